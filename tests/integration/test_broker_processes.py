"""`num.broker.processes=2`: one server.properties, `kbus server-start` runs two broker processes on a real
ZooKeeper; a client produces to and consumes from partitions led by both; a process killed -9 is restarted by the
supervisor and nothing acknowledged is lost; `kbus server-stop` stops the whole set cleanly; a process that cannot
start stops the set."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import TEST_DEFAULTS, free_port, wait_for, wait_for_port

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]
KBUS = str(Path(sys.executable).parent / "kbus")


def two_free_ports() -> int:
    while True:
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def write_config(tmp_path: Path, zk_connect: str, port: int) -> Path:
    props = {
        **TEST_DEFAULTS,
        "broker.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(tmp_path / "data"),
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "6000",
        "replica.lag.time.max.ms": "6000",
        "num.broker.processes": "2",
    }
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def start_set(config: Path, out: Path) -> subprocess.Popen[bytes]:
    with open(out, "ab") as f:
        return subprocess.Popen(
            [KBUS, "server-start", str(config)], stdout=f, stderr=subprocess.STDOUT, cwd=config.parent,
            start_new_session=True,
        )


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def child_of_broker(sup: int, broker_id: int) -> int:
    for pid in children(sup):
        if f"broker.id={broker_id}" in argv(pid):
            return pid
    raise AssertionError(f"no child of {sup} runs broker.id {broker_id}")


def broker_processes_of(config: Path) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            if "kbus.server.broker_process" in (a := argv(int(p.name))) and str(config) in a]


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_two_processes_serve_survive_kill_9_and_stop_together(tmp_path: Path, zk_connect: str) -> None:
    port = two_free_ports()
    config = write_config(tmp_path, zk_connect, port)
    out = tmp_path / "server.out"
    sup = start_set(config, out)
    try:
        wait_for_port(port, 60, sup)
        wait_for_port(port + 1, 60, sup)
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "both processes registered")
        brokers = admin.list_topics(timeout=5).brokers
        assert {b.id: b.port for b in brokers.values()} == {1: port, 2: port + 1}
        cluster = admin.describe_cluster(request_timeout=10).result()
        assert {n.id: n.rack for n in cluster.nodes} == {1: socket.gethostname(), 2: socket.gethostname()}

        admin.create_topics([NewTopic("spread", 4, 2)])["spread"].result(30)
        wait_for(lambda: "spread" in admin.list_topics(timeout=5).topics, 20, "topic visible")
        parts = admin.list_topics(timeout=5).topics["spread"].partitions
        assert {p.leader for p in parts.values()} == {1, 2}  # partitions led by both processes
        assert all(sorted(p.replicas) == [1, 2] for p in parts.values())

        acked: set[int] = set()
        failed: list[str] = []

        def done(err, msg):  # type: ignore[no-untyped-def]
            if err is None:
                acked.add(int(msg.value()))
            else:
                failed.append(str(err))

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0,
                             "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
        for n in range(400):
            producer.produce("spread", str(n).encode(), partition=n % 4, on_delivery=done)
        assert producer.flush(30) == 0 and len(acked) == 400

        victim = child_of_broker(sup.pid, 2)
        os.kill(victim, signal.SIGKILL)
        for n in range(400, 800):  # acks=all: the partitions move to broker 1 once broker 2's session expires
            producer.produce("spread", str(n).encode(), partition=n % 4, on_delivery=done)
        assert producer.flush(90) == 0
        assert failed == [] and len(acked) == 800

        # the supervisor starts broker 2 again (after RESTART_DELAY_S and the old ZooKeeper session's expiry)
        wait_for(lambda: victim not in children(sup.pid) and len(children(sup.pid)) == 2, 60, "a new broker 2")
        wait_for_port(port + 1, 60)
        wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 60, "broker 2 registered again")
        assert "killed by signal 9: restarting it" in out.read_text()
        wait_for(lambda: out.read_text().count("(broker.id=2) ready") == 2, 60, "the new broker 2 ready")

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "log_level": 0})
        consumer.subscribe(["spread"])
        seen: set[int] = set()
        wait_for(lambda: seen.update(int(m.value()) for m in consumer.consume(500, 1.0) if not m.error())
                 or seen >= acked, 60, "every acknowledged record read back")
        consumer.close()

        kids = children(sup.pid)
        status = subprocess.run([KBUS, "server-status", str(config)], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert f"kbus server {sup.pid} ({config}): 2 broker processes" in status.stdout
        for broker_id, pid in ((1, child_of_broker(sup.pid, 1)), (2, child_of_broker(sup.pid, 2))):
            line = f"broker.id={broker_id} pid {pid} PLAINTEXT://127.0.0.1:{port + broker_id - 1} accepting connections"
            assert line in status.stdout
        stop = subprocess.run([KBUS, "server-stop", str(config)], capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        assert sup.wait(60) == 0
        assert all(not Path(f"/proc/{pid}").exists() for pid in kids)
        gone = subprocess.run([KBUS, "server-status", str(config)], capture_output=True, text=True, timeout=60)
        assert gone.returncode == 1 and gone.stderr.strip() == "No kbus server running"
        for broker_id in (1, 2):
            assert (tmp_path / "data" / f"broker-{broker_id}" / ".kafka_cleanshutdown").exists()
    finally:
        stop_group(sup)


def test_a_process_that_cannot_start_stops_the_set(tmp_path: Path, zk_connect: str) -> None:
    port = two_free_ports()
    config = write_config(tmp_path, zk_connect, port)
    out = tmp_path / "server.out"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        sup = start_set(config, out)
        try:
            assert sup.wait(60) == 1
            text = out.read_text()
            assert "cannot listen on PLAINTEXT://127.0.0.1:" in text
            assert "before it was ready: stopping all broker processes" in text
            assert broker_processes_of(config) == []
        finally:
            stop_group(sup)


def test_daemon_mode_is_ready_when_every_process_serves_and_stops_them_all(tmp_path: Path, zk_connect: str) -> None:
    """`server-start --daemon --processes 2` returns on the supervisor's READY=1, sent once both brokers listen (the
    same datagram systemd's Type=notify waits for); `server-stop` through the pid file stops both."""
    port = two_free_ports()
    config = write_config(tmp_path, zk_connect, port)
    config.write_text(config.read_text().replace("num.broker.processes=2\n", ""))
    env = {**os.environ, "KBUS_LOG_DIR": str(tmp_path / "logs")}
    try:
        started = subprocess.run([KBUS, "server-start", "--daemon", "--processes", "2", str(config)], env=env,
                                 capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        for p in (port, port + 1):  # both accept at once: READY=1 came after both were ready
            socket.create_connection(("127.0.0.1", p), timeout=2).close()
        assert len(broker_processes_of(config)) == 2
        stop = subprocess.run([KBUS, "server-stop"], env=env, capture_output=True, text=True, timeout=90)
        assert stop.returncode == 0, stop.stderr
        wait_for(lambda: broker_processes_of(config) == [], 30, "both broker processes gone")
        for broker_id in (1, 2):
            assert (tmp_path / "data" / f"broker-{broker_id}" / ".kafka_cleanshutdown").exists()
    finally:  # after a failure: the supervisor first (its children get SIGTERM from the kernel), then them
        pid_file = tmp_path / "logs" / "kbusServer.pid"
        if pid_file.exists() and f"{config}" in argv(int(pid_file.read_text().split()[0])):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        for pid in broker_processes_of(config):
            os.kill(pid, signal.SIGKILL)


def test_the_supervisor_killed_9_leaves_no_orphan_broker(tmp_path: Path, zk_connect: str) -> None:
    port = two_free_ports()
    config = write_config(tmp_path, zk_connect, port)
    out = tmp_path / "server.out"
    sup = start_set(config, out)
    try:
        # ready, not just listening: a broker's port is bound before it starts (and handles SIGTERM)
        wait_for(lambda: "all 2 broker processes started" in out.read_text(), 60, "both brokers ready")
        assert len(broker_processes_of(config)) == 2
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait(10)
        # PR_SET_PDEATHSIG: the kernel sends each broker SIGTERM, a controlled shutdown
        wait_for(lambda: broker_processes_of(config) == [], 60, "the brokers of a dead supervisor to stop")
        for broker_id in (1, 2):
            assert (tmp_path / "data" / f"broker-{broker_id}" / ".kafka_cleanshutdown").exists()
    finally:
        stop_group(sup)


def test_two_hosts_of_two_processes_keep_replicas_on_different_hosts(tmp_path: Path, zk_connect: str) -> None:
    """Two sets on one ZooKeeper stand for two hosts (broker.rack given, as the host name would differ): a topic
    created with RF 2 through CreateTopics gets Kafka's rack-aware assignment, one replica on each host."""
    sets = []
    try:
        ports = [two_free_ports()]
        while abs((second := two_free_ports()) - ports[0]) < 2:
            pass
        ports.append(second)
        for (host, first_id), port in zip((("host-a", 1), ("host-b", 3)), ports, strict=True):
            base = tmp_path / host
            base.mkdir()
            config = write_config(base, zk_connect, port)
            text = config.read_text().replace("broker.id=1\n", f"broker.id={first_id}\nbroker.rack={host}\n")
            config.write_text(text)
            sets.append((start_set(config, base / "server.out"), port))
        for sup, port in sets:
            wait_for_port(port, 60, sup)
            wait_for_port(port + 1, 60, sup)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{sets[0][1]}", "log_level": 0})
        wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 4, 30, "four brokers registered")
        racks = {n.id: n.rack for n in admin.describe_cluster(request_timeout=10).result().nodes}
        assert racks == {1: "host-a", 2: "host-a", 3: "host-b", 4: "host-b"}
        admin.create_topics([NewTopic("placed", 8, 2)])["placed"].result(30)
        wait_for(lambda: "placed" in admin.list_topics(timeout=5).topics, 20, "topic visible")
        parts = admin.list_topics(timeout=5).topics["placed"].partitions.values()
        assert all({racks[r] for r in p.replicas} == {"host-a", "host-b"} for p in parts)
        assert {p.leader for p in parts} == {1, 2, 3, 4}  # every process leads some
    finally:
        for sup, _ in sets:
            if sup.poll() is None:
                sup.send_signal(signal.SIGTERM)
                try:
                    sup.wait(60)
                except subprocess.TimeoutExpired:
                    stop_group(sup)
