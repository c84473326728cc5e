"""The seed case study, run with the examples as a user would: three Dashboards split abc-bus-location."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group_member import wait_until
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^Topic=(?P<topic>[^,]+), Partition=(?P<p>\d+), Key=(?P<key>[^,]+), Value=(?P<value>.+)$")
ASSIGNED = re.compile(r"^Assigned partitions: \[(?P<ps>[0-9, ]*)\]$")


class Dashboard:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "examples/dashboard_consumer.py",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--group",
                group,
                "--from-beginning",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.records: list[tuple[int, str, str]] = []
        self.assigned: list[int] | None = None
        self._threads = [
            threading.Thread(target=self._out, daemon=True),
            threading.Thread(target=self._err, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = LINE.match(line.strip())
            if m:
                self.records.append((int(m["p"]), m["key"], m["value"]))

    def _err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = ASSIGNED.match(line.strip())
            if m:
                self.assigned = [int(p) for p in m["ps"].split(",") if p.strip()]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        for t in self._threads:
            t.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def dashboards() -> Iterator[list[Dashboard]]:
    started: list[Dashboard] = []
    yield started
    for d in started:
        d.kill()


def run_fleet(bootstrap: str, topic: str, rounds: int) -> None:
    subprocess.run(
        [
            sys.executable,
            "examples/fleet_producer.py",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--rounds",
            str(rounds),
        ],
        cwd=REPO,
        check=True,
        timeout=60,
        capture_output=True,
    )


def test_three_dashboards_split_the_fleet(broker: BrokerProcess, dashboards: list[Dashboard]) -> None:
    topic, group = f"abc-bus-location-{uuid.uuid4().hex[:6]}", f"abc-dashboard-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    for _ in range(3):
        dashboards.append(Dashboard(broker.bootstrap, topic, group))
    wait_until(
        lambda: sorted(p for d in dashboards for p in (d.assigned or [9, 9])) == [0, 1, 2],
        45,
        "each dashboard to own one partition",
    )
    run_fleet(broker.bootstrap, topic, rounds=10)
    wait_until(lambda: sum(len(d.records) for d in dashboards) >= 60, 45, "60 location updates on the dashboards")

    for d in dashboards:
        assert {p for p, _, _ in d.records} == set(d.assigned or []), "a dashboard prints only its own partition"
    keys_by_partition: dict[int, set[str]] = {}
    for d in dashboards:
        for p, key, value in d.records:
            keys_by_partition.setdefault(p, set()).add(key)
            assert re.fullmatch(r"-?\d+\.\d+, -?\d+\.\d+", value)
    # The article's placement (Java's murmur2 partitioner, which the Fleet example selects).
    assert keys_by_partition == {
        0: {"BLRHBL001", "BLRHBL003"},
        1: {"BLRHBL005"},
        2: {"BLRHBL002", "BLRHBL004", "BLRHBL006"},
    }

    for d in dashboards:
        assert d.stop() == 0
    run_fleet(broker.bootstrap, topic, rounds=1)
    restarted = Dashboard(broker.bootstrap, topic, group)
    dashboards.append(restarted)
    wait_until(lambda: len(restarted.records) >= 6, 45, "the restarted dashboard to print the new round")
    wait_until(lambda: restarted.assigned == [0, 1, 2], 10, "the lone dashboard to own every partition")
    assert len(restarted.records) == 6, "it continues from the group's committed offsets"
