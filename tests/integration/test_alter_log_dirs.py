"""Moving replicas between the log dirs of one broker (AlterReplicaLogDirs, `kbus reassign-partitions` with Kafka's
"log_dirs") on a real 3-broker cluster with an acks=all producer running: the future replica shows in
DescribeLogDirs while it fills, --verify reports the move, the swap loses nothing acknowledged, and the moved
replica (the leader) serves every record afterwards."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_leader_election import AckedProducer, assert_nothing_lost
from tests.kbus_processes import Cluster, kbus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]


def log_dirs_of(bootstrap: str, broker: int) -> dict[str, dict[str, dict[str, object]]]:
    """{log dir: {partition name + ("(future)" for a future replica): entry}} from `kbus log-dirs`."""
    res = kbus("log-dirs", "--describe", "--bootstrap-server", bootstrap, "--broker-list", str(broker))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout.splitlines()[2])
    return {
        d["logDir"]: {p["partition"] + ("(future)" if p["isFuture"] else ""): p for p in d["partitions"]}
        for d in doc["brokers"][0]["logDirs"]
    }


def test_move_replicas_between_log_dirs_with_a_producer_running(tmp_path: Path, zk_connect: str) -> None:
    cluster = Cluster(tmp_path, zk_connect)
    for i, b in cluster.brokers.items():
        b.overrides["log.dirs"] = f"{tmp_path}/b{i}/disk0,{tmp_path}/b{i}/disk1"
    try:
        cluster.start_all()
        bootstrap = cluster.bootstrap
        topic = "dirmove"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # broker 1 leads both partitions: after the move, consumers read the moved replicas
        admin.create_topics([NewTopic(topic, 2, replica_assignment=[[1, 2, 3], [1, 3, 2]],
                                      config={"min.insync.replicas": "2"})])[topic].result(30)  # fmt: skip
        wait_for(lambda: len(cluster.partitions(topic)) == 2
                 and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()),
                 timeout=30, what="full ISRs")  # fmt: skip
        # a few MB already there, so the copy takes a while under the throttle
        pre = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
        for i in range(6000):
            pre.produce(topic, str(-1 - i).encode().ljust(1000), partition=i % 2)  # read back as ints
        assert pre.flush(60) == 0

        b1 = cluster.brokers[1]
        disks = [f"{tmp_path}/b1/disk0", f"{tmp_path}/b1/disk1"]
        before = log_dirs_of(b1.bootstrap, 1)
        where = {p: next(d for d in disks if f"{topic}-{p}" in before[d]) for p in (0, 1)}
        target = {p: next(d for d in disks if d != where[p]) for p in (0, 1)}
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": p, "replicas": r, "log_dirs": [target[p], "any", "any"]}
            for p, r in ((0, [1, 2, 3]), (1, [1, 3, 2]))]}))  # fmt: skip

        # the throttle in force before the moves start (the tool's --replica-alter-log-dirs-throttle below writes the
        # same value, but a broker applies it when the config change reaches it, which may be after a short move).
        # 6 MB at 200 KB/s is ~30 s of copying: the describe and --verify below (two tool starts, seconds each on a
        # loaded machine) must see the moves under way; at 500 KB/s they sometimes came after both had finished
        throttle = kbus("configs", "--bootstrap-server", b1.bootstrap, "--alter", "--entity-type", "brokers",
                        "--entity-name", "1", "--add-config", "replica.alter.log.dirs.io.max.bytes.per.second=200000")
        assert throttle.returncode == 0, throttle.stderr
        producer = AckedProducer(bootstrap, topic, 2)
        try:
            wait_for(lambda: all(len(v) > 20 for v in producer.acked.values()), timeout=30, what="acks")
            started = kbus("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                           "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle", "200000")
            assert started.returncode == 0, started.stderr
            out = started.stdout.splitlines()
            assert "The replica-alter-dir throttle limit was set to 200000 B/s" in out
            assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in out
            for p in (0, 1):
                assert f"Successfully started moving log directory to {target[p]} for replica {topic}-{p} with " \
                       f"broker 1 " in out  # fmt: skip

            # while it copies: the future replica in the destination dir, the current one where it was
            during = log_dirs_of(b1.bootstrap, 1)
            assert f"{topic}-0(future)" in during[target[0]] or f"{topic}-1(future)" in during[target[1]], during
            assert f"{topic}-0" in during[where[0]] and f"{topic}-1" in during[where[1]]
            verify = kbus("reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                          "--reassignment-json-file", str(plan))  # fmt: skip
            assert verify.returncode == 0, verify.stderr
            assert f"Reassignment of replica {topic}-0-1 is still in progress." in verify.stdout \
                or f"Reassignment of replica {topic}-1-1 is still in progress." in verify.stdout  # fmt: skip

            def moved() -> bool:
                res = kbus("reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                           "--reassignment-json-file", str(plan))  # fmt: skip
                return all(f"Reassignment of replica {topic}-{p}-1 completed successfully." in res.stdout
                           for p in (0, 1))  # fmt: skip

            wait_for(moved, timeout=180, what="both moves completed")
            after = log_dirs_of(b1.bootstrap, 1)
            for p in (0, 1):
                assert f"{topic}-{p}" in after[target[p]] and f"{topic}-{p}" not in after[where[p]]
                assert not any(k.endswith("(future)") for k in after[target[p]])
                assert (Path(target[p]) / f"{topic}-{p}").is_dir() and not (Path(where[p]) / f"{topic}-{p}").exists()
            count = producer.count()
            wait_for(lambda: producer.count() > count + 200, timeout=30, what="produce going on after the swap")
        finally:
            acked = producer.stop()
        assert sum(len(v) for v in acked.values()) > 200
        # broker 1 still leads both partitions: every acknowledged record is read from the moved replicas
        assert {p: st[0] for p, st in cluster.partitions(topic).items()} == {0: 1, 1: 1}
        assert_nothing_lost(bootstrap, topic, acked)
        assert all(1 in isr for _, isr in cluster.partitions(topic).values())
    finally:
        cluster.stop()


def test_alter_replica_log_dirs_errors(tmp_path: Path, zk_connect: str) -> None:
    cluster = Cluster(tmp_path, zk_connect, size=1)
    cluster.brokers[1].overrides["log.dirs"] = f"{tmp_path}/d0,{tmp_path}/d1"
    try:
        cluster.start_broker(1)
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("e", 1, 1)])["e"].result(30)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "e", "partition": 0, "replicas": [1], "log_dirs": ["/nowhere"]}]}))  # fmt: skip
        res = kbus("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                   str(plan))  # fmt: skip
        assert res.returncode == 1 and "Failed to alter dir for e-0-1: LOG_DIR_NOT_FOUND" in res.stderr, res
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "e", "partition": 0, "replicas": [1], "log_dirs": ["any", "any"]}]}))  # fmt: skip
        res = kbus("reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                   str(plan))  # fmt: skip
        assert res.returncode == 1
        assert "Size of replicas list [1] is different from size of log dirs list [any, any] for partition e-0" \
            in res.stderr  # fmt: skip
    finally:
        cluster.brokers[1].stop()


def test_a_move_under_way_resumes_after_a_restart(tmp_path: Path, zk_connect: str) -> None:
    """As Kafka: the future log survives a restart and the move goes on from where it was."""
    cluster = Cluster(tmp_path, zk_connect, size=1)
    disks = [f"{tmp_path}/d0", f"{tmp_path}/d1"]
    b = cluster.brokers[1]
    b.overrides["log.dirs"] = ",".join(disks)
    try:
        cluster.start_broker(1)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("r", 1, 1)])["r"].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
        for i in range(4000):
            p.produce("r", str(i).encode().ljust(1000))
        assert p.flush(60) == 0
        where = next(d for d in disks if (Path(d) / "r-0").is_dir())
        target = next(d for d in disks if d != where)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "r", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))  # fmt: skip
        throttle = kbus("configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "brokers",
                        "--entity-name", "1", "--add-config", "replica.alter.log.dirs.io.max.bytes.per.second=300000")
        assert throttle.returncode == 0, throttle.stderr
        started = kbus("reassign-partitions", "--bootstrap-server", b.bootstrap, "--execute",
                       "--reassignment-json-file", str(plan))  # fmt: skip
        assert started.returncode == 0, started.stderr

        def future_dirs() -> list[Path]:
            return list(Path(target).glob("r-0.*-future"))

        wait_for(lambda: future_dirs() and sum(f.stat().st_size for f in future_dirs()[0].glob("*.log")) > 300000,
                 timeout=30, what="the copy under way")  # fmt: skip
        b.stop()
        assert future_dirs() and (Path(where) / "r-0").is_dir()  # stopped mid-move
        cluster.start_broker(1)
        assert "Resuming the move of replica r-0" in b.log_text()

        def moved() -> bool:
            res = kbus("reassign-partitions", "--bootstrap-server", b.bootstrap, "--verify",
                       "--reassignment-json-file", str(plan))  # fmt: skip
            return "Reassignment of replica r-0-1 completed successfully." in res.stdout

        wait_for(moved, timeout=90, what="the move completed after the restart")
        assert not future_dirs() and not (Path(where) / "r-0").exists()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "r", "enable.auto.commit": False})
        c.assign([TopicPartition("r", 0, 0)])
        seen: list[int] = []
        deadline = time.monotonic() + 60
        while len(seen) < 4000 and time.monotonic() < deadline:
            seen += [int(m.value()) for m in c.consume(1000, 1.0) if m.error() is None]
        c.close()
        assert seen == list(range(4000))
    finally:
        b.stop()
