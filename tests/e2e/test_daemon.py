"""`kbus server-start --daemon` / `kbus server-stop` round trips against real broker processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.kbus_processes import TEST_DEFAULTS, free_port

KBUS = str(Path(sys.executable).with_name("kbus"))

pytestmark = pytest.mark.integration


def write_config(workdir: Path, port: int) -> Path:
    props = {"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(workdir / "data"),
             **TEST_DEFAULTS}
    path = workdir / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def kbus(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KBUS_LOG_DIR": str(workdir / "logs")}
    return subprocess.run([KBUS, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)


def live_processes_using(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line mentions `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in argv and state != "Z":
            pids.append(int(entry.name))
    return pids


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, b"d%d" % i)
    assert p.flush(30) == 0


def test_daemon_round_trip_leaves_no_stray_process_and_a_clean_log(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, port)
    pid_file, out_file = tmp_path / "logs/kbusServer.pid", tmp_path / "logs/kbusServer.out"
    try:
        started = kbus(tmp_path, "server-start", "--daemon", "server.properties")
        assert started.returncode == 0, started.stderr
        pid = int(pid_file.read_text())
        # it returns once the listener is up, and says where the log is
        assert accepts(port)
        assert f"pid {pid}" in started.stdout and str(out_file) in started.stdout
        assert live_processes_using(str(config)) == [pid]

        again = kbus(tmp_path, "server-start", "--daemon", "server.properties")
        assert again.returncode == 1
        lines = again.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith(f"ERROR kbus server is already running (pid {pid}, pid file {pid_file}); ")
        assert "to run several brokers" in lines[0] and "KBUS_LOG_DIR" in lines[0]
        # ... and doing what it says works: a second broker, its own config and directory
        second_dir = tmp_path / "second"
        second_dir.mkdir()
        second_port = free_port()
        write_config(second_dir, second_port)
        second = kbus(second_dir, "server-start", "--daemon", "server.properties")
        assert second.returncode == 0, second.stderr
        assert accepts(second_port)
        assert kbus(second_dir, "server-stop", "server.properties").returncode == 0

        produce(f"127.0.0.1:{port}", f"d-{uuid.uuid4().hex[:6]}", 100)
        stopped = kbus(tmp_path, "server-stop", "server.properties")
        assert stopped.returncode == 0, stopped.stderr
        # server-stop waits for the exit it asked for
        assert live_processes_using(str(config)) == []
        assert not pid_file.exists() and not accepts(port)
        assert "shut down completed" in out_file.read_text()

        restarted = kbus(tmp_path, "server-start", "--daemon", "server.properties")
        assert restarted.returncode == 0, restarted.stderr
        loads = [line for line in out_file.read_text().splitlines() if " logs from " in line]
        assert "(clean shutdown)" in loads[-1]
        assert kbus(tmp_path, "server-stop", "server.properties").returncode == 0
        assert live_processes_using(str(config)) == []

        # nothing left to stop (the config argument keeps this from touching anyone else's broker)
        nothing = kbus(tmp_path, "server-stop", "server.properties")
        assert nothing.returncode == 1
        assert nothing.stderr.strip() == "No kbus server to stop"
    finally:
        for pid in live_processes_using(str(config)):
            os.kill(pid, 9)


def test_daemon_that_cannot_start_reports_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        config = write_config(tmp_path, busy.getsockname()[1])
        t0 = time.monotonic()
        done = kbus(tmp_path, "server-start", "--daemon", "server.properties")
        elapsed = time.monotonic() - t0
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR kbus server exited with code 1 while starting")
    assert "cannot listen" in lines[0] and "Traceback" not in done.stderr
    assert elapsed < 30
    assert not (tmp_path / "logs/kbusServer.pid").exists()
    assert live_processes_using(str(config)) == []


def test_daemon_rejects_a_bad_config_before_forking(tmp_path: Path) -> None:
    write_config(tmp_path, free_port())
    done = kbus(tmp_path, "server-start", "--daemon", "server.properties", "--override", "num.partitions=zero")
    assert done.returncode == 1
    assert done.stderr.strip() == "ERROR Invalid value zero for configuration num.partitions: Not a number of type INT"
    assert not (tmp_path / "logs").exists() or not (tmp_path / "logs/kbusServer.out").exists()
