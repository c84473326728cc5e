"""Apache Kafka's own jars (fetched by scripts/kafka-jars.sh from Maven Central into .cache/) and a runner for
the main classes behind Kafka's bin/kafka-*.sh scripts, so tests drive kbus with the real Kafka tools."""

from __future__ import annotations

import subprocess
import sys
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
            f"{self.libs}/*",
            self.main_classes[script],
            *args,
        ]

    def run(
        self, script: str, *args: str, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
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
