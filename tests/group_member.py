"""A group member in its own process, so tests can kill -9 it like a crashed consumer.

Run as `python -m tests.group_member --bootstrap H:P --group G --topic T [...]`: a confluent-kafka consumer that
prints one JSON line per event on stdout (`assign`, `revoke`, `msg`, `error`) and stores each offset only after
"processing" (printing) the record, with auto-commit shipping stored offsets: at-least-once.
`MemberProcess` starts one and collects its events on a reader thread.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def run_member(argv: list[str]) -> int:
    from confluent_kafka import Consumer

    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--strategy", default="range,roundrobin")
    p.add_argument("--instance-id")
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--client-id", default="member")
    p.add_argument("--debug", default="", help="librdkafka debug contexts (logged to stderr)")
    p.add_argument("--protocol", default="classic", help="group.protocol: classic, or consumer (KIP-848)")
    p.add_argument("--remote-assignor", help="group.remote.assignor (consumer protocol)")
    args = p.parse_args(argv)
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.offset.store": False,
        "auto.commit.interval.ms": 200,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 2000,
    }
    if args.protocol == "consumer":
        # the broker decides session timeout, heartbeat interval and assignment: librdkafka refuses those keys
        conf["group.protocol"] = "consumer"
        if args.remote_assignor:
            conf["group.remote.assignor"] = args.remote_assignor
    else:
        conf.update({
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": args.strategy,
        })
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.debug:
        conf["debug"] = args.debug
    consumer = Consumer(conf)
    running = True

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)

    def owned() -> list[int]:
        return sorted(tp.partition for tp in consumer.assignment())

    # the consumer protocol is incremental, as cooperative-sticky is
    cooperative = args.strategy == "cooperative-sticky" or args.protocol == "consumer"

    def on_assign(c: Any, partitions: list[Any]) -> None:
        if cooperative:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        emit(
            event="assign",
            partitions=sorted(tp.partition for tp in partitions),
            owned=owned(),
            protocol="COOPERATIVE" if cooperative else "EAGER",
            t=time.time(),
        )

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        emit(event="revoke", partitions=sorted(tp.partition for tp in partitions), owned=owned(), t=time.time())

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    emit(event="started", pid=os.getpid())
    while running:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            emit(event="error", error=str(msg.error()))
            continue
        emit(event="msg", p=msg.partition(), o=msg.offset(), v=msg.value().decode(), t=time.time())
        consumer.store_offsets(msg)
    consumer.close()
    emit(event="closed")
    return 0


class MemberProcess:
    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        name: str,
        strategy: str | None = None,
        instance_id: str | None = None,
        session_ms: int = 6000,
        stderr_path: str | None = None,
        debug: str = "",
        protocol: str = "classic",
        remote_assignor: str | None = None,
        command: list[str] | None = None,
    ) -> None:
        """`command`: another client's member printing the same events (a Java one: kbus.compat.GroupMember)."""
        cmd = [
            sys.executable,
            "-m",
            "tests.group_member",
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--session-ms",
            str(session_ms),
            "--client-id",
            name,
        ]
        if strategy:
            cmd += ["--strategy", strategy]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        if debug:
            cmd += ["--debug", debug]
        if protocol != "classic":
            cmd += ["--protocol", protocol]
        if remote_assignor:
            cmd += ["--remote-assignor", remote_assignor]
        if command is not None:
            cmd = command
        self.name = name
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        stderr = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    @property
    def owned(self) -> list[int] | None:
        """Partitions after the latest rebalance event (None before the first assignment)."""
        owned = None
        for e in self.snapshot():
            if e["event"] in ("assign", "revoke"):
                owned = e["owned"]
        return owned

    def values(self) -> list[str]:
        return [e["v"] for e in self.snapshot() if e["event"] == "msg"]

    def count(self, kind: str) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == kind)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


if __name__ == "__main__":
    sys.exit(run_member(sys.argv[1:]))
