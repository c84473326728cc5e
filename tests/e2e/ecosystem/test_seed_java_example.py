"""Seed 000's Java Fleet producer and three Java Dashboards (examples/java, the article's code) against kbus:
the group splits abc-bus-location's three partitions and every key lands where the article's figures show it."""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.java_checks import VERSIONS, JavaChecks
from tests.e2e.ecosystem.kafka_jars import REPO, KafkaDistribution
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

LINE = re.compile(r"^Topic=abc-bus-location, Partition=(\d), Key=(BLRHBL00\d), Value=(.+)$")
# Figures 6-8 of the article: Kafka's default partitioner puts these keys on these partitions
ARTICLE_PARTITIONS = {"BLRHBL001": 0, "BLRHBL002": 2, "BLRHBL003": 0, "BLRHBL004": 2, "BLRHBL005": 1, "BLRHBL006": 2}


def compile_examples(tmp: Path, bootstrap: str, classpath: str) -> Path:
    """The examples hard-code localhost:9092; the copies compiled here point at the test's broker instead."""
    src = tmp / "src"
    src.mkdir()
    for name in ("Fleet.java", "Dashboard.java"):
        text = (REPO / "examples" / "java" / name).read_text()
        assert '"localhost:9092"' in text
        (src / name).write_text(text.replace('"localhost:9092"', f'"{bootstrap}"'))
    classes = tmp / "classes"
    subprocess.run(
        ["javac", "-cp", classpath, "-d", str(classes), str(src / "Fleet.java"), str(src / "Dashboard.java")],
        check=True,
        timeout=120,
    )
    return classes


def group_ready(kafka39: KafkaDistribution, bootstrap: str) -> bool:
    """Three members, one partition each, and every position committed (so latest-reset Dashboards miss nothing)."""
    out = kafka39.run(
        "kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "abc-dashboard"
    )
    rows = [ln.split() for ln in out.stdout.splitlines() if ln.startswith("abc-dashboard ")]
    return len(rows) == 3 and len({r[6] for r in rows}) == 3 and all(r[3] != "-" for r in rows)


def test_seed_000_java_fleet_and_dashboards(
    tmp_path: Path,
    broker_factory,
    kafka39: KafkaDistribution,
    java_checks: dict[str, JavaChecks],
) -> None:
    broker: BrokerProcess = broker_factory()
    libs = java_checks[VERSIONS[0]].home / "libs"
    classes = compile_examples(tmp_path, broker.bootstrap, f"{libs}/*")
    classpath = f"{classes}:{libs}/*"
    created = kafka39.run("kafka-topics", "--create", "--topic", "abc-bus-location", "--bootstrap-server",
                          broker.bootstrap, "--partitions", "3", "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    outs = [tmp_path / f"dashboard-{i}.out" for i in range(3)]
    tmp = jvm_tmp.options(tmp_path / "jvm-tmp")
    dashboards = []
    try:
        for out in outs:
            with open(out, "w") as stdout, open(out.with_suffix(".err"), "w") as stderr:
                dashboards.append(subprocess.Popen(["java", "-Xmx128m", *tmp, "-cp", classpath, "Dashboard"],
                                                   stdout=stdout, stderr=stderr))  # fmt: skip
        deadline = time.monotonic() + 90
        while not group_ready(kafka39, broker.bootstrap):
            assert time.monotonic() < deadline, "the three Dashboards did not form a group"
            assert all(d.poll() is None for d in dashboards), "a Dashboard exited"
            time.sleep(1)
        fleet = subprocess.run(["java", "-Xmx128m", *tmp, "-cp", classpath, "Fleet"], capture_output=True, text=True,
                               timeout=120)  # fmt: skip
        assert fleet.returncode == 0, fleet.stderr
        deadline = time.monotonic() + 60
        while sum(len(o.read_text().splitlines()) for o in outs) < 60:
            assert time.monotonic() < deadline, "the Dashboards did not print all 60 locations"
            time.sleep(0.2)
    finally:
        for d in dashboards:
            d.terminate()
        for d in dashboards:
            d.wait(30)
    seen: Counter[str] = Counter()
    partitions_per_dashboard = []
    for out in outs:
        lines = out.read_text().splitlines()
        matches = [LINE.match(ln) for ln in lines]
        assert all(matches), lines
        partitions_per_dashboard.append({int(m[1]) for m in matches if m})
        for m in matches:
            assert m is not None
            assert ARTICLE_PARTITIONS[m[2]] == int(m[1]), m.string
            seen[m[2]] += 1
    assert seen == dict.fromkeys(ARTICLE_PARTITIONS, 10)
    # each Dashboard read exactly one partition, as in the article's three terminals
    assert sorted(p for ps in partitions_per_dashboard for p in ps) == [0, 1, 2]
    assert all(len(ps) == 1 for ps in partitions_per_dashboard)
