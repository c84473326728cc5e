"""Real kbus broker processes for integration and e2e tests (no mocks): start, stop, kill -9, restart; a cluster
of them on one ZooKeeper."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.ports import free_port

REPO = Path(__file__).resolve().parent.parent
KBUS = str(Path(sys.executable).parent / "kbus")  # the console script of the venv running the tests


def kbus(*args: str) -> subprocess.CompletedProcess[str]:
    """One `kbus` command as an operator runs it, its output captured (90 s: cluster tools on a loaded machine)."""
    return subprocess.run([KBUS, *args], capture_output=True, text=True, timeout=90, check=False)


# Test-friendly defaults; everything else is Kafka's default.
TEST_DEFAULTS = {
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "4",
    "group.min.session.timeout.ms": "1000",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}


STARTED_LINE = "] started (kbus, cluster.id="  # main.serve's "[KafkaServer id=N] started (kbus, cluster.id=...)"


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def wait_for(predicate: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> float:
    """Poll until `predicate()` is true; returns the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class BrokerProcess:
    workdir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None
    netns: str | None = None  # run inside this network namespace (`ip netns exec`)
    python: str = sys.executable  # another venv's interpreter runs that venv's installed kbus (cwd outside REPO)

    def __post_init__(self) -> None:
        self.port = self.port or free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dirs(self) -> Path:
        return Path(self.overrides.get("log.dirs", self.workdir / "data"))

    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def write_config(self) -> None:
        props = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dirs),
            **TEST_DEFAULTS,
            **self.overrides,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def start(self, timeout: float = 30) -> BrokerProcess:
        """Launch and wait until the broker serves: its port takes connections from before it registers in
        ZooKeeper (Kafka's order), so the 'started' log line says when it answers requests."""
        started_before = self.log_text().count(STARTED_LINE)
        self.start_process()
        return self.wait_started(started_before, timeout)

    def wait_started(self, started_before: int, timeout: float = 30) -> BrokerProcess:
        """After start_process(): wait until the log has more 'started' lines than `started_before` (its count
        before the launch); a broker that does not get there is killed (RuntimeError with its log)."""
        try:
            deadline = time.monotonic() + timeout
            if self.netns is None:  # a namespace's ports are not reachable from here: the log line says it all
                wait_for_port(self.port, timeout, self.proc)
            while self.log_text().count(STARTED_LINE) <= started_before:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"exited with {self.proc.returncode} while starting")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"not started after {timeout}s")
                time.sleep(0.05)
        except Exception:
            self.kill()
            raise RuntimeError(f"broker failed to start; log:\n{self.log_text()[-4000:]}") from None
        return self

    def start_process(self) -> None:
        """Launch the broker without waiting for it to listen (tests that act during its start-up)."""
        self.write_config()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "ab") as out:
            prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
            self.proc = subprocess.Popen(
                [*prefix, self.python, "-m", "kbus.server", str(self.config_path)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO if self.python == sys.executable else self.workdir,
                env=env,
                start_new_session=True,
            )

    def port_open(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM: a clean shutdown."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """kill -9: what a crash looks like."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "6000",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}


class Cluster:
    def __init__(self, tmp_path, zk_connect: str, size: int = 3) -> None:
        self.brokers = {
            i: BrokerProcess(
                tmp_path / f"b{i}", {"zookeeper.connect": zk_connect, "broker.id": str(i), **CLUSTER_OVERRIDES}
            )
            for i in range(1, size + 1)
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive)

    def start_broker(self, broker_id: int, timeout: float = 40) -> None:
        """Start (or restart) one broker; after a kill -9 its old ZooKeeper session must expire first, so
        registration is retried the way an operator's supervisor would."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.brokers[broker_id].start(timeout=20)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def stop(self) -> None:
        """Every broker stopped (SIGTERM), killed (-9) when a clean stop fails: a test's cleanup."""
        for b in self.brokers.values():
            try:
                b.stop()
            except Exception:
                b.kill()

    def start_all(self) -> None:
        """Every broker started, and each seeing all the others. The first broker starts alone, so it is the
        controller as when they started one by one; the others then start at once (each start is seconds of
        Python and ZooKeeper round trips that need not wait for the previous one). One that fails to start is
        started again as start_broker() does."""
        first, *others = self.brokers
        self.start_broker(first)
        before = {i: self.brokers[i].log_text().count(STARTED_LINE) for i in others}
        for i in others:
            self.brokers[i].start_process()
        for i in others:
            try:
                self.brokers[i].wait_started(before[i], timeout=20)
            except RuntimeError:
                self.start_broker(i)
        self.wait_until_all_see_each_other()

    def expose_metrics(self) -> dict[int, int]:
        """Before start_all(): each broker serves /metrics on a free port; broker id -> port."""
        ports = {i: free_port() for i in self.brokers}
        for i, b in self.brokers.items():
            b.overrides["metrics.port"] = str(ports[i])
        return ports

    def wait_until_all_see_each_other(self) -> None:
        """Each broker learns of the others through a ZooKeeper watch, a moment after they register."""
        live = [b for b in self.brokers.values() if b.alive]

        def everyone_sees_all() -> bool:
            for b in live:
                try:
                    md = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0}).list_topics(timeout=5)
                except Exception:
                    return False
                if len(md.brokers) != len(live):
                    return False
            return True

        wait_for(everyone_sees_all, timeout=30, what="every broker seeing every other")

    def metadata(self):
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=5)

    def partitions(self, topic: str) -> dict[int, tuple[int, list[int]]]:
        try:
            t = self.metadata().topics.get(topic)
        except Exception:
            return {}
        if t is None or t.error is not None:
            return {}
        return {p.id: (p.leader, sorted(p.isrs)) for p in t.partitions.values()}

    def controller(self) -> int:
        return self.metadata().controller_id
