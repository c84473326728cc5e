"""Kafka 4's online migration between the classic and the consumer group protocols (group.consumer.migration.policy)
against a real kbus broker with librdkafka (confluent-kafka) members, each in its own process
(tests/group_member.py): a rolling upgrade from `group.protocol=classic` to `consumer` while records flow.
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v9.response import JoinGroupResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.sync_group.v5.response import SyncGroupResponse

from kbus.protocol.client import KafkaConnection
from kbus.server.coordinator.consumer_protocol import parse_assignment, serialize_assignment
from tests.group_member import MemberProcess, wait_until

# the same broker (a short consumer-group session) as the consumer group protocol's tests
from tests.integration.test_consumer_group_protocol import kbroker, owned_sets, partitioned  # noqa: F401 - a fixture
from tests.integration.test_consumer_groups import create_topic, produce, uid
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration


def group_type(broker: BrokerProcess, group: str) -> str | None:
    """The group's type as ListGroups v5 names it (a raw request)."""

    async def main() -> str | None:
        conn = KafkaConnection("127.0.0.1", broker.port, "migration-test")
        try:
            listed = await conn.request(ListGroupsRequest(states_filter=(), types_filter=()), ListGroupsResponse)
        finally:
            await conn.close()
        return next((str(g.group_type) for g in listed.groups if g.group_id == group), None)

    return asyncio.run(main())


def test_rolling_upgrade_from_classic_to_consumer_members(
    kbroker: BrokerProcess, members: list[MemberProcess]  # noqa: F811
) -> None:
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 6)
    group = uid("g")
    classic = [MemberProcess(bootstrap, group, topic, name=f"classic-{n}") for n in ("a", "b")]
    members.extend(classic)
    wait_until(lambda: partitioned(classic, 6), 30, "2 classic members to own the 6 partitions")
    produced = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, produced, 6)
    seen = lambda: {v for m in members for v in m.values()}  # noqa: E731
    wait_until(lambda: set(produced) <= seen(), 30, "the first 300 values")

    # the rolling upgrade: two consumer-protocol members join; the group becomes a consumer group and the four
    # members share the partitions (the classic ones assigned by the broker through JoinGroup/SyncGroup)
    modern = [MemberProcess(bootstrap, group, topic, name=f"consumer-{n}", protocol="consumer") for n in ("c", "d")]
    members.extend(modern)
    wait_until(lambda: partitioned(members, 6), 45, "the 2 classic and 2 consumer members to share the partitions")
    batch = [f"w{i}" for i in range(300)]
    produce(bootstrap, topic, batch, 6)
    produced += batch
    wait_until(lambda: set(produced) <= seen(), 30, "the second 300 values")

    # the classic members leave (LeaveGroup): the consumer members take everything
    for m in classic:
        m.stop()
    wait_until(lambda: partitioned(modern, 6), 45, "the 2 consumer members to own the 6 partitions")
    batch = [f"x{i}" for i in range(300)]
    produce(bootstrap, topic, batch, 6)
    produced += batch
    wait_until(lambda: set(produced) <= seen(), 30, "the third 300 values")

    # nothing lost; duplicates only from offsets not yet committed when a partition moved (auto-commit every
    # 200 ms, stored only after processing): a bounded window, never a partition re-read from the start
    counts = Counter(v for m in members for v in m.values())
    assert set(counts) == set(produced)
    duplicated = sum(n - 1 for n in counts.values())
    assert duplicated <= 150, f"{duplicated} duplicates"
    assert sorted(len(s) for s in owned_sets(modern)) == [3, 3]


def test_downgrade_when_the_consumer_member_leaves(kbroker: BrokerProcess, members: list[MemberProcess]) -> None:  # noqa: F811
    """A consumer-protocol member joins a classic group (upgrade), then leaves: the group is a classic group again
    (group.consumer.migration.policy=bidirectional) and its classic members rebalance among themselves."""
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = uid("g")
    classic = [MemberProcess(bootstrap, group, topic, name=f"classic-{n}") for n in ("a", "b")]
    members.extend(classic)
    wait_until(lambda: partitioned(classic, 4), 30, "2 classic members to own the 4 partitions")
    modern = MemberProcess(bootstrap, group, topic, name="consumer-c", protocol="consumer")
    members.append(modern)
    wait_until(lambda: partitioned(members, 4), 45, "the 3 members to share the partitions")
    assert group_type(kbroker, group) == "consumer"
    produced = [f"v{i}" for i in range(200)]
    produce(bootstrap, topic, produced, 4)
    seen = lambda: {v for m in members for v in m.values()}  # noqa: E731
    wait_until(lambda: set(produced) <= seen(), 30, "the first 200 values")
    modern.stop()
    wait_until(lambda: partitioned(classic, 4), 45, "the 2 classic members to own the 4 partitions again")
    wait_until(lambda: group_type(kbroker, group) == "classic", 15, "the group to be listed as classic")
    batch = [f"w{i}" for i in range(200)]
    produce(bootstrap, topic, batch, 4)
    produced += batch
    wait_until(lambda: set(produced) <= seen(), 30, "the second 200 values")
    counts = Counter(v for m in members for v in m.values())
    assert set(counts) == set(produced)
    assert sum(n - 1 for n in counts.values()) <= 100


# ---------------------------------------------------------------- raw frames: JoinGroup/SyncGroup/Heartbeat of a
# classic member in a consumer group, both conversions, through the wire codec of a real broker

RETRIABLE = {E.coordinator_not_available, E.coordinator_load_in_progress, E.not_coordinator}


def v1_subscription(topic: str, owned: set[int]) -> bytes:
    """ConsumerProtocol Subscription v1: topics, null user data, owned partitions."""
    out = struct.pack(">hih", 1, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)
    if not owned:
        return out + struct.pack(">i", 0)
    out += struct.pack(">ih", 1, len(topic)) + topic.encode() + struct.pack(">i", len(owned))
    return out + b"".join(struct.pack(">i", p) for p in sorted(owned))


class Classic:
    """One classic member speaking raw JoinGroup v9 / SyncGroup v5 / Heartbeat v4."""

    def __init__(self, conn: KafkaConnection, group: str, topic: str) -> None:
        self.conn, self.group, self.topic = conn, group, topic
        self.member_id, self.generation = "", -1

    async def join(self, owned: set[int]) -> Any:
        while True:
            resp = await self.conn.request(JoinGroupRequest(
                group_id=self.group, session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=v1_subscription(self.topic, owned)),),
            ), JoinGroupResponse)
            if resp.error_code in RETRIABLE:
                await asyncio.sleep(0.05)
                continue
            self.member_id = resp.member_id
            if resp.error_code == E.member_id_required:
                continue
            assert resp.error_code == E.none, resp
            self.generation = resp.generation_id
            return resp

    async def sync(self, assignments: dict[str, set[int]] | None = None) -> set[int]:
        resp = await self.conn.request(SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range",
            assignments=tuple(SyncGroupRequestAssignment(member_id=m, assignment=serialize_assignment(
                {self.topic: frozenset(ps)}, 1)) for m, ps in (assignments or {}).items()),
        ), SyncGroupResponse)
        assert resp.error_code == E.none, resp
        return set(parse_assignment(resp.assignment).get(self.topic, frozenset()))

    async def heartbeat(self) -> int:
        resp = await self.conn.request(HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
        ), HeartbeatResponse)
        return int(resp.error_code)


async def consumer_heartbeat(conn: KafkaConnection, group: str, member: str, epoch: int, topic: str,
                             owned: tuple[Any, ...] | None) -> Any:
    return await conn.request(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout=timedelta(seconds=10),
        subscribed_topic_names=(topic,) if epoch == 0 else None, topic_partitions=owned,
    ), ConsumerGroupHeartbeatResponse)


def test_raw_frames_classic_member_in_a_consumer_group_and_both_conversions(kbroker: BrokerProcess) -> None:  # noqa: F811
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = uid("g")

    async def main() -> None:
        conn = KafkaConnection("127.0.0.1", kbroker.port, "migration-raw")
        try:
            await conn.request(FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse)
            x = Classic(conn, group, topic)
            # a classic group: x leads generation 1 and assigns itself everything
            assert (await x.join(set())).leader == x.member_id and x.generation == 1
            assert await x.sync({x.member_id: {0, 1, 2, 3}}) == {0, 1, 2, 3}
            # the upgrade: a consumer-protocol member joins; x keeps its partitions, c waits for them
            c = await consumer_heartbeat(conn, group, "c-member-id-0000000001", 0, topic, ())
            assert c.error_code == E.none and c.member_epoch == 2 and not c.assignment.topic_partitions
            assert await _group_type(conn, group) == "consumer"
            assert await x.heartbeat() == E.rebalance_in_progress
            # x joins again still owning everything (cooperative): generation = its epoch, no leader, revoke first
            r = await x.join({0, 1, 2, 3})
            assert (r.generation_id, r.leader, r.members) == (1, "", ())
            kept = await x.sync()
            assert len(kept) == 2
            assert await x.heartbeat() == E.rebalance_in_progress  # revoked: join again
            r = await x.join(kept)
            assert r.generation_id == 2 and await x.sync() == kept and await x.heartbeat() == E.none
            c = await consumer_heartbeat(conn, group, "c-member-id-0000000001", 2, topic, ())
            assert c.error_code == E.none and c.assignment is not None
            tid = c.assignment.topic_partitions[0].topic_id
            assert set(c.assignment.topic_partitions[0].partitions) == {0, 1, 2, 3} - kept
            # the downgrade: c leaves, x is the classic group's only member and rebalances through it
            left = await consumer_heartbeat(conn, group, "c-member-id-0000000001", -1, topic, None)
            assert left.error_code == E.none and tid is not None
            assert await _group_type(conn, group) == "classic"
            assert await x.heartbeat() == E.rebalance_in_progress
            r = await x.join(kept)
            assert r.leader == x.member_id and r.generation_id == 3
            assert await x.sync({x.member_id: {0, 1, 2, 3}}) == {0, 1, 2, 3}
            assert await x.heartbeat() == E.none
        finally:
            await conn.close()

    asyncio.run(main())


async def _group_type(conn: KafkaConnection, group: str) -> str | None:
    listed = await conn.request(ListGroupsRequest(states_filter=(), types_filter=()), ListGroupsResponse)
    return next((str(g.group_type) for g in listed.groups if g.group_id == group), None)
