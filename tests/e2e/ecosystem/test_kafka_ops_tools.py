"""Kafka 3.9's operations tools (kafka-log-dirs, ...) against kbus, and kbus's own commands printing what they print."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, kbus
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration


def test_log_dirs_describe_matches_kafkas_tool(kafka39: KafkaDistribution, tmp_path: Path) -> None:
    dirs = [tmp_path / f"disk{i}" for i in range(3)]
    b = BrokerProcess(tmp_path / "b", {"log.dirs": ",".join(map(str, dirs))}).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("ld-a", 5, 1), NewTopic("ld-b", 3, 1)])["ld-a"].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(50):
            p.produce("ld-a", b"v%d" % i, partition=i % 5)
        assert p.flush(30) == 0
        for extra in ((), ("--topic-list", "ld-b"), ("--broker-list", "0")):
            args = ("--bootstrap-server", b.bootstrap, "--describe", *extra)
            theirs = kafka39.run("kafka-log-dirs", *args)
            ours = kbus("log-dirs", *args)
            assert theirs.returncode == 0, theirs.stderr
            assert ours.returncode == 0, ours.stderr
            assert ours.stdout == theirs.stdout  # byte for byte, JSON key and entry order included
        assert '"partition":"ld-a-4"' in ours.stdout and '"error":null' in ours.stdout
    finally:
        b.stop()


@pytest.mark.zookeeper
def test_leader_election_and_reassignment_with_kafkas_tools(
    kafka39: KafkaDistribution, cluster, tmp_path: Path
) -> None:
    """Kafka 3.9's kafka-leader-election and kafka-reassign-partitions drive kbus (ElectLeaders,
    Alter/ListPartitionReassignments), and kbus's commands print what they print."""
    import json

    from tests.kbus_processes import wait_for

    bs = ("--bootstrap-server", cluster.bootstrap)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("kt-elect", 1, replica_assignment=[[1, 2]])])["kt-elect"].result(30)
    wait_for(lambda: cluster.partitions("kt-elect").get(0, (-1, []))[1] == [1, 2], timeout=30, what="in sync")
    args = (*bs, "--election-type", "preferred", "--topic", "kt-elect", "--partition", "0")
    theirs = kafka39.run("kafka-leader-election", *args)
    assert theirs.returncode == 0, theirs.stderr
    assert kbus("leader-election", *args).stdout == theirs.stdout == (
        "Valid replica already elected for partitions kt-elect-0\n")

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "kt-elect", "partition": 0,
                                                                "replicas": [3, 2], "log_dirs": ["any", "any"]}]}))
    started = kafka39.run("kafka-reassign-partitions", *bs, "--execute", "--reassignment-json-file", str(plan))
    assert started.returncode == 0, started.stderr
    assert "Successfully started partition reassignment for kt-elect-0" in started.stdout
    wait_for(lambda: cluster.partitions("kt-elect").get(0, (-1, []))[1] == [2, 3]
             and cluster.metadata().topics["kt-elect"].partitions[0].replicas == [3, 2], timeout=60,
             what="moved by Kafka's tool")  # fmt: skip
    verify = ("--verify", "--reassignment-json-file", str(plan))
    theirs = kafka39.run("kafka-reassign-partitions", *bs, *verify)
    ours = kbus("reassign-partitions", *bs, *verify)
    assert theirs.returncode == 0 and ours.returncode == 0, theirs.stderr + ours.stderr
    assert "Reassignment of partition kt-elect-0 is completed." in theirs.stdout
    assert ours.stdout.splitlines()[:2] == theirs.stdout.splitlines()[:2]
    listed = kafka39.run("kafka-reassign-partitions", *bs, "--list")
    assert listed.returncode == 0 and "No partition reassignments found." in listed.stdout
    assert kbus("reassign-partitions", *bs, "--list").stdout == "No partition reassignments found.\n"


@pytest.mark.zookeeper
def test_log_dir_moves_with_kafkas_reassign_tool(kafka39: KafkaDistribution, zk_connect: str, tmp_path: Path) -> None:
    """Kafka 3.9's kafka-reassign-partitions with "log_dirs" moves a kbus replica to another log dir
    (Admin.alterReplicaLogDirs) and its --verify reads the move back (Admin.describeReplicaLogDirs, built on
    DescribeLogDirs); kbus's --verify prints the same."""
    import json

    from tests.kbus_processes import Cluster, wait_for

    cluster = Cluster(tmp_path, zk_connect, size=1)
    disks = [f"{tmp_path}/b1/disk0", f"{tmp_path}/b1/disk1"]
    cluster.brokers[1].overrides["log.dirs"] = ",".join(disks)
    try:
        cluster.start_broker(1)
        bs = ("--bootstrap-server", cluster.bootstrap)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("kt-dirs", 2, 1)])["kt-dirs"].result(30)
        p = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(200):
            p.produce("kt-dirs", b"v%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        where = next(d for d in disks if (Path(d) / "kt-dirs-0").is_dir())
        target = next(d for d in disks if d != where)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "kt-dirs", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))  # fmt: skip
        started = kafka39.run("kafka-reassign-partitions", *bs, "--execute", "--reassignment-json-file", str(plan))
        assert started.returncode == 0, started.stderr
        assert (f"Successfully started moving log directory to {target} for replica kt-dirs-0 with broker 1 \n"
                in started.stdout)  # fmt: skip
        wait_for(lambda: (Path(target) / "kt-dirs-0").is_dir() and not (Path(where) / "kt-dirs-0").exists(),
                 timeout=60, what="the replica in its new dir")  # fmt: skip
        verify = ("--verify", "--reassignment-json-file", str(plan))
        theirs = kafka39.run("kafka-reassign-partitions", *bs, *verify)
        ours = kbus("reassign-partitions", *bs, *verify)
        assert theirs.returncode == 0 and ours.returncode == 0, theirs.stderr + ours.stderr
        assert "Reassignment of replica kt-dirs-0-1 completed successfully." in theirs.stdout
        assert ours.stdout == theirs.stdout
        c = kafka39.run("kafka-console-consumer", *bs, "--topic", "kt-dirs", "--partition", "0", "--offset",
                        "earliest", "--max-messages", "100", "--timeout-ms", "20000")  # fmt: skip
        assert c.stdout.split() == [f"v{i}" for i in range(0, 200, 2)]
    finally:
        cluster.brokers[1].stop()
