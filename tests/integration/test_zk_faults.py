"""Failover through ZooKeeper faults (issue 20): each test runs its own real ZooKeeper, which it kills and restarts
or pauses (SIGSTOP) past a session timeout, and real broker processes; a leader killed afterwards must be replaced,
and every broker must follow the leadership the controller decides.

Before the fix, kazoo dropped every watch when its connection to ZooKeeper went (SUSPENDED) and the brokers only
read ZooKeeper again after a *new* session: a broker whose session survived the fault never heard of a change again.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from kbus.server.metadata.zk_store import ZkMetadataStore
from tests.kbus_processes import BrokerProcess, Cluster, wait_for
from tests.zk_server import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]

SESSION_S = 6.0  # CLUSTER_OVERRIDES' zookeeper.session.timeout.ms
FAILOVER_BOUND_S = SESSION_S + 10  # the bound: a session timeout to notice the death, 10 s to act on it


@dataclass(frozen=True)
class BrokerView:
    """What one broker answers to Metadata v1 (asked of that broker alone, not of whichever librdkafka picks)."""

    controller: int
    leaders: dict[tuple[str, int], int]


def view_of(broker: BrokerProcess) -> BrokerView | None:
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    request = struct.pack(">hhih", 3, 1, 7, 4) + b"test" + struct.pack(">i", -1)  # Metadata v1, every topic
    try:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", _recv_exactly(s, 4))[0]
            frame = _recv_exactly(s, size)
    except OSError:
        return None
    value, _ = entity_reader(load_response_schema(3, 1))(frame, 4)
    leaders = {(str(t.name), int(p.partition_index)): int(p.leader_id) for t in value.topics for p in t.partitions}
    return BrokerView(int(value.controller_id), leaders)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class Truth:
    """(controller, leader) as ZooKeeper has them, read through one client of the test's own (it reconnects by
    itself after a fault; until then the answer is "none")."""

    def __init__(self, connect: str) -> None:
        self.zk = KazooClient(hosts=connect)
        self.zk.start(timeout=10)

    def __call__(self, topic: str, partition: int) -> tuple[int, int]:
        try:
            controller = self._read("/controller", "brokerid")
            leader = self._read(f"/brokers/topics/{topic}/partitions/{partition}/state", "leader")
        except KazooException:
            return -1, -1
        return controller, leader

    def _read(self, path: str, key: str) -> int:
        try:
            return int(json.loads(self.zk.get(path)[0])[key])
        except NoNodeError:
            return -1

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def everyone_agrees(cluster: Cluster, truth: Truth, topic: str, partition: int, leader: int) -> bool:
    """Every live broker names `leader` for the partition and ZooKeeper's controller as the controller."""
    controller, zk_leader = truth(topic, partition)
    if zk_leader != leader or controller < 0:
        return False
    for b in cluster.brokers.values():
        if not b.alive:
            continue
        view = view_of(b)
        if view is None or view.controller != controller or view.leaders.get((topic, partition)) != leader:
            return False
    return True


def produce_one(bootstrap: str, topic: str, partition: int, timeout: float = 10) -> bool:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout * 1000),
                  "log_level": 0})  # fmt: skip
    done: list[object] = []
    p.produce(topic, b"after the fault", partition=partition, on_delivery=lambda err, _m: done.append(err))
    p.flush(timeout + 5)
    return done == [None]


def wait_reconnected(zk: ZooKeeperServer, clients: int) -> None:
    time.sleep(0.5)  # the connections of before the fault may still be counted a moment
    wait_for(lambda: zk.connections() >= clients, timeout=20, what=f"{clients} clients reconnected to ZooKeeper")


def test_a_leader_killed_after_zookeeper_restarts_is_replaced(tmp_path: Path, own_zookeeper: ZooKeeperServer):
    """Defect 1: ZooKeeper kill -9 and restart within the session timeout (every broker keeps its session), then
    the partition leader is killed: the others elect a new leader within a session timeout + 10 s."""
    connect = f"{own_zookeeper.connect}/kbus"
    cluster = Cluster(tmp_path, connect)
    truth: Truth | None = None
    try:
        cluster.start_all()
        truth = Truth(connect)
        topic = "after-zk-restart"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(20)
        wait_for(lambda: cluster.partitions(topic).get(0, (-1, []))[1] == [1, 2, 3], timeout=30, what="full ISR")

        own_zookeeper.kill()
        own_zookeeper.start()
        wait_reconnected(own_zookeeper, 4)  # and the test's own client
        time.sleep(1)  # the brokers' reads after reconnecting

        leader = truth(topic, 0)[1]
        cluster.brokers[leader].kill()
        t0 = time.monotonic()
        wait_for(lambda: truth(topic, 0)[1] not in (-1, leader), timeout=FAILOVER_BOUND_S,
                 what=f"the controller replacing leader {leader}")  # fmt: skip
        new_leader = truth(topic, 0)[1]
        wait_for(lambda: everyone_agrees(cluster, truth, topic, 0, new_leader),
                 timeout=max(1.0, FAILOVER_BOUND_S - (time.monotonic() - t0)),
                 what=f"every live broker naming {new_leader} leader")  # fmt: skip
        print(f"failover after a ZooKeeper restart: {time.monotonic() - t0:.1f} s")
        assert produce_one(cluster.brokers[new_leader].bootstrap, topic, 0)
    finally:
        if truth is not None:
            truth.close()
        cluster.stop()


def test_a_broker_whose_session_survived_a_zookeeper_pause_takes_its_leadership(
    tmp_path: Path, own_zookeeper: ZooKeeperServer
):
    """Defect 2: ZooKeeper paused 13 s, past brokers 1 and 2's session timeout (6 s) but not broker 3's (16 s): 1
    and 2 get new sessions; 3 loses its connection (no answer to its pings for 2/3 of its timeout) but keeps its
    session. Then the leader of a partition on [2, 3] is killed (unless the controller already moved it to 3): 3
    must act on its leadership (serve the partition) and every broker must name the same leader and controller."""
    connect = f"{own_zookeeper.connect}/kbus"
    cluster = Cluster(tmp_path, connect)
    cluster.brokers[3].overrides["zookeeper.session.timeout.ms"] = "16000"
    truth: Truth | None = None
    try:
        cluster.start_all()
        truth = Truth(connect)
        topic = "after-zk-pause"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[2, 3]],
                                      config={"min.insync.replicas": "1"})])[topic].result(20)  # fmt: skip
        wait_for(lambda: cluster.partitions(topic).get(0, (-1, []))[1] == [2, 3], timeout=30, what="full ISR")

        own_zookeeper.pause()
        time.sleep(13)
        own_zookeeper.resume()
        wait_reconnected(own_zookeeper, 4)  # and the test's own client
        # settled: a controller, both replicas registered again and the partition led by one of them
        wait_for(lambda: truth(topic, 0)[0] > 0 and truth(topic, 0)[1] in (2, 3),
                 timeout=20, what="a controller and a leader after the pause")  # fmt: skip
        if truth(topic, 0)[1] == 2:
            cluster.brokers[2].kill()
        t0 = time.monotonic()
        wait_for(lambda: everyone_agrees(cluster, truth, topic, 0, 3), timeout=FAILOVER_BOUND_S,
                 what="broker 3 leading, as every live broker says")  # fmt: skip
        print(f"broker 3 leading {time.monotonic() - t0:.1f} s after the leader was killed")
        assert produce_one(cluster.brokers[3].bootstrap, topic, 0)
    finally:
        if truth is not None:
            truth.close()
        cluster.stop()


def lose_every_watch(store: ZkMetadataStore) -> None:
    """What a lost notification looks like to the store: kazoo forgets its watchers (as it does when a connection
    drops) while the session and ZooKeeper's side stay as they are, so the next change is announced to nobody.
    First the store's event thread must be idle: a read it makes afterwards would set the watch again."""
    wait_for(store._events.empty, timeout=5, what="the store's events handled")
    time.sleep(0.3)  # the last one taken off the queue may still be being handled
    zk = store._client().zk
    zk._data_watchers.clear()
    zk._child_watchers.clear()


def test_a_state_change_whose_watch_was_lost_reaches_the_broker(stores, raw_zk):
    """The backstop that cannot be lost (Kafka's LeaderAndIsr push has no ZooKeeper equivalent): a partition state
    written while the broker heard nothing still reaches its view within the reconciliation interval."""
    store = stores(1, reconcile_interval_s=0.5)
    store.create_topic("unannounced", 1, 1, {})
    before = store.partition_state("unannounced", 0)
    assert before is not None and before.leader == 1
    lose_every_watch(store)
    path = "/brokers/topics/unannounced/partitions/0/state"
    raw_zk.set(path, json.dumps({"version": 1, "leader": 1, "leader_epoch": 7, "isr": [1],
                                 "controller_epoch": 1}).encode())  # fmt: skip
    took = wait_for(lambda: (s := store.partition_state("unannounced", 0)) is not None and s.leader_epoch == 7,
                    timeout=5, what="the unannounced state in the broker's view")  # fmt: skip
    print(f"unannounced state seen after {took:.2f} s")


def test_a_controller_that_missed_a_broker_death_elects_a_new_leader(stores, raw_zk):
    """The controller's own watch on /brokers/ids lost, then a leader's broker goes: the reconciliation finds the
    death and the controller moves leadership (and every broker's view follows)."""
    controller = stores(1, reconcile_interval_s=0.5)
    other = stores(2, reconcile_interval_s=0.5)
    controller.create_topic("orphan", 1, 2, {}, assignment={0: [2, 1]})
    wait_for(lambda: (s := controller.partition_state("orphan", 0)) is not None and s.leader == 2, timeout=5,
             what="broker 2 leading")  # fmt: skip
    lose_every_watch(controller)
    other._client().zk.stop()  # its session ends with no controlled shutdown: a crash, as ZooKeeper sees it
    took = wait_for(lambda: (s := controller.partition_state("orphan", 0)) is not None and s.leader == 1,
                    timeout=5, what="the controller electing broker 1")  # fmt: skip
    assert json.loads(raw_zk.get("/brokers/topics/orphan/partitions/0/state")[0])["leader"] == 1
    print(f"leader replaced {took:.2f} s after a death the controller was not told of")


def test_an_isr_write_whose_answer_was_lost_is_read_back(stores, raw_zk, monkeypatch):
    """Found by the chaos test: ZooKeeper paused just after a leader sent "ISR [1, 2, 3]"; the write was applied
    but its answer lost with the connection, the leader took it as failed and acknowledged records without
    replica 3, which the controller then elected from ZooKeeper's ISR (566 acknowledged records truncated). The
    store now reads the znode back: applied means written, whatever the connection said."""
    from kazoo.exceptions import ConnectionLoss

    leader = stores(1)
    stores(2)
    leader.create_topic("ambiguous", 1, 2, {}, assignment={0: [1, 2]})
    wait_for(lambda: (s := leader.partition_state("ambiguous", 0)) is not None and list(s.isr) == [1, 2],
             timeout=5, what="ISR [1, 2]")  # fmt: skip
    client = leader._client()
    real_write = client.update_partition_state

    def applied_then_lost(*args, **kwargs):  # type: ignore[no-untyped-def]
        real_write(*args, **kwargs)
        raise ConnectionLoss()

    monkeypatch.setattr(client, "update_partition_state", applied_then_lost)
    shrunk = leader.alter_isr("ambiguous", 0, [1])
    assert shrunk is not None and shrunk.isr == [1]
    wait_for(lambda: list(leader.partition_state("ambiguous", 0).isr) == [1], timeout=5, what="the view")

    def lost_unapplied(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise ConnectionLoss()

    monkeypatch.setattr(client, "update_partition_state", lost_unapplied)
    assert leader.alter_isr("ambiguous", 0, [1, 2]) is None
    assert json.loads(raw_zk.get("/brokers/topics/ambiguous/partitions/0/state")[0])["isr"] == [1]


def test_a_reread_older_than_the_stored_state_never_replaces_it(stores):
    """A reconciliation's pipelined read takes ~1 s at 10k partitions. A leader's own ISR write landing after the
    read of its partition was queued is stored first (alter_isr, version v+1), then the read's answer (version v)
    arrives: taking it would tell the broker its ISR expansion was undone while ZooKeeper lists the follower in
    sync, and the high watermark would move on without it. The older state must never reach the view."""
    leader = stores(1)
    stores(2)
    leader.create_topic("race", 1, 2, {}, assignment={0: [1, 2]})
    wait_for(lambda: (s := leader.partition_state("race", 0)) is not None and list(s.isr) == [1, 2],
             timeout=5, what="ISR [1, 2]")  # fmt: skip
    assert leader.alter_isr("race", 0, [1]) is not None
    wait_for(lambda: list(leader.partition_state("race", 0).isr) == [1], timeout=5, what="the shrink in the view")
    lose_every_watch(leader)  # idle event thread, so the read below is the only one
    seen: list[list[int]] = []
    leader.add_listener(lambda: seen.append(list(leader.partition_state("race", 0).isr)))
    client = leader._client()
    real_read = client.get_partition_states
    expanded: list[object] = []

    def read_then_expand(items, watch=None, **kwargs):  # type: ignore[no-untyped-def]
        out = real_read(items, watch=watch, **kwargs)
        if ("race", 0) in items and not expanded:
            # the leader's worker thread wins the race: the expansion is written and stored after the read
            expanded.append(leader.alter_isr("race", 0, [1, 2]))
        return out

    client.get_partition_states = read_then_expand  # type: ignore[method-assign]
    try:
        leader.request_state_read("race", 0)  # what a watch event or a reconciliation makes the thread read
        wait_for(lambda: bool(expanded), timeout=5, what="the racing expansion")
        assert expanded[0] is not None
        wait_for(leader._events.empty, timeout=5, what="the store's events handled")
        time.sleep(0.5)
    finally:
        del client.get_partition_states
    state = leader.partition_state("race", 0)
    assert list(state.isr) == [1, 2] and state.zk_version == 2
    assert seen and all(isr == [1, 2] for isr in seen), f"listeners saw the expansion undone: {seen}"


def test_a_topic_recreated_unannounced_takes_its_new_states(stores, raw_zk):
    """Version order holds within one znode only: a topic deleted and created again while the broker heard
    nothing has state znodes starting again at version 0, and the reconciliation must take them."""
    store = stores(1, reconcile_interval_s=0.5)
    store.create_topic("reborn", 1, 1, {})
    path = "/brokers/topics/reborn/partitions/0/state"
    for epoch in (3, 4):  # the old znode's version moves past the new one's
        raw_zk.set(path, json.dumps({"version": 1, "leader": 1, "leader_epoch": epoch, "isr": [1],
                                     "controller_epoch": 1}).encode())  # fmt: skip
    wait_for(lambda: store.partition_state("reborn", 0).leader_epoch == 4, timeout=5, what="the old state")
    lose_every_watch(store)
    assignment, _ = raw_zk.get("/brokers/topics/reborn")
    # in one transaction, so no read in between finds the topic gone
    tx = raw_zk.transaction()
    znodes = ["/brokers/topics/reborn", "/brokers/topics/reborn/partitions", "/brokers/topics/reborn/partitions/0"]
    for znode in [path, *reversed(znodes)]:
        tx.delete(znode)
    tx.create(znodes[0], assignment)
    for znode in znodes[1:]:
        tx.create(znode, b"")
    tx.create(path, json.dumps({"version": 1, "leader": 1, "leader_epoch": 0, "isr": [1],
                               "controller_epoch": 1}).encode())  # fmt: skip
    assert not any(isinstance(r, Exception) for r in tx.commit())
    wait_for(lambda: (s := store.partition_state("reborn", 0)) is not None and s.leader_epoch == 0, timeout=5,
             what="the new topic's state")  # fmt: skip
    assert store.partition_state("reborn", 0).zk_version == 0


def test_a_reconciliation_rereads_only_the_states_that_changed(stores, raw_zk):
    """ZooKeeper's zxid moves with any write anywhere in the ensemble (another chroot's cluster, a topic created
    elsewhere), and each move made the reconciliation read every partition state again with one getData each:
    ~150 ms of broker CPU at 1,150 partitions, every ~6 s (bench/notes/msgsize-2026-11-27-s12.md). It peeks at
    them in multiRead batches now and reads again, with a watch, only what differs from the view."""
    store = stores(1, reconcile_interval_s=3600)
    store.create_topic("calm", 30, 1, {})
    wait_for(lambda: store.partition_state("calm", 29) is not None, timeout=10, what="30 states")
    lose_every_watch(store)  # the event thread idle and hearing nothing: every read below is the reconciliation's
    store._reconcile()  # learns the zxid of the states it wrote itself
    client = store._client()
    real_read = client.get_partition_states
    reread: list[tuple[str, int]] = []

    def counting(items, watch=None, **kwargs):  # type: ignore[no-untyped-def]
        reread.extend(items)
        return real_read(items, watch=watch, **kwargs)

    client.get_partition_states = counting  # type: ignore[method-assign]
    try:
        raw_zk.create(f"/elsewhere-{uuid.uuid4().hex}")  # the zxid moves; no state changed
        store._reconcile()
        assert reread == []
        raw_zk.set("/brokers/topics/calm/partitions/7/state", json.dumps({
            "version": 1, "leader": 1, "leader_epoch": 9, "isr": [1], "controller_epoch": 1}).encode())  # fmt: skip
        store._reconcile()
        assert reread == [("calm", 7)]
        assert store.partition_state("calm", 7).leader_epoch == 9
    finally:
        del client.get_partition_states


def test_a_lost_state_change_is_found_by_a_sweep_in_parts(stores, raw_zk, monkeypatch):
    """At 11,111 partitions a look at every state cost the metadata thread 90-107 ms after any write in the
    ensemble (bench/notes/spikes-2026-11-27-s16.md). A pass now peeks at 1/SWEEP_PASSES of the states (here 10 of
    30: one multiRead of MULTI_READ_BATCH each), the sweep goes on until every state was looked at since it began,
    and a state written with its notification lost is read in the pass that reaches it; once a sweep is complete
    and nothing was written, a pass peeks at nothing."""
    from kbus.server.metadata import zk_view
    from kbus.zk import client as zk_client

    monkeypatch.setattr(zk_client, "MULTI_READ_BATCH", 10)
    monkeypatch.setattr(zk_view, "SWEEP_PASSES", 3)
    store = stores(1, reconcile_interval_s=3600)
    store.create_topic("swept", 30, 1, {})
    wait_for(lambda: store.partition_state("swept", 29) is not None, timeout=10, what="30 states")
    lose_every_watch(store)  # the event thread idle and hearing nothing: every read below is the reconciliation's
    client = store._client()
    peeks: list[int] = []
    rereads: list[list[tuple[str, int]]] = []
    real_peek, real_read = client.peek_writes, client.get_partition_states

    def counting_peek(request):  # type: ignore[no-untyped-def]
        peeks.append(request.size)
        return real_peek(request)

    def counting_read(items, watch=None, **kwargs):  # type: ignore[no-untyped-def]
        rereads.append(list(items))
        return real_read(items, watch=watch, **kwargs)

    client.peek_writes = counting_peek  # type: ignore[method-assign]
    client.get_partition_states = counting_read  # type: ignore[method-assign]
    try:
        for _ in range(4):  # the sweep the store's own writes started (learning the zxids of its writes)
            store._reconcile()
            if store._sweep is None:
                break
        assert store._sweep is None
        lose_every_watch(store)  # a state read again above was watched again
        peeks.clear()
        rereads.clear()
        store._reconcile()
        assert peeks == [] and rereads == []  # nothing written since the sweep began
        raw_zk.set("/brokers/topics/swept/partitions/25/state", json.dumps({
            "version": 1, "leader": 1, "leader_epoch": 9, "isr": [1], "controller_epoch": 1}).encode())  # fmt: skip
        store._reconcile()
        store._reconcile()
        assert peeks == [10, 10] and rereads == []  # partitions 0-19
        assert store.partition_state("swept", 25).leader_epoch != 9
        store._reconcile()
        assert peeks == [10, 10, 10] and rereads == [[("swept", 25)]]
        assert store.partition_state("swept", 25).leader_epoch == 9
        assert store._sweep is None
        store._reconcile()
        assert peeks == [10, 10, 10]
    finally:
        del client.peek_writes
        del client.get_partition_states
