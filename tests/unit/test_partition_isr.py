"""A leader Partition decides its ISR changes and writes them through the alter-ISR port it was given (a fake
here, ZooKeeper or the local store in a broker): expand when a follower catches up, shrink when one lags past
replica.lag.time.max.ms, one change at a time, and a state that moved on meanwhile is never overwritten."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log.log import Log
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.partition import Partition

LEADER, FOLLOWER = 1, 2


class FakeAlterIsr:
    """Records each write; answers with the written state (or what `answer` says) once `release` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], PartitionState]] = []
        self.release = asyncio.Event()
        self.answer: PartitionState | str | None = "written"

    async def __call__(self, topic: str, index: int, isr: list[int], based_on: PartitionState) -> PartitionState | None:
        self.calls.append((list(isr), based_on))
        await self.release.wait()
        if self.answer == "written":
            return PartitionState(based_on.leader, based_on.leader_epoch, list(based_on.replicas), list(isr))
        assert not isinstance(self.answer, str)
        return self.answer


def leader(tmp_path: Path, isr: list[int], port: FakeAlterIsr, records: int = 5) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig())
    part = Partition("t", 0, log, PartitionState(LEADER, 4, [LEADER, FOLLOWER], isr), LEADER, alter_isr=port)
    for _ in range(records):
        part.append_as_leader(build_batch([(None, b"x")]))
    return part


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_caught_up_follower_joins_the_isr_through_the_port(tmp_path: Path) -> None:
    async def main() -> None:
        port = FakeAlterIsr()
        part = leader(tmp_path, [LEADER], port)
        part.follower_fetched(FOLLOWER, 2)  # behind the log end: not in sync yet
        await settle()
        assert port.calls == []
        part.follower_fetched(FOLLOWER, part.log_end_offset)
        part.follower_fetched(FOLLOWER, part.log_end_offset)  # a second fetch while the write is in flight
        await settle()
        assert [isr for isr, _ in port.calls] == [[LEADER, FOLLOWER]]  # one change at a time
        port.release.set()
        await settle()
        assert part.state.isr == [LEADER, FOLLOWER]

    asyncio.run(main())


def test_a_lagging_follower_is_shrunk_out(tmp_path: Path) -> None:
    async def main() -> None:
        port = FakeAlterIsr()
        port.release.set()
        part = leader(tmp_path, [LEADER, FOLLOWER], port)
        part.maybe_shrink_isr(max_lag_ms=60_000)  # just became leader: the follower has time left
        await settle()
        assert port.calls == []
        part.maybe_shrink_isr(max_lag_ms=-1)  # nothing caught up within the (elapsed) lag time
        await settle()
        assert [isr for isr, _ in port.calls] == [[LEADER]]
        assert part.state.isr == [LEADER]

    asyncio.run(main())


def test_a_refused_or_outdated_write_leaves_the_newer_state(tmp_path: Path) -> None:
    async def main() -> None:
        port = FakeAlterIsr()
        part = leader(tmp_path, [LEADER, FOLLOWER], port)
        port.answer = None  # the store refused: leadership or the ISR moved on
        port.release.set()
        part.maybe_shrink_isr(max_lag_ms=-1)
        await settle()
        assert part.state.isr == [LEADER, FOLLOWER]
        # the write succeeded, but a newer leader epoch arrived from the metadata meanwhile
        port.answer = "written"
        port.release.clear()
        part.maybe_shrink_isr(max_lag_ms=-1)
        await settle()
        part.update_state(PartitionState(LEADER, 5, [LEADER, FOLLOWER], [LEADER, FOLLOWER]))
        port.release.set()
        await settle()
        assert (part.state.leader_epoch, part.state.isr) == (5, [LEADER, FOLLOWER])

    asyncio.run(main())


def test_a_closed_partition_ignores_its_pending_change(tmp_path: Path) -> None:
    async def main() -> None:
        port = FakeAlterIsr()
        part = leader(tmp_path, [LEADER, FOLLOWER], port)
        part.maybe_shrink_isr(max_lag_ms=-1)
        await settle()
        part.close()
        port.release.set()
        await settle()
        assert part.state.isr == [LEADER, FOLLOWER] and part.closed

    asyncio.run(main())


def test_the_high_watermark_waits_for_a_replica_whose_joining_is_being_written(tmp_path: Path) -> None:
    """Kafka's maximal ISR (PendingExpandIsr): while the ISR with the follower is being written, appends are not
    committed past the follower, since it is in the ISR (and electable) as soon as the write lands."""

    async def main() -> None:
        port = FakeAlterIsr()
        part = leader(tmp_path, [LEADER], port)  # alone in its ISR: everything is committed at once
        caught_up = part.log_end_offset
        assert part.high_watermark == caught_up
        part.follower_fetched(FOLLOWER, caught_up)  # joins: the write is under way
        await settle()
        part.append_as_leader(build_batch([(None, b"y")]))
        assert part.high_watermark == caught_up  # not acknowledged for acks=all before the follower has it
        part.follower_fetched(FOLLOWER, part.log_end_offset)
        assert part.high_watermark == part.log_end_offset
        port.release.set()
        await settle()
        assert part.state.isr == [LEADER, FOLLOWER]

    asyncio.run(main())


def test_acks_all_waiters_answer_on_the_high_watermark_time_out_and_leave_no_entry(tmp_path: Path) -> None:
    """wait_for_high_watermark (acks=all) keeps one timer per waiter instead of asyncio.wait_for: answered when the
    follower catches up, False after its timeout, and neither a timed-out nor a cancelled waiter stays listed."""

    async def main() -> None:
        port = FakeAlterIsr()
        port.release.set()
        part = leader(tmp_path, [LEADER, FOLLOWER], port)
        end = part.log_end_offset
        assert part.high_watermark < end
        caught_up = asyncio.ensure_future(part.wait_for_high_watermark(end, 30))
        timed_out = asyncio.ensure_future(part.wait_for_high_watermark(end + 1, 0.05))
        cancelled = asyncio.ensure_future(part.wait_for_high_watermark(end + 1, 30))
        await settle()
        assert len(part._hw_waiters) == 3
        assert await timed_out is False
        cancelled.cancel()
        await settle()
        assert len(part._hw_waiters) == 1
        part.follower_fetched(FOLLOWER, end)
        assert await asyncio.wait_for(caught_up, 5) is True
        assert part._hw_waiters == []

    asyncio.run(main())


def test_an_idle_in_sync_follower_stays_in_the_isr_and_one_that_stops_or_falls_behind_leaves(tmp_path: Path) -> None:
    """Kafka's replica.lag.time.max.ms counts from the last fetch at which the follower was caught up. A fetch that
    reports the position the follower had already (every idle partition of its fetch session) takes a shorter way
    through update_follower: it must still count as caught up when the position is the log end, and not when the
    leader's log moved on without it."""
    part = leader(tmp_path, [LEADER, FOLLOWER], FakeAlterIsr())
    t, lag = 10**13, 30_000  # explicit clock (ms)
    end = part.log_end_offset
    assert not part.update_follower(FOLLOWER, end, t)
    assert part.high_watermark == end
    for k in range(1, 5):  # idle and caught up: each fetch keeps it in sync, for longer than the lag time
        assert not part.update_follower(FOLLOWER, end, t + k * 20_000)
    assert part.lagging_replicas(t + 80_000 + lag - 1, lag) == []
    # it stops fetching: out once the lag time has passed since its last (caught-up) fetch
    assert part.lagging_replicas(t + 80_000 + lag + 1, lag) == [FOLLOWER]
    # it fetches again but stays at its old position while the leader's log grows: no longer caught up
    part.append_as_leader(build_batch([(None, b"y")]))
    for k in (1, 2, 3):
        part.update_follower(FOLLOWER, end, t + 100_000 + k * 20_000)
    assert part.high_watermark == end  # the high watermark waits for it
    assert part.lagging_replicas(t + 160_000, lag) == [FOLLOWER]
    part.update_follower(FOLLOWER, part.log_end_offset, t + 161_000)
    assert part.high_watermark == part.log_end_offset
    assert part.lagging_replicas(t + 161_000 + lag - 1, lag) == []


def test_a_refused_join_stops_holding_back_the_high_watermark(tmp_path: Path) -> None:
    """While a follower's joining is written the high watermark waits for it (maximal ISR); when the store refuses
    the write, the high watermark moves on without it at once, not at the next fetch of a follower whose position
    moved (idle in-sync followers' fetches do not look at the high watermark)."""

    async def main() -> None:
        port = FakeAlterIsr()
        part = leader(tmp_path, [LEADER], port)
        caught_up = part.log_end_offset
        part.follower_fetched(FOLLOWER, caught_up)  # joins: the write is under way
        await settle()
        part.append_as_leader(build_batch([(None, b"y")]))
        assert part.high_watermark == caught_up
        port.answer = None  # refused
        port.release.set()
        await settle()
        assert part.state.isr == [LEADER]
        assert part.high_watermark == part.log_end_offset

    asyncio.run(main())
