"""Share groups (KIP-932) against a real kbus broker with raw kio frames: ShareGroupHeartbeat (join, heartbeat,
fencing, leave), ShareGroupDescribe, ListGroups' share type, the group's records in __consumer_offsets surviving a
broker restart, and ShareFetch/ShareAcknowledge's share-partition state machine (acquisition locks, delivery
counts, ACCEPT/RELEASE/REJECT, share sessions)."""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.alter_share_group_offsets.v0.response import AlterShareGroupOffsetsResponse
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kio.schema.delete_share_group_offsets.v0.response import DeleteShareGroupOffsetsResponse
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.describe_share_group_offsets.v1.response import DescribeShareGroupOffsetsResponse
from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.share_acknowledge.v1.request import AcknowledgementBatch as AckBatch
from kio.schema.share_acknowledge.v1.request import AcknowledgePartition, AcknowledgeTopic, ShareAcknowledgeRequest
from kio.schema.share_acknowledge.v1.response import ShareAcknowledgeResponse
from kio.schema.share_fetch.v1.request import AcknowledgementBatch, FetchPartition, FetchTopic, ShareFetchRequest
from kio.schema.share_fetch.v1.response import ShareFetchResponse
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse

from kbus.protocol.client import KafkaConnection
from kbus.protocol.record_batch import decode_records, iter_complete_batches
from tests.integration.test_consumer_groups import create_topic, produce, uid
from tests.kbus_processes import BrokerProcess, Cluster

pytestmark = pytest.mark.integration

T = TypeVar("T")
RETRIABLE = {E.coordinator_not_available, E.coordinator_load_in_progress, E.not_coordinator}


def run(port: int, body: Callable[[KafkaConnection], Awaitable[T]]) -> T:
    async def main() -> T:
        conn = KafkaConnection("127.0.0.1", port, "share-test")
        try:
            return await body(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


async def heartbeat(conn: KafkaConnection, group: str, member: str, epoch: int,
                    topics: tuple[str, ...] | None = None) -> Any:
    """One ShareGroupHeartbeat, retried while the coordinator is being created or loaded (FindCoordinator creates
    __consumer_offsets, as a client's first step does)."""
    await conn.request(FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse)
    for _ in range(200):
        resp = await conn.request(
            ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                       subscribed_topic_names=topics),
            ShareGroupHeartbeatResponse)
        if resp.error_code not in RETRIABLE:
            return resp
        await asyncio.sleep(0.05)
    raise AssertionError("the coordinator never answered")


async def topic_id(conn: KafkaConnection, topic: str) -> uuid.UUID:
    md = await conn.request(MetadataRequest(topics=(MetadataRequestTopic(name=topic, topic_id=None),),
                                            allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False), MetadataResponse)
    tid = md.topics[0].topic_id
    assert tid is not None
    return tid


def assigned(resp: Any) -> dict[uuid.UUID, set[int]]:
    assert resp.assignment is not None
    return {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}


async def describe(conn: KafkaConnection, group: str) -> Any:
    resp = await conn.request(ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False),
                              ShareGroupDescribeResponse)
    return resp.groups[0]


def test_share_group_heartbeat_describe_list_and_reload(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"offsets.topic.num.partitions": "1", "group.share.heartbeat.interval.ms": "700"})
    topic = create_topic(b.bootstrap, 2)
    group = uid("sg")
    members = [str(uuid.uuid4()) for _ in range(3)]

    async def step1(conn: KafkaConnection) -> tuple[int, list[int]]:
        tid = await topic_id(conn, topic)
        epochs = []
        for m in members:
            r = await heartbeat(conn, group, m, 0, (topic,))
            assert r.error_code == E.none, r
            assert r.member_id == m and r.heartbeat_interval == datetime.timedelta(milliseconds=700)
            # Kafka's simple share assignor: alone, the first member gets both partitions; later ones a share
            if m == members[0]:
                assert assigned(r) == {tid: {0, 1}}
            epochs.append(r.member_epoch)
        assert epochs == [1, 2, 3]
        # the first two members catch up with the group's epoch on their next heartbeat
        r = await heartbeat(conn, group, members[0], 1)
        assert r.error_code == E.none and r.member_epoch == 3 and r.assignment is not None
        await heartbeat(conn, group, members[1], 2)
        # 3 members, 2 partitions: each partition shared by ceil(3/2) = 2 members, members hold 2/1/1
        d = await describe(conn, group)
        held = {m.member_id: {p for tp in m.assignment.topic_partitions for p in tp.partitions} for m in d.members}
        assert sorted(len(ps) for ps in held.values()) == [1, 1, 2], held
        assert sorted(p for ps in held.values() for p in ps) == [0, 0, 1, 1], held
        # a heartbeat with nothing new carries no assignment
        r = await heartbeat(conn, group, members[0], 3)
        assert r.error_code == E.none and r.member_epoch == 3 and r.assignment is None
        # fencing: a wrong epoch, an unknown member, an invalid first heartbeat
        assert (await heartbeat(conn, group, members[1], 7)).error_code == E.fenced_member_epoch
        assert (await heartbeat(conn, group, "nobody", 3)).error_code == E.unknown_member_id
        assert (await heartbeat(conn, group, "x", 0, None)).error_code == E.invalid_request
        d = await describe(conn, group)
        assert d.error_code == E.none and d.group_state == "Stable" and d.assignor_name == "simple"
        assert d.group_epoch == 3 and d.assignment_epoch == 3
        assert sorted(m.member_id for m in d.members) == sorted(members)
        listed = await conn.request(ListGroupsRequest(states_filter=(), types_filter=("share",)), ListGroupsResponse)
        mine = [g for g in listed.groups if g.group_id == group]
        assert [(g.group_type, g.protocol_type, g.group_state) for g in mine] == [("share", "share", "Stable")]
        # a member leaves: epoch -1, the group's epoch moves on
        r = await heartbeat(conn, group, members[2], -1)
        assert r.error_code == E.none and r.member_epoch == -1
        d = await describe(conn, group)
        return d.group_epoch, sorted(m.member_epoch for m in d.members)

    group_epoch, member_epochs = run(b.port, step1)
    assert group_epoch == 4 and member_epochs == [3, 3]

    # a restarted broker loads the group from its records in __consumer_offsets
    b.restart()

    async def step2(conn: KafkaConnection) -> None:
        for _ in range(200):
            d = await describe(conn, group)
            if d.error_code not in RETRIABLE:
                break
            await asyncio.sleep(0.05)
        assert d.error_code == E.none, d
        assert d.group_epoch == 4 and sorted(m.member_id for m in d.members) == sorted(members[:2])
        epochs = {m.member_id: m.member_epoch for m in d.members}
        r = await heartbeat(conn, group, members[0], epochs[members[0]])
        assert r.error_code == E.none and r.member_epoch == 4
        # not a consumer group, nor a classic one
        assert (await describe(conn, uid("none"))).error_code == E.group_id_not_found

    run(b.port, step2)


def test_simple_assignor_spreads_partitions_over_members(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Kafka 4.1+'s simple share assignor: 2 members and 4 partitions get 2 partitions each, disjoint (not every
    member every partition)."""
    b = broker_factory({"offsets.topic.num.partitions": "1"})
    topic, group = create_topic(b.bootstrap, 4), uid("sg")
    a, c = str(uuid.uuid4()), str(uuid.uuid4())

    async def body(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        r = await heartbeat(conn, group, a, 0, (topic,))
        assert r.error_code == E.none and assigned(r) == {tid: {0, 1, 2, 3}}
        r = await heartbeat(conn, group, c, 0, (topic,))
        assert r.error_code == E.none and r.member_epoch == 2
        got_c = assigned(r)[tid]
        assert len(got_c) == 2, got_c
        r = await heartbeat(conn, group, a, 1)
        assert r.error_code == E.none and r.member_epoch == 2
        got_a = assigned(r)[tid]
        assert len(got_a) == 2 and got_a | got_c == {0, 1, 2, 3}, (got_a, got_c)
        # sticky: the first member keeps two of the partitions it had, nothing moves on a plain heartbeat
        r = await heartbeat(conn, group, a, 2)
        assert r.error_code == E.none and r.assignment is None

    run(b.port, body)


async def share_fetch(conn: KafkaConnection, group: str, member: str, epoch: int, tid: uuid.UUID,
                      acks: tuple[tuple[int, int, tuple[int, ...]], ...] = (), max_wait_ms: int = 0,
                      max_records: int = 100) -> tuple[Any, list[tuple[int, int, int]], list[int]]:
    """One ShareFetch of partition 0: (the response, the acquired ranges (first, last, delivery count), the
    offsets of the records sent)."""
    batches = tuple(AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t) for f, la, t in acks)
    resp = await conn.request(ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 20,
        max_records=max_records, batch_size=max_records,
        topics=(FetchTopic(topic_id=tid, partitions=(FetchPartition(partition_index=0,
                                                                     acknowledgement_batches=batches),)),),
        forgotten_topics_data=()), ShareFetchResponse)
    ranges: list[tuple[int, int, int]] = []
    offsets: list[int] = []
    for t in resp.responses:
        for p in t.partitions:
            ranges += [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
            if p.records:
                offsets += [rec.offset for batch in decode_batches(p.records) for rec in batch]
    return resp, ranges, offsets


def decode_batches(data: bytes) -> list[list[Any]]:
    return [decode_records(data, h) for h in iter_complete_batches(data)]


def test_share_fetch_locks_delivery_counts_and_acknowledgements(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"offsets.topic.num.partitions": "1", "group.share.record.lock.duration.ms": "1500",
                        "group.share.delivery.count.limit": "2"})
    topic = create_topic(b.bootstrap, 1)
    group = uid("sg")
    a, c = str(uuid.uuid4()), str(uuid.uuid4())
    ACCEPT, RELEASE, REJECT = 1, 2, 3

    async def body(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        for m in (a, c):
            assert (await heartbeat(conn, group, m, 0, (topic,))).error_code == E.none
        # the first fetch creates the share-partition at the high watermark (share.auto.offset.reset=latest)
        resp, ranges, _ = await share_fetch(conn, group, a, 0, tid)
        assert resp.error_code == E.none and ranges == []
        produce(b.bootstrap, topic, [f"v{i}" for i in range(10)], 1)
        resp, ranges, offsets = await share_fetch(conn, group, a, 1, tid, max_wait_ms=2000)
        assert resp.acquisition_lock_timeout == datetime.timedelta(milliseconds=1500)
        assert ranges == [(0, 9, 1)] and offsets == list(range(10))
        # the other member gets nothing: all 10 are locked by a
        _, ranges, _ = await share_fetch(conn, group, c, 0, tid)
        assert ranges == []
        # acknowledgements piggy-backed on the next fetch: accept 0-2, release 3-4, reject 5
        resp, ranges, _ = await share_fetch(conn, group, a, 2, tid,
                                            acks=((0, 2, (ACCEPT,)), (3, 5, (RELEASE, RELEASE, REJECT))))
        [part] = resp.responses[0].partitions
        assert part.acknowledge_error_code == 0
        # a's next fetch takes the released records again, their delivery count now 2
        assert ranges == [(3, 4, 2)]
        # acknowledging what it does not hold (accepted already, or never delivered) is INVALID_RECORD_STATE
        resp, _, _ = await share_fetch(conn, group, a, 3, tid, acks=((0, 0, (ACCEPT,)),))
        assert resp.responses[0].partitions[0].acknowledge_error_code == E.invalid_record_state
        # a wrong share session epoch, an unknown session
        resp, _, _ = await share_fetch(conn, group, a, 9, tid)
        assert resp.error_code == E.invalid_share_session_epoch
        resp, _, _ = await share_fetch(conn, group, str(uuid.uuid4()), 1, tid)
        assert resp.error_code == E.share_session_not_found
        # a's locks run out: 6-9 go to c (delivery count 2); 3-4 were delivered twice, the limit: archived
        await asyncio.sleep(1.7)
        _, ranges, offsets = await share_fetch(conn, group, c, 1, tid, max_wait_ms=2000)
        # (the records go back as the log's whole batches, as Kafka's do: the client keeps the acquired ones)
        assert ranges == [(6, 9, 2)] and {6, 7, 8, 9} <= set(offsets)
        # c releases them: delivered twice, they are archived too, and nothing is left to deliver
        resp = await conn.request(ShareAcknowledgeRequest(group_id=group, member_id=c, share_session_epoch=2, topics=(
            AcknowledgeTopic(topic_id=tid, partitions=(AcknowledgePartition(partition_index=0, acknowledgement_batches=(
                AckBatch(first_offset=6, last_offset=9, acknowledge_types=(RELEASE,)),)),)),)),
            ShareAcknowledgeResponse)
        assert resp.error_code == E.none and resp.responses[0].partitions[0].error_code == E.none
        _, ranges, _ = await share_fetch(conn, group, c, 3, tid, max_wait_ms=300)
        assert ranges == []
        # new records go on from offset 10
        produce(b.bootstrap, topic, ["w"], 1)
        _, ranges, offsets = await share_fetch(conn, group, c, 4, tid, max_wait_ms=2000)
        assert ranges == [(10, 10, 1)] and offsets == [10]
        # closing the session (epoch -1) releases what c holds: a gets it again
        resp, _, _ = await share_fetch(conn, group, c, -1, tid)
        resp = await conn.request(ShareFetchRequest(
            group_id=group, member_id=c, share_session_epoch=-1, max_wait=datetime.timedelta(0), min_bytes=1,
            max_bytes=1 << 20, max_records=10, batch_size=10, topics=(), forgotten_topics_data=()),
            ShareFetchResponse)
        _, ranges, _ = await share_fetch(conn, group, a, 0, tid, max_wait_ms=2000)
        assert ranges == [(10, 10, 2)]

    run(b.port, body)


def leader_of(cluster: Cluster, topic: str, exclude: int | None = None) -> int:
    """The broker id leading partition 0 of `topic`, as a live broker's metadata says (waits for a new one)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        md = admin.list_topics(topic, timeout=10)
        leader = md.topics[topic].partitions[0].leader
        if leader > 0 and leader != exclude and cluster.brokers[leader].alive:
            return leader
        time.sleep(0.5)
    raise AssertionError(f"no new leader for {topic}")


@pytest.mark.slow
def test_share_partition_leader_killed_mid_delivery(cluster: Cluster) -> None:
    """kill -9 of the share-partition leader (3 brokers, RF 3, min ISR 2, __share_group_state RF 3): after the
    failover nothing ACCEPTed is delivered again, the records in flight come back (delivery count 2), nothing
    is lost."""
    topic = uid("t")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    group, member = uid("sg"), str(uuid.uuid4())
    old = leader_of(cluster, topic)
    ACCEPT = 1

    async def before(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        for _ in range(100):  # the share coordinator's topic is created on first use
            resp, ranges, _ = await share_fetch(conn, group, member, 0, tid)
            if resp.error_code == E.none and resp.responses and resp.responses[0].partitions[0].error_code == 0:
                break
            await asyncio.sleep(0.2)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(20):
            p.produce(topic, value=f"v{i}")
            p.flush(10)  # one batch per record
        resp, ranges, _ = await share_fetch(conn, group, member, 1, tid, max_wait_ms=3000, max_records=20)
        assert ranges == [(0, 19, 1)], resp
        resp, _, _ = await share_fetch(conn, group, member, 2, tid, acks=((0, 9, (ACCEPT,)),), max_records=1)
        assert resp.responses[0].partitions[0].acknowledge_error_code == E.none

    run(cluster.brokers[old].port, before)
    cluster.brokers[old].kill()
    new = leader_of(cluster, topic, exclude=old)

    async def after(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        got: list[tuple[int, int, int]] = []
        epoch = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(b - a + 1 for a, b, _ in got) < 10:
            resp, ranges, _ = await share_fetch(conn, group, member, epoch, tid, max_wait_ms=1000, max_records=50)
            if resp.error_code == E.none:
                epoch += 1
                got += ranges
            else:
                epoch = 0
                await asyncio.sleep(0.2)
        # the 10 in flight come back, delivered a second time; the 10 accepted never do (in one range or more: the
        # new leader's high watermark may trail for a moment)
        offsets = [o for a, b, _ in got for o in range(a, b + 1)]
        assert offsets == list(range(10, 20)) and {c for _, _, c in got} == {2}, got

    run(cluster.brokers[new].port, after)

    # a follower answers NOT_LEADER_OR_FOLLOWER naming the new leader and where it is (Kafka's CurrentLeader and
    # NodeEndpoints)
    follower = next(i for i in cluster.brokers if i not in (old, new))

    async def elsewhere(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        resp, _, _ = await share_fetch(conn, group, str(uuid.uuid4()), 0, tid)
        [part] = resp.responses[0].partitions
        assert part.error_code == E.not_leader_or_follower and part.current_leader.leader_id == new, resp
        assert [(n.node_id, n.port) for n in resp.node_endpoints] == [(new, cluster.brokers[new].port)], resp

    run(cluster.brokers[follower].port, elsewhere)


def test_share_group_offsets_describe_alter_delete(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"offsets.topic.num.partitions": "1"})
    topic = create_topic(b.bootstrap, 1)
    group, member = uid("sg"), str(uuid.uuid4())

    async def offsets(conn: KafkaConnection) -> list[tuple[int, int]]:
        resp = await conn.request(DescribeShareGroupOffsetsRequest(groups=(DescribeShareGroupOffsetsRequestGroup(
            group_id=group, topics=None),)), DescribeShareGroupOffsetsResponse)
        g = resp.groups[0]
        assert g.error_code == E.none, g
        return [(p.start_offset, p.lag) for t in g.topics for p in t.partitions]

    async def alter(conn: KafkaConnection, offset: int) -> Any:
        return await conn.request(AlterShareGroupOffsetsRequest(group_id=group, topics=(
            AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(
                AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset),)),)),
            AlterShareGroupOffsetsResponse)

    async def body(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        assert (await heartbeat(conn, group, member, 0, (topic,))).error_code == E.none
        await share_fetch(conn, group, member, 0, tid)
        produce(b.bootstrap, topic, [f"v{i}" for i in range(10)], 1)
        _, ranges, _ = await share_fetch(conn, group, member, 1, tid, max_wait_ms=2000)
        assert ranges == [(0, 9, 1)]
        await share_fetch(conn, group, member, 2, tid, acks=((0, 3, (1,)),), max_records=1)
        # SPSO 4, 6 records still to be done (KIP-1226's lag)
        assert await offsets(conn) == [(4, 6)]
        # not while the group has members
        assert (await alter(conn, 8)).error_code == E.non_empty_group
        await share_fetch(conn, group, member, -1, tid)
        assert (await heartbeat(conn, group, member, -1)).error_code == E.none
        resp = await alter(conn, 8)
        assert resp.error_code == E.none and resp.responses[0].partitions[0].error_code == E.none
        assert await offsets(conn) == [(8, 2)]
        # the leader reads the altered state: delivery starts at 8
        got: list[tuple[int, int, int]] = []
        for epoch in range(5):
            _, ranges, _ = await share_fetch(conn, group, member, epoch, tid, max_wait_ms=500)
            got += ranges
            if got:
                break
        assert got == [(8, 9, 1)], got
        await share_fetch(conn, group, member, -1, tid)
        # DeleteShareGroupOffsets: the start offset is unset until the next fetch (share.auto.offset.reset)
        resp = await conn.request(DeleteShareGroupOffsetsRequest(group_id=group, topics=(
            DeleteShareGroupOffsetsRequestTopic(topic_name=topic),)), DeleteShareGroupOffsetsResponse)
        assert resp.error_code == E.none and resp.responses[0].error_code == E.none
        assert await offsets(conn) == [(-1, -1)]

    run(b.port, body)


def test_console_share_consumer_accepts_releases_and_rejects(broker_factory: Callable[..., BrokerProcess]) -> None:
    """`kbus console-share-consumer`: released records are printed again by the next member, accepted and rejected
    ones never."""
    import subprocess
    import sys

    b = broker_factory({"offsets.topic.num.partitions": "1"})
    topic, group = create_topic(b.bootstrap, 1), uid("sg")
    kbus_bin = str(Path(sys.executable).parent / "kbus")

    def consume(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [kbus_bin, "console-share-consumer", "--bootstrap-server", b.bootstrap, "--topic", topic, "--group",
             group, "--formatter-property", "print.offset=true", "--timeout-ms", "20000", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # share.auto.offset.reset is latest: records sent until the first consumer has one
    first = consume("--max-messages", "1", "--release")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    sent = 0
    deadline = time.monotonic() + 30
    while first.poll() is None and time.monotonic() < deadline:
        p.produce(topic, value=f"v{sent}")
        p.flush(5)
        sent += 1
        time.sleep(0.3)
    out, err = first.communicate(timeout=30)
    released = out.splitlines()
    for i in range(5):  # more for the members that follow
        p.produce(topic, value=f"w{i}")
    p.flush(5)
    assert len(released) == 1 and "Processed a total of 1 messages" in err, (out, err)
    # the next member gets the released record again (the lowest available offset goes first), and accepts it
    second = consume("--max-messages", "1")
    out, err = second.communicate(timeout=60)
    assert out.splitlines() == released, (out, err)
    third = consume("--max-messages", "1", "--reject")
    out, err = third.communicate(timeout=60)
    rejected = out.splitlines()
    assert len(rejected) == 1 and rejected[0] not in released
    # nothing accepted or rejected comes back
    fourth = consume("--timeout-ms", "3000")
    out, err = fourth.communicate(timeout=60)
    assert not set(out.splitlines()) & {*released, *rejected}, out


SHARE_APIS = {
    76: ("ShareGroupHeartbeat", range(1, 2)), 77: ("ShareGroupDescribe", range(1, 2)),
    78: ("ShareFetch", range(1, 2)), 79: ("ShareAcknowledge", range(1, 2)),
    83: ("InitializeShareGroupState", range(0, 1)), 84: ("ReadShareGroupState", range(0, 1)),
    85: ("WriteShareGroupState", range(0, 1)), 86: ("DeleteShareGroupState", range(0, 1)),
    87: ("ReadShareGroupStateSummary", range(0, 1)), 90: ("DescribeShareGroupOffsets", range(0, 2)),
    91: ("AlterShareGroupOffsets", range(0, 1)), 92: ("DeleteShareGroupOffsets", range(0, 1)),
}


def test_fuzzed_share_frames_are_answered_or_refused(broker_factory: Callable[..., BrokerProcess]) -> None:
    """The share group APIs with fuzzed and null-filled frames: every one answered or refused, nothing logged as an
    unexpected error, the broker healthy."""
    from tests import fuzzing

    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    fuzzing.prepare(broker.bootstrap)
    host, port = broker.bootstrap.split(":")
    res = fuzzing.run(host, int(port), 800, 932, frame_timeout=15, apis={**fuzzing.APIS, **SHARE_APIS},
                      null_rate=0.5, mutate_rate=0.3)
    assert res.hangs == 0 and res.answered > 300 and not res.garbage_accepted, res.summary()
    assert broker.alive and fuzzing.healthy(host, int(port))
    assert fuzzing.broker_log_problems(broker.log_text()) == []


def test_group_configs_share_auto_offset_reset_and_lock_duration(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Kafka 4's group configs (IncrementalAlterConfigs/DescribeConfigs on a GROUP resource): with
    share.auto.offset.reset=earliest a new share-partition starts at the log start, share.delivery.count.limit
    applies to that group only; unknown keys and bad values are INVALID_CONFIG."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse

    b = broker_factory({"offsets.topic.num.partitions": "1"})
    topic, group, member = create_topic(b.bootstrap, 1), uid("sg"), str(uuid.uuid4())
    produce(b.bootstrap, topic, [f"v{i}" for i in range(5)], 1)

    async def alter(conn: KafkaConnection, **configs: str) -> Any:
        resp = await conn.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=32, resource_name=group, configs=tuple(
                AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items())),),
            validate_only=False), IncrementalAlterConfigsResponse)
        return resp.responses[0]

    async def body(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        assert (await alter(conn, share_auto_offset_reset="sometimes")).error_code == E.invalid_config
        assert (await alter(conn, share_no_such_key="1")).error_code == E.invalid_config
        r = await alter(conn, share_auto_offset_reset="earliest", share_delivery_count_limit="2")
        assert r.error_code == E.none, r
        resp = await conn.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=None),), include_synonyms=False,
            include_documentation=False), DescribeConfigsResponse)
        configs = {c.name: (c.value, c.config_source) for c in resp.results[0].configs}
        assert configs["share.auto.offset.reset"] == ("earliest", 8)  # GROUP_CONFIG
        assert configs["share.record.lock.duration.ms"] == ("30000", 5)  # DEFAULT_CONFIG: the broker's
        # the 5 records sent before anyone fetched are delivered (latest would skip them)
        _, ranges, _ = await share_fetch(conn, group, member, 0, tid, max_wait_ms=2000)
        assert ranges == [(0, 4, 1)], ranges
        _, ranges, _ = await share_fetch(conn, group, member, 1, tid, acks=((0, 4, (2,)),), max_wait_ms=2000)
        assert ranges == [(0, 4, 2)], ranges
        # the group's delivery count limit is 2: released again, they are archived
        _, ranges, _ = await share_fetch(conn, group, member, 2, tid, acks=((0, 4, (2,)),), max_wait_ms=300)
        assert ranges == [], ranges

    run(b.port, body)


def test_share_isolation_level_read_committed(broker_factory: Callable[..., BrokerProcess]) -> None:
    """share.isolation.level=read_committed (Kafka 4.4's group config): a share group delivers no record of an
    aborted transaction and nothing past the last stable offset (an open transaction's records wait for its
    commit); a read_uncommitted group on the same partition gets everything."""
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse

    b = broker_factory({"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"})
    topic, committed, uncommitted = create_topic(b.bootstrap, 1), uid("sg"), uid("sg")
    member = str(uuid.uuid4())

    async def configure(conn: KafkaConnection) -> None:
        for group, level in ((committed, "read_committed"), (uncommitted, "read_uncommitted")):
            resp = await conn.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
                resource_type=32, resource_name=group, configs=(
                    AlterableConfig(name="share.isolation.level", config_operation=0, value=level),
                    AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest"))),),
                validate_only=False), IncrementalAlterConfigsResponse)
            assert resp.responses[0].error_code == E.none, resp

    run(b.port, configure)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": uid("txn"), "linger.ms": 0})
    p.init_transactions(30)

    def txn(values: list[str], end: str) -> None:
        p.begin_transaction()
        for v in values:
            p.produce(topic, v.encode(), partition=0)
        p.flush(30)
        if end == "commit":
            p.commit_transaction(30)
        elif end == "abort":
            p.abort_transaction(30)

    txn(["c0", "c1"], "commit")  # offsets 0, 1; marker 2
    txn(["a0", "a1"], "abort")  # 3, 4; marker 5
    txn(["c2"], "commit")  # 6; marker 7
    txn(["open"], "open")  # 8: the LSO stays at 8 until it commits

    async def values(conn: KafkaConnection, group: str, epoch: int, tid: uuid.UUID,
                     acks: tuple[tuple[int, int, tuple[int, ...]], ...] = ()) -> tuple[list[tuple[int, int, int]],
                                                                                       set[str]]:
        resp, ranges, _ = await share_fetch(conn, group, member, epoch, tid, acks=acks, max_wait_ms=1000)
        acquired = {o for first, last, _ in ranges for o in range(first, last + 1)}
        got = set()
        for t in resp.responses:
            for part in t.partitions:
                data = part.records or b""
                for h in iter_complete_batches(data):
                    if not h.is_control:  # the transaction markers
                        got |= {r.value.decode() for r in decode_records(data, h) if r.offset in acquired and r.value}
        return ranges, got

    async def body(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        ranges, got = await values(conn, committed, 0, tid)
        assert got == {"c0", "c1", "c2"}, (ranges, got)
        assert all(last < 8 for _, last, _ in ranges), ranges  # nothing past the LSO
        assert not any(first <= o <= last for first, last, _ in ranges for o in (3, 4)), ranges
        ack = tuple((first, last, (1,)) for first, last, _ in ranges)
        # the open transaction commits: its record is delivered now, the aborted ones never
        p.commit_transaction(30)
        ranges, got = await values(conn, committed, 1, tid, ack)
        assert got == {"open"}, (ranges, got)
        # read_uncommitted: everything, aborted records included
        _, got = await values(conn, uncommitted, 0, tid)
        assert {"c0", "c1", "a0", "a1", "c2", "open"} <= got, got

    run(b.port, body)


def test_closed_connection_releases_its_share_session_records(broker_factory: Callable[..., BrokerProcess]) -> None:
    """A share consumer's connection closes while it holds records: they are available to the other members at
    once (Kafka's SharePartitionManager releases the session on disconnect), not after the 30 s lock."""
    b = broker_factory({"offsets.topic.num.partitions": "1", "group.share.record.lock.duration.ms": "30000"})
    topic, group = create_topic(b.bootstrap, 1), uid("sg")
    first, second = str(uuid.uuid4()), str(uuid.uuid4())

    async def holder(conn: KafkaConnection) -> uuid.UUID:
        tid = await topic_id(conn, topic)
        _, ranges, _ = await share_fetch(conn, group, first, 0, tid, max_wait_ms=300)  # SPSO at the end (latest)
        assert ranges == []
        produce(b.bootstrap, topic, [f"v{i}" for i in range(5)], 1)
        _, ranges, _ = await share_fetch(conn, group, first, 1, tid, max_wait_ms=3000)
        assert ranges == [(0, 4, 1)], ranges
        return tid  # run() closes this connection without a final ShareFetch

    tid = run(b.port, holder)

    async def other(conn: KafkaConnection) -> None:
        started = time.monotonic()
        _, ranges, _ = await share_fetch(conn, group, second, 0, tid, max_wait_ms=3000)
        assert ranges == [(0, 4, 2)], ranges
        assert time.monotonic() - started < 10
        # the first member's session is gone with its connection
        resp, _, _ = await share_fetch(conn, group, first, 2, tid)
        assert resp.error_code == E.share_session_not_found, resp

    run(b.port, other)
