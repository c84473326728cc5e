"""Apache Kafka 4.x in KRaft mode on loopback: one combined broker+controller (`kafka-storage format
--standalone`), from the jars scripts/kafka-jars.sh fetches. For checks that must be known valid on Kafka 4 (share
groups, the consumer group protocol) and for benchmarks beside kbus."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.kafka_jars import default_version, fetch
from tests.zk_server import free_port


@contextmanager
def kafka4_kraft(base: Path, configs: dict[str, str] | None = None, heap: str = "512m") -> Iterator[str]:
    """Starts Kafka 4.x (the newest served) with its data under `base`; yields its bootstrap, stops it after."""
    libs = fetch(default_version("4"))
    port, controller = free_port(), free_port()
    props = base / "server.properties"
    lines = [
        "process.roles=broker,controller", "node.id=1",
        f"controller.quorum.bootstrap.servers=localhost:{controller}",
        f"listeners=PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller}",
        f"advertised.listeners=PLAINTEXT://localhost:{port}", "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", f"log.dirs={base / 'logs'}",
        "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1", "share.coordinator.state.topic.num.partitions=1",
        "group.initial.rebalance.delay.ms=0",
        *(f"{k}={v}" for k, v in (configs or {}).items()),
    ]  # fmt: skip
    props.write_text("\n".join(lines) + "\n")
    cp = f"{libs}/*"
    java = ["java", *jvm_tmp.options(base / "tmp")]  # its temporary files under `base`, not /tmp
    cluster_id = subprocess.run([*java, "-cp", cp, "kafka.tools.StorageTool", "random-uuid"], capture_output=True,
                                text=True, check=True, timeout=60).stdout.strip().splitlines()[-1]  # fmt: skip
    subprocess.run([*java, "-cp", cp, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                    "--standalone"], capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    log = (base / "kafka.out").open("w")
    proc = subprocess.Popen([*java, f"-Xmx{heap}", "-cp", cp, "kafka.Kafka", str(props)], stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("localhost", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "Kafka 4 did not start"
                time.sleep(0.5)
        yield f"localhost:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
