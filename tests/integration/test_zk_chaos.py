"""Chaos through ZooKeeper faults (issue 20): a 3-broker cluster (RF=3, min.insync.replicas=2, 6 s sessions) on a
ZooKeeper of its own, an idempotent acks=all producer running throughout. Each round applies one fault, lets the
cluster settle, then kills a partition leader with SIGKILL:

- ZooKeeper killed (-9) and restarted at once (the brokers' sessions survive);
- ZooKeeper paused (SIGSTOP) past the session timeout (some or all sessions expire, others survive);
- a broker paused past the session timeout (its session expires; it comes back as a follower).

Asserted: the killed leader is replaced, as ZooKeeper and every live broker say, within a session timeout + 10 s;
afterwards no broker names another leader or controller than ZooKeeper does, every leader takes writes, and every
acknowledged message is read back. KBUS_CHAOS_ROUNDS=N runs N rounds (default 3), the faults in turn;
KBUS_CHAOS_FAULTS=zookeeper-restart,zookeeper-pause picks which.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import KazooException

from tests.integration.test_zk_faults import FAILOVER_BOUND_S, SESSION_S, Truth, view_of, wait_reconnected
from tests.kbus_processes import Cluster, wait_for
from tests.zk_server import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]

TOPIC = "chaos"
PARTITIONS = 3
FAULTS = ("zookeeper-restart", "zookeeper-pause", "broker-pause")


class IdempotentProducer:
    """acks=all, enable.idempotence in a thread; every acknowledged value per partition."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap,))
        self._thread.start()

    def _run(self, bootstrap: str) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 120000, "retry.backoff.ms": 50,
                      "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})  # fmt: skip

        def done(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                with self._lock:
                    self.acked[msg.partition()].add(int(msg.value()))

        n = 0
        while not self._stop.is_set():
            try:
                p.produce(TOPIC, str(n).encode(), partition=n % PARTITIONS, on_delivery=done)
                n += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if n % 50 == 0:
                time.sleep(0.01)  # a steady stream, not a flood
        p.flush(150)

    def counts(self) -> list[int]:
        with self._lock:
            return [len(self.acked[p]) for p in range(PARTITIONS)]

    def stop(self) -> dict[int, set[int]]:
        self._stop.set()
        self._thread.join(180)
        with self._lock:
            return {p: set(v) for p, v in self.acked.items()}


def states(truth: Truth) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, isr) in ZooKeeper."""
    out = {}
    for p in range(PARTITIONS):
        try:
            data = truth.zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")[0]
        except KazooException:
            return {}
        state = json.loads(data)
        out[p] = (int(state["leader"]), sorted(state["isr"]))
    return out


def nobody_ignores_leaderships(cluster: Cluster, truth: Truth) -> bool:
    """Every live broker names ZooKeeper's controller and ZooKeeper's leader of every partition."""
    controller = truth(TOPIC, 0)[0]
    zk_states = states(truth)
    if controller < 0 or len(zk_states) != PARTITIONS:
        return False
    for b in cluster.brokers.values():
        if not b.alive:
            continue
        view = view_of(b)
        if view is None or view.controller != controller:
            return False
        if any(view.leaders.get((TOPIC, p)) != leader for p, (leader, _) in zk_states.items()):
            return False
    return True


def settled(cluster: Cluster, truth: Truth) -> bool:
    zk_states = states(truth)
    full = len(zk_states) == PARTITIONS and all(isr == [1, 2, 3] and leader > 0 for leader, isr in zk_states.values())
    return full and nobody_ignores_leaderships(cluster, truth)


def serving(producer: IdempotentProducer, before: list[int]) -> bool:
    """Writes acknowledged on every partition since `before`: every leader acts as one."""
    return all(now > then + 20 for now, then in zip(producer.counts(), before, strict=True))


def apply_fault(fault: str, zk: ZooKeeperServer, cluster: Cluster, truth: Truth) -> None:
    if fault == "zookeeper-restart":
        zk.kill()
        zk.start()
    elif fault == "zookeeper-pause":
        zk.pause()
        time.sleep(SESSION_S + 3)
        zk.resume()
    else:
        leader = truth(TOPIC, 0)[1]
        pgid = cluster.brokers[leader].proc.pid  # type: ignore[union-attr]
        os.killpg(pgid, signal.SIGSTOP)
        try:
            time.sleep(SESSION_S + 2)
        finally:
            os.killpg(pgid, signal.SIGCONT)
    wait_reconnected(zk, 4)  # three brokers and the test's own client


def assert_all_read_back(bootstrap: str, acked: dict[int, set[int]]) -> None:
    """Every acknowledged value (per partition of TOPIC) is in the log: read from the start for up to 60 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "log_level": 0})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    need = {p: set(v) for p, v in acked.items()}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(need.values()):
        for m in consumer.consume(5000, 1.0):
            if m.error() is None:
                need[m.partition()].discard(int(m.value()))
    consumer.close()
    missing = {p: len(v) for p, v in need.items() if v}
    assert not missing, f"acknowledged messages not read back, per partition: {missing}"


def test_failover_after_zookeeper_faults_loses_nothing(tmp_path: Path, own_zookeeper: ZooKeeperServer):
    rounds = int(os.environ.get("KBUS_CHAOS_ROUNDS", "3"))
    faults = os.environ.get("KBUS_CHAOS_FAULTS", ",".join(FAULTS)).split(",")
    assert set(faults) <= set(FAULTS), f"KBUS_CHAOS_FAULTS: pick from {FAULTS}"
    connect = f"{own_zookeeper.connect}/kbus"
    cluster = Cluster(tmp_path, connect)
    truth: Truth | None = None
    producer: IdempotentProducer | None = None
    failovers: list[tuple[str, float]] = []
    try:
        cluster.start_all()
        truth = Truth(connect)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(20)
        wait_for(lambda: settled(cluster, truth), timeout=30, what="full ISRs")
        producer = IdempotentProducer(cluster.bootstrap)
        wait_for(lambda: serving(producer, [0] * PARTITIONS), timeout=30, what="writes acknowledged")

        for i in range(rounds):
            fault = faults[i % len(faults)]
            apply_fault(fault, own_zookeeper, cluster, truth)
            wait_for(lambda: settled(cluster, truth), timeout=60, what=f"round {i} ({fault}): settled")
            victim = truth(TOPIC, i % PARTITIONS)[1]
            cluster.brokers[victim].kill()
            t0 = time.monotonic()
            wait_for(lambda v=victim: all(leader not in (-1, v) for leader, _ in states(truth).values())
                     and nobody_ignores_leaderships(cluster, truth),
                     timeout=FAILOVER_BOUND_S, what=f"round {i} ({fault}): broker {victim}'s partitions led again "
                     "as every broker says")  # fmt: skip
            took = time.monotonic() - t0
            failovers.append((fault, took))
            print(f"round {i}: {fault}, then leader {victim} killed: failover {took:.1f} s", flush=True)
            before = producer.counts()
            wait_for(lambda b=before: serving(producer, b), timeout=30, what=f"round {i}: writes after failover")
            cluster.start_broker(victim)
        wait_for(lambda: settled(cluster, truth), timeout=60, what="settled at the end")
        acked = producer.stop()
        producer = None
        assert sum(len(v) for v in acked.values()) > 500
        assert_all_read_back(cluster.bootstrap, acked)
    finally:
        if producer is not None:
            producer.stop()
        if truth is not None:
            truth.close()
        cluster.stop()
        print("failover times (s):", [f"{f}: {t:.1f}" for f, t in failovers])
