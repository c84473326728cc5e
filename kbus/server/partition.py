"""One hosted partition: its log, its leadership state, its high watermark, the followers it tracks as leader,
and the fetches and acks=all produces waiting on it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.metadata.types import PartitionState
from kbus.server.replication.epochs import LeaderEpochCache

if TYPE_CHECKING:
    from kbus.server.log.log import AppendResult, Log


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica): its log end offset, from its fetch offset."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        log: Log,
        state: PartitionState,
        local_broker_id: int,
        *,
        topic_id: object = None,
        checkpointed_high_watermark: int | None = None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.state = state
        # Everything in a sole replica's log is committed. A replica of a replicated partition starts from its
        # checkpointed high watermark (Kafka's replication-offset-checkpoint), never from its log end: records past
        # it may never have been committed, and consumers must not see them until the ISR has them.
        if len(state.replicas) <= 1:
            self.high_watermark = log.log_end_offset
        else:
            saved = checkpointed_high_watermark if checkpointed_high_watermark is not None else log.log_start_offset
            self.high_watermark = max(log.log_start_offset, min(saved, log.log_end_offset))
        self.followers: dict[int, FollowerState] = {}
        self.epochs = self._load_epochs()
        self._waiters: set[asyncio.Future[None]] = set()
        self._hw_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        if self.is_leader:
            self._init_followers()
            self.maybe_advance_high_watermark()  # a leader alone in its ISR commits what it has

    def _load_epochs(self) -> LeaderEpochCache:
        cache = LeaderEpochCache.load(self.log.dir)
        if cache is None:
            cache = LeaderEpochCache(self.log.dir / "leader-epoch-checkpoint")
            cache.assign_from_headers((h.partition_leader_epoch, h.base_offset) for h in self.log.iter_batches())
        cache.truncate_from_end(self.log.log_end_offset)  # a torn tail may have been cut by recovery
        return cache

    # ------------------------------------------------------------------ role
    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def replicated(self) -> bool:
        return len(self.state.replicas) > 1

    def _init_followers(self) -> None:
        now = now_ms()
        self.followers = {
            r: self.followers.get(r) or FollowerState(last_caught_up_ms=now)
            for r in self.state.replicas
            if r != self.local_broker_id
        }

    def update_state(self, state: PartitionState) -> tuple[bool, bool]:
        """Apply new metadata. Returns (became_leader, became_follower)."""
        was_leader, old_epoch = self.is_leader, self.state.leader_epoch
        self.state = state
        if self.is_leader:
            self._init_followers()
            self.maybe_advance_high_watermark()
            return (not was_leader or state.leader_epoch != old_epoch), False
        became_follower = was_leader or state.leader_epoch != old_epoch
        if became_follower:
            self.followers = {}
            self.fail_waiters()
        return False, became_follower

    # ------------------------------------------------------------------ leader: appends and the high watermark
    def append_as_leader(self, records: bytes, *, from_coordinator: bool = False) -> AppendResult:
        result = self.log.append_as_leader(records, leader_epoch=self.state.leader_epoch,
                                           from_coordinator=from_coordinator)
        if not result.duplicate:
            self.epochs.assign(self.state.leader_epoch, result.first_offset)
            self.maybe_advance_high_watermark()
            self.wake_fetchers()
        return result

    def in_sync_leos(self) -> list[int]:
        leos = [self.log.log_end_offset]
        for r in self.state.isr:
            if r != self.local_broker_id:
                f = self.followers.get(r)
                leos.append(f.log_end_offset if f is not None else -1)
        return leos

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may see: the HW, lowered by open or not yet replicated transactions."""
        return self.log.last_stable_offset(self.high_watermark)

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        new_hw = min(self.in_sync_leos())
        if new_hw <= self.high_watermark:
            return False
        self.high_watermark = new_hw
        self._complete_hw_waiters()
        self.wake_fetchers()
        return True

    def update_follower(self, replica_id: int, fetch_offset: int, now: int) -> bool:
        """A follower fetched from `fetch_offset` (= its log end offset). Returns True when it should join the ISR."""
        f = self.followers.get(replica_id)
        leo = self.log.log_end_offset
        if f is None or not self.log.log_start_offset <= fetch_offset <= leo:
            return False  # a diverged follower asking past our end is not "caught up" (it gets OFFSET_OUT_OF_RANGE)
        if fetch_offset >= leo:
            f.last_caught_up_ms = now
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_leader_leo = leo
        f.last_fetch_ms = now
        f.log_end_offset = fetch_offset
        self.maybe_advance_high_watermark()
        epoch_start = self._current_epoch_start()
        return replica_id not in self.state.isr and fetch_offset >= max(self.high_watermark, epoch_start)

    def _current_epoch_start(self) -> int:
        for epoch, start in reversed(self.epochs.entries):
            if epoch == self.state.leader_epoch:
                return start
        return self.log.log_end_offset

    def lagging_replicas(self, now: int, max_lag_ms: int) -> list[int]:
        """ISR followers that have not caught up for replica.lag.time.max.ms (ISR shrink candidates)."""
        out = []
        for r in self.state.isr:
            if r == self.local_broker_id:
                continue
            f = self.followers.get(r)
            if f is None or now - f.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return out

    async def wait_for_high_watermark(self, offset: int, timeout: float) -> bool:
        """acks=all: True once the high watermark reaches `offset`, False on timeout or lost leadership."""
        if self.high_watermark >= offset:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._hw_waiters.append((offset, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        finally:
            self._hw_waiters = [(o, f) for o, f in self._hw_waiters if f is not fut]

    def _complete_hw_waiters(self) -> None:
        if not self._hw_waiters:
            return
        keep = []
        for offset, fut in self._hw_waiters:
            if offset <= self.high_watermark:
                if not fut.done():
                    fut.set_result(True)
            else:
                keep.append((offset, fut))
        self._hw_waiters = keep

    def fail_waiters(self) -> None:
        for _, fut in self._hw_waiters:
            if not fut.done():
                fut.set_result(False)
        self._hw_waiters = []
        self.wake_fetchers()

    # ------------------------------------------------------------------ follower
    def append_as_follower(self, records: bytes, leader_high_watermark: int) -> AppendResult | None:
        result = None
        if records:
            result = self.log.append_as_follower(records)
            self.epochs.assign_from_headers(
                (h.partition_leader_epoch, h.base_offset) for h in iter_complete_batches(records)
            )
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        return result

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            self.log.truncate_to(offset)
        self.epochs.truncate_from_end(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The follower is behind the leader's log start: drop everything and continue from there."""
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.entries.clear()
        self.epochs.save()
        self.high_watermark = offset

    def delete_records(self, before_offset: int) -> int:
        """Advance the log start (DeleteRecords on the leader; the leader's log start on a follower)."""
        start = self.log.delete_records(before_offset)
        self.epochs.truncate_from_start(start)
        self.high_watermark = max(self.high_watermark, start)
        return start

    # ------------------------------------------------------------------ long-poll support
    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def wake_fetchers(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
