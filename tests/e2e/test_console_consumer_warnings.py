"""A console consumer that would otherwise wait in silence says why on stderr, as Kafka's tools warn: its broker
died, or its (misspelt) topic was only just auto-created."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

KBUS = str(Path(sys.executable).parent / "kbus")


class StderrLines:
    """A running command whose stderr lines are collected as they come."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([KBUS, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> float:
        """Seconds until a line containing `text` arrived."""
        start = time.monotonic()
        while True:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                raise AssertionError(f"no stderr line with {text!r} in {timeout} s; got {self.seen}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return time.monotonic() - start

    def drain(self, seconds: float) -> list[str]:
        time.sleep(seconds)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.seen

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_misspelt_topic_auto_created_is_reported(broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("bus-locations", 1, 1)])["bus-locations"].result(30)
    consumer = StderrLines("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "bus-locatoins")
    try:
        after = consumer.wait_for("WARN Topic 'bus-locatoins' did not exist", timeout=30)
        assert 4 <= after < 20
        # the closest name comes first (the session's shared broker may hold other near names after it)
        assert "Did you mean bus-locations" in consumer.seen[-1]
    finally:
        consumer.stop()


def test_an_existing_empty_topic_is_not_reported(broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("quiet-topic", 1, 1)])["quiet-topic"].result(30)
    consumer = StderrLines("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "quiet-topic")
    try:
        assert consumer.drain(8) == []
    finally:
        consumer.stop()


def _wait_for_topic(bootstrap: str, topic: str, timeout: float = 30) -> None:
    """The consumer's first metadata request auto-creates its topic: once it exists, the consumer is connected."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if topic in admin.list_topics(timeout=10).topics:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} was not auto-created within {timeout} s")


def test_broker_death_is_reported_once_then_rate_limited(broker_factory) -> None:
    b = broker_factory()
    consumer = StderrLines("console-consumer", "--bootstrap-server", b.bootstrap, "--topic", "t", "--from-beginning")
    try:
        # consuming once connected (its metadata request auto-creates the topic; that warning may come too); a
        # fixed sleep lost the race to a slow start-up and killed the broker before the consumer's first connection
        _wait_for_topic(b.bootstrap, "t")
        time.sleep(1)
        b.kill()
        after = consumer.wait_for("could not be established. Broker may not be available.", timeout=20)
        assert after < 10
        lines = consumer.drain(6)
        assert sum("Broker may not be available" in ln for ln in lines) == 1, lines
    finally:
        consumer.stop()
