"""`kbus broker-health` against a healthy broker and against nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kbus_processes import free_port

KBUS = str(Path(sys.executable).with_name("kbus"))

pytestmark = pytest.mark.integration


def health(bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KBUS, "broker-health", "--bootstrap-server", bootstrap, *extra], capture_output=True, text=True, timeout=60
    )


def test_healthy_broker_exits_0(broker_factory) -> None:
    b = broker_factory()
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce("health-topic", b"x")
    assert p.flush(30) == 0
    done = health(b.bootstrap)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK broker 0 is healthy: 1 partitions, all in sync"


def test_no_broker_listening_is_one_line_and_nonzero() -> None:
    port = free_port()
    t0 = time.monotonic()
    done = health(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 15
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"ERROR kbus broker at 127.0.0.1:{port} is not answering")
    assert "Connection refused" in lines[0]


def test_bad_bootstrap_is_a_usage_error() -> None:
    done = health("no-port-here")
    assert done.returncode == 1
    assert done.stderr.strip().startswith("ERROR Invalid --bootstrap-server 'no-port-here'")
