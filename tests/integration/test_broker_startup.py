"""A broker's start and stop as an operator sees them: the config banner, a taken port, the clean-stop line."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import REPO, BrokerProcess

pytestmark = pytest.mark.integration


def test_start_banner_lists_the_effective_config(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, {"num.partitions": "7", "log.retention.hours": "5"}).start()
    try:
        text = b.log_text()
    finally:
        b.stop()
    assert "KafkaConfig values: \n" in text
    banner = text.split("KafkaConfig values: \n", 1)[1].split("\n[", 1)[0].splitlines()
    assert f"\tlisteners = PLAINTEXT://127.0.0.1:{b.port}" in banner
    assert "\tnum.partitions = 7" in banner  # from the file
    assert "\tlog.retention.hours = 5" in banner
    assert "\tmessage.max.bytes = 1048588" in banner  # Kafka's default, not in the file
    assert "\tadvertised.listeners = null" in banner
    keys = [line.split(" = ")[0] for line in banner]
    assert keys == sorted(keys) and len(keys) > 40


def test_a_broker_that_cannot_bind_never_registers(tmp_path: Path, zk_connect: str, raw_zk) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "server.properties"
        config.write_text(f"broker.id=5\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n"
                          f"zookeeper.connect={zk_connect}\n")
        res = subprocess.run([sys.executable, "-m", "kbus.server", str(config)], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
    assert res.returncode != 0
    assert f"ERROR cannot listen on PLAINTEXT://127.0.0.1:{port}: Address already in use" in res.stderr
    # it never reached ZooKeeper: not even the persistent paths a registering broker creates
    assert raw_zk.exists("/brokers") is None


def test_clean_stop_counts_only_the_partitions_it_led(tmp_path: Path, zk_connect: str) -> None:
    """RF=1 partitions cannot move: the line says 0 moved and 0 stranded among those it led (never negative)."""
    b = BrokerProcess(tmp_path, {"zookeeper.connect": zk_connect, "broker.id": "1"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("single", 3, 1)])["single"].result(30)
        deadline = time.monotonic() + 30
        while "Partition single-2: leader" not in b.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        assert b.stop() == 0
    lines = [ln for ln in b.log_text().splitlines() if "Controlled shutdown: moved leadership" in ln]
    assert len(lines) == 1
    assert "moved leadership of 0 partition(s); 0 had no other in-sync replica" in lines[0], lines[0]
