"""A broker starting while ZooKeeper is in trouble (issue 20, defect 3). Kafka's order: the listener is bound and
accepting before the broker registers in /brokers/ids (the controller may make it leader the moment it registers,
and followers and clients connect at once); ZooKeeper calls during start-up wait for the connection to come back
(zookeeper.connection.timeout.ms) instead of failing; a start-up that does fail says what failed.

Real ZooKeeper (a private one: these tests pause it with SIGSTOP), real broker processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.kbus_processes import REPO, BrokerProcess, wait_for
from tests.zk_server import ZooKeeperServer, free_port

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]

SESSION_MS = 6000


@pytest.fixture
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zk-paused"), free_port()).start()
    try:
        yield server
    finally:
        server.kill()  # it may be stopped (SIGSTOP): SIGKILL ends it either way


def zk_pid(server: ZooKeeperServer) -> int:
    return int((server.base / "logs" / "zookeeper.pid").read_text())


@contextlib.contextmanager
def paused_on_registration(server: ZooKeeperServer, broker_id: int, port: int) -> Iterator[dict[str, object]]:
    """SIGSTOP ZooKeeper the moment /brokers/ids/<broker_id> appears (seen through a watch), noting whether the
    broker's port took a connection at that moment. SIGCONT on the way out, whatever happened."""
    seen: dict[str, object] = {}
    fired = threading.Event()
    pid = zk_pid(server)
    client = KazooClient(hosts=server.connect, timeout=SESSION_MS / 1000)
    client.start(timeout=10)

    def on_created(event: object) -> None:
        if fired.is_set():
            return
        fired.set()
        os.kill(pid, signal.SIGSTOP)
        seen["paused_at"] = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                seen["accepting"] = True
        except OSError as exc:
            seen["accepting"] = f"{type(exc).__name__}: {exc}"

    path = f"/kbus/brokers/ids/{broker_id}"
    if client.exists(path, watch=on_created) is not None:
        raise AssertionError(f"{path} exists before the broker started")
    try:
        seen["fired"] = fired
        yield seen
    finally:
        os.kill(pid, signal.SIGCONT)
        with contextlib.suppress(Exception):
            client.stop()
            client.close()


def test_a_broker_registers_only_once_it_accepts_and_starts_through_a_zookeeper_pause(tmp_path, zk) -> None:
    """The broker registers, ZooKeeper freezes past the session timeout at that very moment: the broker must
    already take connections, and must finish starting once ZooKeeper is back (its session expired meanwhile:
    it registers again in the new one)."""
    connect = f"{zk.connect}/kbus"
    b = BrokerProcess(tmp_path / "b1", {"zookeeper.connect": connect, "broker.id": "1",
                                        "zookeeper.session.timeout.ms": str(SESSION_MS),
                                        "num.partitions": "100"}).start()  # fmt: skip
    try:
        # something to lead once registered (the broker is its own controller): 100 partitions
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("led", 100, 1)])["led"].result(30)
        del admin
        assert b.stop() == 0
        with paused_on_registration(zk, 1, b.port) as seen:
            b.start_process()
            fired = seen["fired"]
            assert isinstance(fired, threading.Event)
            assert fired.wait(30), f"the broker never registered; log:\n{b.log_text()[-3000:]}"
            time.sleep(SESSION_MS / 1000 + 3)  # every session times out while ZooKeeper is frozen
        # ZooKeeper is back: the broker finishes starting, registered in its new session, leading its partitions
        wait_for(lambda: b.port_open(), timeout=40, what="the broker to serve after the pause")
        assert b.alive, b.log_text()[-3000:]

        def leads_everything() -> bool:
            md = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0}).list_topics(timeout=5)
            parts = md.topics["led"].partitions if "led" in md.topics else {}
            return len(md.brokers) == 1 and len(parts) == 100 and all(p.leader == 1 for p in parts.values())

        wait_for(leads_everything, timeout=40, what="broker 1 registered and leading every partition")
        assert b.alive
        assert "Fatal error during KafkaServer startup" not in b.log_text()
        assert seen["accepting"] is True, f"registered while not accepting connections: {seen['accepting']}"
    finally:
        b.stop()


def test_a_start_up_that_fails_says_what_failed(tmp_path, zk) -> None:
    """ZooKeeper frozen for longer than zookeeper.connection.timeout.ms while the broker registers: the broker
    gives up, and both the log and stderr name the failure (the exception's type and what it was doing), never
    an empty message."""
    port = free_port()
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(
        f"broker.id=2\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={data}\nzookeeper.connect={zk.connect}/kbus\n"
        f"zookeeper.session.timeout.ms={SESSION_MS}\nzookeeper.connection.timeout.ms=3000\n"
    )
    with paused_on_registration(zk, 2, port) as seen:
        proc = subprocess.run([sys.executable, "-m", "kbus.server", str(config)], cwd=REPO, capture_output=True,
                              text=True, timeout=90)  # fmt: skip
        assert seen.get("paused_at"), "ZooKeeper was never paused: the broker did not register"
    assert proc.returncode == 1, proc.stdout[-3000:]
    fatal = [line for line in proc.stdout.splitlines() if "Fatal error during KafkaServer startup" in line]
    assert len(fatal) == 1, proc.stdout[-3000:]
    message = fatal[0].split("Prepare to shutdown:", 1)[1].strip()
    assert "ZooKeeper" in message and "zookeeper.connection.timeout.ms" in message, fatal[0]
    assert proc.stderr.strip().startswith("ERROR ") and len(proc.stderr.strip()) > len("ERROR ") + 20, proc.stderr


def test_a_start_up_that_fails_after_registering_leaves_the_cluster_at_once(tmp_path, zk) -> None:
    """A failure after the broker registered (here: an ACL znode that is not JSON, read when the authorizer loads)
    closes its ZooKeeper session on the way out, as Kafka's failed startup closes its zkClient: /brokers/ids/<id>
    is gone when the process has exited, not a session timeout later (meanwhile the controller could make a broker
    that refuses connections leader)."""
    client = KazooClient(hosts=zk.connect, timeout=SESSION_MS / 1000)
    client.start(timeout=10)
    try:
        client.create("/kbus/kafka-acl/Topic/t", b"{not json", makepath=True)
        port = free_port()
        config = tmp_path / "server.properties"
        config.write_text(
            f"broker.id=3\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n"
            f"zookeeper.connect={zk.connect}/kbus\nzookeeper.session.timeout.ms=30000\n"
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
        )
        proc = subprocess.run([sys.executable, "-m", "kbus.server", str(config)], cwd=REPO, capture_output=True,
                              text=True, timeout=90)  # fmt: skip
        exited = time.monotonic()
        assert proc.returncode == 1, proc.stdout[-3000:]
        assert any("Fatal error during KafkaServer startup" in line for line in proc.stdout.splitlines())
        assert client.exists("/kbus/brokers/ids") is not None, "the broker never registered: the test proves nothing"
        # the session (30 s) would keep the ephemeral znode long after this check
        assert client.exists("/kbus/brokers/ids/3") is None and time.monotonic() - exited < 10
    finally:
        client.stop()
        client.close()
