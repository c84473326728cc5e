"""Leader election on request (`kbus leader-election`, ElectLeaders) and per-topic unclean election, on a real
3-broker cluster with a producer running (acks=all): nothing acknowledged is lost."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import kbus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.slow]


def replicas_of(cluster, topic: str) -> dict[int, list[int]]:
    t = cluster.metadata().topics[topic]
    return {p.id: list(p.replicas) for p in t.partitions.values()}


class AckedProducer:
    """acks=all in a thread; remembers every acknowledged value per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.acked: dict[int, set[int]] = {p: set() for p in range(partitions)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic, partitions))
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, partitions: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000,
                      "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})

        def done(err, msg):  # type: ignore[no-untyped-def]
            with self._lock:
                if err is None:
                    self.acked[msg.partition()].add(int(msg.value()))
                else:
                    self.errors.append(str(err))

        n = 0
        while not self._stop.is_set():
            try:
                p.produce(topic, str(n).encode(), partition=n % partitions, on_delivery=done)
                n += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if n % 100 == 0:
                time.sleep(0.01)
        p.flush(60)

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def stop(self) -> dict[int, set[int]]:
        self._stop.set()
        self._thread.join(90)
        return self.acked


def assert_nothing_lost(bootstrap: str, topic: str, acked: dict[int, set[int]]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False, "log_level": 0})
    c.assign([TopicPartition(topic, p, 0) for p in acked])
    need = {p: set(v) for p, v in acked.items()}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(need.values()):
        for m in c.consume(5000, 1.0):
            if m.error() is None:
                need[m.partition()].discard(int(m.value()))
    c.close()
    assert not any(need.values()), {p: len(v) for p, v in need.items()}


def test_preferred_election_with_a_producer_running(cluster) -> None:
    topic = "elect-pref"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for(lambda: all(len(isr) == 3 for _, isr in cluster.partitions(topic).values())
             and len(cluster.partitions(topic)) == 3, timeout=30, what="full ISRs")  # fmt: skip
    preferred = {p: r[0] for p, r in replicas_of(cluster, topic).items()}
    noop = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
                "--topic", topic, "--partition", "0")
    assert noop.stdout == f"Valid replica already elected for partitions {topic}-0\n"

    producer = AckedProducer(cluster.bootstrap, topic, 3)
    try:
        # a clean stop moves leadership away from broker 1; back in the ISR it does not lead again by itself
        # (auto.leader.rebalance.enable checks every 300 s)
        cluster.brokers[1].stop()
        cluster.start_broker(1)
        wait_for(lambda: all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()), timeout=60,
                 what="broker 1 back in every ISR")  # fmt: skip
        moved = sorted(p for p, (leader, _) in cluster.partitions(topic).items() if leader != preferred[p])
        assert moved, "broker 1 led nothing to begin with"
        before = producer.count()
        res = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
                   "--all-topic-partitions")
        assert res.returncode == 0, res.stderr
        first = res.stdout.splitlines()[0]
        assert first.startswith("Successfully completed leader election (PREFERRED) for partitions ")
        assert sorted(first.split("partitions ", 1)[1].split(", ")) == [f"{topic}-{p}" for p in moved]
        wait_for(lambda: {p: leader for p, (leader, _) in cluster.partitions(topic).items()} == preferred,
                 timeout=20, what="preferred leaders everywhere")  # fmt: skip
        wait_for(lambda: producer.count() > before + 300, timeout=30, what="acknowledged writes after the election")
    finally:
        acked = producer.stop()
    assert sum(len(v) for v in acked.values()) > 500
    assert_nothing_lost(cluster.bootstrap, topic, acked)


def test_unclean_election_on_request_and_per_topic(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([
        NewTopic("elect-unclean", 1, replica_assignment=[[2, 3]]),
        NewTopic("auto-unclean", 1, replica_assignment=[[2, 3]], config={"unclean.leader.election.enable": "true"}),
    ])  # fmt: skip
    for f in futures.values():
        f.result(30)
    for t in ("elect-unclean", "auto-unclean"):
        wait_for(lambda t=t: cluster.partitions(t).get(0, (-1, []))[1] == [2, 3], timeout=30, what=f"{t} in sync")
    # broker 3 leaves the ISRs, then broker 2 (the only in-sync replica) dies: both partitions go offline
    cluster.brokers[3].stop()
    wait_for(lambda: all(cluster.partitions(t)[0][1] == [2] for t in ("elect-unclean", "auto-unclean")),
             timeout=30, what="ISR [2]")  # fmt: skip
    cluster.brokers[2].kill()
    cluster.start_broker(3)
    # per-topic unclean.leader.election.enable=true: the controller lets the out-of-sync replica lead
    wait_for(lambda: cluster.partitions("auto-unclean").get(0, (-1, []))[0] == 3, timeout=40,
             what="unclean leader for auto-unclean")  # fmt: skip
    time.sleep(2)
    assert cluster.partitions("elect-unclean")[0][0] == -1  # the default stays clean: offline

    pref = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
                "--topic", "elect-unclean", "--partition", "0")
    assert pref.returncode == 1
    assert pref.stdout == ("Error completing leader election (PREFERRED) for partition: elect-unclean-0: "
                           "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: "
                           "The preferred leader was not available.\n")
    assert pref.stderr == "1 replica(s) could not be elected\n"
    res = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "unclean",
               "--topic", "elect-unclean", "--partition", "0")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "Successfully completed leader election (UNCLEAN) for partitions elect-unclean-0\n"
    wait_for(lambda: cluster.partitions("elect-unclean").get(0, (-1, []))[0] == 3, timeout=20, what="leader 3")
    again = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "unclean",
                 "--topic", "elect-unclean", "--partition", "0")
    assert again.stdout == "Valid replica already elected for partitions elect-unclean-0\n"


def test_elect_leaders_api_from_librdkafka_and_bad_arguments(cluster, tmp_path: Path) -> None:
    from confluent_kafka import ElectionType

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("elect-api", 2, 3)])["elect-api"].result(30)
    wait_for(lambda: len(cluster.partitions("elect-api")) == 2, timeout=30, what="topic")
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect-api", 0),
                                                          TopicPartition("nope", 0)]).result(30)  # fmt: skip
    errors = {tp.topic: (err.name() if err is not None else None) for tp, err in result.items()}
    assert errors == {"elect-api": "ELECTION_NOT_NEEDED", "nope": "UNKNOWN_TOPIC_OR_PART"}

    plan = tmp_path / "election.json"
    plan.write_text('{"partitions": [{"topic": "elect-api", "partition": 1}, {"topic": "elect-api", "partition": 1}]}')
    dup = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
               "--path-to-json-file", str(plan))
    assert dup.returncode == 1
    assert dup.stderr == "Replica election data contains duplicate partitions: elect-api-1\n"
    both = kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
                "--topic", "elect-api", "--all-topic-partitions")
    assert both.returncode == 1 and "One and only one of the following options is required" in both.stderr
    assert kbus("leader-election", "--bootstrap-server", cluster.bootstrap, "--topic", "t",
                "--partition", "0").stderr == "Missing required option(s): election-type\n"
