"""A real Apache Kafka 3.9 broker (kafka.Kafka from scripts/kafka-jars.sh's jars) in ZooKeeper mode, as a peer of
kbus in the tests: the cluster a user migrates from."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.kafka_jars import KafkaDistribution
from tests.kbus_processes import free_port

STARTED = "[KafkaServer id=0] started"


@dataclass
class ApacheKafka:
    """One Kafka broker (id 0) under its own ZooKeeper chroot; `start` returns at once, `wait_started` waits."""

    dist: KafkaDistribution
    workdir: Path
    zk_connect: str
    overrides: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.port = self.port or free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / "kafka.log"

    def start(self) -> ApacheKafka:
        config = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://{self.bootstrap}",
            "log.dirs": str(self.workdir / "data"),
            "zookeeper.connect": self.zk_connect,  # Kafka creates the chroot
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        log4j = self.dist.libs.parent / "config" / "log4j.properties"
        cmd = ["java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               *jvm_tmp.options(self.workdir / "tmp"), f"-Dlog4j.configuration=file:{log4j}",
               f"-Dkafka.logs.dir={self.workdir / 'logs'}",
               "-cp", f"{self.dist.libs}/*", "kafka.Kafka", str(path)]  # fmt: skip
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def wait_started(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while STARTED not in self.log.read_text(errors="replace"):
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Apache Kafka did not start:\n{self.log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), kill -9 when it takes too long; only this test's process."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
