"""Classic and consumer-protocol members in one group (Kafka 4's online upgrade/downgrade,
group.consumer.migration.policy), on the coordinator's fake clock and in-memory __consumer_offsets."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.server.coordinator.consumer_protocol import parse_assignment, parse_subscription, serialize_assignment
from kbus.server.coordinator.group import GroupState, JoinResult
from kbus.server.coordinator.records import ConsumerGroupKey, GroupKey
from tests.unit.test_consumer_group_protocol import CG


def sub(topics: tuple[str, ...] = ("t",), owned: dict[str, set[int]] | None = None) -> bytes:
    """A ConsumerProtocol Subscription v1 (topics, no user data, owned partitions)."""
    import struct

    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for t, ps in owned.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in sorted(ps))
    return out


def assigned(data: bytes) -> set[int]:
    return set(parse_assignment(data).get("t", frozenset()))


async def join(h: CG, member_id: str, owned: set[int] | None = None) -> JoinResult:
    task = h.join("g", member_id, protocols=[("range", sub(owned={"t": owned} if owned else None))])
    await h.tick()
    return await task


async def classic_pair(h: CG) -> tuple[str, str]:
    """A classic group of a and b, Stable at generation 2, a holding t-0..2 and b t-3..5."""
    first = await h.join("g")
    assert first.error == E.member_id_required
    a = first.member_id
    r = await join(h, a)
    assert r.generation_id == 1
    await h.sync(a, 1, {a: serialize_assignment({"t": frozenset(range(6))}, 1)})
    b = (await h.join("g")).member_id
    tb = h.join("g", b, protocols=[("range", sub())])
    await h.tick()
    ta = h.join("g", a, protocols=[("range", sub(owned={"t": set(range(6))}))])
    await h.tick()
    ra, rb = await ta, await tb
    assert ra.generation_id == rb.generation_id == 2
    leader = a if ra.leader_id == a else b
    other = b if leader == a else a
    fsync = h.sync(other, 2)
    await h.sync(leader, 2, {a: serialize_assignment({"t": frozenset({0, 1, 2})}, 1),
                             b: serialize_assignment({"t": frozenset({3, 4, 5})}, 1)})
    await fsync
    assert h.coord.groups["g"].state is GroupState.STABLE
    return a, b


def test_subscription_and_assignment_bytes() -> None:
    s = parse_subscription(sub(("t", "u"), {"t": {1, 2}}))
    assert s.topics == ("t", "u") and s.owned == {"t": frozenset({1, 2})}
    data = serialize_assignment({"t": frozenset({2, 0})}, 3)
    assert data == b"\x00\x03" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" \
        + b"\x00\x00\x00\x02" + b"\xff\xff\xff\xff"
    assert parse_assignment(data) == {"t": frozenset({0, 2})}


def test_upgrade_converts_the_classic_group_and_moves_its_members() -> None:
    async def body(h: CG) -> None:
        a, b = await classic_pair(h)
        # a consumer-protocol member joins: the group becomes a consumer group, a and b keep their partitions
        rc = await h.hb("c", 0)
        assert rc.error == E.none and rc.member_epoch == 3 and not rc.assignment
        group = h.coord.consumer_groups["g"]
        assert group.members[a].classic is not None and group.members[a].member_epoch == 2
        assert group.owner_of("t", 0) == a and group.owner_of("t", 5) == b
        assert h.coord.groups["g"].state is GroupState.EMPTY  # kept, for the offsets
        keys = h.log.record_keys()
        assert (GroupKey("g"), True) in keys  # the classic group's tombstone
        assert any(isinstance(k, ConsumerGroupKey) and k.member_id == a for k, _ in keys)
        # the classic members are told to join again
        assert h.coord.heartbeat("g", 2, a, None) == E.rebalance_in_progress
        assert h.coord.heartbeat("g", 1, a, None) == E.illegal_generation
        # a (cooperative: it still owns 0..2) joins: it must revoke one partition first
        ra = await join(h, a, owned={0, 1, 2})
        assert ra.error == E.none and ra.generation_id == 2 and ra.leader_id == "" and not ra.members
        sa = await h.sync(a, 2)
        assert sa.error == E.none and len(assigned(sa.assignment)) == 2
        assert h.coord.heartbeat("g", 2, a, None) == E.rebalance_in_progress  # revoking: join again
        ra = await join(h, a, owned=assigned(sa.assignment))
        assert ra.generation_id == 3
        assert h.coord.heartbeat("g", 3, a, None) == E.none
        # b (eager: it gave up everything before joining) is at the new epoch at once
        rb = await join(h, b)
        assert rb.generation_id == 3
        sb = await h.sync(b, 3)
        assert len(assigned(sb.assignment)) == 2
        # c gets what a and b released
        rc = await h.hb("c", 3, owned={})
        assert rc.member_epoch == 3 and len(rc.assignment.get("t", ())) == 2 if rc.assignment else False
        owners = {group.owner_of("t", p) for p in range(6)}
        assert owners == {a, b, "c"}
        assert group.state.value == "Stable"
        # offsets: a classic member commits with its generation (its member epoch), v8 or older
        from kbus.server.coordinator.records import OffsetAndMetadata

        om = {("t", 0): OffsetAndMetadata(offset=5, leader_epoch=-1, metadata="", commit_timestamp=0)}
        assert await h.coord.commit_offsets("g", a, None, 3, om, api_version=8) == {("t", 0): E.none}
        assert await h.coord.commit_offsets("g", a, None, 2, om, api_version=8) == {
            ("t", 0): E.illegal_generation}
        # a classic member leaves: the group epoch moves, the consumer member takes over
        top, errors = h.coord.leave_group("g", [(a, None), (b, None), ("c", None), ("nobody", None)])
        # c is not a classic member: UNKNOWN_MEMBER_ID as in Kafka; one epoch bump for both leaving
        assert (top, errors) == (E.none, [E.none, E.none, E.unknown_member_id, E.unknown_member_id])
        await h.tick()
        assert set(group.members) == {"c"} and group.group_epoch == 4

    run_cg(body)


def test_a_classic_member_joins_a_consumer_group_and_the_group_survives_a_reload() -> None:
    async def body(h: CG) -> None:
        await h.hb("c", 0)
        first = await h.join("g")
        assert first.error == E.member_id_required
        r = await join(h, first.member_id)
        assert r.error == E.none and r.generation_id == 2 and r.protocol_name == "range"
        s = await h.sync(first.member_id, 2)
        assert s.error == E.none and assigned(s.assignment) == set()  # c still owns everything
        assert h.coord.heartbeat("g", 2, first.member_id, None) == E.none  # waiting on c
        rc = await h.hb("c", 1, owned={"t": frozenset(range(6))})
        await h.hb("c", 1, owned=rc.assignment)
        # c released its partitions: the classic member is told to join again to get them
        assert h.coord.heartbeat("g", 2, first.member_id, None) == E.rebalance_in_progress
        r = await join(h, first.member_id)
        s = await h.sync(first.member_id, 2)
        assert len(assigned(s.assignment)) == 3
        # the ClassicMemberMetadata (tag 0) is in the records: another coordinator has the same member
        other = CG(log=h.log)
        other.coord.topic_image = h.coord.topic_image
        await other.elect_all()
        assert other.coord.consumer_groups["g"].members == h.coord.consumer_groups["g"].members
        # a protocol type other than consumer is refused
        bad = h.coord.join_group("g", "", None, require_known_member_id=True, supports_skip_assignment=False,
                                 client_id="x", client_host="/h", rebalance_timeout_ms=1000,
                                 session_timeout_ms=10_000, protocol_type="connect", protocols=[("x", b"")])
        assert (await bad).error == E.inconsistent_group_protocol

    run_cg(body)


async def upgraded(h: CG) -> tuple[str, str]:
    """a and b classic, c consumer-protocol, all reconciled at epoch 3."""
    a, b = await classic_pair(h)
    await h.hb("c", 0)
    for m in (a, b):
        await join(h, m)  # eager: owning nothing
        await h.sync(m, 3)
    rc = await h.hb("c", 3, owned={})
    assert len(rc.assignment.get("t", ())) == 2 if rc.assignment else False
    return a, b


def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    async def body(h: CG) -> None:
        a, b = await upgraded(h)
        group = h.coord.consumer_groups["g"]
        kept = {m: set(group.members[m].assigned["t"]) for m in (a, b)}
        r = await h.hb("c", -1)
        assert r.error == E.none
        assert "g" not in h.coord.consumer_groups
        classic = h.coord.groups["g"]
        assert classic.state is GroupState.PREPARING_REBALANCE and classic.generation_id == 3
        assert {m: assigned(classic.members[m].assignment) for m in (a, b)} == kept
        keys = h.log.record_keys()
        assert keys[-1] == (GroupKey("g"), False)  # the classic group written after the consumer group's tombstones
        assert (ConsumerGroupKey(3, "g", None), True) in keys  # the group epoch's tombstone
        # the classic members join again through the classic protocol and a leader assigns
        assert h.coord.heartbeat("g", 3, a, None) == E.rebalance_in_progress
        ta = h.join("g", a, protocols=[("range", sub(owned={"t": kept[a]}))])
        tb = h.join("g", b, protocols=[("range", sub(owned={"t": kept[b]}))])
        await h.tick()
        ra, rb = await ta, await tb
        assert ra.generation_id == rb.generation_id == 4
        leader = ra if ra.leader_id == a else rb
        assert len(leader.members) == 2
        other = b if leader.member_id == a else a
        fsync = h.sync(other, 4)
        await h.sync(leader.member_id, 4, {a: serialize_assignment({"t": frozenset({0, 1, 2})}, 1),
                                           b: serialize_assignment({"t": frozenset({3, 4, 5})}, 1)})
        assert assigned((await fsync).assignment) in ({0, 1, 2}, {3, 4, 5})
        assert classic.state is GroupState.STABLE

    run_cg(body)


def test_no_downgrade_with_policy_upgrade() -> None:
    async def body(h: CG) -> None:
        a, _b = await upgraded(h)
        await h.hb("c", -1)
        group = h.coord.consumer_groups["g"]
        assert "c" not in group.members and group.members[a].classic is not None
        assert h.coord.heartbeat("g", 3, a, None) == E.rebalance_in_progress  # the epoch moved: join again
        assert (await join(h, a)).generation_id == 4

    run_cg(body, consumer_migration_policy="upgrade")


def test_classic_members_that_do_not_sync_or_rejoin_in_time_are_fenced() -> None:
    async def body(h: CG) -> None:
        await h.hb("c", 0)
        first = await h.join("g")
        x = first.member_id
        tx = h.join("g", x, protocols=[("range", sub())], rebalance=3000)
        await h.tick()
        assert (await tx).error == E.none
        group = h.coord.consumer_groups["g"]
        await h.tick(3100)  # joined but never synced within its rebalance timeout: fenced
        assert x not in group.members
        # a member told to join again (its heartbeat) that does not is fenced too
        second = await h.join("g")
        y = second.member_id
        ty = h.join("g", y, protocols=[("range", sub())], rebalance=3000)
        await h.tick()
        assert (await ty).error == E.none
        assert (await h.sync(y, group.members[y].member_epoch)).error == E.none
        await h.hb("c", group.members["c"].member_epoch, subscribed_topic_names=("t", "u"))  # new group epoch
        assert h.coord.heartbeat("g", group.members[y].member_epoch, y, None) == E.rebalance_in_progress
        await h.tick(2000)
        assert h.coord.heartbeat("g", group.members[y].member_epoch, y, None) == E.rebalance_in_progress
        await h.tick(1100)  # 3 s after the first REBALANCE_IN_PROGRESS (the timer is not pushed back)
        assert y not in group.members

    run_cg(body)


def test_policy_disabled_keeps_the_classic_group() -> None:
    async def body(h: CG) -> None:
        a, _b = await classic_pair(h)
        rc = await h.hb("c", 0)
        assert rc.error == E.group_id_not_found
        assert "g" not in h.coord.consumer_groups
        assert h.coord.heartbeat("g", 2, a, None) == E.none

    run_cg(body, consumer_migration_policy="disabled")


def test_migration_policy_is_validated_at_start() -> None:
    cfg = KafkaConfig.from_properties({"group.consumer.migration.policy": "Upgrade"})  # case-insensitive
    assert cfg.group_consumer_migration_policy == "Upgrade"
    with pytest.raises(ConfigError):
        KafkaConfig.from_properties({"group.consumer.migration.policy": "sideways"})
    assert dataclasses.fields(cfg)  # the key is one of the broker's


def run_cg(body: Any, **config: Any) -> None:
    async def main() -> None:
        h = CG(**config)
        await h.elect_all()
        await body(h)
        await h.coord.shutdown()

    asyncio.run(main())
