"""monitoring/: the Grafana dashboard and the Prometheus alert rules, checked against real scrapes of a 3-broker
cluster: every metric they use exists, and `promtool test rules` fires exactly the alerts the cluster's state
calls for (one broker stopped: under-replicated partitions; a lagging group: consumer lag)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import REPO, Cluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]
DASHBOARD = REPO / "monitoring" / "kbus-dashboard.json"
RULES = REPO / "monitoring" / "kbus-alerts.yml"
PROMTOOL = shutil.which("promtool")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")


def scrape(port: int) -> list[tuple[str, str, float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), m.group(2) or "{}", float(m.group(3))))
    return out


def metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\bkbus_[a-z_]+", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def series_file(scrapes: dict[int, list[tuple[str, str, float]]]) -> list[dict[str, str]]:
    """The scrapes as promtool input series: each sample constant for 30 minutes, with job and instance labels."""
    out = []
    for broker, samples in scrapes.items():
        for name, labels, value in samples:
            inner = labels.strip("{}")
            extra = f'job="kbus",instance="b{broker}"'
            out.append({"series": f"{name}{{{inner + ',' if inner else ''}{extra}}}", "values": f"{value:g}+0x30"})
    return out


def promtool_test(tmp_path: Path, name: str, series: list[dict[str, str]], expected: dict[str, list[dict]]) -> None:
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{"eval_time": "15m", "alertname": a, "exp_alerts": e} for a, e in expected.items()],
        }],
    }  # fmt: skip
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(test))
    res = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_dashboard_and_alert_rules_against_real_scrapes(tmp_path: Path, zk_connect: str) -> None:
    assert PROMTOOL is not None, "promtool missing: scripts/setup.sh installs Debian's prometheus package"
    check = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    cluster = Cluster(tmp_path, zk_connect)
    ports = cluster.expose_metrics()
    try:
        cluster.start_all()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("watched", 3, 3)])["watched"].result(30)
        wait_for(lambda: all(len(isr) == 3 for _, isr in cluster.partitions("watched").values())
                 and len(cluster.partitions("watched")) == 3, timeout=30, what="full ISRs")  # fmt: skip
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
        for i in range(3 * 10_500):
            p.produce("watched", b"m", partition=i % 3)
            if i % 5000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        # a group that committed the start of every partition: 10,500 records behind on each
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "lagging", "log_level": 0})
        c.commit(offsets=[TopicPartition("watched", n, 0) for n in range(3)], asynchronous=False)
        c.close()
        reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "log_level": 0})
        reader.assign([TopicPartition("watched", n, 0) for n in range(3)])
        assert len(reader.consume(1000, 20)) > 0  # so the out counters exist
        reader.close()

        healthy = {i: scrape(port) for i, port in ports.items()}
        names = {n for samples in healthy.values() for sample, _, _ in samples for n in metric_names(sample)}
        dashboard = json.loads(DASHBOARD.read_text())
        exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
        rules = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
        assert len(exprs) >= 10 and len(rules) == 5
        for expr in exprs + rules:
            missing = metric_names(expr) - names
            assert not missing, f"{expr} uses {missing}, which no broker exports"
        lag = {"group": "lagging"}
        promtool_test(tmp_path, "healthy", series_file(healthy), {
            "KbusUnderReplicatedPartitions": [], "KbusOfflinePartitions": [], "KbusNoActiveController": [],
            "KbusRequestLatencyHigh": [],
            "KbusConsumerLagHigh": [{"exp_labels": {**lag, "severity": "warning"}, "exp_annotations": {
                "summary": "Consumer group lagging is 10500 records behind"}}],
        })  # fmt: skip

        # a broker stops: the partitions it followed are under-replicated on their leaders
        cluster.brokers[3].stop()
        def under_replicated() -> float:
            return sum(v for i, port in ports.items() if i != 3 for n, _, v in scrape(port)
                       if n == "kbus_under_replicated_partitions")  # fmt: skip

        # the topic's 3 partitions and __consumer_offsets' 4 (RF 3 here) all had a replica on broker 3
        wait_for(lambda: under_replicated() == 7, timeout=30, what="7 under-replicated partitions")
        degraded = {i: scrape(port) for i, port in ports.items() if i != 3}
        promtool_test(tmp_path, "degraded", series_file(degraded), {
            "KbusUnderReplicatedPartitions": [{"exp_labels": {"severity": "warning"}, "exp_annotations": {
                "summary": "7 kbus partition(s) under-replicated",
                "description": "Leaders report fewer in-sync replicas than replicas: a follower is down or lagging."}}],
            "KbusOfflinePartitions": [], "KbusNoActiveController": [],
        })  # fmt: skip
    finally:
        cluster.stop()
