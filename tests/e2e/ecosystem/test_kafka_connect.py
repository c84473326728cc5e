"""Apache Kafka's own Connect runtime (3.9, `kbus connect-standalone` / `kbus connect-distributed`) on real kbus
brokers: Kafka's FileStreamSource -> topic -> FileStreamSink example with the config files kbus ships, a
distributed cluster of two workers (compacted config/offset/status topics, the "connect" group protocol, the REST
API) surviving a worker's kill -9, and exactly-once source tasks (KIP-618) on kbus's transactions."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.e2e.ecosystem.connect_workers import (
    CONNECT_VERSIONS,
    KBUS,
    Worker,
    fetch_connect,
    props,
    rest,
    shipped,
    worker_env,
)
from tests.kbus_processes import BrokerProcess, free_port, kbus, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=CONNECT_VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    fetch_connect(request.param)
    return str(request.param)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[str]:
    """Every committed value of partition 0 of `topic` (JSON strings as JsonConverter writes them)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[str] = []

    def poll() -> bool:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                out.append(m.value().decode())
        return len(out) >= expected

    try:
        wait_for(poll, timeout, f"{expected} committed records in {topic}")
        out.extend(m.value().decode() for m in c.consume(500, 1.0) if m.error() is None)  # nothing more
    finally:
        c.close()
    return out


def test_standalone_file_source_to_topic_to_file_sink(
    broker: BrokerProcess, tmp_path: Path, workers: list[Worker], version: str
):
    source, sink = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    source.write_text("".join(f"line {i}\n" for i in range(100)))
    rest = free_port()
    worker_props = props(tmp_path / "connect-standalone.properties", shipped(
        "connect-standalone.properties", **{"bootstrap.servers": broker.bootstrap,
        "offset.storage.file.filename": str(tmp_path / "connect.offsets"), "offset.flush.interval.ms": "1000",
        "listeners": f"HTTP://127.0.0.1:{rest}"}))  # fmt: skip
    src = props(tmp_path / "src.properties", shipped(
        "connect-file-source.properties", file=str(source), topic=f"connect-standalone-{version}"))  # fmt: skip
    snk = props(tmp_path / "sink.properties", shipped(
        "connect-file-sink.properties", file=str(sink), topics=f"connect-standalone-{version}"))  # fmt: skip
    # Kafka's script name, as pasted from Kafka's quickstart
    w = Worker.start("connect-standalone.sh", [str(worker_props), str(src), str(snk)], rest, tmp_path, version)
    workers.append(w)
    wait_for(lambda: len(lines(sink)) >= 100, 90, "the sink file to hold the source's 100 lines")
    with source.open("a") as f:
        f.write("".join(f"line {i}\n" for i in range(100, 150)))
    wait_for(lambda: len(lines(sink)) >= 150, 30, "the 50 appended lines")
    assert lines(sink) == [f"line {i}" for i in range(150)]
    status = w.rest("GET", "/connectors?expand=status")[1]
    assert isinstance(status, dict)
    assert {n: s["status"]["tasks"][0]["state"] for n, s in status.items()} == {
        "local-file-source": "RUNNING", "local-file-sink": "RUNNING"}  # fmt: skip


def distributed_props(tmp_path: Path, bootstrap: str, rest: int, group: str, **extra: str) -> Path:
    return props(tmp_path / f"worker-{rest}.properties", shipped(
        "connect-distributed.properties", **{"bootstrap.servers": bootstrap, "group.id": group,
        "offset.storage.topic": f"{group}-offsets", "config.storage.topic": f"{group}-configs",
        "status.storage.topic": f"{group}-status", "offset.storage.partitions": "5", "status.storage.partitions": "2",
        "offset.flush.interval.ms": "1000", "listeners": f"HTTP://127.0.0.1:{rest}",
        # a dead worker is noticed after its session times out; its tasks then wait this long before being
        # reassigned (Kafka's default is 5 minutes, for a worker that may come back)
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000", "scheduled.rebalance.max.delay.ms": "1000",
        **extra}))  # fmt: skip


def start_cluster(
    tmp_path: Path, bootstrap: str, group: str, workers: list[Worker], version: str, **extra: str
) -> tuple[Worker, Worker]:
    for _ in range(2):
        rest = free_port()
        cfg = distributed_props(tmp_path, bootstrap, rest, group, **extra)
        workers.append(Worker.start("connect-distributed.sh", [str(cfg)], rest, tmp_path, version))
    for w in workers:
        w.wait_ready()
    return workers[0], workers[1]


def task_worker(w: Worker, connector: str) -> str | None:
    code, body = w.rest("GET", f"/connectors/{connector}/status")
    if code != 200 or not isinstance(body, dict) or not body["tasks"]:
        return None
    task = body["tasks"][0]
    return str(task["worker_id"]) if task["state"] == "RUNNING" else None


def test_distributed_two_workers_failover(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path, workers: list[Worker], version: str
):
    b = broker_factory()
    w1, w2 = start_cluster(tmp_path, b.bootstrap, "connect-ha", workers, version)
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(f"{i}\n" for i in range(200)))
    assert w1.rest("PUT", "/connectors/src/config", {"connector.class": "FileStreamSource", "tasks.max": "1",
                   "file": str(source), "topic": "ha"})[0] == 201  # fmt: skip
    assert w2.rest("PUT", "/connectors/sink/config", {"connector.class": "FileStreamSink", "tasks.max": "1",
                   "file": str(sink), "topics": "ha"})[0] == 201  # fmt: skip
    wait_for(lambda: len(lines(sink)) >= 200, 60, "the first 200 lines in the sink")
    listed = w2.rest("GET", "/connectors")[1]
    assert isinstance(listed, list) and sorted(listed) == ["sink", "src"]

    # Connect's internal topics, created by the workers through CreateTopics, are compacted as Connect requires
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resources = [ConfigResource("topic", f"connect-ha-{t}") for t in ("configs", "offsets", "status")]
    for res, fut in admin.describe_configs(resources).items():
        assert fut.result(20)["cleanup.policy"].value == "compact", res
    # the workers' group has protocol type "connect" on kbus's classic group coordinator, which
    # kafka-consumer-groups.sh refuses to describe with Kafka's own words
    described = kbus("consumer-groups", "--bootstrap-server", b.bootstrap, "--describe", "--group", "connect-ha")
    assert "GroupId connect-ha is not a consumer group (connect)" in described.stderr, described.stderr

    # kill -9 the worker running the source task; the survivor takes it over and nothing is lost
    owner = task_worker(w1, "src")
    assert owner is not None
    victim, survivor = (w1, w2) if owner.endswith(f":{w1.rest_port}") else (w2, w1)
    victim.kill9()
    with source.open("a") as f:
        f.write("".join(f"{i}\n" for i in range(200, 300)))
    survivor_id = f"127.0.0.1:{survivor.rest_port}"
    wait_for(lambda: task_worker(survivor, "src") == survivor_id, 60, "the source task to move to the survivor")
    wait_for(lambda: task_worker(survivor, "sink") == survivor_id, 30, "the sink task on the survivor")
    wait_for(lambda: {int(x) for x in lines(sink)} >= set(range(300)), 60, "all 300 lines in the sink")
    # at-least-once: every line arrived; a replay after the kill may repeat some, never invent or reorder them
    got = [int(x) for x in lines(sink)]
    assert set(got) == set(range(300))


def test_exactly_once_source(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path, workers: list[Worker], version: str
):
    """KIP-618: with exactly.once.source.support=enabled the source task writes its records and its offsets in
    one kbus transaction (transactional.id <group>-<connector>-<task>); a worker killed -9 mid-stream is fenced
    and its successor resumes from the committed offsets, so a read_committed consumer sees each line once."""
    b = broker_factory()
    w1, w2 = start_cluster(
        tmp_path, b.bootstrap, "connect-eos", workers, version, **{"exactly.once.source.support": "enabled"}
    )
    source = tmp_path / "in.txt"
    source.write_text("".join(f"{i}\n" for i in range(300)))
    code, body = w1.rest("PUT", "/connectors/src/config", {"connector.class": "FileStreamSource", "tasks.max": "1",
                         "file": str(source), "topic": "eos", "exactly.once.support": "required",
                         "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                         "value.converter": "org.apache.kafka.connect.storage.StringConverter"})  # fmt: skip
    assert code == 201, body
    owner = None

    def running() -> bool:
        nonlocal owner
        owner = task_worker(w1, "src")
        return owner is not None

    wait_for(running, 60, "the exactly-once source task to run")
    assert sorted(read_committed(b.bootstrap, "eos", 300)) == sorted(str(i) for i in range(300))
    listed = kbus("transactions", "--bootstrap-server", b.bootstrap, "list")
    assert "connect-eos-src-0" in listed.stdout, listed.stdout + listed.stderr

    victim, survivor = (w1, w2) if owner and owner.endswith(f":{w1.rest_port}") else (w2, w1)
    victim.kill9()
    with source.open("a") as f:
        f.write("".join(f"{i}\n" for i in range(300, 400)))
    survivor_id = f"127.0.0.1:{survivor.rest_port}"
    wait_for(lambda: task_worker(survivor, "src") == survivor_id, 60, "the source task to move to the survivor")
    got = read_committed(b.bootstrap, "eos", 400)
    assert sorted(got, key=int) == [str(i) for i in range(400)]  # each line exactly once


def jvm_running(config: Path) -> int | None:
    """The pid of the JVM whose command line names `config` (a path only this test created)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"java") and str(config).encode() in argv:
                return int(proc.name)
    return None


def test_daemon_detaches_and_logs_to_log_dir(broker: BrokerProcess, tmp_path: Path) -> None:
    """`-daemon` as kafka-run-class.sh: the command returns at once, the worker runs on with its console output
    in $LOG_DIR/connectDistributed.out and connect-log4j.properties' file in $LOG_DIR/connect.log."""
    fetch_connect()
    port = free_port()
    cfg = distributed_props(tmp_path, broker.bootstrap, port, "connect-daemon")
    logs = tmp_path / "logs"
    out = subprocess.run([KBUS, "connect-distributed.sh", "-daemon", str(cfg)], env=worker_env(logs), cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out
    pid = jvm_running(cfg)
    assert pid is not None
    try:

        def answers() -> bool:
            try:
                return rest(f"http://127.0.0.1:{port}", "GET", "/connectors")[0] == 200
            except OSError:
                return False

        wait_for(answers, 90, "the daemon's REST API")
        assert "Kafka Connect started" in (logs / "connectDistributed.out").read_text()
        assert (logs / "connect.log").stat().st_size > 0
    finally:
        os.kill(pid, signal.SIGTERM)
        try:
            wait_for(lambda: jvm_running(cfg) is None, 30, "the daemon to stop")
        except AssertionError:
            os.kill(pid, signal.SIGKILL)
            raise
