"""`kbus connect-*`: the java command Kafka's bin/connect-*.sh would run, Kafka's script names, and usage errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kbus.cli.commands import command_for_script
from kbus.connect.runtime import SCRIPTS, connect_libs, java_command, log4j_config, version

KBUS = str(Path(sys.executable).parent / "kbus")


def test_script_names_map_to_the_commands() -> None:
    assert command_for_script("bin/connect-standalone.sh") == "connect-standalone"
    assert command_for_script("connect-distributed.sh") == "connect-distributed"
    assert command_for_script("connect-mirror-maker.sh") == "connect-mirror-maker"


def test_java_command_as_kafka_run_class_builds_it(tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    cmd = java_command("/usr/bin/java", SCRIPTS["connect-distributed"], libs, ["w.properties"], {"LOG_DIR": "/l"})
    assert cmd[0] == "/usr/bin/java"
    assert cmd[1:3] == ["-Xms256M", "-Xmx2G"]  # the connect scripts' KAFKA_HEAP_OPTS
    assert "-Dkafka.logs.dir=/l" in cmd
    assert f"-Dlog4j.configuration=file:{log4j_config()}" in cmd
    assert log4j_config().is_file()
    assert cmd[-4:] == ["-cp", f"{libs}/*", "org.apache.kafka.connect.cli.ConnectDistributed", "w.properties"]


def test_java_command_honours_kafkas_environment(tmp_path: Path) -> None:
    env = {"KAFKA_HEAP_OPTS": "-Xmx128m", "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC",
           "KAFKA_LOG4J_OPTS": "-Dlog4j.configuration=file:/x.properties", "KAFKA_OPTS": "-Da=b -Dc=d",
           "CLASSPATH": "/plugins/x.jar"}  # fmt: skip
    cmd = java_command("java", SCRIPTS["connect-mirror-maker"], tmp_path, ["mm2.properties"], env)
    assert cmd[1:3] == ["-Xmx128m", "-XX:+UseSerialGC"]
    assert "-Dlog4j.configuration=file:/x.properties" in cmd and "-Da=b" in cmd and "-Dc=d" in cmd
    assert cmd[-3:] == [f"{tmp_path}/*:/plugins/x.jar", "org.apache.kafka.connect.mirror.MirrorMaker", "mm2.properties"]


def test_version_and_cached_libs(tmp_path: Path) -> None:
    assert version({}) == "3.9.2"
    assert version({"KBUS_CONNECT_VERSION": "4.4.0"}) == "4.4.0"
    home = tmp_path / "kafka-connect" / "3.9.2"
    (home / "libs").mkdir(parents=True)
    (home / ".complete").touch()
    assert connect_libs("3.9.2", tmp_path) == home / "libs"  # cached: no Maven run


def test_usage_without_a_worker_config() -> None:
    out = subprocess.run([KBUS, "connect-distributed.sh"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == "USAGE: kbus connect-distributed [-daemon] connect-distributed.properties"


def test_missing_java_is_one_line(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "JAVA_HOME": str(tmp_path / "nojava")}
    out = subprocess.run([KBUS, "connect-standalone", "w.properties"], capture_output=True, text=True, env=env,
                         timeout=60)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith("kbus connect-standalone: JAVA_HOME=") and len(out.stderr.splitlines()) == 1


def test_kafka4_logs_through_log4j2(tmp_path: Path) -> None:
    cmd = java_command("java", SCRIPTS["connect-standalone"], tmp_path, ["w.properties"], {}, "4.1.1")
    config = log4j_config("4.1.1")
    assert config.name == "connect-log4j2.properties" and config.is_file()
    assert f"-Dlog4j2.configurationFile={config}" in cmd
    assert not any(a.startswith("-Dlog4j.configuration=") for a in cmd)
