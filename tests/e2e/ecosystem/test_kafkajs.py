"""kafkajs (the npm package, pure JavaScript) against kbus: admin, an idempotent gzip producer with headers, a
consumer group of two members, committed offsets and group admin (tests/e2e/ecosystem/js/kafkajs_check.js)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.ecosystem.kafka_jars import REPO
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

JS = Path(__file__).resolve().parent / "js"
MODULES = REPO / ".cache" / "kafkajs"


@pytest.fixture(scope="session")
def kafkajs() -> str:
    """kafkajs installed from npm into .cache/kafkajs (the version pinned in tests/e2e/ecosystem/js/package.json)."""
    MODULES.mkdir(parents=True, exist_ok=True)
    shutil.copy2(JS / "package.json", MODULES / "package.json")
    out = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=MODULES,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return str(MODULES / "node_modules")


def test_kafkajs_producer_and_consumer_group(kafkajs: str, broker: BrokerProcess) -> None:
    cmd = ["node", str(JS / "kafkajs_check.js"), broker.bootstrap, "kafkajs"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={**os.environ, "NODE_PATH": kafkajs})
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, f"{out.stdout}\n{out.stderr[-3000:]}"
    r = json.loads(lines[0].removeprefix("RESULT "))
    assert r["created"] is True and r["partitions"] == 3
    assert r["acked_partitions"] == 3 and r["produce_errors"] == 0
    assert r["distinct_records"] == 60 and r["bad_records"] == 0  # key, value and header of each record intact
    assert (r["group_state"], r["group_members"], r["group_protocol"]) == ("Stable", 2, "RoundRobinAssigner")
    assert r["member_partitions"] == [1, 2]  # the two members split the three partitions
    assert r["committed_total"] == 60
    assert r["listed"] is True and r["listed_after_delete"] is False
    assert r["high_total"] == 60
