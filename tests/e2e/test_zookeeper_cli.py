"""`kbus zookeeper-start / zookeeper-stop / zookeeper-shell` with the real Apache ZooKeeper."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kbus.zk.launcher import four_letter, is_listening, wait_until_serving
from tests.zk_server import KBUS, ZooKeeperServer, free_port, write_config

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


@pytest.fixture
def own_server(tmp_path):
    server = ZooKeeperServer(tmp_path, free_port())
    write_config(tmp_path, server.port)
    yield server
    server.kill()


def test_daemon_start_stop_round_trip(own_server):
    t0 = time.monotonic()
    started = own_server.kbus("zookeeper-start", str(own_server.config), "--daemon")
    ready = time.monotonic() - t0
    assert started.returncode == 0, started.stderr
    assert f"on 127.0.0.1:{own_server.port}" in started.stdout
    print(f"zookeeper-start --daemon returned serving after {ready:.2f}s")
    assert "Mode: standalone" in four_letter("srvr", "127.0.0.1", own_server.port)
    logs = own_server.base / "logs"
    pid = int((logs / "zookeeper.pid").read_text())
    assert b"QuorumPeerMain" in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert (logs / "zookeeper.log").read_text().count("binding to port") >= 1, "log4j binding logs to file"
    assert (own_server.base / "data" / "version-2").is_dir()

    again = own_server.kbus("zookeeper-start", str(own_server.config), "--daemon")
    assert again.returncode == 1 and "already running" in again.stderr

    shell = own_server.kbus("zookeeper-shell", own_server.connect, "ls", "/")
    assert shell.returncode == 0 and "[zookeeper]" in shell.stdout

    stopped = own_server.kbus("zookeeper-stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not is_listening("127.0.0.1", own_server.port)
    assert not (logs / "zookeeper.pid").exists()
    none_left = own_server.kbus("zookeeper-stop")
    assert none_left.returncode == 1 and none_left.stderr.strip() == "No zookeeper server to stop"


def test_foreground_start_stops_cleanly_on_sigterm(own_server):
    proc = subprocess.Popen(
        [KBUS, "zookeeper-start", str(own_server.config)],
        env=own_server.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=own_server.base,
    )
    try:
        assert wait_until_serving("127.0.0.1", own_server.port, 60, alive=lambda: proc.poll() is None)
        # like Kafka, another terminal can stop a foreground server
        assert (own_server.base / "logs" / "zookeeper.pid").exists()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert b"binding to port" in out, "foreground logs go to the console"
    assert not is_listening("127.0.0.1", own_server.port)


def test_port_in_use_is_one_clear_error(zookeeper, tmp_path):
    clash = ZooKeeperServer(tmp_path, zookeeper.port)
    write_config(tmp_path, zookeeper.port)
    done = clash.kbus("zookeeper-start", str(clash.config), "--daemon")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"Error: 127.0.0.1:{zookeeper.port} is already in use (another ZooKeeper?); change clientPort"
    )


def test_missing_zookeeper_jars_say_what_to_install(own_server, tmp_path):
    env = {**own_server.env, "ZOOKEEPER_HOME": str(tmp_path / "empty")}
    done = subprocess.run(
        [KBUS, "zookeeper-start", str(own_server.config)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "apt-get install -y zookeeper" in line and "ZOOKEEPER_HOME" in line
    assert not is_listening("127.0.0.1", own_server.port)


def test_missing_java_says_what_to_install(own_server, tmp_path):
    env = {**own_server.env, "JAVA_HOME": str(tmp_path / "no-jdk")}
    done = subprocess.run(
        [KBUS, "zookeeper-start", str(own_server.config)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "bin/java" in line and "apt-get install -y zookeeper" in line


def test_missing_config_file(own_server, tmp_path):
    done = own_server.kbus("zookeeper-start", str(tmp_path / "nope.properties"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"Error: ZooKeeper config file {tmp_path / 'nope.properties'} does not exist"


def test_session_zookeeper_is_running(zookeeper):
    # the session fixture itself was started by `kbus zookeeper-start --daemon`
    assert four_letter("ruok", "127.0.0.1", zookeeper.port) == "imok"
    assert os.path.exists(zookeeper.base / "logs" / "zookeeper.pid")


def test_stop_from_another_directory_finds_the_server(own_server, tmp_path_factory):
    started = own_server.kbus("zookeeper-start", str(own_server.config), "--daemon")
    assert started.returncode == 0, started.stderr
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    env = {k: v for k, v in own_server.env.items() if k != "KBUS_LOG_DIR"}
    # nothing in this directory's logs/: the server is found by the config it runs
    stopped = subprocess.run([KBUS, "zookeeper-stop", str(own_server.config)], env=env, cwd=elsewhere,
                             capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert not is_listening("127.0.0.1", own_server.port)
    assert not (own_server.base / "logs" / "zookeeper.pid").exists()
