"""Kafka Connect's jars and the java command behind `kbus connect-standalone`, `connect-distributed` and
`connect-mirror-maker`, built the way Kafka's bin/connect-*.sh and kafka-run-class.sh build it.

The jars (connect-runtime, connect-file, connect-json, connect-mirror and their dependencies) are fetched once from
Maven Central with `mvn` into `<cache>/kafka-connect/VERSION/libs` -- the layout scripts/kafka-jars.sh --connect
uses, so KBUS_CACHE_DIR=<checkout>/.cache shares the tests' copy. Later runs start without any network.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kbus.common.maven import MavenFailed, MavenMissing, copy_dependencies
from kbus.ops.install import default_source

# The newest Kafka 3.9 on Maven Central (scripts/kafka-jars.sh pins the same); KBUS_CONNECT_VERSION picks another.
DEFAULT_VERSION = "3.9.2"
_ARTIFACTS = (
    "connect-runtime",
    "connect-file",
    "connect-json",
    "connect-mirror",
    "connect-mirror-client",
    "connect-transforms",
)
_SLF4J_1 = ("org.slf4j", "slf4j-reload4j", "1.7.36")
_RELOAD4J = ("ch.qos.reload4j", "reload4j", "1.2.25")
_LOG4J2_SLF4J2 = ("org.apache.logging.log4j", "log4j-slf4j2-impl", "2.24.3")
# connect-runtime 4.x alone resolves slf4j-api 1.7, which ignores the slf4j 2 binding above
_SLF4J_2 = ("org.slf4j", "slf4j-api", "2.0.17")


class ConnectError(Exception):
    """Java or the jars are missing; the message says what to install."""


@dataclass(frozen=True)
class Script:
    """One of Kafka's bin/connect-*.sh: its main class and the name kafka-run-class gives its -daemon log."""

    main_class: str
    daemon_name: str


SCRIPTS = {
    "connect-standalone": Script("org.apache.kafka.connect.cli.ConnectStandalone", "connectStandalone"),
    "connect-distributed": Script("org.apache.kafka.connect.cli.ConnectDistributed", "connectDistributed"),
    "connect-mirror-maker": Script("org.apache.kafka.connect.mirror.MirrorMaker", "mirrorMaker"),
}


def version(env: Mapping[str, str]) -> str:
    return env.get("KBUS_CONNECT_VERSION") or DEFAULT_VERSION


def connect_libs(ver: str, root: Path) -> Path:
    """`root`/kafka-connect/VER/libs, fetched the first time."""
    home = root / "kafka-connect" / ver
    if not (home / ".complete").exists():
        _fetch(ver, root, home)
    return home / "libs"


def _fetch(ver: str, root: Path, home: Path) -> None:
    deps = [("org.apache.kafka", a, ver) for a in _ARTIFACTS]
    deps += [_LOG4J2_SLF4J2, _SLF4J_2] if ver.startswith("4.") else [_SLF4J_1, _RELOAD4J]
    try:
        copy_dependencies(home, root / "m2", "kafka-jars-connect", ver, deps)
    except MavenMissing:
        raise ConnectError(
            f"Kafka Connect {ver}'s jars are not in {home} and Maven (mvn) is not installed to fetch them: "
            "apt-get install -y maven"
        ) from None
    except MavenFailed as exc:
        raise ConnectError(f"Maven could not fetch Kafka Connect {ver}:\n{exc}") from None
    (home / ".complete").touch()


def log4j_config(ver: str = DEFAULT_VERSION) -> Path:
    """config/connect-log4j.properties (Kafka 3, log4j 1) or connect-log4j2.properties (Kafka 4, log4j2) of this
    checkout, else the copy installed under share/kbus."""
    name = "connect-log4j2.properties" if ver.startswith("4.") else "connect-log4j.properties"
    return default_source() / "config" / name


def java_command(
    java: str, script: Script, libs: Path, args: Sequence[str], env: Mapping[str, str], ver: str = DEFAULT_VERSION
) -> list[str]:
    """What kafka-run-class.sh runs for bin/connect-*.sh: KAFKA_HEAP_OPTS (default -Xms256M -Xmx2G, as the
    connect scripts set), KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS (default connect-log4j.properties, logs
    under LOG_DIR), KAFKA_OPTS, then the classpath (Connect's jars, then CLASSPATH) and the main class."""
    heap = env.get("KAFKA_HEAP_OPTS") or "-Xms256M -Xmx2G"
    perf = env.get("KAFKA_JVM_PERFORMANCE_OPTS") or (
        "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
        "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true"
    )
    config = log4j_config(ver)
    log4j = env.get("KAFKA_LOG4J_OPTS") or (
        f"-Dlog4j2.configurationFile={config}" if ver.startswith("4.") else f"-Dlog4j.configuration=file:{config}"
    )
    log_dir = env.get("LOG_DIR") or str(Path.cwd() / "logs")
    classpath = f"{libs}/*" + (f":{env['CLASSPATH']}" if env.get("CLASSPATH") else "")
    return [
        java,
        *shlex.split(heap),
        *shlex.split(perf),
        f"-Dkafka.logs.dir={log_dir}",
        *shlex.split(log4j),
        *shlex.split(env.get("KAFKA_OPTS", "")),
        "-cp",
        classpath,
        script.main_class,
        *args,
    ]
