"""Health and metrics tell an operator about a follower that fell out of sync: 2 kbus brokers on a real ZooKeeper,
one replicated partition led by broker 1; broker 2 is frozen (SIGSTOP) while writes go on, then thawed.

The leader's lag check (replica.lag.time.max.ms) shrinks the ISR well before broker 2's ZooKeeper
session expires; thawed, broker 2 catches up and the leader expands the ISR again (kbus_isr_expands_total)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kbus_processes import BrokerProcess, free_port
from tests.zk_server import ZooKeeperServer

KBUS = str(Path(sys.executable).with_name("kbus"))
TOPIC = "urp"

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    zk = ZooKeeperServer(tmp_path / "zk", free_port())
    zk.base.mkdir()
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.2)


def isr(bootstrap: str) -> list[int] | None:
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(TOPIC, timeout=5)
    except Exception:
        return None
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return sorted(t.partitions[0].isrs)


def http(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(port: int, line_start: str) -> float:
    text = http(port, "/metrics")[1]
    return float(next(ln for ln in text.splitlines() if ln.startswith(line_start + " ")).rsplit(" ", 1)[1])


def health(bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KBUS, "broker-health", "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60
    )


def produce(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "log_level": 0})
    for i in range(n):
        p.produce(TOPIC, b"u%d" % i)
    assert p.flush(30) == 0


def test_out_of_sync_follower_shows_in_health_and_metrics(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    common = {
        "zookeeper.connect": zookeeper.connect,
        # the session outlives the lag limit, so it is the leader's own lag check that shrinks the ISR
        "zookeeper.session.timeout.ms": "15000",
        "replica.lag.time.max.ms": "2000",
    }
    m1 = free_port()
    b1 = BrokerProcess(tmp_path / "b1", {**common, "broker.id": "1", "metrics.port": str(m1)})
    b2 = BrokerProcess(tmp_path / "b2", {**common, "broker.id": "2"})
    try:
        b1.start()
        b2.start()
        admin = AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2]])])[TOPIC].result(20)
        wait_for(lambda: isr(b1.bootstrap) == [1, 2], 30, "ISR [1, 2]")
        ok = health(b1.bootstrap)
        assert ok.returncode == 0, ok.stderr
        assert metric(m1, "kbus_under_replicated_partitions") == 0

        assert b2.proc is not None
        b2.proc.send_signal(signal.SIGSTOP)
        produce(b1.bootstrap, 50)
        wait_for(lambda: isr(b1.bootstrap) == [1], 20, "ISR to shrink to [1]")
        bad = health(b1.bootstrap)
        assert bad.returncode == 1
        assert bad.stderr.strip() == "ERROR broker 1 is not healthy: 1 under-replicated partitions (urp-0)"
        assert metric(m1, "kbus_under_replicated_partitions") == 1
        assert metric(m1, "kbus_isr_shrinks_total") >= 1
        status, body = http(m1, "/health")
        assert status == 503 and json.loads(body)["under_replicated_partitions"] == ["urp-0"]

        b2.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: isr(b1.bootstrap) == [1, 2], 40, "ISR to expand back to [1, 2]")
        assert health(b1.bootstrap).returncode == 0
        assert metric(m1, "kbus_isr_expands_total") >= 1
        assert metric(m1, "kbus_under_replicated_partitions") == 0
        assert http(m1, "/health")[0] == 200
    finally:
        for b in (b2, b1):
            if b.alive:
                assert b.proc is not None
                b.proc.send_signal(signal.SIGCONT)
            try:
                b.stop()
            except Exception:
                b.kill()
