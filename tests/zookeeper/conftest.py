"""One real ZooKeeper per test session; each test gets its own chroot so tests never see each other's znodes."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from tests.zookeeper.zk_server import ZooKeeperServer, free_port

logging.getLogger("kazoo.client").setLevel(logging.ERROR)


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
