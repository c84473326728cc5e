"""One hosted partition (Kafka's Partition): its log, its leadership state, its high watermark, the followers it
tracks as leader, its ISR changes (decided here, written through the injected `AlterIsr` port), and the fetches
and acks=all produces waiting on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kbus.common.clock import now_ms
from kbus.protocol.record_batch import BatchHeader, iter_complete_batches
from kbus.server.log.epochs import CHECKPOINT_FILE, LeaderEpochCache
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.errors import NotLeaderError
from kbus.server.util.metrics import METRICS

if TYPE_CHECKING:
    from kbus.common.topic_config import LogConfig
    from kbus.protocol.validation import ValidationPolicy
    from kbus.server.log.log import AppendResult, FetchData, Log
    from kbus.server.log.producer_state import VerificationGuard
    from kbus.server.log.txn_index import AbortedTxn

log = logging.getLogger("kbus.server")

# (topic, partition, new ISR, the state the change was decided on) -> the written state, or None when the
# store refused it (leadership or the ISR moved on; the store's listener brings the newer state)
AlterIsr = Callable[[str, int, list[int], PartitionState], Awaitable[PartitionState | None]]
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP = -1, -2, -3


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
        alter_isr: AlterIsr | None = None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.state = state  # assigned here and in update_state only, each time with _leader beside it
        # whether this broker leads (is_leader), kept as a native bool: Fetch and Produce ask it for every partition
        # of every request, and reading it through the interpreted PartitionState cost two attribute lookups (and
        # cache misses: with 1,000 partitions in a Fetch, ~4 % of a full Fetch's CPU in a profile)
        self._leader = state.leader == local_broker_id
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
        if self.is_leader:
            self._start_leader_epoch(flush=False)
        self.epochs.flush()  # what loading and becoming leader changed, written once (if it differs from the file)
        # parked Fetch requests (Kafka's DelayedFetch), by what completes them: followers read to the log end and
        # wake on appends; consumers read to the high watermark (or the LSO, which moves only with it) and wake
        # when it advances, not on an append that they cannot see yet
        self._parked_log_end: set[asyncio.Future[None]] = set()
        self._parked_hw: set[asyncio.Future[None]] = set()
        self._hw_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._alter_isr = alter_isr
        self._isr_change: asyncio.Task[None] | None = None  # one ISR change at a time
        self._maximal_isr: list[int] | None = None  # the ISR with a replica whose joining is being written
        self.closed = False
        # what Produce validates this partition's batches against, built once per LogConfig (apis/produce.py)
        self.validation_policy: tuple[LogConfig, ValidationPolicy] | None = None
        # its topic's label set (metrics.labels_key(topic=...)) in kbus_messages_in_total / kbus_bytes_in_total, made
        # once: Produce counts every append under it, and the same tuple object is a dict's fastest key
        self.topic_labels: tuple[tuple[str, str], ...] = (("topic", topic),)
        # while the replica moves to another log dir: the lowest offset its log was truncated to since the mover
        # last looked (None: no move), so the copy drops what the truncation dropped
        self.truncated_since_copy: int | None = None
        if self.is_leader:
            self._init_followers()
            self.maybe_advance_high_watermark()  # a leader alone in its ISR commits what it has

    def _load_epochs(self) -> LeaderEpochCache:
        """The leader epoch cache as its checkpoint says, else (none, or a corrupt one) rebuilt from the batch
        headers; not written yet (the caller flushes)."""
        cache = LeaderEpochCache.load(self.log.dir)
        if cache is None:
            cache = LeaderEpochCache(self.log.dir / CHECKPOINT_FILE)
            cache.assign_from_headers(((h.partition_leader_epoch, h.base_offset) for h in self.log.iter_batches()),
                                      flush=False)
        # a torn tail may have been cut by recovery; an epoch that starts at the log end has no records (Kafka's
        # LogLoader: truncateFromEnd(nextOffset)), a leader assigns it again (_start_leader_epoch)
        cache.truncate_from_end(self.log.log_end_offset, flush=False)
        return cache

    def _start_leader_epoch(self, *, flush: bool = True) -> None:
        """Kafka's Partition.makeLeader (maybeAssignEpochStartOffset): the replica becoming leader of a new leader
        epoch caches it as starting at its log end offset, and checkpoints it (LeaderEpochCache.flush), then, not
        at the epoch's first append: a follower holding records of a later epoch than any in this log (successive
        elections in a short time) truncates to the right offset, and the first produce to 10,000 new partitions
        writes no checkpoints (their topic's creation does, in one background job: ReplicaManager.apply_metadata).
        A no-op for the epoch it already has (an update of the ISR, a restarted leader whose checkpoint has it)."""
        self.epochs.assign(self.state.leader_epoch, self.log.log_end_offset, flush=flush)

    # ------------------------------------------------------------------ role
    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode | None:
        """KIP-320: a client that knows a newer epoch than ours (UNKNOWN_LEADER_EPOCH) or an older one
        (FENCED_LEADER_EPOCH) must refresh its metadata; -1 means the client does not say. Here, in compiled code,
        because the Fetch handler asks it for every partition of every Fetch that carries an epoch."""
        if current_leader_epoch == -1:
            return None
        epoch = self.state.leader_epoch
        if current_leader_epoch < epoch:
            return ErrorCode.fenced_leader_epoch
        if current_leader_epoch > epoch:
            return ErrorCode.unknown_leader_epoch
        return None

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
        self._leader = state.leader == self.local_broker_id
        if self.is_leader:
            if state.leader_epoch > old_epoch:  # Kafka's isNewLeaderEpoch
                self._start_leader_epoch()
            self._init_followers()
            self.maybe_advance_high_watermark()
            return (not was_leader or state.leader_epoch != old_epoch), False
        became_follower = was_leader or state.leader_epoch != old_epoch
        if became_follower:
            self.followers = {}
            self.fail_waiters()
        return False, became_follower

    # ------------------------------------------------------------------ leader: appends and the high watermark
    def append_as_leader(
        self, records: bytes | bytearray | memoryview, *, from_coordinator: bool = False,
        verify_transactions: bool = False,
        verification_guard: VerificationGuard | None = None, transaction_version: int = 0,
        validated: BatchHeader | None = None,
    ) -> AppendResult:
        # Kafka's appendRecordsToLeader (leaderLogIfLocal): a caller that awaited something since it looked the
        # partition up (a Produce waiting on the transaction coordinator) may find this replica a follower now;
        # appending then would write into a follower's log, stamped with the new leader's epoch
        if not self.is_leader:
            raise NotLeaderError(f"Leader not local for partition {self.topic}-{self.index} on broker "
                                 f"{self.local_broker_id}")
        epoch = self.state.leader_epoch  # PartitionState is interpreted: read once, not twice
        result = self.log.append_as_leader(records, leader_epoch=epoch, from_coordinator=from_coordinator,
                                           verify_transactions=verify_transactions,
                                           verification_guard=verification_guard,
                                           transaction_version=transaction_version, validated=validated)
        if not result.duplicate:
            self.epochs.assign(epoch, result.first_offset)
            self.wake_followers()
            self.maybe_advance_high_watermark()
        return result

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may see: the HW, lowered by open or not yet replicated transactions."""
        return self.log.last_stable_offset(self.high_watermark)

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        # the lowest log end offset of the in-sync replicas (this one's, and each follower's as its fetches said; -1
        # for one not heard from), in a loop: no list and no builtin min() on every append and every follower fetch
        # that moves a follower
        new_hw = self.log.log_end_offset
        local = self.local_broker_id
        for r in self._maximal_isr or self.state.isr:
            if r != local:
                f = self.followers.get(r)
                leo = f.log_end_offset if f is not None else -1
                if leo < new_hw:
                    new_hw = leo
        if new_hw <= self.high_watermark:
            return False
        self.high_watermark = new_hw
        self._complete_hw_waiters()
        self._wake(self._parked_hw)
        return True

    def update_follower(self, replica_id: int, fetch_offset: int, now: int) -> bool:
        """A follower fetched from `fetch_offset` (= its log end offset). Returns True when it should join the ISR."""
        f = self.followers.get(replica_id)
        leo = self.log.log_end_offset
        if f is None or not self.log.log_start_offset <= fetch_offset <= leo:
            return False  # a diverged follower asking past our end is not "caught up" (it gets OFFSET_OUT_OF_RANGE)
        # Kafka's Replica.updateFetchState: caught up now, or at its previous fetch's leader log end
        if fetch_offset >= leo:
            f.last_caught_up_ms = now
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_leader_leo = leo
        f.last_fetch_ms = now
        if fetch_offset == f.log_end_offset and replica_id in self.state.isr:
            # an in-sync follower whose position has not moved (every idle partition of its fetch session, on
            # every fetch): the high watermark, a minimum over positions, cannot move with it, and it is in the
            # ISR already; only its caught-up time above changes
            return False
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

    # ------------------------------------------------------------------ leader: ISR expand / shrink
    def follower_fetched(self, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch: track its progress, and let it into the ISR once it has caught up."""
        if self.update_follower(replica_id, fetch_offset, now_ms()):
            new_isr = sorted({*self.state.isr, replica_id})
            if self._change_isr(self._expand_isr(replica_id, new_isr)):
                # Kafka's PendingExpandIsr: from the decision on, the high watermark waits for the joining replica
                # too. Otherwise records acknowledged while the ISR write is under way could be missing on a
                # replica that is in the ISR once it is written, and that replica may then be elected leader
                self._maximal_isr = new_isr

    def maybe_shrink_isr(self, max_lag_ms: int) -> None:
        """Drop followers that have not caught up for replica.lag.time.max.ms from the ISR."""
        if not self.is_leader or len(self.state.isr) <= 1:
            return
        lagging = self.lagging_replicas(now_ms(), max_lag_ms)
        if lagging:
            self._change_isr(self._shrink_isr(lagging))

    def _change_isr(self, change: Coroutine[object, None, None]) -> bool:
        """Run one ISR change at a time; False (and the change dropped) while another is under way."""
        if self._alter_isr is None or (self._isr_change is not None and not self._isr_change.done()):
            change.close()
            return False
        self._isr_change = asyncio.create_task(change)
        self._isr_change.add_done_callback(_log_failure)
        return True

    async def _expand_isr(self, replica_id: int, new_isr: list[int]) -> None:
        try:
            if replica_id in self.state.isr or not self.is_leader:
                return
            if await self._write_isr(new_isr):
                METRICS.inc("kbus_isr_expands_total")
                log.info("Partition %s-%d: expanded ISR to %s", self.topic, self.index, new_isr)
        finally:
            self._maximal_isr = None
            # a refused write leaves the joining replica out again: the high watermark no longer waits for it
            # (an idle in-sync follower's fetch does not look at the high watermark, see update_follower)
            self.maybe_advance_high_watermark()

    async def _shrink_isr(self, lagging: list[int]) -> None:
        new_isr = [r for r in self.state.isr if r not in lagging]
        if await self._write_isr(new_isr):
            METRICS.inc("kbus_isr_shrinks_total")
            log.info("Partition %s-%d: shrank ISR to %s (out of sync: %s)", self.topic, self.index, new_isr, lagging)

    async def _write_isr(self, new_isr: list[int]) -> bool:
        assert self._alter_isr is not None
        based_on = self.state
        epoch = based_on.leader_epoch
        state = await self._alter_isr(self.topic, self.index, new_isr, based_on)
        if state is None or self.closed:
            return False
        if not self.is_leader or state.leader_epoch != epoch or self.state.leader_epoch != epoch:
            return False  # leadership moved while we wrote: the store's listener brings the newer state
        self.update_state(state)
        return True

    def cancel_isr_change(self) -> None:
        if self._isr_change is not None:
            self._isr_change.cancel()

    def close(self) -> None:
        """The partition is no longer hosted here: answer every waiter, forget pending ISR changes."""
        self.closed = True
        self.epochs.close()  # a queued checkpoint write must not land in a new topic's directory of the same name
        self.cancel_isr_change()
        self.fail_waiters()

    async def wait_for_high_watermark(self, offset: int, timeout: float) -> bool:
        """acks=all: True once the high watermark reaches `offset`, False on timeout or lost leadership."""
        if self.high_watermark >= offset:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._hw_waiters.append((offset, fut))
        # a timer on the future itself, not asyncio.wait_for (a second future, a task switch and callbacks per
        # acks=all request); a waiter answered by _complete_hw_waiters or fail_waiters has left the list already,
        # so only one that timed out or was cancelled is looked for in it (not a copy of the list per request)
        timer = loop.call_later(timeout, _time_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            if not fut.done() or fut.cancelled() or not fut.result():
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

    # ------------------------------------------------------------------ reads
    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def read(self, offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool) -> FetchData:
        return self.log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return self.log.collect_aborted_txns(fetch_offset, upper_bound)

    def offset_for_timestamp(self, timestamp: int, read_committed: bool) -> tuple[int, int]:
        """ListOffsets: (offset, timestamp) for one query; (-1, -1) when no committed record matches."""
        if timestamp == LATEST_TIMESTAMP:
            return (self.last_stable_offset if read_committed else self.high_watermark), -1
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            found = self.log.max_timestamp_and_offset()
            if found is not None and found[1] < self.high_watermark:
                return found[1], found[0]
            return -1, -1
        at = self.log.offset_for_timestamp(timestamp)
        if at is not None and at[0] < self.high_watermark:
            return at
        return -1, -1

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of the requested epoch in this log."""
        return self.epochs.end_offset_for(leader_epoch, self.log.log_end_offset)

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
            if self.truncated_since_copy is not None:
                self.truncated_since_copy = min(self.truncated_since_copy, offset)
        self.epochs.truncate_from_end(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The follower is behind the leader's log start: drop everything and continue from there."""
        self.log.truncate_fully_and_start_at(offset)
        if self.truncated_since_copy is not None:
            self.truncated_since_copy = -1  # nothing of the copy holds
        self.epochs.truncate_fully()
        self.high_watermark = offset

    def delete_records(self, before_offset: int) -> int:
        """Advance the log start (DeleteRecords on the leader; the leader's log start on a follower)."""
        start = self.log.delete_records(before_offset)
        self.epochs.truncate_from_start(start)
        self.high_watermark = max(self.high_watermark, start)
        return start

    # ------------------------------------------------------------------ long-poll support
    def add_waiter(self, fut: asyncio.Future[None], *, log_end: bool) -> None:
        """Park a Fetch: `log_end` (a follower's) until the next append, else (a consumer's) until the high
        watermark advances; any of them when the partition changes hands or closes."""
        (self._parked_log_end if log_end else self._parked_hw).add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._parked_log_end.discard(fut)
        self._parked_hw.discard(fut)

    def wake_followers(self) -> None:
        self._wake(self._parked_log_end)

    def wake_fetchers(self) -> None:
        """Every parked Fetch (leadership moved, the partition closes, the broker stops)."""
        self._wake(self._parked_log_end)
        self._wake(self._parked_hw)

    @staticmethod
    def _wake(waiters: set[asyncio.Future[None]]) -> None:
        if waiters:
            woken = list(waiters)
            waiters.clear()
            for fut in woken:
                if not fut.done():
                    fut.set_result(None)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("ISR change failed: %s", task.exception())


def _time_out(fut: asyncio.Future[bool]) -> None:
    """wait_for_high_watermark's timer: the replicas did not catch up in time."""
    if not fut.done():
        fut.set_result(False)
