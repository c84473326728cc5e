"""Partition reassignment on a real 3-broker cluster (`kbus reassign-partitions`, AlterPartitionReassignments,
ListPartitionReassignments, /admin/reassign_partitions) with an acks=all producer running: replicas are added,
catch up, leadership moves, old replicas are removed, and nothing acknowledged is lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_leader_election import AckedProducer, assert_nothing_lost
from tests.kbus_processes import kbus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]


def replicas(cluster, topic: str) -> dict[int, list[int]]:
    t = cluster.metadata().topics.get(topic)
    return {} if t is None else {p.id: list(p.replicas) for p in t.partitions.values()}


def plan(path: Path, topic: str, targets: dict[int, list[int]]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in targets.items()]}))
    return str(path)


def test_move_partitions_off_a_broker_with_a_producer_running(cluster, raw_zk, tmp_path: Path) -> None:
    b = cluster.bootstrap
    topic = "moving"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1, 2], [2, 1], [1, 2]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)  # fmt: skip
    wait_for(lambda: all(len(isr) == 2 for _, isr in cluster.partitions(topic).values())
             and len(cluster.partitions(topic)) == 3, timeout=30, what="ISRs of 2")  # fmt: skip

    to_move = tmp_path / "topics.json"
    to_move.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    gen = kbus("reassign-partitions", "--bootstrap-server", b, "--generate", "--topics-to-move-json-file",
               str(to_move), "--broker-list", "2,3")
    assert gen.returncode == 0, gen.stderr
    lines = gen.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[2] == ""
    assert json.loads(lines[1])["partitions"][0] == {"topic": topic, "partition": 0, "replicas": [1, 2],
                                                     "log_dirs": ["any", "any"]}  # fmt: skip
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert len(proposed) == 3 and all(sorted(e["replicas"]) == [2, 3] for e in proposed)
    # no broker has a rack here: --disable-rack-aware proposes the same kind of plan; an unknown broker is dropped
    # (Kafka keeps only the brokers describeCluster returns), so 2 replicas over 2,99 is one too many
    plain = kbus("reassign-partitions", "--bootstrap-server", b, "--generate", "--topics-to-move-json-file",
                 str(to_move), "--broker-list", "2,3", "--disable-rack-aware")  # fmt: skip
    assert all(sorted(e["replicas"]) == [2, 3] for e in json.loads(plain.stdout.splitlines()[4])["partitions"])
    short = kbus("reassign-partitions", "--bootstrap-server", b, "--generate", "--topics-to-move-json-file",
                 str(to_move), "--broker-list", "2,99")  # fmt: skip
    assert short.returncode == 1
    assert short.stderr.strip() == "Error: Replication factor: 2 larger than available brokers: 1."

    producer = AckedProducer(b, topic, 3)
    try:
        time.sleep(2)
        targets = {0: [3, 2], 1: [2, 3], 2: [3, 2]}
        moved = plan(tmp_path / "plan.json", topic, targets)
        ex = kbus("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file", moved,
                  "--throttle", "50000000")
        assert ex.returncode == 0, ex.stderr
        out = ex.stdout.splitlines()
        assert out[0] == "Current partition replica assignment" and out[1] == ""
        assert json.loads(out[2])["partitions"][1]["replicas"] == [2, 1]
        assert "Save this to use as the --reassignment-json-file option during rollback" in out
        assert "The inter-broker throttle limit was set to 50000000 B/s" in out
        assert out[-1] == f"Successfully started partition reassignments for {topic}-0,{topic}-1,{topic}-2"
        assert json.loads(raw_zk.get("/config/brokers/3")[0])["config"]["follower.replication.throttled.rate"] == (
            "50000000")

        def verified() -> bool:
            res = kbus("reassign-partitions", "--bootstrap-server", b, "--verify", "--reassignment-json-file", moved)
            return all(f"Reassignment of partition {topic}-{p} is completed." in res.stdout for p in targets)

        wait_for(verified, timeout=90, what="reassignment completed")
        assert replicas(cluster, topic) == targets
        wait_for(lambda: all(leader in targets[p] for p, (leader, _) in cluster.partitions(topic).items()),
                 timeout=20, what="leaders among the new replicas")  # fmt: skip
        before = producer.count()
        wait_for(lambda: producer.count() > before + 300, timeout=30, what="acknowledged writes after the move")
    finally:
        acked = producer.stop()
    # broker 1 holds no replica any more: its logs are gone; the throttles were cleared by --verify
    wait_for(lambda: not any((cluster.brokers[1].log_dirs / f"{topic}-{p}").exists() for p in targets), timeout=20,
             what="broker 1's logs deleted")  # fmt: skip
    assert "follower.replication.throttled.rate" not in json.loads(raw_zk.get("/config/brokers/3")[0])["config"]
    assert sum(len(v) for v in acked.values()) > 500
    assert_nothing_lost(b, topic, acked)
    listed = kbus("reassign-partitions", "--bootstrap-server", b, "--list")
    assert listed.stdout == "No partition reassignments found.\n"


def test_cancel_and_the_legacy_znode(cluster, raw_zk, tmp_path: Path) -> None:
    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic("stuck", 1, replica_assignment=[[1, 2]]),
                                  NewTopic("legacy", 1, replica_assignment=[[1, 2]])]).values():  # fmt: skip
        f.result(30)
    wait_for(lambda: all(len(cluster.partitions(t).get(0, (-1, []))[1]) == 2 for t in ("stuck", "legacy")),
             timeout=30, what="in sync")  # fmt: skip

    # a target replica that dies never catches up: the reassignment stays under way until cancelled (killed, so
    # its registration lasts until the session times out: Kafka, too, only accepts registered brokers)
    cluster.brokers[3].kill()
    stuck = plan(tmp_path / "stuck.json", "stuck", {0: [3, 2]})
    ex = kbus("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file", stuck)
    assert ex.returncode == 0, ex.stderr
    listed = kbus("reassign-partitions", "--bootstrap-server", b, "--list")
    assert listed.stdout == ("Current partition reassignments:\n"
                             "stuck-0: replicas: 3,2,1. adding: 3. removing: 1.\n")  # fmt: skip
    topic_znode = json.loads(raw_zk.get("/brokers/topics/stuck")[0])
    assert topic_znode["adding_replicas"] == {"0": [3]} and topic_znode["removing_replicas"] == {"0": [1]}
    again = kbus("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file", stuck)
    assert again.returncode == 1 and "existing partition assignment" in again.stderr
    more = kbus("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file", stuck,
                "--additional")  # fmt: skip
    assert more.returncode == 0, more.stderr
    assert more.stdout.splitlines()[-1] == "Successfully started partition reassignment for stuck-0"
    cancelled = kbus("reassign-partitions", "--bootstrap-server", b, "--cancel", "--reassignment-json-file", stuck)
    assert cancelled.stdout.splitlines()[0] == "Successfully cancelled partition reassignment for: stuck-0"
    # (as in Kafka, the original replicas are what is left when the added ones go: [3,2,1] - [3])
    wait_for(lambda: replicas(cluster, "stuck") == {0: [2, 1]}, timeout=30, what="original replicas back")
    status = kbus("reassign-partitions", "--bootstrap-server", b, "--verify", "--reassignment-json-file", stuck)
    assert ("There is no active reassignment of partition stuck-0, but replica set is 2,1 rather than 3,2."
            in status.stdout)  # fmt: skip
    cluster.start_broker(3)
    cluster.wait_until_all_see_each_other()

    # Kafka 2.x's tools write /admin/reassign_partitions; the controller carries it out and removes it
    raw_zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": "legacy", "partition": 0, "replicas": [2, 3]}]}).encode(),
        makepath=True)  # fmt: skip
    wait_for(lambda: replicas(cluster, "legacy") == {0: [2, 3]}, timeout=60, what="legacy reassignment done")
    wait_for(lambda: raw_zk.exists("/admin/reassign_partitions") is None, timeout=20, what="znode removed")
