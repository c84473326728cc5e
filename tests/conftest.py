"""Shared fixtures for tests/integration and tests/e2e: real kbus broker processes on free loopback ports, one real
ZooKeeper per session (each test gets its own chroot so tests never see each other's znodes), a 3-broker cluster.

Also how the suite runs on pytest-xdist workers (`KBUS_TEST_WORKERS=N scripts/test.sh`: `-n N --dist loadgroup`,
described below): which tests share a worker, which run alone on the machine, and in which order they start."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import uuid
from collections.abc import Callable, Generator, Iterator
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
    config.addinivalue_line("markers", "xdist_group(name): tests that run on one pytest-xdist worker, one at a time")
    if hasattr(config, "workerinput") and int(config.workerinput.get("workercount", 1)) > 1:
        # a pytest-xdist worker's basetemp is <the run's basetemp>/gwN: the run's own directory, shared by its workers
        config.stash[_RUN_LOCKS] = _RunLocks(Path(config.option.basetemp).parent)


# How the suite runs on pytest-xdist workers (KBUS_TEST_WORKERS=N scripts/test.sh: -n N --dist loadgroup). A worker
# is a process of its own with its own session fixtures (a broker, a ZooKeeper; tests/ports.py gives each worker its
# own ports), so most tests may run beside any other, each handed out on its own. Grouped (one worker runs them, one
# after the other) are:
# - every test of a module whose fixtures are module- or class-scoped (a module's cluster is started once), or that
#   share module-level state (MODULE_STATE),
# - every Spark test that uses the `spark` fixture (one local SparkSession, 1 GB of driver, for all of them), and the
#   tests of a module that shares a module-scoped fixture with one of them; the other Spark tests (spark-submit jobs
#   in JVMs of their own, the Kafka connector's job, helpers without a session) go to any worker, so the Spark
#   worker's chain, the longest, is not longer by their minutes,
# - the SERIAL tests: timing-sensitive or filling the machine (partitions, ZooKeeper chaos, leaders killed, an install
#   that builds kbus, disk moves under a throttle); one at a time, beside the other workers' tests,
# - tests marked xdist_group(name), as pytest-xdist's loadgroup does.
# EXCLUSIVE tests run alone: every other worker waits for them (the Spark standalone clusters: a master, two workers,
# executors and the driver, each a JVM, with deadlines on their progress).
# xdist 3.8 marks a group by appending "@group" to the test's nodeid, which pytest 9.2 ignores (a node's id is no
# longer its _nodeid; pytest-xdist issue 1386): the workers write each test's group to a file of the run's and the
# scheduler below reads it.
SPARK = ("tests/e2e/spark/", "tests/e2e/ecosystem/test_spark_kafka_connector.py")
SERIAL = (
    "tests/integration/test_netns_partitions.py",
    "tests/integration/test_zk_chaos.py",
    "tests/integration/test_zk_ensemble_faults.py",
    "tests/integration/test_zk_replication.py",
    "tests/integration/test_alter_log_dirs.py",
    "tests/e2e/test_pure_python_install.py",
    "tests/e2e/test_bench_suite.py",
)
EXCLUSIVE = ("tests/e2e/spark/test_spark_standalone_cluster.py", "tests/e2e/spark/test_spark_exactly_once_cluster.py")
# modules whose tests share work through module-level state, as a module-scoped fixture would (one JVM per
# kafka-clients version runs every check, each test reads its result): one worker runs each such module
MODULE_STATE = ("tests/e2e/ecosystem/test_java_client.py",)
# fixtures that build into the shared .cache (Maven): one worker at a time runs them
SHARED_BUILDS = frozenset({"java_checks"})
GROUPS_FILE = "kbus-xdist-groups-{}.json"


def _wider(item: pytest.Item) -> bool:
    """The test uses a module-, class- or package-scoped fixture."""
    fixturedefs = item._fixtureinfo.name2fixturedefs.values()  # type: ignore[attr-defined]
    return any(d.scope in ("module", "class", "package") for defs in fixturedefs for d in defs)


def _group(item: pytest.Item, path: str, session_modules: frozenset[str]) -> str | None:
    """`session_modules`: the Spark modules with a test on the `spark` fixture (the SparkSession)."""
    marks = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    if marks:
        return "_".join(sorted(marks))
    wider = _wider(item)
    if path.startswith(SPARK) and ("spark" in item.fixturenames or (wider and path in session_modules)):
        return "spark"
    if path.startswith(SERIAL):
        return "serial"
    if wider or path.startswith(MODULE_STATE):
        return path
    return None


def xdist_groups(items: list[pytest.Item]) -> tuple[dict[str, str], dict[str, int]]:
    """Each grouped test's group, and each test's rank in the order work is handed out (lowest first)."""
    groups: dict[str, str] = {}
    rank: dict[str, int] = {}
    session_modules = frozenset(
        path for item in items if (path := item.nodeid.split("::", 1)[0]).startswith(SPARK) and "spark" in
        item.fixturenames)  # fmt: skip
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        group = _group(item, path, session_modules)
        if group is not None:
            groups[item.nodeid] = group
        rank[item.nodeid] = 0 if path.startswith(SPARK) else 1 if group == "serial" else 3 if path.startswith(
            "tests/unit/") else 2
    return groups, rank


def _run_dir(config: pytest.Config) -> Path:
    """The run's own directory, shared by its workers: a worker's basetemp is <the run's basetemp>/gwN."""
    if hasattr(config, "workerinput"):
        return Path(config.option.basetemp).parent
    return config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]


@pytest.hookimpl(tryfirst=True)  # the nodeids before xdist's hook appends its "@group" (where that still works)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):
        return
    groups, rank = xdist_groups(items)
    for item in items:
        if item.nodeid.split("::", 1)[0].startswith(EXCLUSIVE):
            item.stash[_EXCLUSIVE] = True
    # the order the work is handed out in: the Spark tests first (the longest group, and the spark-submit jobs off
    # it, minutes each), the many short unit tests last, where they fill the workers' ends evenly
    items.sort(key=lambda item: rank[item.nodeid])
    out = _run_dir(config) / GROUPS_FILE.format(config.workerinput["workerid"])  # type: ignore[attr-defined]
    out.with_suffix(".tmp").write_text(json.dumps(groups))
    out.with_suffix(".tmp").replace(out)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: no error where it is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """xdist's loadscope with the scopes the workers wrote (a test's group, else the test alone), handed out in
        the workers' collection order (no reordering by size)."""

        groups: dict[str, str] = {}

        def schedule(self) -> None:
            if not self.groups and (files := sorted(_run_dir(config).glob(GROUPS_FILE.format("*")))):
                self.groups = json.loads(files[0].read_text())
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's "@group" suffix (pytest before 9.2)
                return nodeid.rsplit("@", 1)[1]
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


_EXCLUSIVE = pytest.StashKey[bool]()


class _RunLocks:
    """A readers-writer lock over one run's workers (flock on two files in the run's directory): every test holds
    it shared, an exclusive test holds it alone. The gate makes an exclusive test wait only for the tests running
    when it asked, not for every test started after."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.gate = open(directory / "kbus-exclusive.gate", "a")  # noqa: SIM115 (held for the worker's life)
        self.lock = open(directory / "kbus-exclusive.lock", "a")  # noqa: SIM115

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def alone(self, name: str) -> Iterator[None]:
        """One worker at a time (a build into the shared .cache)."""
        with open(self.directory / f"kbus-{name}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield


_RUN_LOCKS = pytest.StashKey[_RunLocks]()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: waiting for the lock is not part of the test's timeout
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    locks = item.config.stash.get(_RUN_LOCKS, None)
    if locks is None:
        return (yield)
    with locks.hold(item.stash.get(_EXCLUSIVE, False)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> Generator[
        None, object, object]:
    locks = request.config.stash.get(_RUN_LOCKS, None)
    if locks is None or fixturedef.argname not in SHARED_BUILDS:
        return (yield)
    with locks.alone(fixturedef.argname):
        return (yield)


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
    c.start_all()
    yield c
    c.stop()
