"""SCRAM users whose names are not legal znode names, in ZooKeeper mode: Kafka keeps every user entity under its
sanitized (URL-encoded) name, `/config/users/alice%40example.com`, so credentials one tool writes are the ones a
broker and the other tools read."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient

from tests.kbus_processes import BrokerProcess, free_port

pytestmark = pytest.mark.integration
KBUS = str(Path(sys.executable).parent / "kbus")
USER = "alice@example.com"


def kbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBUS, *args], capture_output=True, text=True, timeout=60, check=False)


def test_a_user_name_with_an_at_sign_is_stored_sanitized_and_logs_in(
    tmp_path: Path, zk_connect: str, raw_zk: KazooClient
) -> None:
    created = kbus("configs", "--zookeeper", zk_connect, "--alter", "--add-config",
                   "SCRAM-SHA-256=[password=secret-1]", "--entity-type", "users", "--entity-name", USER)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert raw_zk.exists("/config/users/alice%40example.com") is not None
    assert raw_zk.exists(f"/config/users/{USER}") is None

    described = kbus("configs", "--zookeeper", zk_connect, "--describe", "--entity-type", "users",
                     "--entity-name", USER)  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert USER in described.stdout and "SCRAM-SHA-256" in described.stdout

    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "b", {
        "zookeeper.connect": zk_connect,
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    }, port=plain).start()  # fmt: skip
    try:
        def produce(password: str) -> object:
            """The delivery error of one message sent as USER with `password` (None when delivered)."""
            p = Producer({"bootstrap.servers": f"127.0.0.1:{sasl}", "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": password,
                          "message.timeout.ms": 8000, "logger": None, "error_cb": lambda e: None})  # fmt: skip
            errors: list[object] = []
            p.produce(f"scram-{uuid.uuid4().hex[:8]}", b"v", on_delivery=lambda err, msg: errors.append(err))
            assert p.flush(30) == 0
            return errors[0]

        assert produce("secret-1") is None
        assert produce("wrong") is not None
    finally:
        broker.stop()



def test_too_few_iterations_are_refused_before_anything_is_stored(zk_connect: str, raw_zk: KazooClient) -> None:
    """Kafka's ConfigCommand refuses SCRAM iterations under the mechanism's minimum (4096), with --zookeeper too
    (where no broker checks them): nothing is written."""
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        refused = kbus("configs", "--zookeeper", zk_connect, "--alter", "--add-config",
                       f"{mechanism}=[iterations=1,password=weak-one]", "--entity-type", "users",
                       "--entity-name", "weakling")  # fmt: skip
        assert refused.returncode == 1, refused.stdout
        assert f"Iterations 1 is less than the minimum 4096 required for {mechanism}" in refused.stderr
        assert "weak-one" not in refused.stderr
    assert raw_zk.exists("/config/users/weakling") is None
    ok = kbus("configs", "--zookeeper", zk_connect, "--alter", "--add-config",
              "SCRAM-SHA-256=[iterations=4096,password=strong-one]", "--entity-type", "users",
              "--entity-name", "weakling")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
