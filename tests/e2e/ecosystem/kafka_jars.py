"""Apache Kafka's own jars (fetched by scripts/kafka-jars.sh from Maven Central into .cache/) and a runner for
the main classes behind Kafka's bin/kafka-*.sh scripts, so tests drive kbus with the real Kafka tools."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.ecosystem import jvm_tmp

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "kafka-jars.sh"

# the main class each bin/kafka-*.sh script runs in Kafka 3.9
MAIN_CLASSES_39 = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
}
# Kafka 2.8, for the --zookeeper paths 3.x removed
MAIN_CLASSES_28 = {
    "kafka-topics": "kafka.admin.TopicCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "kafka.tools.ConsoleConsumer",
    "kafka-consumer-groups": "kafka.admin.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-delete-records": "kafka.admin.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "kafka.tools.ConsumerPerformance",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
}


def fetch(*args: str) -> Path:
    """Run scripts/kafka-jars.sh (a no-op once the cache is complete) and return the libs directory it prints."""
    out = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/kafka-jars.sh {' '.join(args)} failed:\n{out.stderr}")
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class KafkaDistribution:
    """A fetched Apache Kafka: libs/ (jars) and config/ (log4j files) as in the binary distribution."""

    version: str
    libs: Path

    @property
    def main_classes(self) -> dict[str, str]:
        return MAIN_CLASSES_28 if self.version.startswith("2.") else MAIN_CLASSES_39

    def command(self, script: str, *args: str) -> list[str]:
        return self.java(self.main_classes[script], *args)

    def java(self, main_class: str, *args: str, classpath: str = "") -> list[str]:
        """A JVM running main_class over Kafka's jars (and `classpath`), with the tools' options: the ToolRunner's
        JVM gets the same ones as a tool's own."""
        log4j = self.libs.parent / "config" / "tools-log4j.properties"
        return [
            "java",
            "-Xmx256m",
            # short-lived tools: the C1 compiler and the serial collector start a JVM fastest
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            *jvm_tmp.session_options(),
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            f"{self.libs}/*{classpath and ':' + classpath}",
            main_class,
            *args,
        ]

    def run(
        self, script: str, *args: str, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """The script's tool on `args`, as its own process would run it: its status, stdout and stderr. Inside a
        `tool_runners()` scope a one-shot tool without input runs in the scope's ToolRunner JVM instead of a JVM
        of its own (the same main class and arguments)."""
        if input is None and script in ONE_SHOT and _scope is not None:
            return _scope.runner(self).run(self.main_classes[script], args, timeout, self.command(script, *args))
        return subprocess.run(self.command(script, *args), input=input, capture_output=True, text=True, timeout=timeout)


def distribution(version: str | None = None) -> KafkaDistribution:
    libs = fetch(version) if version else fetch()
    return KafkaDistribution(libs.parent.name, libs)


def default_version(line: str) -> str:
    return subprocess.run(
        [str(SCRIPT), "--default-version", line], capture_output=True, text=True, check=True
    ).stdout.strip()


def kbus(*args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """kbus's own CLI (the venv's entry point), to compare with Kafka's tool for the same command."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "kbus"), *args], input=input, capture_output=True, text=True, timeout=timeout
    )


# Tools that read no stdin, start no long-lived client and end on their own: these may share a ToolRunner JVM.
# The console producer/consumer and the perf tests keep a JVM of their own (stdin, rates that a test reads).
ONE_SHOT = frozenset({
    "kafka-topics", "kafka-configs", "kafka-consumer-groups", "kafka-get-offsets", "kafka-delete-records",
    "kafka-dump-log", "kafka-transactions", "kafka-log-dirs", "kafka-leader-election", "kafka-reassign-partitions",
})  # fmt: skip
RUNNER_SOURCE = Path(__file__).resolve().parent / "tool_runner" / "ToolRunner.java"


def runner_classes() -> Path:
    """ToolRunner.java compiled once into .cache/tool-runner/<its hash> (a directory renamed into place whole, so
    workers compiling at once never see half of one)."""
    source = RUNNER_SOURCE.read_bytes()
    out = REPO / ".cache" / "tool-runner" / hashlib.sha256(source).hexdigest()[:16]
    if not (out / "ToolRunner.class").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
        try:
            subprocess.run(["javac", "-d", str(tmp), str(RUNNER_SOURCE)], check=True, capture_output=True, timeout=300)
            with contextlib.suppress(OSError):  # another worker's build is in place: the same classes
                tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


class ToolRunner:
    """One JVM (tests/e2e/ecosystem/tool_runner/ToolRunner.java) that runs one-shot Kafka tools one after another:
    a test's tool calls pay one JVM start, not one each. Answers as subprocess.run would (CompletedProcess, and
    TimeoutExpired after which the JVM is gone: the next call starts another)."""

    def __init__(self, dist: KafkaDistribution) -> None:
        cmd = dist.java("ToolRunner", classpath=str(runner_classes()))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.pending = b""

    def run(
        self, main_class: str, args: tuple[str, ...], timeout: float, argv: list[str]
    ) -> subprocess.CompletedProcess[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        fields = [base64.b64encode(f.encode()).decode() for f in (main_class, *args)]
        self.proc.stdin.write((" ".join(fields) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                line, nl, rest = self.pending.partition(b"\n")
                if nl:
                    self.pending = rest
                    if line.startswith(b"KBUS-TOOL "):
                        break
                    continue  # anything else the JVM itself printed
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise subprocess.TimeoutExpired(argv, timeout)
                if sel.select(left):
                    chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        raise RuntimeError(f"the ToolRunner JVM ended (rc={self.proc.wait()}) running {argv}")
                    self.pending += chunk
        status, out, err = line.split(b" ")[1:4]
        return subprocess.CompletedProcess(
            argv, int(status), base64.b64decode(out).decode(), base64.b64decode(err).decode()
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


class _Scope:
    def __init__(self) -> None:
        self.runners: dict[Path, ToolRunner] = {}

    def runner(self, dist: KafkaDistribution) -> ToolRunner:
        r = self.runners.get(dist.libs)
        if r is None or r.proc.poll() is not None:
            r = self.runners[dist.libs] = ToolRunner(dist)
        return r


_scope: _Scope | None = None


@contextlib.contextmanager
def tool_runners() -> Iterator[None]:
    """While open, KafkaDistribution.run runs one-shot tools in one ToolRunner JVM per Kafka version; all end with
    it (tests/e2e/ecosystem/conftest.py opens one per test, so no JVM state outlives a test)."""
    global _scope
    outer, _scope = _scope, _Scope()
    try:
        yield
    finally:
        scope, _scope = _scope, outer
        for r in scope.runners.values():
            r.close()
