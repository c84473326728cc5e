"""The systemd units as an operator gets them from `kbus install-service`: systemd-analyze accepts them, and their
ExecStart lines, run as written (only the install paths and ports substituted), give a working ZooKeeper-mode
broker that shuts down cleanly on SIGTERM."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbus.ops.install import CONFIG_DIR, LOG_DIR, STATE_DIR
from tests.e2e.systemd_units import environment, exec_start, parse_unit
from tests.kbus_processes import free_port

KBUS = Path(sys.executable).with_name("kbus")
REPO = Path(__file__).resolve().parents[2]
UNITS = ("kbus-zookeeper.service", "kbus.service")

pytestmark = pytest.mark.integration


def install(prefix: Path) -> Path:
    done = subprocess.run(
        [str(KBUS), "install-service", "--prefix", str(prefix)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return prefix / "etc/systemd/system"


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        pytest.fail("systemd-analyze not installed: apt-get install -y systemd (scripts/setup.sh does)")
    return path


def verify(*units: Path) -> subprocess.CompletedProcess[str]:
    # run from the units' directory so systemd-analyze finds the Requires= partner next to the unit
    return subprocess.run(
        [systemd_analyze(), "verify", "--man=no", *map(str, units)],
        capture_output=True, text=True, timeout=60, cwd=units[0].parent,
    )


def test_systemd_analyze_verify_accepts_installed_units(tmp_path: Path) -> None:
    unit_dir = install(tmp_path / "root")
    done = verify(*(unit_dir / u for u in UNITS))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""


def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a typo in a key and a wrong ExecStart path are both reported."""
    unit_dir = install(tmp_path / "root")
    broken = unit_dir / "kbus.service"
    broken.write_text(
        broken.read_text().replace("Type=notify", "Type=notfy").replace(str(KBUS), "/nonexistent/bin/kbus")
    )
    done = verify(broken)
    assert done.returncode != 0
    assert "notfy" in done.stderr and "/nonexistent/bin/kbus" in done.stderr


def test_units_shape(tmp_path: Path) -> None:
    unit_dir = install(tmp_path / "root")
    zk = parse_unit((unit_dir / "kbus-zookeeper.service").read_text())
    broker = parse_unit((unit_dir / "kbus.service").read_text())
    assert "kbus-zookeeper.service" in broker["Unit"]["Requires"][0]
    assert "kbus-zookeeper.service" in broker["Unit"]["After"][0]
    assert broker["Service"]["Type"] == ["notify"]
    for unit in (zk, broker):
        svc = unit["Service"]
        assert svc["User"] == ["kbus"] and svc["Restart"] == ["on-failure"]
        assert int(svc["LimitNOFILE"][0]) >= 65536
        assert svc["ProtectSystem"] == ["strict"] and svc["NoNewPrivileges"] == ["yes"]
        assert svc["PrivateTmp"] == ["yes"] and svc["ProtectHome"] == ["yes"]
        assert set(svc["ReadWritePaths"][0].split()) == {str(STATE_DIR), str(LOG_DIR)}
        # logs go to the journal: nothing redirects stdout
        assert "StandardOutput" not in svc
        argv = exec_start(svc, environment(svc))
        assert argv[0] == str(KBUS)
        assert argv[-1].startswith(str(CONFIG_DIR) + "/")
    assert environment(broker["Service"])["KBUS_LOG_CONFIG"] == str(CONFIG_DIR / "logging.yaml")


# ---- running the ExecStart lines --------------------------------------------------------------------------------


def staged(value: str, root: Path) -> str:
    """The install paths, moved under the staging root (the only substitution besides ports)."""
    for path in (CONFIG_DIR, STATE_DIR, LOG_DIR):
        value = value.replace(str(path), str(root / path.relative_to("/")))
    return value


def set_props(path: Path, **props: str) -> None:
    lines = path.read_text().splitlines()
    keys = {k.replace("_", "."): v for k, v in props.items()}
    out = [line for line in lines if line.split("=", 1)[0].strip() not in keys]
    path.write_text("\n".join([*out, *(f"{k}={v}" for k, v in keys.items())]) + "\n")


class NotifySocket:
    """Stands in for systemd's NOTIFY_SOCKET: collects sd_notify datagrams."""

    def __init__(self) -> None:
        self.name = f"@kbus-test-notify-{uuid.uuid4().hex[:12]}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.2)
        self.messages: list[str] = []

    def wait_for(self, message: str, timeout: float, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + timeout
        while message not in self.messages:
            assert proc.poll() is None, f"exited with {proc.returncode} before sending {message}"
            assert time.monotonic() < deadline, f"no {message} within {timeout} s"
            with contextlib.suppress(TimeoutError):
                self.messages += self.sock.recv(4096).decode().split("\n")


class Unit:
    """One unit's ExecStart run as a child process, its stdout kept as the unit's 'journal'."""

    def __init__(self, unit_file: Path, root: Path, journal: Path, extra_env: dict[str, str] | None = None) -> None:
        svc = parse_unit(unit_file.read_text())["Service"]
        env = {k: staged(v, root) for k, v in environment(svc).items()}
        self.argv = [staged(a, root) for a in exec_start(svc, env)]
        self.env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", **env, **(extra_env or {})}
        self.journal = journal
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Unit:
        with open(self.journal, "ab") as out:
            # systemd starts services in / with only the unit's environment (plus PATH)
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd="/", stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def stop(self, timeout: float = 60) -> int:
        """What systemd does with KillMode=mixed: SIGTERM to the main process, then wait."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def group_alive(self) -> bool:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        # zombies of the group still answer; look for a live one
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                        return True
        return False


@pytest.fixture
def units(tmp_path: Path) -> Iterator[list[Unit]]:
    started: list[Unit] = []
    yield started
    for unit in reversed(started):
        unit.kill()


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"v%d" % i)
    assert p.flush(30) == 0


def consume(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(m.value() for m in c.consume(1000, 0.5) if not m.error())
    c.close()
    return out


@pytest.mark.slow
@pytest.mark.zookeeper
def test_exec_start_lines_run_a_working_broker_with_clean_restart(tmp_path: Path, units: list[Unit]) -> None:
    root = tmp_path / "root"
    unit_dir = install(root)
    etc = root / "etc/kbus"
    zk_port, kafka_port, metrics_port = free_port(), free_port(), free_port()
    set_props(etc / "zookeeper.properties", clientPort=str(zk_port))
    set_props(
        etc / "server.properties",
        listeners=f"PLAINTEXT://127.0.0.1:{kafka_port}",
        zookeeper_connect=f"127.0.0.1:{zk_port}",
        metrics_port=str(metrics_port),
        offsets_topic_replication_factor="1",
    )
    # what the installer wrote is what runs: the staged data paths are the /var/lib/kbus ones
    assert f"log.dirs={STATE_DIR}/data" in (etc / "server.properties").read_text()
    for name in ("server.properties", "zookeeper.properties"):
        (etc / name).write_text(staged((etc / name).read_text(), root))

    zk = Unit(unit_dir / "kbus-zookeeper.service", root, tmp_path / "zookeeper.journal")
    units.append(zk.start())
    assert zk.argv[1:] == ["zookeeper-start", str(etc / "zookeeper.properties")]

    notify = NotifySocket()
    broker_unit = unit_dir / "kbus.service"
    broker = Unit(broker_unit, root, tmp_path / "kbus.journal", {"NOTIFY_SOCKET": notify.name})
    units.append(broker.start())
    assert broker.proc is not None
    # Type=notify: the broker itself says when it is ready (after ZooKeeper came up)
    notify.wait_for("READY=1", 90, broker.proc)

    bootstrap = f"127.0.0.1:{kafka_port}"
    topic = f"svc-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, 500)
    assert consume(bootstrap, topic, 500) == [b"v%d" % i for i in range(500)]
    health = subprocess.run(
        [str(KBUS), "broker-health", "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60
    )
    assert health.returncode == 0, health.stderr

    assert broker.stop() == 0
    notify.messages.remove("READY=1")
    assert "STOPPING=1" in notify.messages or notify.sock.recv(4096).startswith(b"STOPPING=1")
    first = broker.journal.read_text()
    # logging.yaml from /etc/kbus was used: Kafka-style lines on stdout (the journal)
    assert "shut down completed (kbus.server)" in first

    units.append(broker.start())
    notify.wait_for("READY=1", 90, broker.proc)
    restarted = broker.journal.read_text()[len(first) :]
    loads = [line for line in restarted.splitlines() if " logs from " in line]
    assert loads and all("(clean shutdown)" in line for line in loads), restarted[-3000:]
    assert consume(bootstrap, topic, 500) == [b"v%d" % i for i in range(500)]

    assert broker.stop() == 0
    assert zk.stop() == 0
    deadline = time.monotonic() + 10
    while (zk.group_alive() or broker.group_alive()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not zk.group_alive(), "the ZooKeeper JVM outlived its launcher"
    assert not broker.group_alive()
    assert not (root / "var/log/kbus/zookeeper.pid").exists()


def test_ui_unit_verifies(tmp_path: Path) -> None:
    unit = tmp_path / "kbus-ui.service"
    unit.write_text((REPO / "systemd/kbus-ui.service").read_text().replace("/opt/kbus/venv/bin/kbus", str(KBUS)))
    done = verify(unit)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
