"""Several log.dirs: new partitions go to the dir with the fewest, and `kbus log-dirs --describe`
(DescribeLogDirs) says where each replica lives and how big it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration
KBUS = str(Path(sys.executable).parent / "kbus")


def kbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBUS, *args], capture_output=True, text=True, timeout=60, check=False)


def test_partitions_spread_over_log_dirs_and_described(tmp_path: Path) -> None:
    dirs = [tmp_path / f"disk{i}" for i in range(3)]
    b = BrokerProcess(tmp_path / "b", {"log.dirs": ",".join(map(str, dirs))}).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("spread", 6, 1), NewTopic("other", 1, 1)])["spread"].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for _ in range(30):
            p.produce("spread", b"x" * 100, partition=0)
        assert p.flush(30) == 0
        # on disk: two of the six partitions in each dir
        on_disk = {d: sorted(x.name for x in d.iterdir() if x.name.startswith("spread-")) for d in dirs}
        assert sorted(len(v) for v in on_disk.values()) == [2, 2, 2]

        res = kbus("log-dirs", "--describe", "--bootstrap-server", b.bootstrap, "--topic-list", "spread")
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[:2] == ["Querying brokers for log directories information",
                             "Received log directory information from brokers 0"]
        doc = json.loads(lines[2])
        assert doc["version"] == 1 and [x["broker"] for x in doc["brokers"]] == [0]
        described = {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}
        assert set(described) == {str(d) for d in dirs}
        for d in dirs:
            entry = described[str(d)]
            assert entry["error"] is None
            assert sorted(x["partition"] for x in entry["partitions"]) == on_disk[d]  # --topic-list leaves out "other"
            for part in entry["partitions"]:
                size = sum(f.stat().st_size for f in (d / part["partition"]).glob("*.log"))
                assert part["size"] == size and part["offsetLag"] == 0 and part["isFuture"] is False
        sizes = {x["partition"]: x["size"] for e in described.values() for x in e["partitions"]}
        assert sizes["spread-0"] > 3000

        missing = kbus("log-dirs", "--describe", "--bootstrap-server", b.bootstrap, "--broker-list", "0,7")
        assert missing.returncode == 1
        assert missing.stderr.strip() == (
            "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 0"
        )
        assert kbus("log-dirs", "--bootstrap-server", b.bootstrap).returncode != 0  # --describe is required
    finally:
        b.stop()
