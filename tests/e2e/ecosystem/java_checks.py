"""The Java client checks (the Maven module in java/ beside this file) built per kafka-clients version into
.cache/java-checks/."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.kafka_jars import REPO, default_version, fetch
from tests.e2e.ecosystem.maven_build import mvn_compile

POM = Path(__file__).resolve().parent / "java" / "pom.xml"
RESULT = re.compile(r"^RESULT (?P<name>\S+) (?P<status>PASS|FAIL) ?(?P<detail>.*)$")

# the client versions tested: the newest 3.9.x and 4.x that Maven Central serves (pinned in scripts/kafka-jars.sh)
VERSIONS = [default_version("3.9"), default_version("4")]

# kbus.compat.Checks.all(), in its order
CHECKS = [
    "producer_acks_all_idempotent_compression_headers",
    "producer_errors",
    "consumer_group_range",
    "consumer_group_cooperative_sticky",
    "consumer_static_membership",
    "consumer_seek_offsets_for_times",
    "consumer_commit_sync_async",
    "consumer_group_protocol",
    "admin_topics",
    "admin_configs",
    "admin_list_offsets_delete_records",
    "admin_describe_cluster",
    "admin_consumer_groups",
    "admin_log_dirs_producers_election",
    "transactions_commit_abort_fence_offsets",
]


@dataclass(frozen=True)
class JavaChecks:
    version: str
    home: Path

    @property
    def classpath(self) -> str:
        return f"{self.home / 'classes'}:{self.home / 'libs'}/*"

    def java(self, main: str, *args: str, client_config: Path | None = None) -> list[str]:
        props = [f"-Dkbus.client.config={client_config}"] if client_config else []
        return ["java", "-Xmx256m", *jvm_tmp.session_options(), "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                f"-Dkbus.client.version={self.version}", *props, "-cp", self.classpath, main, *args]  # fmt: skip

    def start(
        self, bootstrap: str, suffix: str, checks: tuple[str, ...] = (), client_config: Path | None = None
    ) -> subprocess.Popen[str]:
        """Starts the checks (all by default) in one JVM; `results` waits for them. `client_config`: a .properties
        file every client gets (security settings)."""
        cmd = self.java("kbus.compat.Checks", bootstrap, suffix, *checks, client_config=client_config)
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @staticmethod
    def results(proc: subprocess.Popen[str], timeout: float = 600) -> tuple[dict[str, tuple[bool, str]], str]:
        """{check: (passed, detail)} of a run `start` began, and the JVM's stderr."""
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        results: dict[str, tuple[bool, str]] = {}
        for line in stdout.splitlines():
            m = RESULT.match(line)
            if m:
                results[m["name"]] = (m["status"] == "PASS", m["detail"])
        return results, stderr

    def run(
        self,
        bootstrap: str,
        suffix: str,
        checks: tuple[str, ...] = (),
        client_config: Path | None = None,
        timeout: float = 600,
    ) -> tuple[dict[str, tuple[bool, str]], str]:
        """Runs the checks (all by default) in one JVM; returns {check: (passed, detail)} and the JVM's stderr."""
        return self.results(self.start(bootstrap, suffix, checks, client_config), timeout)


def build(version: str) -> JavaChecks:
    """`mvn compile` + the dependencies, everything Maven fetches kept in .cache/m2 (once per change of the module:
    maven_build.py)."""
    home = REPO / ".cache" / "java-checks" / version
    mvn_compile(POM, version, home, "the Java checks for kafka-clients")
    return JavaChecks(version, home)


@dataclass(frozen=True)
class SingleFileCheck:
    """A one-file Java check (java-txn/, java-share/) compiled with javac against kafka-clients' jars; it prints
    `RESULT PASS` or `RESULT FAIL ...` and the same check runs against kbus and against Apache Kafka."""

    classes: Path
    clients: Path

    @classmethod
    def compile(cls, source: Path, out: Path, version: str) -> SingleFileCheck:
        clients = fetch("--clients", version)
        subprocess.run(["javac", "-d", str(out), "-cp", f"{clients}/*", str(source)], check=True, timeout=120)
        return cls(out, clients)

    def run(self, main: str, *args: str, timeout: float) -> str:
        """Runs `main` with `args`, asserts its one RESULT line says PASS; returns its stdout."""
        cmd = ["java", "-Xmx256m", *jvm_tmp.session_options(), "-cp", f"{self.classes}:{self.clients}/*", main, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        results = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
        assert results == ["RESULT PASS"], f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done.stdout
