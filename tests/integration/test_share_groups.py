"""Share groups (KIP-932) against a real kbus broker with raw kio frames: ShareGroupHeartbeat (join, heartbeat,
fencing, leave), ShareGroupDescribe, ListGroups' share type, the group's records in __consumer_offsets surviving a
broker restart, and ShareFetch/ShareAcknowledge's share-partition state machine (acquisition locks, delivery
counts, ACCEPT/RELEASE/REJECT, share sessions)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse

from kbus.protocol.client import KafkaConnection
from tests.integration.test_consumer_groups import create_topic, uid
from tests.kbus_processes import BrokerProcess

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
            # Kafka's simple share assignor: every member gets every partition
            assert assigned(r) == {tid: {0, 1}}
            epochs.append(r.member_epoch)
        assert epochs == [1, 2, 3]
        # the first two members catch up with the group's epoch on their next heartbeat
        r = await heartbeat(conn, group, members[0], 1)
        assert r.error_code == E.none and r.member_epoch == 3 and assigned(r) == {tid: {0, 1}}
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
    assert group_epoch == 4 and member_epochs == [2, 3]

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
