"""JBOD failure handling (Kafka's LogDirFailureChannel) with real faults: a log dir on a small tmpfs that is
filled up (every write then fails with ENOSPC) or mounted read-only before the broker starts.

With a 3-broker ZooKeeper cluster and an acks=all producer running, one broker's dir fails: that broker stops its
replicas in the dir and tells the controller (/log_dir_event_notification), which moves their leadership and
drops the broker from their ISRs; the broker's other dir keeps serving, nothing acknowledged is lost, and
`kbus log-dirs` / `kbus topics --under-replicated-partitions` show it; restarted with the disk still bad the broker
serves its other dir, and restarted with the disk repaired its replicas rejoin their ISRs. A broker with every dir
failed halts, and one with no usable dir refuses to start."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.integration.test_leader_election import AckedProducer, assert_nothing_lost
from tests.kbus_processes import BrokerProcess, Cluster, free_port, kbus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]
# mounting a tmpfs needs root (CAP_SYS_ADMIN); the sandbox and CI run as root
needs_mount = pytest.mark.skipif(os.geteuid() != 0, reason="fault injection mounts a tmpfs (needs root)")


@contextlib.contextmanager
def tmpfs(path: Path, *options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=32m", *options)), "tmpfs", str(path)],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield path
    finally:
        for _ in range(20):  # a broker still holding files: retry until it has exited, then detach lazily
            if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> None:
    """Take every free block of the filesystem: the broker's next write there fails with ENOSPC."""
    with open(path / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * (1 << 20))


def dirs_of(broker: BrokerProcess, topic: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for d in broker.overrides["log.dirs"].split(","):
        out[d] = sorted(int(p.name.rsplit("-", 1)[1]) for p in Path(d).iterdir() if p.name.startswith(f"{topic}-"))
    return out


@needs_mount
def test_failed_log_dir_moves_leaders_and_keeps_the_other_dir_serving(tmp_path: Path, zk_connect: str) -> None:
    cluster = Cluster(tmp_path, zk_connect)
    for i, b in cluster.brokers.items():
        b.overrides["log.dirs"] = f"{tmp_path}/b{i}/disk0,{tmp_path}/b{i}/disk1"
    failing = tmp_path / "b1" / "disk1"
    metrics_port = free_port()
    cluster.brokers[1].overrides["metrics.port"] = str(metrics_port)
    with tmpfs(failing):
        try:
            cluster.start_all()
            bootstrap = cluster.bootstrap
            topic = "jbod"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            # broker 1 leads partitions 0 and 1 and follows 2 and 3; its 4 replicas spread over its 2 dirs
            admin.create_topics([NewTopic(topic, 4, replica_assignment=[[1, 2, 3], [1, 3, 2], [2, 3, 1], [3, 1, 2]],
                                          config={"min.insync.replicas": "2"})])[topic].result(30)  # fmt: skip
            wait_for(lambda: len(cluster.partitions(topic)) == 4
                     and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()),
                     timeout=30, what="full ISRs")  # fmt: skip
            on_dir = dirs_of(cluster.brokers[1], topic)
            lost, kept = on_dir[str(failing)], on_dir[str(tmp_path / "b1" / "disk0")]
            assert len(lost) == 2 and len(kept) == 2, on_dir
            led_before = {p: st[0] for p, st in cluster.partitions(topic).items()}
            assert any(led_before[p] == 1 for p in lost), (led_before, lost)  # a leader is among the lost

            producer = AckedProducer(bootstrap, topic, 4)
            try:
                wait_for(lambda: all(len(v) > 50 for v in producer.acked.values()), timeout=30, what="acks")
                fill(failing)
                b1 = cluster.brokers[1]
                wait_for(lambda: "Stopped serving replicas in dir" in b1.log_text(), timeout=30, what="dir offline")
                # the controller moved leadership of the lost replicas and dropped broker 1 from their ISRs
                wait_for(lambda: all(st[0] not in (1, -1) and 1 not in st[1]
                                     for p, st in cluster.partitions(topic).items() if p in lost),
                         timeout=30, what="leaders and ISRs without broker 1's lost replicas")  # fmt: skip
                # the replicas on broker 1's healthy dir stay in sync (and partition 0 or 2 may still be led by 1)
                states = cluster.partitions(topic)
                assert all(1 in states[p][1] for p in kept), states
                assert b1.alive
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
                    assert "\nkbus_offline_log_directories 1\n" in resp.read().decode()
                before = producer.count()
                wait_for(lambda: producer.count() > before + 400
                         and all(len(v) > 100 for v in producer.acked.values()),
                         timeout=60, what="produce continuing on every partition")  # fmt: skip

                described = kbus("log-dirs", "--describe", "--bootstrap-server", bootstrap, "--broker-list", "1")
                assert described.returncode == 0, described.stderr
                dirs = {d["logDir"]: d for d in json.loads(described.stdout.splitlines()[2])["brokers"][0]["logDirs"]}
                assert dirs[str(failing)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
                assert dirs[str(failing)]["partitions"] == []
                healthy = dirs[str(tmp_path / "b1" / "disk0")]
                assert healthy["error"] is None
                assert sorted(int(x["partition"].rsplit("-", 1)[1]) for x in healthy["partitions"]
                              if x["partition"].startswith(f"{topic}-")) == kept  # fmt: skip

                under = kbus("topics", "--describe", "--under-replicated-partitions", "--bootstrap-server",
                             bootstrap, "--topic", topic)  # fmt: skip
                assert under.returncode == 0, under.stderr
                listed = sorted(int(line.split("Partition: ")[1].split()[0]) for line in under.stdout.splitlines())
                assert listed == lost, under.stdout

                # a restart with the disk still bad (read-only now): the dir is offline from the start, the broker
                # serves its other dir, and its lost replicas stay out of their ISRs
                b1.stop()
                subprocess.run(["mount", "-o", "remount,ro", str(failing)], check=True, capture_output=True)
                cluster.start_broker(1)
                wait_for(lambda: all(1 in st[1] for p, st in cluster.partitions(topic).items() if p in kept),
                         timeout=60, what="broker 1's healthy replicas back in sync")  # fmt: skip
                assert "Failed to load log dir" in b1.log_text()
                assert all(1 not in st[1] for p, st in cluster.partitions(topic).items() if p in lost)
                dirs = {d["logDir"]: d for d in json.loads(kbus(
                    "log-dirs", "--describe", "--bootstrap-server", b1.bootstrap, "--broker-list", "1"
                ).stdout.splitlines()[2])["brokers"][0]["logDirs"]}  # fmt: skip
                assert dirs[str(failing)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"

                # the disk repaired: after a restart its replicas recover, catch up and rejoin their ISRs
                b1.stop()
                subprocess.run(["mount", "-o", "remount,rw", str(failing)], check=True, capture_output=True)
                (failing / "filler").unlink()
                cluster.start_broker(1)
                wait_for(lambda: all(len(st[1]) == 3 for st in cluster.partitions(topic).values()),
                         timeout=90, what="every ISR full again")  # fmt: skip
                assert sorted(dirs_of(b1, topic)[str(failing)]) == lost
            finally:
                acked = producer.stop()
            assert_nothing_lost(bootstrap, topic, acked)
            assert sum(len(v) for v in acked.values()) > 1000
        finally:
            cluster.stop()


@needs_mount
def test_offline_dirs_at_start_and_all_dirs_failing(tmp_path: Path) -> None:
    good, readonly = tmp_path / "disk0", tmp_path / "disk1"
    with tmpfs(readonly, "ro"):
        # one unusable dir: the broker starts on the other and reports the dead one
        b = BrokerProcess(tmp_path / "b", {"log.dirs": f"{good},{readonly}"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
            p = Producer({"bootstrap.servers": b.bootstrap})
            p.produce("t", b"v", partition=1)
            assert p.flush(30) == 0
            described = kbus("log-dirs", "--describe", "--bootstrap-server", b.bootstrap)
            dirs = {d["logDir"]: d for d in json.loads(described.stdout.splitlines()[2])["brokers"][0]["logDirs"]}
            assert dirs[str(readonly)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
            assert sorted(x["partition"] for x in dirs[str(good)]["partitions"]) == ["t-0", "t-1"]
        finally:
            b.stop()
        # no usable dir at all: the broker refuses to start
        alone = BrokerProcess(tmp_path / "c", {"log.dirs": str(readonly)})
        with pytest.raises(RuntimeError, match="no usable log dir"):
            alone.start(timeout=20)

    # every dir failing at run time: the broker halts (Kafka: "Shutdown broker because all log dirs ... failed")
    only = tmp_path / "only"
    with tmpfs(only):
        b = BrokerProcess(tmp_path / "d", {"log.dirs": str(only)}).start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic("h", 1, 1)])["h"].result(30)
            fill(only)
            p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 5000, "log_level": 0})
            for _ in range(200):
                p.produce("h", b"x" * 1000)
            p.flush(10)
            assert b.proc is not None
            assert b.proc.wait(30) == 1
            assert "Shutdown broker because all log dirs in" in b.log_text()
        finally:
            b.kill()


def test_log_dir_event_znode_is_kafkas(raw_zk: KazooClient) -> None:
    """What a failing broker writes is what Kafka's controller reads."""
    from kbus.zk.client import KafkaZkClient

    zk = KafkaZkClient(raw_zk)
    zk.ensure_persistent_paths()
    zk.propagate_log_dir_event(7)
    names = raw_zk.get_children("/log_dir_event_notification")
    assert len(names) == 1 and names[0].startswith("log_dir_event_") and len(names[0]) == len("log_dir_event_") + 10
    data, _ = raw_zk.get(f"/log_dir_event_notification/{names[0]}")
    assert json.loads(data) == {"version": 1, "broker": 7, "event": 1}
    assert zk.get_log_dir_events() == [(names[0], 7)]
    zk.delete_log_dir_events([names[0]])
    assert raw_zk.get_children("/log_dir_event_notification") == []
