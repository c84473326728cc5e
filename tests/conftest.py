"""Shared fixtures for tests/integration and tests/e2e: real kbus broker processes on free loopback ports, one real
ZooKeeper per session (each test gets its own chroot so tests never see each other's znodes), a 3-broker cluster."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.group_member import MemberProcess
from tests.kbus_processes import BrokerProcess, Cluster
from tests.zk_server import ZooKeeperServer, free_port

logging.getLogger("kazoo.client").setLevel(logging.ERROR)


def pytest_configure(config: pytest.Config) -> None:
    """An editable install's compiled modules (setup.py: mypyc) shadow their .py: after a .py changed (an edit, a
    rebase), the tests would run the old compiled code. Refuse that instead of testing the wrong code."""
    kbus_dir = Path(__file__).resolve().parent.parent / "kbus"
    stale = [
        str(py.relative_to(kbus_dir.parent))
        for so in kbus_dir.rglob("*.cpython-*.so")
        if (py := so.with_name(so.name.split(".", 1)[0] + ".py")).exists() and py.stat().st_mtime > so.stat().st_mtime
    ]
    if stale:
        pytest.exit(f"compiled modules older than their source: {', '.join(stale)}. Rebuild them with "
                    "`.venv/bin/pip install --no-deps -e .` (or KBUS_PURE_PYTHON=1 for none), then run the tests", 2)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the whole session (tests must use their own topic names)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker")).start()
    yield b
    b.stop()


@pytest.fixture
def members() -> Iterator[list[MemberProcess]]:
    """Group members in their own processes (tests/group_member.py) that a test started: killed when it ends."""
    started: list[MemberProcess] = []
    yield started
    for m in started:
        m.kill()


@pytest.fixture
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., BrokerProcess]]:
    """Start dedicated brokers: `broker_factory({"log.segment.bytes": "1024"})`. All are stopped afterwards."""
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str] | None = None, **kwargs: object) -> BrokerProcess:
        b = BrokerProcess(tmp_path_factory.mktemp("broker"), dict(overrides or {}), **kwargs).start()  # type: ignore[arg-type]
        started.append(b)
        return b

    yield start
    for b in started:
        try:
            b.stop()
        except Exception:
            b.kill()


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of one test's own, to kill or pause: the shared session one (`zookeeper`) must not be, under the
    other tests."""
    base = tmp_path / "zookeeper"
    base.mkdir()
    server = ZooKeeperServer(base, free_port()).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), free_port()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """host:port/chroot unique to this test."""
    return f"{zookeeper.connect}/kbus-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def raw_zk(zk_connect: str) -> Iterator[KazooClient]:
    """A plain kazoo client on the test's chroot, for looking at znodes the way an operator would."""
    hosts, _, chroot = zk_connect.partition("/")
    root = KazooClient(hosts=hosts)
    root.start(timeout=10)
    root.ensure_path("/" + chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def stores(zk_connect: str) -> Iterator[Callable[..., object]]:
    """Start ZkMetadataStore instances (`stores(broker_id)`); all are stopped afterwards."""
    from kbus.server.metadata.zk_store import ZkMetadataStore

    started: list[ZkMetadataStore] = []

    def start(broker_id: int, port: int = 0, **kwargs: object) -> ZkMetadataStore:
        kwargs.setdefault("session_timeout_ms", 6000)
        store = ZkMetadataStore(zk_connect, broker_id, "127.0.0.1", port or 9090 + broker_id, **kwargs)  # type: ignore[arg-type]
        store.start()
        started.append(store)
        return store

    yield start
    for store in started:
        store.stop()


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zk_connect)
    for i in c.brokers:
        c.start_broker(i)
    c.wait_until_all_see_each_other()
    yield c
    c.stop()
