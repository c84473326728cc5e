"""Building ZooKeeper's java command line and finding an install, without starting anything."""

import os
from pathlib import Path

import pytest

from kbus.common.properties import parse_properties
from kbus.zk import launcher
from kbus.zk.launcher import ZooKeeperSetupError

REPO = Path(__file__).resolve().parents[2]


def _fake_java(tmp_path: Path) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    return home


def _debian_layout(tmp_path: Path, *jars: str) -> Path:
    d = tmp_path / "share-java"
    d.mkdir()
    for jar in jars:
        (d / jar).write_bytes(b"")
    return d


def test_shipped_config_matches_kafka_plus_whitelist():
    props = parse_properties((REPO / "config" / "zookeeper.properties").read_text())
    assert props["dataDir"] == "/tmp/zookeeper"
    assert props["clientPort"] == "2181"
    assert props["maxClientCnxns"] == "0"
    assert props["admin.enableServer"] == "false"
    assert "srvr" in props["4lw.commands.whitelist"].split(",")


def test_debian_install_with_log4j_binding(tmp_path):
    share = _debian_layout(tmp_path, "zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar", "slf4j-nop.jar")
    install = launcher.find_install({"JAVA_HOME": str(_fake_java(tmp_path))}, java_dir=str(share))
    assert install.binding == "log4j"
    assert install.classpath[0] == str(share / "zookeeper.jar")
    assert str(share / "slf4j-nop.jar") in install.shell_classpath
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    cmd = launcher.server_command(install, tmp_path / "zk.properties", log_dir, daemon=True, heap_opts="-Xms8m -Xmx64m")
    assert cmd[0].endswith("/bin/java") and "-Xmx64m" in cmd
    assert cmd[-2:] == [launcher.SERVER_MAIN, str(tmp_path / "zk.properties")]
    assert f"-Dlog4j.configuration=file:{log_dir}/zookeeper-log4j.properties" in cmd
    assert "FILE" in (log_dir / "zookeeper-log4j.properties").read_text().splitlines()[0]


def test_simple_binding_fallback(tmp_path):
    share = _debian_layout(tmp_path, "zookeeper.jar", "slf4j-simple.jar")
    install = launcher.find_install({"JAVA_HOME": str(_fake_java(tmp_path))}, java_dir=str(share))
    assert install.binding == "simple"
    cmd = launcher.server_command(install, tmp_path / "z", tmp_path, daemon=False)
    assert "-Dorg.slf4j.simpleLogger.logFile=System.out" in cmd


def test_missing_jars_say_what_to_install(tmp_path):
    with pytest.raises(ZooKeeperSetupError, match=r"apt-get install -y zookeeper"):
        launcher.find_install({"JAVA_HOME": str(_fake_java(tmp_path))}, java_dir=str(tmp_path / "none"))
    with pytest.raises(ZooKeeperSetupError, match=r"ZOOKEEPER_HOME=.*apt-get install -y zookeeper"):
        launcher.find_install({"ZOOKEEPER_HOME": str(tmp_path)})


def test_missing_java_says_what_to_install(tmp_path):
    share = _debian_layout(tmp_path, "zookeeper.jar")
    with pytest.raises(ZooKeeperSetupError, match=r"Java not found.*apt-get install -y zookeeper"):
        launcher.find_install({"PATH": str(tmp_path)}, java_dir=str(share))
    with pytest.raises(ZooKeeperSetupError, match=r"JAVA_HOME=.*bin/java"):
        launcher.find_install({"JAVA_HOME": str(tmp_path)}, java_dir=str(share))


def test_tarball_install(tmp_path):
    home = tmp_path / "apache-zookeeper-3.8.4-bin"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "zookeeper-3.8.4.jar").write_bytes(b"")
    install = launcher.find_install({"ZOOKEEPER_HOME": str(home), "JAVA_HOME": str(_fake_java(tmp_path))})
    assert install.binding == "bundled" and f"{home}/lib/*" in install.classpath


def test_client_endpoint():
    assert launcher.client_endpoint({"clientPort": "2182"}) == launcher.ClientEndpoint("127.0.0.1", 2182)
    assert launcher.client_endpoint({"clientPortAddress": "0.0.0.0"}).host == "127.0.0.1"
    with pytest.raises(ZooKeeperSetupError):
        launcher.client_endpoint({"clientPort": "x"})


def test_pid_file_ignores_dead_or_foreign_pids(tmp_path):
    pid_file = launcher.pid_file(tmp_path)
    pid_file.write_text(f"{os.getpid()}\n")  # alive, but not a ZooKeeper server
    assert launcher.live_server_pid(pid_file) is None
    pid_file.write_text("garbage")
    assert launcher.live_server_pid(pid_file) is None


def test_running_servers_finds_only_kbus_started_zookeepers(tmp_path):
    from kbus.zk.launcher import KBUS_MARKER, SERVER_MAIN, RunningServer, running_servers

    def process(pid: int, *argv: str) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    process(10, "java", "-Dzookeeper.log.dir=/srv/zk/logs", KBUS_MARKER, "-cp", "x", SERVER_MAIN, "/srv/zk.props")
    process(11, "java", "-cp", "x", SERVER_MAIN, "/etc/zookeeper/zoo.cfg")  # not ours (e.g. a system service)
    process(12, "python", "-m", "kbus")
    (tmp_path / "self").mkdir()
    assert running_servers(tmp_path) == [RunningServer(10, Path("/srv/zk.props"), Path("/srv/zk/logs"))]


def test_a_tls_only_server_is_probed_on_its_secure_port():
    endpoint = launcher.client_endpoint({"secureClientPort": "2182", "secureClientPortAddress": "0.0.0.0"})
    assert endpoint == launcher.ClientEndpoint("127.0.0.1", 2182, tls_only=True)
    assert not launcher.client_endpoint({"clientPort": "2181", "secureClientPort": "2182"}).tls_only


def test_debian_netty_jars_the_manifest_leaves_out_are_added(tmp_path: Path):
    """Without netty-codec the secureClientPort fails (ClassNotFoundException: ByteToMessageDecoder)."""
    java_dir = _debian_layout(tmp_path, "zookeeper.jar", "netty-codec.jar", "netty-resolver.jar", "slf4j-nop.jar")
    install = launcher.find_install({"JAVA_HOME": str(_fake_java(tmp_path))}, java_dir=str(java_dir))
    for cp in (install.classpath, install.shell_classpath):
        assert f"{java_dir}/netty-codec.jar" in cp and f"{java_dir}/netty-resolver.jar" in cp
