"""The group coordinator's state machine, driven with a fake clock and an in-memory __consumer_offsets."""

from __future__ import annotations

import asyncio
import gc
import struct
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.protocol.record_batch import decode_records, iter_complete_batches
from kbus.server.coordinator.coordinator import GroupConfig, GroupCoordinator
from kbus.server.coordinator.group import GroupState, JoinResult
from kbus.server.coordinator.records import GroupKey, OffsetAndMetadata, decode_key

SESSION = 10_000
REBALANCE = 30_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class MemoryLog:
    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = defaultdict(list)
        self.fail = False

    async def append(self, partition: int, records: bytes) -> int:
        await asyncio.sleep(0)
        if self.fail:
            raise RuntimeError("disk on fire")
        self.batches[partition].append(records)
        return len(self.batches[partition]) - 1

    async def read(self, partition: int) -> list[bytes]:
        return list(self.batches[partition])

    def record_keys(self) -> list[Any]:
        out = []
        for chunks in self.batches.values():
            for chunk in chunks:
                for h in iter_complete_batches(chunk):
                    out += [(decode_key(r.key), r.value is None) for r in decode_records(chunk, h)]
        return out


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(self, log: MemoryLog | None = None, **config: Any) -> None:
        self.clock = FakeClock()
        self.log = log or MemoryLog()
        cfg = {
            "offsets_topic_num_partitions": 4,
            "initial_rebalance_delay_ms": 0,
            "min_session_timeout_ms": 1000,
            **config,
        }
        self.coord = GroupCoordinator(GroupConfig(**cfg), self.log, self.clock)

    async def elect_all(self) -> None:
        for p in range(self.coord.config.offsets_topic_num_partitions):
            self.coord.on_election(p)
        await self.coord.settle()

    async def tick(self, ms: int = 0) -> None:
        """Advance the fake clock, fire due timers, let parked requests and appends finish."""
        self.clock.now += ms
        for _ in range(5):
            await asyncio.sleep(0)
            self.coord.timers.run_due(self.clock.now)
            await self.coord.settle()
            await asyncio.sleep(0)

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: Any = None,
        session: int = SESSION,
        rebalance: int = REBALANCE,
        version: int = 5,
        topics: tuple[str, ...] = ("t",),
    ) -> asyncio.Task[JoinResult]:
        protocols = protocols or [("range", subscription(*topics))]
        return asyncio.ensure_future(
            self.coord.join_group(
                group,
                member_id,
                instance,
                require_known_member_id=version >= 4,
                supports_skip_assignment=version >= 9,
                client_id="client",
                client_host="/127.0.0.1",
                rebalance_timeout_ms=rebalance,
                session_timeout_ms=session,
                protocol_type="consumer",
                protocols=protocols,
            )
        )

    async def join_new(self, group: str = "g", **kw: Any) -> asyncio.Task[JoinResult]:
        """A v4+ dynamic member: MEMBER_ID_REQUIRED first, then the real (parked) join."""
        first = await self.join(group, **kw)
        assert first.error == E.member_id_required
        assert first.member_id.startswith("client-")
        task = self.join(group, first.member_id, **kw)
        await asyncio.sleep(0)
        return task

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = "g",
        instance: str | None = None,
    ) -> asyncio.Task[Any]:
        return asyncio.ensure_future(
            self.coord.sync_group(
                group,
                generation,
                member_id,
                group_instance_id=instance,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments or {},
            )
        )

    def group(self, name: str = "g") -> Any:
        return self.coord.groups[name]


def run(test: Callable[[Harness], Awaitable[None]], **config: Any) -> None:
    async def main() -> None:
        h = Harness(**config)
        await h.elect_all()
        await test(h)
        await h.coord.shutdown()

    asyncio.run(main())


async def stable_pair(h: Harness) -> tuple[str, str, int]:
    """Two members in a Stable group: returns (leader, follower, generation)."""
    t1 = await h.join_new()
    await h.tick()
    r1 = await t1
    assert r1.error == E.none and r1.generation_id == 1
    s1 = await h.sync(r1.member_id, 1, {r1.member_id: b"p0"})
    assert s1.error == E.none
    t2 = await h.join_new()
    await h.tick()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", 1, r1.member_id, None) == E.rebalance_in_progress
    t1b = h.join(member_id=r1.member_id)
    await h.tick()
    r1b, r2 = await t1b, await t2
    assert r1b.generation_id == r2.generation_id == 2
    leader, follower = (r1b, r2) if r1b.leader_id == r1b.member_id else (r2, r1b)
    fsync = h.sync(follower.member_id, 2)
    await h.tick()
    assert not fsync.done(), "a follower's SyncGroup waits for the leader's assignment"
    lsync = await h.sync(leader.member_id, 2, {leader.member_id: b"A", follower.member_id: b"B"})
    assert lsync.assignment == b"A"
    assert (await fsync).assignment == b"B"
    assert h.group().state is GroupState.STABLE
    return leader.member_id, follower.member_id, 2


def test_first_join_requires_member_id_then_completes() -> None:
    async def t(h: Harness) -> None:
        task = await h.join_new()
        await h.tick()
        r = await task
        assert r.error == E.none
        assert r.generation_id == 1
        assert r.leader_id == r.member_id
        assert r.protocol_name == "range"
        assert [m[0] for m in r.members] == [r.member_id]
        assert h.group().state is GroupState.COMPLETING_REBALANCE

    run(t)


def test_old_join_version_gets_member_id_directly() -> None:
    async def t(h: Harness) -> None:
        task = h.join(version=3)
        await h.tick()
        r = await task
        assert r.error == E.none and r.member_id.startswith("client-")

    run(t)


def test_two_members_rebalance_and_sync() -> None:
    async def t(h: Harness) -> None:
        _leader, follower, gen = await stable_pair(h)
        assert h.coord.heartbeat("g", gen, follower, None) == E.none
        assert h.coord.heartbeat("g", gen - 1, follower, None) == E.illegal_generation
        assert h.coord.heartbeat("g", gen, "nobody", None) == E.unknown_member_id

    run(t)


def test_session_timeout_removes_silent_member_and_rebalances() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        await h.tick(SESSION // 2)
        assert h.coord.heartbeat("g", gen, leader, None) == E.none
        await h.tick(SESSION // 2 + 1)  # the follower never heartbeat: expired
        assert not h.group().has(follower)
        assert h.group().state is GroupState.PREPARING_REBALANCE
        assert h.coord.heartbeat("g", gen, leader, None) == E.rebalance_in_progress
        rejoin = h.join(member_id=leader)
        await h.tick()
        r = await rejoin
        assert r.generation_id == gen + 1 and len(r.members) == 1

    run(t)


def test_member_not_rejoining_within_rebalance_timeout_is_dropped() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        rejoin = h.join(member_id=leader)  # the leader re-joining forces a rebalance
        await h.tick()
        assert h.group().state is GroupState.PREPARING_REBALANCE
        # The follower keeps heartbeating (so the session never expires) but never re-joins.
        for _ in range(REBALANCE // 5000):
            assert h.coord.heartbeat("g", gen, follower, None) == E.rebalance_in_progress
            await h.tick(5000)
        await h.tick(1)
        r = await rejoin
        assert r.error == E.none and r.generation_id == gen + 1
        assert not h.group().has(follower)

    run(t)


def test_follower_rejoin_with_same_metadata_keeps_generation() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        r = await h.join(member_id=follower)
        assert r.error == E.none and r.generation_id == gen and r.members == ()
        assert h.group().state is GroupState.STABLE
        # Changed subscription (e.g. cooperative-sticky's owned partitions) forces a new generation.
        changed = h.join(member_id=follower, topics=("t", "u"))
        await h.tick()
        assert h.group().state is GroupState.PREPARING_REBALANCE
        lj = h.join(member_id=leader)
        await h.tick()
        assert (await changed).generation_id == (await lj).generation_id == gen + 1

    run(t)


def test_sync_during_rebalance_and_commit_during_completing() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        h.join(member_id=leader)
        await h.tick()
        assert (await h.sync(follower, gen)).error == E.rebalance_in_progress
        # Commits are still accepted while PreparingRebalance (members learn of it via heartbeats).
        errs = await h.coord.commit_offsets("g", follower, None, gen, {("t", 0): OffsetAndMetadata(5)})
        assert errs == {("t", 0): E.none}

    run(t)


def test_leave_group_triggers_rebalance_and_empty_group_can_be_deleted() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        assert (await h.coord.delete_groups(["g"])) == {"g": E.non_empty_group}
        top, errs = h.coord.leave_group("g", [(follower, None), ("ghost", None)])
        assert (top, errs) == (E.none, [E.none, E.unknown_member_id])
        assert h.group().state is GroupState.PREPARING_REBALANCE
        h.coord.leave_group("g", [(leader, None)])
        await h.tick()
        assert h.group().state is GroupState.EMPTY
        assert h.group().generation_id == gen + 1
        assert (await h.coord.delete_groups(["g", "nope"])) == {"g": E.none, "nope": E.group_id_not_found}
        assert "g" not in h.coord.groups
        assert GroupKey("g") in [k for k, tomb in h.log.record_keys() if tomb], "deletion writes a group tombstone"

    run(t)


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    async def t(h: Harness) -> None:
        task = h.join(instance="dash-1")  # static members skip MEMBER_ID_REQUIRED
        await h.tick()
        r = await task
        assert r.error == E.none and r.generation_id == 1
        assert (await h.sync(r.member_id, 1, {r.member_id: b"P0"}, instance="dash-1")).assignment == b"P0"
        # Quick restart: same instance id, unknown member id.
        again = h.join(instance="dash-1")
        await h.tick()
        r2 = await again
        assert r2.error == E.none
        assert r2.member_id != r.member_id
        assert r2.generation_id == 1, "no rebalance for a returning static member"
        assert r2.leader_id == r.member_id, "pre-v9 clients are not told to re-run the assignor"
        assert h.group().state is GroupState.STABLE
        s = await h.sync(r2.member_id, 1, instance="dash-1")
        assert s.assignment == b"P0"
        # the same member object under its new id: its session timer is the new id's, the old id's is gone
        assert h.group().members[r2.member_id].heartbeat_timer.key == ("hb", "g", r2.member_id)
        assert h.coord.timers.deadline(("hb", "g", r.member_id)) is None
        assert h.coord.timers.deadline(("hb", "g", r2.member_id)) is not None
        assert h.coord.heartbeat("g", 1, r.member_id, "dash-1") == E.fenced_instance_id
        _top, errs = h.coord.leave_group("g", [("", "dash-1")])
        assert errs == [E.none]

    run(t)


def test_static_leader_rejoin_v9_skips_assignment() -> None:
    async def t(h: Harness) -> None:
        task = h.join(instance="a", version=9)
        await h.tick()
        r = await task
        await h.sync(r.member_id, 1, {r.member_id: b"x"}, instance="a")
        again = h.join(instance="a", version=9)
        await h.tick()
        r2 = await again
        assert r2.leader_id == r2.member_id and r2.skip_assignment and len(r2.members) == 1

    run(t)


def test_initial_rebalance_delay_collects_members() -> None:
    async def t(h: Harness) -> None:
        a = await h.join_new()
        await h.tick(1000)
        b = await h.join_new()
        await h.tick(1000)
        assert not a.done() and not b.done()
        await h.tick(3000)  # the first delay ran out, another one started because b arrived
        await h.tick(3000)
        ra, rb = await a, await b
        assert ra.generation_id == rb.generation_id == 1

    run(t, initial_rebalance_delay_ms=3000)


def test_protocol_selection_and_inconsistent_protocols() -> None:
    async def t(h: Harness) -> None:
        a = h.join(version=3, protocols=[("cooperative-sticky", b"c"), ("range", b"r")])
        await h.tick()
        ra = await a
        assert ra.protocol_name == "cooperative-sticky"
        await h.sync(ra.member_id, 1)
        b = h.join(version=3, protocols=[("range", b"r2"), ("cooperative-sticky", b"c2")])
        aa = h.join(member_id=ra.member_id, version=3, protocols=[("cooperative-sticky", b"c"), ("range", b"r")])
        await h.tick()
        rb, raa = await b, await aa
        assert rb.protocol_name == raa.protocol_name == "cooperative-sticky"  # tie -> leader's preference
        bad = await h.join(version=3, protocols=[("roundrobin", b"")])
        assert bad.error == E.inconsistent_group_protocol

    run(t)


def test_invalid_session_timeout_and_group_id() -> None:
    async def t(h: Harness) -> None:
        assert (await h.join(session=10)).error == E.invalid_session_timeout
        assert (await h.join(group="")).error == E.invalid_group_id

    run(t)


def test_simple_commit_fetch_and_metadata_round_trip() -> None:
    async def t(h: Harness) -> None:
        errs = await h.coord.commit_offsets(
            "simple",
            "",
            None,
            -1,
            {
                ("t", 0): OffsetAndMetadata(10, 3, "my metadata", h.clock()),
                ("t", 1): OffsetAndMetadata(20, -1, "", h.clock()),
            },
        )
        assert set(errs.values()) == {E.none}
        err, got = h.coord.fetch_offsets("simple", [("t", 0), ("t", 2)])
        assert err == E.none
        assert got[("t", 0)] is not None and got[("t", 0)].offset == 10 and got[("t", 0)].metadata == "my metadata"
        assert got[("t", 0)].leader_epoch == 3
        assert got[("t", 2)] is None
        _, everything = h.coord.fetch_offsets("simple", None)
        assert {tp: om.offset for tp, om in everything.items()} == {("t", 0): 10, ("t", 1): 20}
        _, overviews = h.coord.list_groups()
        assert [(o.group_id, o.protocol_type, o.state) for o in overviews] == [("simple", "", "Empty")]

    run(t)


def test_commit_validation() -> None:
    async def t(h: Harness) -> None:
        _leader, follower, gen = await stable_pair(h)
        tp = {("t", 0): OffsetAndMetadata(1)}
        assert await h.coord.commit_offsets("g", follower, None, gen + 1, tp) == {("t", 0): E.illegal_generation}
        assert await h.coord.commit_offsets("g", "who", None, gen, tp) == {("t", 0): E.unknown_member_id}
        assert await h.coord.commit_offsets("g", "", None, -1, tp) == {("t", 0): E.unknown_member_id}
        assert await h.coord.commit_offsets("nogroup", "m", None, 3, tp) == {("t", 0): E.illegal_generation}
        big = {("t", 0): OffsetAndMetadata(1, metadata="x" * 5000)}
        assert await h.coord.commit_offsets("g", follower, None, gen, big) == {("t", 0): E.offset_metadata_too_large}
        h.log.fail = True
        assert await h.coord.commit_offsets("g", follower, None, gen, tp) == {("t", 0): E.coordinator_not_available}
        h.log.fail = False
        assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is None, "failed commits are not visible"

    run(t)


def test_state_survives_reload_from_the_log() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        await h.coord.commit_offsets("g", leader, None, gen, {("t", 0): OffsetAndMetadata(7, 1, "meta", 5)})
        await h.coord.commit_offsets("g", leader, None, gen, {("t", 0): OffsetAndMetadata(8, 1, "meta2", 6)})
        await h.coord.commit_offsets("other", "", None, -1, {("u", 1): OffsetAndMetadata(3)})
        h2 = Harness(log=h.log)
        await h2.elect_all()
        g = h2.group()
        assert g.state is GroupState.STABLE and g.generation_id == gen
        assert set(g.members) == {leader, follower} and g.leader_id == leader
        assert g.get(follower).assignment == b"B"
        assert h2.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)] == OffsetAndMetadata(8, 1, "meta2", 6)
        assert h2.coord.fetch_offsets("other", None)[1][("u", 1)].offset == 3
        # Members of the loaded generation can keep heartbeating without a rebalance...
        assert h2.coord.heartbeat("g", gen, follower, None) == E.none
        # ...and are expired when they don't.
        await h2.tick(SESSION + 1)
        assert not h2.group().has(leader)
        await h2.coord.shutdown()

    run(t)


def test_resignation_unloads_groups() -> None:
    async def t(h: Harness) -> None:
        leader, _follower, gen = await stable_pair(h)
        p = h.coord.partition_for("g")
        h.coord.on_resignation(p)
        assert "g" not in h.coord.groups
        assert h.coord.heartbeat("g", gen, leader, None) == E.not_coordinator
        h.coord.on_election(p)
        assert h.coord.heartbeat("g", gen, leader, None) == E.none, "loading: answered blindly"
        await h.coord.settle()
        assert h.coord.heartbeat("g", gen, leader, None) == E.none

    run(t)


def test_offset_retention_expires_empty_groups() -> None:
    async def t(h: Harness) -> None:
        retention = h.coord.config.offsets_retention_ms
        committed = {("t", 0): OffsetAndMetadata(1, commit_timestamp=h.clock())}
        await h.coord.commit_offsets("simple", "", None, -1, committed)
        await h.tick(retention - 10)
        assert await h.coord.expire_offsets() == 0
        await h.tick(20)
        assert await h.coord.expire_offsets() == 1
        assert "simple" not in h.coord.groups
        assert ({k.group for k, tomb in h.log.record_keys() if tomb}) == {"simple"}

    run(t, offsets_retention_ms=60_000)


def test_stable_group_keeps_offsets_of_subscribed_topics() -> None:
    async def t(h: Harness) -> None:
        leader, follower, gen = await stable_pair(h)
        now = h.clock()
        await h.coord.commit_offsets(
            "g",
            leader,
            None,
            gen,
            {
                ("t", 0): OffsetAndMetadata(1, commit_timestamp=now),
                ("old", 0): OffsetAndMetadata(1, commit_timestamp=now),
            },
        )
        h.clock.now += 120_000
        for m in (leader, follower):
            h.coord.heartbeat("g", gen, m, None)
        assert await h.coord.expire_offsets() == 1
        assert set(h.group().offsets) == {("t", 0)}

    run(t, offsets_retention_ms=60_000)


def test_offset_delete_respects_subscriptions() -> None:
    async def t(h: Harness) -> None:
        leader, _follower, gen = await stable_pair(h)
        await h.coord.commit_offsets(
            "g", leader, None, gen, {("t", 0): OffsetAndMetadata(1), ("x", 0): OffsetAndMetadata(2)}
        )
        err, per = await h.coord.delete_offsets("g", [("t", 0), ("x", 0)])
        assert err == E.none and per == {("t", 0): E.group_subscribed_to_topic, ("x", 0): E.none}
        assert set(h.group().offsets) == {("t", 0)}
        assert (await h.coord.delete_offsets("missing", [("t", 0)]))[0] == E.group_id_not_found

    run(t)


def test_deleted_topics_lose_their_offsets() -> None:
    async def t(h: Harness) -> None:
        await h.coord.commit_offsets(
            "s", "", None, -1, {("gone", 0): OffsetAndMetadata(1), ("kept", 0): OffsetAndMetadata(1)}
        )
        assert await h.coord.on_topics_deleted(["gone"]) == 1
        assert set(h.coord.groups["s"].offsets) == {("kept", 0)}

    run(t)


def test_describe_and_list_groups() -> None:
    async def t(h: Harness) -> None:
        leader, follower, _gen = await stable_pair(h)
        err, summary = h.coord.describe_group("g")
        assert err == E.none and summary.state == "Stable" and summary.protocol == "range"
        assert {m.member_id: m.assignment for m in summary.members} == {leader: b"A", follower: b"B"}
        assert all(m.client_host == "/127.0.0.1" for m in summary.members)
        assert h.coord.describe_group("unknown")[1].state == "Dead"
        assert [o.group_id for o in h.coord.list_groups(["stable"])[1]] == ["g"]
        assert h.coord.list_groups(["Empty"])[1] == []
        assert h.coord.list_groups([], ["consumer"])[1] == []

    run(t)


def test_not_coordinator_for_unowned_partitions() -> None:
    async def main() -> None:
        h = Harness()
        assert (await h.join()).error == E.not_coordinator
        assert h.coord.fetch_offsets("g", None)[0] == E.not_coordinator

    asyncio.run(main())


@pytest.mark.parametrize("version", [4, 5])
def test_pending_member_that_never_returns_expires(version: int) -> None:
    async def t(h: Harness) -> None:
        first = await h.join(version=version)
        assert first.error == E.member_id_required
        assert first.member_id in h.group().pending_members
        await h.tick(SESSION + 1)
        assert first.member_id not in h.group().pending_members

    run(t)


def test_periodic_sweep_removes_offsets_of_vanished_topics() -> None:
    async def main() -> None:
        h = Harness()
        live: set[str] | None = None
        h.coord._live_topics = lambda: live
        await h.elect_all()
        await h.coord.commit_offsets(
            "s",
            "",
            None,
            -1,
            {
                ("a", 0): OffsetAndMetadata(1, commit_timestamp=h.clock()),
                ("b", 0): OffsetAndMetadata(1, commit_timestamp=h.clock()),
            },
        )
        assert await h.coord.expire_offsets() == 0, "an untrusted metadata view removes nothing"
        live = {"a", "__consumer_offsets"}
        assert await h.coord.expire_offsets() == 1
        assert set(h.coord.groups["s"].offsets) == {("a", 0)}

    asyncio.run(main())


def test_offset_delete_writes_tombstones_that_survive_a_reload() -> None:
    async def t(h: Harness) -> None:
        await h.coord.commit_offsets(
            "simple", "", None, -1, {("x", 0): OffsetAndMetadata(5), ("y", 0): OffsetAndMetadata(6)}
        )
        error, per_partition = await h.coord.delete_offsets("simple", [("x", 0)])
        assert error == E.none and per_partition == {("x", 0): E.none}
        h2 = Harness(log=h.log)
        await h2.elect_all()
        offsets = h2.coord.fetch_offsets("simple", None)[1]
        assert ("x", 0) not in offsets and offsets[("y", 0)].offset == 6
        await h2.coord.shutdown()

    run(t)


class GatedLog(MemoryLog):
    """Each read takes its snapshot at once but returns only when its gate opens."""

    def __init__(self, shared: MemoryLog) -> None:
        super().__init__()
        self.batches = shared.batches
        self.gates: list[asyncio.Event] = []

    async def read(self, partition: int) -> list[bytes]:
        snapshot = list(self.batches[partition])
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return snapshot


def test_a_newer_election_wins_over_an_older_load() -> None:
    async def t(h: Harness) -> None:
        await h.coord.commit_offsets("g2", "", None, -1, {("t", 0): OffsetAndMetadata(10)})
        gated = GatedLog(h.log)
        h2 = Harness(log=gated)
        p = h2.coord.partition_for("g2")
        h2.coord.on_election(p)  # load #1 snapshots offset 10...
        await asyncio.sleep(0.01)
        h2.coord.on_resignation(p)
        await h.coord.commit_offsets("g2", "", None, -1, {("t", 0): OffsetAndMetadata(20)})
        h2.coord.on_election(p)  # load #2 snapshots offset 20
        await asyncio.sleep(0.01)
        assert len(gated.gates) == 2
        gated.gates[0].set()  # the stale load finishes first
        await asyncio.sleep(0.05)
        gated.gates[1].set()
        await h2.coord.settle()
        assert h2.coord.fetch_offsets("g2", None)[1][("t", 0)].offset == 20
        await h2.coord.shutdown()

    run(t)


def test_a_timer_moved_to_a_later_deadline_fires_then_and_only_once() -> None:
    """A heartbeat moves its member's timer on without a new heap entry (Timers.schedule): the timer fires at the
    last deadline it was given, not at the first; an earlier deadline, a cancel and a re-schedule still hold."""
    from kbus.server.coordinator.timers import Timers

    timers, fired = Timers(), []
    timers.schedule("hb", 100, lambda: fired.append("first"))
    timers.schedule("hb", 250, lambda: fired.append("moved"))
    assert timers.deadline("hb") == 250 and timers.next_deadline() == 100  # the old entry, passed by run_due
    assert timers.run_due(100) == 0 and fired == []
    assert timers.next_deadline() == 250
    assert timers.run_due(249) == 0 and timers.run_due(250) == 1 and fired == ["moved"]
    assert timers.run_due(10_000) == 0 and len(timers) == 0
    timers.schedule("hb", 500, lambda: fired.append("late"))
    timers.schedule("hb", 300, lambda: fired.append("early"))  # earlier: a new entry, the old one is stale
    assert timers.run_due(300) == 1 and timers.run_due(500) == 0 and fired == ["moved", "early"]
    timers.schedule("hb", 600, lambda: fired.append("cancelled"))
    timers.schedule("hb", 700, lambda: fired.append("cancelled"))
    timers.cancel("hb")
    timers.schedule("hb", 800, lambda: fired.append("again"))
    assert timers.run_due(10_000) == 1 and fired == ["moved", "early", "again"]


def test_a_members_heartbeat_timer_is_made_once_and_moved_by_each_request() -> None:
    """Heartbeats and commits move a member's session timer on in place (one HeartbeatTimer per member and group
    object, no key tuple or closure per request); the timer still expires a silent member, and a member found in
    another group object (its partition loaded again) gets a timer that expires it from that group."""
    from kbus.server.coordinator.commit_path import HeartbeatTimer
    from kbus.server.coordinator.group import Group

    async def t(h: Harness) -> None:
        first = await h.join_new()
        await h.tick()
        r = await first
        assert (await h.sync(r.member_id, 1, {r.member_id: b"p0"})).error == E.none
        member = h.group().members[r.member_id]
        timer = member.heartbeat_timer
        assert isinstance(timer, HeartbeatTimer) and timer.key == ("hb", "g", r.member_id)
        await h.tick(1000)
        assert h.coord.heartbeat("g", 1, r.member_id, None) == E.none
        assert member.heartbeat_timer is timer
        assert h.coord.timers.deadline(timer.key) == h.clock.now + SESSION
        await h.tick(1000)
        errors = await h.coord.commit_offsets("g", r.member_id, None, 1, {("t", 0): OffsetAndMetadata(5)}, 8)
        assert errors == {("t", 0): E.none}
        assert member.heartbeat_timer is timer, "a commit moves the same timer on"
        assert h.coord.timers.deadline(timer.key) == h.clock.now + SESSION
        again = Group("g", h.group().partition)
        h.coord.commit_path.schedule_heartbeat(again, member)
        assert member.heartbeat_timer is not timer and member.heartbeat_timer.group is again
        h.coord.commit_path.schedule_heartbeat(h.group(), member)
        await h.tick(SESSION + 1)  # silent since: expired, from the group that holds it
        assert not h.group().has(r.member_id)
        assert h.group().state is GroupState.PREPARING_REBALANCE or h.group().state is GroupState.EMPTY

    run(t)


def test_a_left_member_and_an_unloaded_group_are_freed_without_the_cyclic_gc() -> None:
    """A member's HeartbeatTimer holds its group (what expires is that group's member): while the member is in
    the group, group -> members -> member -> heartbeat_timer -> group is a reference cycle. A member that leaves
    is freed as it goes (nothing in the cycle points at it); when the group's partition is unloaded (resigned,
    or the coordinator shut down) its members' timers are dropped with their timer entries, so the group and its
    members are freed by reference counting, not left to the cyclic GC."""

    async def t(h: Harness) -> None:
        async def stable_member() -> str:
            first = await h.join_new()
            await h.tick()
            r = await first
            assert (await h.sync(r.member_id, r.generation_id, {r.member_id: b"p0"})).error == E.none
            assert h.coord.heartbeat("g", r.generation_id, r.member_id, None) == E.none
            assert h.group().members[r.member_id].heartbeat_timer.group is h.group()
            return r.member_id

        gc.collect()
        gc.disable()
        try:
            member_id = await stable_member()
            left = weakref.ref(h.group().members[member_id])
            assert h.coord.leave_group("g", [(member_id, None)])[1] == [E.none]
            await h.tick()
            assert left() is None
            member_id = await stable_member()
            group, member = weakref.ref(h.group()), weakref.ref(h.group().members[member_id])
            h.coord.on_resignation(h.group().partition)
            await h.tick()
            assert "g" not in h.coord.groups
            assert group() is None and member() is None, "the unloaded group was left to the cyclic GC"
        finally:
            gc.enable()

    run(t)


def test_heartbeat_errors_before_the_member_is_looked_at() -> None:
    """Kafka's handleHeartbeat (compiled: CommitPath.heartbeat): an empty group id is INVALID_GROUP_ID, a group
    this coordinator does not know UNKNOWN_MEMBER_ID, a Dead one COORDINATOR_NOT_AVAILABLE, a group of offsets only
    (no members) UNKNOWN_MEMBER_ID; none of them arms a session timer."""

    async def t(h: Harness) -> None:
        assert h.coord.heartbeat("", 1, "m", None) == E.invalid_group_id
        assert h.coord.heartbeat("nope", 1, "m", None) == E.unknown_member_id
        committed = await h.coord.commit_offsets("s", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
        assert committed == {("t", 0): E.none}
        assert h.coord.heartbeat("s", -1, "", None) == E.unknown_member_id
        h.group("s").state = GroupState.DEAD
        assert h.coord.heartbeat("s", -1, "", None) == E.coordinator_not_available
        assert h.coord.timers.deadline(("hb", "s", "")) is None
        assert h.coord.timers.deadline(("hb", "nope", "m")) is None

    run(t)


def test_groups_keep_their_partition_when_offsets_partitions_are_added() -> None:
    """Kafka reads __consumer_offsets' partition count once (GroupMetadataManager's lazy val): a group maps to the
    same partition after partitions are added; before the topic exists the configured count is used, unread."""
    counts: list[int | None] = [None]
    coordinator = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=50), MemoryLog(), FakeClock(),
                                   offsets_partitions=lambda: counts[0])  # fmt: skip
    assert coordinator.partition_for("group-a") == java_partition("group-a", 50)
    counts[0] = 7
    assert coordinator.partition_for("group-a") == java_partition("group-a", 7)
    counts[0] = 9
    assert coordinator.partition_for("group-a") == java_partition("group-a", 7)


def java_partition(group: str, count: int) -> int:
    h = 0
    for c in group:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return abs(h) % count
