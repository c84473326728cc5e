"""KIP-932 share groups with the Java KafkaShareConsumer (kafka-clients 4.x): the same check
(java-share/ShareGroupCheck.java) against a kbus broker and against Apache Kafka 4.x in KRaft mode (one combined
broker+controller, `kafka-storage format --standalone`; Kafka 4.4's format turns share.version on by itself), so
the check is known valid on Kafka. Three members consume one partition with explicit acknowledgement: released
records come back, rejected ones never do, a fourth member's records come back when its acquisition locks run out
(group.share.record.lock.duration.ms 3000; Kafka needs group.share.min.record.lock.duration.ms lowered for that),
and no record is delivered more than group.share.delivery.count.limit (3) times."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.ecosystem.kafka_jars import default_version, fetch
from tests.kbus_processes import BrokerProcess
from tests.zk_server import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = Path(__file__).resolve().parent / "java-share" / "ShareGroupCheck.java"
LOCK_MS, LIMIT = 3000, 3
SHARE_CONFIGS = {
    "offsets.topic.num.partitions": "1",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(LIMIT),
    "group.share.heartbeat.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def check_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    clients = fetch("--clients", default_version("4"))
    out = tmp_path_factory.mktemp("share-check")
    subprocess.run(["javac", "-d", str(out), "-cp", f"{clients}/*", str(SOURCE)], check=True, timeout=120)
    return out, clients


def run_check(classes: tuple[Path, Path], bootstrap: str) -> str:
    out, clients = classes
    tag = uuid.uuid4().hex[:8]
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{out}:{clients}/*", "ShareGroupCheck", bootstrap, f"share-{tag}",
         f"sg-{tag}", str(LIMIT), str(LOCK_MS)],
        capture_output=True, text=True, timeout=240)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert results == ["RESULT PASS"], f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Apache Kafka 4.x, KRaft, one node as broker and controller; yields its bootstrap."""
    libs = fetch(default_version("4"))
    base = tmp_path_factory.mktemp("kafka4")
    port, controller = free_port(), free_port()
    props = base / "server.properties"
    props.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1",
        f"controller.quorum.bootstrap.servers=localhost:{controller}",
        f"listeners=PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller}",
        f"advertised.listeners=PLAINTEXT://localhost:{port}", "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", f"log.dirs={base / 'logs'}",
        "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1", "share.coordinator.state.topic.num.partitions=1",
        "group.share.min.record.lock.duration.ms=1000", "group.share.min.heartbeat.interval.ms=1000",
        "group.initial.rebalance.delay.ms=0",
        *(f"{k}={v}" for k, v in SHARE_CONFIGS.items()),
    ]) + "\n")
    cp = f"{libs}/*"
    cluster_id = subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "random-uuid"], capture_output=True,
                                text=True, check=True, timeout=60).stdout.strip().splitlines()[-1]
    subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                    "--standalone"], capture_output=True, text=True, check=True, timeout=120)
    log = (base / "kafka.out").open("w")
    proc = subprocess.Popen(["java", "-Xmx512m", "-cp", cp, "kafka.Kafka", str(props)], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        import socket

        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("localhost", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "Kafka 4 did not start"
                time.sleep(0.5)
        yield f"localhost:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_share_consumers_on_apache_kafka_4(check_classes: tuple[Path, Path], kafka4: str) -> None:
    """The check itself, on Kafka: the test is valid when this passes."""
    run_check(check_classes, kafka4)


def test_share_consumers_on_kbus(check_classes: tuple[Path, Path], tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, dict(SHARE_CONFIGS)).start()
    try:
        run_check(check_classes, broker.bootstrap)
    finally:
        broker.stop()
