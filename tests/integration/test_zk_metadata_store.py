"""ZkMetadataStore against a real ZooKeeper: Kafka 2.x znodes, broker registry, controller and failover."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient

from kbus.common.cluster import BrokerEndpoint, BrokerInfo
from kbus.common.errors import (
    InvalidConfigError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from kbus.server.metadata.zk_store import ZkMetadataStore
from kbus.zk import codec
from kbus.zk.client import BrokerIdInUseError
from tests.kbus_processes import wait_for

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


def znode_json(zk: KazooClient, path: str) -> dict:
    data, _ = zk.get(path)
    return json.loads(data)


def test_broker_registration_writes_kafka_znodes(stores, raw_zk):
    store = stores(1, port=9092, rack="r1")
    for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/changes", "/admin/delete_topics",
                 "/isr_change_notification", "/latest_producer_id_block", "/consumers"):  # fmt: skip
        assert raw_zk.exists(path), path
    data, stat = raw_zk.get("/brokers/ids/1")
    assert stat.ephemeralOwner != 0
    body = json.loads(data)
    assert body["version"] == 5 and body["host"] == "127.0.0.1" and body["port"] == 9092
    assert body["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"] and body["rack"] == "r1"
    assert body["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    cluster = znode_json(raw_zk, "/cluster/id")
    assert cluster["version"] == "1" and cluster["id"] == store.cluster_id and len(store.cluster_id) == 22
    controller = znode_json(raw_zk, "/controller")
    assert controller["brokerid"] == 1 and controller["version"] == 1
    assert raw_zk.get("/controller_epoch")[0] == b"1"
    plaintext = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
    assert store.brokers() == [BrokerInfo(1, "127.0.0.1", 9092, "r1", (plaintext,))]
    assert store.controller_id() == 1 and store.is_controller()

    store.stop()
    # a clean stop closes the session: the ephemerals go at once, so failover need not wait for a timeout
    assert raw_zk.exists("/brokers/ids/1") is None
    assert raw_zk.exists("/controller") is None
    assert raw_zk.exists("/cluster/id")  # persistent


def test_duplicate_broker_id_is_refused(stores, zk_connect, raw_zk):
    first = stores(1)
    owner = raw_zk.get("/brokers/ids/1")[1].ephemeralOwner
    twin = ZkMetadataStore(zk_connect, 1, "127.0.0.1", 9999, session_timeout_ms=6000, registration_wait_ms=800)
    started = time.monotonic()
    with pytest.raises(BrokerIdInUseError, match=r"broker.id 1 is already registered"):
        twin.start()
    # it gave a possibly crashed predecessor's session the chance to expire before giving up
    assert time.monotonic() - started >= 0.8
    # the first broker's registration is untouched
    assert raw_zk.get("/brokers/ids/1")[1].ephemeralOwner == owner
    assert [b.port for b in first.brokers()] == [9091]


def test_create_topic_writes_assignment_state_and_config(stores, raw_zk):
    store = stores(1)
    seen: list[int] = []
    store.add_listener(lambda: seen.append(1))
    topic = store.create_topic("orders", 3, 1, {"retention.ms": "60000"})
    assert sorted(topic.partitions) == [0, 1, 2]
    for state in topic.partitions.values():
        assert (state.leader, state.replicas, state.isr, state.leader_epoch) == (1, [1], [1], 0)
    assert topic.configs == {"retention.ms": "60000"}
    assert seen, "listeners hear about new topics"

    body = znode_json(raw_zk, "/brokers/topics/orders")
    assert body["version"] == 3 and body["partitions"] == {"0": [1], "1": [1], "2": [1]}
    assert codec.uuid_from_kafka(body["topic_id"]) == topic.topic_id
    state = znode_json(raw_zk, "/brokers/topics/orders/partitions/2/state")
    assert state == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
    assert znode_json(raw_zk, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "60000"}}
    assert store.topics()["orders"] == topic
    assert store.topic("orders") == topic and store.topic("missing") is None  # one topic, without the copy

    with pytest.raises(TopicExistsError, match=r"Topic 'orders' already exists."):
        store.create_topic("orders", 1, 1, {})
    with pytest.raises(InvalidReplicationFactorError, match=r"larger than available brokers: 1"):
        store.create_topic("wide", 1, 3, {})
    with pytest.raises(InvalidTopicError):
        store.create_topic("bad/name", 1, 1, {})
    with pytest.raises(InvalidConfigError, match=r"Unknown topic config name: nope"):
        store.create_topic("cfg", 1, 1, {"nope": "1"})
    assert sorted(store.topics()) == ["orders"]


def test_configs_partitions_and_delete(stores, raw_zk):
    store = stores(1)
    store.create_topic("t1", 1, 1, {})
    store.alter_topic_configs("t1", {"cleanup.policy": "compact", "retention.ms": "5"})
    store.alter_topic_configs("t1", {"retention.ms": None})
    assert store.topics()["t1"].configs == {"cleanup.policy": "compact"}
    changes = raw_zk.get_children("/config/changes")
    assert changes and all(c.startswith("config_change_") for c in changes)
    assert znode_json(raw_zk, "/config/changes/" + sorted(changes)[-1]) == {"version": 2, "entity_path": "topics/t1"}

    grown = store.create_partitions("t1", 4)
    assert sorted(grown.partitions) == [0, 1, 2, 3] and all(p.leader == 1 for p in grown.partitions.values())
    t1 = store.topic("t1")  # a change replaces the view: topic() reads the new one, as topics() does
    assert t1 is not None and sorted(t1.partitions) == [0, 1, 2, 3]
    assert raw_zk.exists("/brokers/topics/t1/partitions/3/state")

    store.delete_topic("t1")
    assert "t1" not in store.topics() and store.topic("t1") is None
    assert raw_zk.exists("/brokers/topics/t1") is None
    assert raw_zk.exists("/config/topics/t1") is None
    assert raw_zk.get_children("/admin/delete_topics") == []
    with pytest.raises(UnknownTopicError):
        store.delete_topic("t1")
    # the name is free again, with a new id
    again = store.create_topic("t1", 1, 1, {})
    assert again.partitions[0].leader == 1


def test_controller_failover_and_leader_election_from_isr(stores, raw_zk):
    one = stores(1)
    two = stores(2)
    assert one.controller_id() == 1 and two.controller_id() == 1 and not two.is_controller()
    wait_for(lambda: len(one.brokers()) == 2 and len(two.brokers()) == 2, what="both brokers seen")
    topic = one.create_topic("replicated", 4, 2, {})
    leaders = {p: s.leader for p, s in topic.partitions.items()}
    assert sorted(set(leaders.values())) == [1, 2], "leaders spread over both brokers"
    assert all(sorted(s.isr) == [1, 2] for s in topic.partitions.values())
    wait_for(lambda: two.topics().get("replicated") == one.topics().get("replicated"), what="views agree")
    # a partition only broker 1 holds: with no other in-sync replica it must go offline, not unclean
    one.create_topic("solo", 1, 1, {}, assignment={0: [1]})
    wait_for(lambda: "solo" in two.topics())

    t0 = time.monotonic()
    one.stop()  # the controller and a leader go away
    took = wait_for(lambda: two.is_controller(), what="broker 2 to take over as controller")
    assert raw_zk.get("/controller_epoch")[0] == b"2"
    assert znode_json(raw_zk, "/controller")["brokerid"] == 2

    def moved() -> bool:
        parts = two.topics()["replicated"].partitions.values()
        return all(s.leader == 2 and s.isr == [2] for s in parts)

    wait_for(moved, what="leaders moved to broker 2")
    failover = time.monotonic() - t0
    print(f"controller failover {took:.3f}s, all leaders on broker 2 after {failover:.3f}s")
    for p, was in leaders.items():
        state = znode_json(raw_zk, f"/brokers/topics/replicated/partitions/{p}/state")
        assert state["leader"] == 2 and state["isr"] == [2] and state["controller_epoch"] == 2
        assert state["leader_epoch"] == 1, "exactly one election or ISR shrink per partition"
        assert (was == 1) or state["leader"] == was
    solo = two.topics()["solo"].partitions[0]
    assert (solo.leader, solo.isr) == (-1, [1])

    # broker 1 comes back: it is the only safe leader for "solo", and it does not take back the controller
    back = stores(1)
    wait_for(lambda: two.topics()["solo"].partitions[0].leader == 1, what="solo led by returning broker 1")
    assert two.is_controller() and back.controller_id() == 2 and not back.is_controller()
    assert all(s.leader == 2 for s in back.topics()["replicated"].partitions.values())


def test_leader_writes_isr_changes_with_compare_and_set(stores, raw_zk):
    one = stores(1)
    two = stores(2)
    wait_for(lambda: len(one.brokers()) == 2)
    one.create_topic("isr", 1, 2, {}, assignment={0: [2, 1]})
    wait_for(lambda: two.partition_state("isr", 0) is not None)
    assert one.alter_isr("isr", 0, [2]) is None, "only the leader changes the ISR"
    shrunk = two.alter_isr("isr", 0, [2])
    assert shrunk is not None and shrunk.isr == [2] and shrunk.leader_epoch == 0
    assert znode_json(raw_zk, "/brokers/topics/isr/partitions/0/state")["isr"] == [2]
    wait_for(lambda: one.topics()["isr"].partitions[0].isr == [2], what="other broker sees the shrink")


def test_session_expiry_re_registers_broker_and_controller(stores, zk_connect, raw_zk):
    store = stores(1)
    old_owner = raw_zk.get("/brokers/ids/1")[1].ephemeralOwner
    # the classic way to expire a session: a second client attaches to it and closes it
    session_id, password = store._zk.zk.client_id  # type: ignore[union-attr]
    thief = KazooClient(hosts=zk_connect, client_id=(session_id, password))
    thief.start(timeout=10)
    thief.stop()
    thief.close()

    def re_registered() -> bool:
        stat = raw_zk.exists("/brokers/ids/1")
        return stat is not None and stat.ephemeralOwner not in (0, old_owner)

    wait_for(re_registered, timeout=30, what="broker re-registered on a new session")
    wait_for(lambda: raw_zk.exists("/controller") is not None and store.is_controller(), timeout=30)
    assert raw_zk.get("/controller_epoch")[0] == b"2"
    assert store.create_topic("after-expiry", 1, 1, {}).partitions[0].leader == 1


def test_producer_id_blocks_never_overlap(stores, raw_zk):
    one = stores(1)
    two = stores(2)
    a = [one.allocate_producer_id() for _ in range(3)]
    b = two.allocate_producer_id()
    assert a == [0, 1, 2] and b == 1000
    block = znode_json(raw_zk, "/latest_producer_id_block")
    assert block == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}


def test_controlled_shutdown_moves_leadership_before_the_session_closes(stores, raw_zk):
    one = stores(1)
    two = stores(2)
    wait_for(lambda: len(one.brokers()) == 2)
    one.create_topic("moving", 4, 2, {})
    one.create_topic("stuck", 1, 1, {}, assignment={0: [1]})
    wait_for(lambda: "stuck" in two.topics() and "moving" in two.topics())
    assert 1 in {s.leader for s in two.topics()["moving"].partitions.values()}

    stranded = one.controlled_shutdown()
    assert stranded == [("stuck", 0)]
    # broker 1 is still registered, yet every partition it could hand over is led by 2 without it in the ISR
    assert raw_zk.exists("/brokers/ids/1")
    wait_for(lambda: all(s.leader == 2 and s.isr == [2] for s in two.topics()["moving"].partitions.values()),
             what="broker 2 sees the moved leaders")  # fmt: skip
    for p in range(4):
        assert znode_json(raw_zk, f"/brokers/topics/moving/partitions/{p}/state")["isr"] == [2]
    one.stop()
    wait_for(lambda: two.is_controller())
    # is_controller() turns true when 2 takes /controller, a moment before it acts on broker 1 being gone
    wait_for(lambda: two.topics()["stuck"].partitions[0].leader == -1, what="the stranded partition offline")


def test_preferred_leaders_return_once_back_in_sync(stores):
    fast = {"leader_imbalance_check_interval_s": 0.5}
    one = stores(1, **fast)
    two = stores(2, **fast)
    wait_for(lambda: len(one.brokers()) == 2)
    topic = one.create_topic("pref", 4, 2, {})
    preferred = {p: s.replicas[0] for p, s in topic.partitions.items()}
    assert sorted(set(preferred.values())) == [1, 2]
    one.stop()  # (broker 2 may not have read the new topic yet: it does when it takes over)
    wait_for(lambda: "pref" in two.topics() and all(s.leader == 2 for s in two.topics()["pref"].partitions.values()))
    back = stores(1, **fast)
    time.sleep(1.5)  # several imbalance checks: broker 1 is alive but not in sync, so nothing moves yet
    assert all(s.leader == 2 for s in two.topics()["pref"].partitions.values())
    # the replication layer (the leader) lets broker 1 back into every ISR
    for p in range(4):
        wait_for(lambda p=p: two.alter_isr("pref", p, [2, 1]) is not None, what="leader expands the ISR")
    wait_for(lambda: {p: s.leader for p, s in back.topics()["pref"].partitions.items()} == preferred,
             what="auto leader rebalance restores preferred leaders")  # fmt: skip


def test_admin_requested_preferred_replica_election(stores, zk_connect):
    from kbus.zk.client import KafkaZkClient

    no_auto = {"auto_leader_rebalance_enable": False}
    one = stores(1, **no_auto)
    two = stores(2, **no_auto)
    wait_for(lambda: len(one.brokers()) == 2)
    one.create_topic("manual", 1, 2, {}, assignment={0: [1, 2]})
    wait_for(lambda: "manual" in two.topics())
    initial = one.partition_state("manual", 0)
    assert initial is not None and initial.leader == 1
    one.controlled_shutdown()  # leadership moves to 2, broker 1 leaves the ISR
    wait_for(lambda: two.alter_isr("manual", 0, [2, 1]) is not None, what="new leader expands the ISR")
    admin = KafkaZkClient.connect(zk_connect, 6, 6)
    try:
        admin.request_preferred_replica_election([("manual", 0)])
        wait_for(lambda: two.topics()["manual"].partitions[0].leader == 1, what="preferred replica elected")
        wait_for(lambda: admin.get_preferred_replica_election() is None, what="request removed")
    finally:
        admin.close()


CRASHING_BROKER = """
import sys, time
from kbus.server.metadata.zk_store import ZkMetadataStore
ZkMetadataStore(sys.argv[1], 7, "127.0.0.1", 9097, session_timeout_ms=4000).start()
print("registered", flush=True)
time.sleep(600)
"""


def test_restart_after_crash_waits_for_the_old_session(stores, zk_connect, raw_zk):
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_BROKER, zk_connect], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "registered"
        old_owner = raw_zk.get("/brokers/ids/7")[1].ephemeralOwner
    finally:
        proc.kill()  # kill -9: the session lingers until ZooKeeper times it out
        proc.wait()
    started = time.monotonic()
    again = stores(7, session_timeout_ms=4000)
    took = time.monotonic() - started
    assert raw_zk.get("/brokers/ids/7")[1].ephemeralOwner not in (0, old_owner)
    assert [b.broker_id for b in again.brokers()] == [7]
    print(f"restart after kill -9 registered after {took:.2f}s (session timeout 4 s)")
    assert 0.5 < took < 10
