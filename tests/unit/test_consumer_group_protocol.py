"""The consumer group protocol (KIP-848) sans I/O: the assignors, the reconciliation state machine (Kafka's
CurrentAssignmentBuilder) and the coordinator's ConsumerGroupHeartbeat flow on a fake clock."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.assignors import MemberSpec, range_assign, uniform_assign
from kbus.server.coordinator.consumer_group import (
    ConsumerGroupMember,
    MemberState,
    TopicImage,
    reconcile,
)
from kbus.server.coordinator.consumer_membership import HeartbeatRequest, HeartbeatResponse
from tests.unit.test_group_coordinator import Harness

# ---------------------------------------------------------------- assignors


def flat(assignment: dict[str, dict[str, frozenset[int]]]) -> list[tuple[str, int]]:
    return sorted((t, p) for a in assignment.values() for t, ps in a.items() for p in ps)


def counts(assignment: dict[str, dict[str, frozenset[int]]]) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in assignment.values())


def test_uniform_balances_and_is_sticky() -> None:
    topics = {"t": 6}
    members = {m: MemberSpec(frozenset({"t"})) for m in ("a", "b", "c")}
    first = uniform_assign(members, topics)
    assert flat(first) == [("t", p) for p in range(6)]
    assert counts(first) == [2, 2, 2]
    # a fourth member: only what it needs moves, the others keep the rest
    members = {m: MemberSpec(frozenset({"t"}), first.get(m, {})) for m in ("a", "b", "c", "d")}
    second = uniform_assign(members, topics)
    assert counts(second) == [1, 1, 2, 2]
    for m in ("a", "b", "c"):
        assert second[m]["t"] <= first[m]["t"]
    # a member leaves: its partitions go to the others, nobody else loses any
    members = {m: MemberSpec(frozenset({"t"}), second[m]) for m in ("a", "b", "d")}
    third = uniform_assign(members, topics)
    assert counts(third) == [2, 2, 2]
    for m in ("a", "b", "d"):
        assert second[m].get("t", frozenset()) <= third[m]["t"]


def test_uniform_heterogeneous_subscriptions() -> None:
    topics = {"x": 3, "y": 3}
    members = {"a": MemberSpec(frozenset({"x"})), "b": MemberSpec(frozenset({"x", "y"})),
               "c": MemberSpec(frozenset({"y"}))}
    out = uniform_assign(members, topics)
    assert flat(out) == [("x", p) for p in range(3)] + [("y", p) for p in range(3)]
    assert set(out["a"]) <= {"x"} and set(out["c"]) <= {"y"}
    assert counts(out) == [2, 2, 2]


@settings(max_examples=60, deadline=None)
@given(
    n_members=st.integers(1, 6),
    partitions=st.lists(st.integers(1, 8), min_size=1, max_size=3),
    seed=st.randoms(use_true_random=False),
)
def test_uniform_properties(n_members: int, partitions: list[int], seed: Any) -> None:
    topics = {f"t{i}": n for i, n in enumerate(partitions)}
    names = sorted(topics)
    members = {f"m{i}": MemberSpec(frozenset(seed.sample(names, seed.randint(1, len(names)))))
               for i in range(n_members)}
    out = uniform_assign(members, topics)
    subscribed = {t for s in members.values() for t in s.subscribed}
    # every subscribed partition exactly once, only to a subscriber
    assert flat(out) == sorted((t, p) for t in subscribed for p in range(topics[t]))
    for m, a in out.items():
        assert set(a) <= members[m].subscribed
    if all(s.subscribed == members["m0"].subscribed for s in members.values()):
        assert max(counts(out)) - min(counts(out)) <= 1


def test_range_is_co_partitioned() -> None:
    topics = {"x": 5, "y": 5}
    members = {m: MemberSpec(frozenset({"x", "y"})) for m in ("b", "a")}
    out = range_assign(members, topics)
    assert out["a"] == {"x": frozenset({0, 1, 2}), "y": frozenset({0, 1, 2})}
    assert out["b"] == {"x": frozenset({3, 4}), "y": frozenset({3, 4})}


# ---------------------------------------------------------------- reconciliation


def A(**topics: set[int]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in topics.items()}


def test_revocation_before_assignment() -> None:
    owners: dict[tuple[str, int], str] = {("t", 0): "a", ("t", 1): "a", ("t", 2): "b"}
    a = ConsumerGroupMember("a", member_epoch=1, assigned=A(t={0, 1}))
    # target moves t-1 from a to b: a must revoke first, staying at epoch 1
    a2 = reconcile(a, 2, A(t={0}), {"t"}, lambda t, p: owners.get((t, p)), A(t={0, 1}))
    assert a2.state is MemberState.UNREVOKED_PARTITIONS
    assert a2.member_epoch == 1 and a2.assigned == A(t={0}) and a2.pending_revocation == A(t={1})
    # b wants t-1 but a still owns it: b moves to epoch 2 without it (unreleased)
    b = ConsumerGroupMember("b", member_epoch=1, assigned=A(t={2}))
    b2 = reconcile(b, 2, A(t={1, 2}), {"t"}, lambda t, p: owners.get((t, p)), A(t={2}))
    assert b2.state is MemberState.UNRELEASED_PARTITIONS and b2.member_epoch == 2 and b2.assigned == A(t={2})
    # a heartbeats still owning t-1: nothing changes
    assert reconcile(a2, 2, A(t={0}), {"t"}, lambda t, p: owners.get((t, p)), A(t={0, 1})) is a2
    # a no longer lists t-1: it reaches epoch 2, the partition is free
    a3 = reconcile(a2, 2, A(t={0}), {"t"}, lambda t, p: owners.get((t, p)), A(t={0}))
    assert a3.state is MemberState.STABLE and a3.member_epoch == 2 and a3.previous_member_epoch == 1
    del owners[("t", 1)]
    b3 = reconcile(b2, 2, A(t={1, 2}), {"t"}, lambda t, p: owners.get((t, p)), A(t={2}))
    assert b3.state is MemberState.STABLE and b3.assigned == A(t={1, 2})


def test_partial_heartbeat_keeps_revocation_pending() -> None:
    a = ConsumerGroupMember("a", member_epoch=1, assigned=A(t={0, 1}))
    # owned None (a heartbeat that does not list partitions) counts as still owning them
    a2 = reconcile(a, 2, A(t={0}), {"t"}, lambda t, p: None, None)
    assert a2.state is MemberState.UNREVOKED_PARTITIONS


# ---------------------------------------------------------------- the coordinator's heartbeat flow


class CG(Harness):
    def __init__(self, **config: Any) -> None:
        super().__init__(consumer_session_timeout_ms=6000, consumer_heartbeat_interval_ms=500, **config)
        self.set_topics({"t": 6})

    def set_topics(self, counts: dict[str, int]) -> None:
        ids = {t: uuid.uuid5(uuid.NAMESPACE_DNS, t) for t in counts}
        self.coord.topic_image = TopicImage(self.coord.topic_image.version + 1, counts, ids,
                                            {v: k for k, v in ids.items()})

    async def hb(self, member_id: str, epoch: int, **kw: Any) -> HeartbeatResponse:
        fields: dict[str, Any] = {"group_id": "g", "member_id": member_id, "member_epoch": epoch}
        if epoch == 0:
            fields.update(rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        fields.update(kw)
        return await self.coord.consumer_group_heartbeat(HeartbeatRequest(**fields))


def run(body: Any) -> None:
    async def main() -> None:
        h = CG()
        await h.elect_all()
        await body(h)

    asyncio.run(main())


def total(resp: HeartbeatResponse) -> set[int]:
    return set((resp.assignment or {}).get("t", frozenset()))


def test_join_revoke_then_assign() -> None:
    async def body(h: CG) -> None:
        r1 = await h.hb("a", 0)
        assert r1.error == E.none and r1.member_epoch == 1 and total(r1) == set(range(6))
        assert r1.heartbeat_interval_ms == 500
        r2 = await h.hb("b", 0)
        # b is in epoch 2 but gets nothing until a revokes
        assert r2.member_epoch == 2 and total(r2) == set()
        ra = await h.hb("a", 1, owned=A(t=set(range(6))))
        assert ra.member_epoch == 1 and len(total(ra)) == 3  # a keeps 3 and is asked to revoke 3
        revoked = set(range(6)) - total(ra)
        assert (await h.hb("b", 2, owned={})).assignment is None  # still unreleased
        ra2 = await h.hb("a", 1, owned=A(t=total(ra)))
        assert ra2.member_epoch == 2
        rb = await h.hb("b", 2, owned={})
        assert total(rb) == revoked
        summary = h.coord.describe_consumer_groups(["g"])[0][3]
        assert summary is not None and summary.state == "Stable" and summary.group_epoch == 2

    run(body)


def test_session_timeout_and_leave() -> None:
    async def body(h: CG) -> None:
        await h.hb("a", 0)
        await h.hb("b", 0)
        await h.tick(3000)
        await h.hb("a", 1, owned=A(t=set(range(6))))
        await h.tick(3500)  # b's session (6 s) ran out, a's did not
        group = h.coord.consumer_groups["g"]
        assert set(group.members) == {"a"}
        # leaving: epoch -1, the group is Empty
        r = await h.hb("a", -1)
        assert r.error == E.none and r.member_epoch == -1
        assert group.state.value == "Empty"
        assert (await h.hb("a", 3)).error == E.unknown_member_id

    run(body)


def test_fenced_epochs() -> None:
    async def body(h: CG) -> None:
        await h.hb("a", 0)
        assert (await h.hb("a", 5)).error == E.fenced_member_epoch
        await h.hb("b", 0)  # epoch 2 for the group
        await h.hb("a", 1, owned=A(t=set(range(6))))
        await h.hb("a", 1, owned={"t": frozenset(range(3))})
        # a is now at epoch 2; its previous epoch with a subset of its partitions is still accepted
        assert (await h.hb("a", 1, owned={"t": frozenset()})).error == E.none
        assert (await h.hb("a", 0, owned={})).error == E.fenced_member_epoch

    run(body)


def test_static_member_leaves_temporarily_and_returns() -> None:
    async def body(h: CG) -> None:
        await h.hb("a", 0, instance_id="i1")
        await h.hb("b", 0)
        await h.hb("a", 1, instance_id="i1", owned=A(t=set(range(6))))
        r = await h.hb("a", 1, instance_id="i1", owned=A(t=set(range(3))))
        kept = total(r) if r.assignment else None
        r = await h.hb("a", -2, instance_id="i1")
        assert r.member_epoch == -2
        group = h.coord.consumer_groups["g"]
        epoch = group.group_epoch
        # another process with the same instance id while the first has not left: refused
        assert (await h.hb("a2", -2, instance_id="i1")).error == E.fenced_instance_id
        # the instance returns with a new member id: same partitions, no new group epoch
        r = await h.hb("a3", 0, instance_id="i1")
        assert r.error == E.none and group.group_epoch == epoch
        assert kept is None or total(r) == kept
        assert (await h.hb("a4", 0, instance_id="i1")).error == E.unreleased_instance_id

    run(body)


def test_regex_and_new_topic_bump_the_group_epoch() -> None:
    async def body(h: CG) -> None:
        r = await h.hb("a", 0, subscribed_topic_names=None, subscribed_topic_regex="t.*")
        assert r.error == E.none and r.member_epoch == 1
        h.set_topics({"t": 6, "t2": 2, "other": 1})
        r = await h.hb("a", 1, owned=A(t=set(range(6))))
        assert r.member_epoch == 2 and r.assignment == {"t": frozenset(range(6)), "t2": frozenset({0, 1})}
        bad = await h.hb("b", 0, subscribed_topic_names=None, subscribed_topic_regex="(")
        assert bad.error == E.invalid_regular_expression

    run(body)


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"group_id": ""}, E.invalid_request),
        ({"rebalance_timeout_ms": -1}, E.invalid_request),
        ({"owned": None}, E.invalid_request),
        ({"member_id": ""}, E.invalid_request),
        ({"server_assignor": "sticky"}, E.unsupported_assignor),
        ({"member_epoch": -3}, E.invalid_request),
    ],
)
def test_invalid_heartbeats(kw: dict[str, Any], code: int) -> None:
    async def body(h: CG) -> None:
        fields: dict[str, Any] = {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                  "rebalance_timeout_ms": 1000, "subscribed_topic_names": ("t",), "owned": {}}
        fields.update(kw)
        assert (await h.coord.consumer_group_heartbeat(HeartbeatRequest(**fields))).error == code

    run(body)


def test_offset_commit_checks_member_epoch() -> None:
    async def body(h: CG) -> None:
        from kbus.server.coordinator.records import OffsetAndMetadata

        await h.hb("a", 0)
        om = {("t", 0): OffsetAndMetadata(offset=5, leader_epoch=-1, metadata="", commit_timestamp=0)}
        assert await h.coord.commit_offsets("g", "a", None, 1, om) == {("t", 0): E.none}
        assert await h.coord.commit_offsets("g", "a", None, 0, om) == {("t", 0): E.stale_member_epoch}
        assert await h.coord.commit_offsets("g", "x", None, 1, om) == {("t", 0): E.unknown_member_id}
        assert await h.coord.commit_offsets("g", "a", None, 1, om, api_version=8) == {
            ("t", 0): E.unsupported_version}
        error, offsets = h.coord.fetch_offsets("g", [("t", 0)])
        assert error == E.none and offsets[("t", 0)] is not None and offsets[("t", 0)].offset == 5
        # ListGroups shows one consumer group, not the classic group holding its offsets
        _, listed = h.coord.list_groups()
        assert [(o.group_id, o.group_type, o.state) for o in listed] == [("g", "consumer", "Stable")]
        assert h.coord.describe_group("g")[1].state == "Dead"
        # a classic member joins it (Kafka 4's online migration: test_group_migration.py), after getting its id
        join = await h.join("g")
        assert join.error == E.member_id_required

    run(body)


# ---------------------------------------------------------------- the APIs, every version, through the wire codec


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_and_describe_apis(version: int) -> None:
    from kbus.protocol.codec import build, nested, request_type
    from tests.unit.test_group_apis import FakeBroker, call, elected

    async def main() -> None:
        b = FakeBroker()
        await elected(b)
        coord = b.group_coordinator
        tid = uuid.uuid4()
        coord.topic_image = TopicImage(1, {"t": 2}, {"t": tid}, {tid: "t"})
        fields: dict[str, Any] = {"group_id": "g", "member_id": "m1", "member_epoch": 0, "rebalance_timeout": 30000,
                                  "subscribed_topic_names": ("t",), "topic_partitions": ()}
        r = await call(b, 68, version, **fields)
        assert (r.error_code, r.member_id, r.member_epoch) == (E.none, "m1", 1)
        assert [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions] == [(tid, [0, 1])]
        owned = (build(nested(request_type(68, version), "TopicPartitions"), topic_id=tid, partitions=(0, 1)),)
        r = await call(b, 68, version, group_id="g", member_id="m1", member_epoch=1, topic_partitions=owned)
        assert (r.error_code, r.member_epoch, r.assignment) == (E.none, 1, None)
        d = await call(b, 69, version, group_ids=("g", "nope"), include_authorized_operations=False)
        g, missing = d.groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (E.none, "Stable", 1, "uniform")
        [member] = g.members
        assert member.member_id == "m1" and member.subscribed_topic_names == ("t",)
        assert [(tp.topic_name, list(tp.partitions)) for tp in member.assignment.topic_partitions] == [("t", [0, 1])]
        assert missing.error_code == E.group_id_not_found
        r = await call(b, 68, version, group_id="g", member_id="m1", member_epoch=-1, topic_partitions=None)
        assert (r.error_code, r.member_epoch) == (E.none, -1)
        listed = await call(b, 16, 5, states_filter=(), types_filter=("consumer",))
        assert [(x.group_id, x.group_type, x.group_state) for x in listed.groups] == [("g", "consumer", "Empty")]

    asyncio.run(main())


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("t.*", ["t", "t2"], ["xt"]),
        ("\\Qa.b\\E-.*", ["a.b-1"], ["axb-1"]),  # Pattern.quote, as the Java client sends it
        ("\\Qa.b", ["a.b"], ["a.bc", "axb"]),  # \\Q to the end
        ("ab\\z", ["ab"], ["abc"]),
        ("a\\.b|c+", ["a.b", "ccc"], ["axb"]),
    ],
)
def test_regex_re2_syntax(pattern: str, matches: list[str], misses: list[str]) -> None:
    from kbus.server.coordinator.consumer_group import compile_regex

    compiled = compile_regex(pattern)
    assert [t for t in matches + misses if compiled.fullmatch(t)] == matches


def test_cli_prints_kafka_4_columns_for_a_consumer_group() -> None:
    from kbus.admin.models import BrokerNode, GroupDescription, GroupMember
    from kbus.cli.consumer_groups import format_consumer_members, format_consumer_state

    desc = GroupDescription(
        "grp", "Reconciling", "uniform", BrokerNode(1, "h", 9092),
        [GroupMember("m1", "c1", "/1.2.3.4", [("t", 1), ("t", 0), ("a", 5)], None, [("t", 0)], 3)],
        group_type="consumer", group_epoch=4, target_assignment_epoch=4,
    )
    assert format_consumer_state(desc, verbose=True) == [
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                GROUP-EPOCH     "
        "TARGET-ASSIGNMENT-EPOCH   #MEMBERS",
        "grp             h:9092  (1)               uniform              Reconciling          4               "
        "4                         1",
    ]
    head, row = format_consumer_members(desc, verbose=True)
    assert head.split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                            "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    assert row == (
        "grp             m1              /1.2.3.4        c1              3               3               "
        "a:5;t:0,1            4               t:0                 "
    )


def test_offsets_of_subscribed_topics_do_not_expire_while_the_group_has_members() -> None:
    async def body(h: CG) -> None:
        from kbus.server.coordinator.records import OffsetAndMetadata

        h.set_topics({"t": 6, "u": 1})
        await h.hb("a", 0)
        om = OffsetAndMetadata(offset=5, leader_epoch=-1, metadata="", commit_timestamp=h.clock.now)
        assert await h.coord.commit_offsets("g", "a", None, 1, {("t", 0): om, ("u", 0): om}) == {
            ("t", 0): E.none, ("u", 0): E.none}
        h.clock.now += h.coord.config.offsets_retention_ms + 1  # no timers run: the member stays
        assert await h.coord.expire_offsets() == 1
        _, offsets = h.coord.fetch_offsets("g", None)
        assert list(offsets) == [("t", 0)]  # u is not subscribed: its offset expired
        await h.hb("a", -1)
        assert await h.coord.expire_offsets() == 1  # an empty group keeps nothing past retention

    run(body)


def test_a_new_coordinator_loads_the_group_from_its_records() -> None:
    """Kafka 4's records in __consumer_offsets: another coordinator reading the same log has the same group."""

    async def body(h: CG) -> None:
        await h.hb("a", 0, instance_id="i1", server_assignor="range")
        await h.hb("b", 0)
        ra = await h.hb("a", 1, instance_id="i1", owned=A(t=set(range(6))))
        await h.hb("a", 1, instance_id="i1", owned=A(t=set(total(ra))))  # revoked: a at epoch 2
        await h.hb("b", 2, owned={})
        await h.hb("c", 0)
        await h.hb("c", -1)  # tombstones
        before = h.coord.consumer_groups["g"]
        other = CG(log=h.log)
        other.coord.topic_image = h.coord.topic_image
        await other.elect_all()
        after = other.coord.consumer_groups["g"]
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert after.members == before.members and set(after.members) == {"a", "b"}
        assert after.target == {m: t for m, t in before.target.items() if t} | {
            m: {} for m, t in before.target.items() if not t}
        assert after.owners == before.owners and after.static_members == {"i1": "a"}
        # the members carry on without re-joining, with the same epochs
        rb = await other.hb("b", 2, owned=before.members["b"].assigned)
        assert rb.error == E.none and rb.member_epoch == after.assignment_epoch
        # and a session still times out on the new coordinator
        await other.tick(7000)
        assert not other.coord.consumer_groups["g"].members

    run(body)


def test_records_are_kafkas_bytes() -> None:
    from kbus.server.coordinator import records

    tid = uuid.UUID(int=1)
    assert records.consumer_group_key(records.CG_MEMBER_METADATA, "g", "m") == b"\x00\x05\x00\x01g\x00\x01m"
    assert records.consumer_group_epoch_value(7) == b"\x00\x00\x00\x00\x00\x07\x00"
    value = records.consumer_current_assignment_value(records.ConsumerCurrentAssignmentValue(
        3, 2, 1, ((tid, (0, 1)),), ()))
    assert value == (b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x01" + b"\x02" + tid.bytes
                     + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00" + b"\x01" + b"\x00")
    assert records.decode_consumer_current_assignment_value(value).assigned == ((tid, (0, 1)),)


def test_rebalance_protocols_config_turns_the_consumer_protocol_off() -> None:
    import dataclasses

    from kbus.common.broker_config import ConfigError, KafkaConfig
    from tests.unit.test_group_apis import FakeBroker, call, elected

    assert "consumer" in KafkaConfig().group_coordinator_rebalance_protocols.split(",")
    for bad in ("consumer", "classic,streams", "classic,nope"):
        with pytest.raises(ConfigError):
            KafkaConfig.from_properties({"group.coordinator.rebalance.protocols": bad})

    async def main() -> None:
        b = FakeBroker()
        await elected(b)
        on = {int(k.api_key) for k in (await call(b, 18, 3)).api_keys}
        assert {68, 69} <= on
        b.config = dataclasses.replace(b.config, group_coordinator_rebalance_protocols="classic")
        off = {int(k.api_key) for k in (await call(b, 18, 3)).api_keys}
        assert on - off == {68, 69}
        r = await call(b, 68, 1, group_id="g", member_id="m", member_epoch=0, rebalance_timeout=1000,
                       subscribed_topic_names=("t",), topic_partitions=())
        assert r.error_code == E.unsupported_version

    asyncio.run(main())


def test_a_loaded_regex_re_cannot_compile_matches_nothing() -> None:
    """A log written by Kafka may hold an RE2-only regex (\\p{L}): loading the group must not fail."""
    from kbus.protocol.record_batch import build_batch
    from kbus.server.coordinator import records
    from kbus.server.coordinator.consumer_group import epoch_record, member_records

    async def body(h: CG) -> None:
        member = ConsumerGroupMember("m", client_id="c", rebalance_timeout_ms=1000, subscribed_topic_regex="\\p{L}+",
                                     subscribed_topic_names=("t",), member_epoch=1)
        recs = [epoch_record(records.CG_METADATA, "g", 1), *member_records(h.coord.topic_image, "g", member)]
        other = CG(log=h.log)
        await h.log.append(other.coord.partition_for("g"), build_batch(recs, timestamp_ms=0))
        await other.elect_all()
        group = other.coord.consumer_groups["g"]
        assert set(group.members) == {"m"} and group.subscription_metadata == {"t": 6}

    run(body)
