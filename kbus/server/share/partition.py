"""One share-partition (KIP-932; Kafka's SharePartition): the state a share group keeps for one topic-partition,
on that partition's leader.

Records between the share-partition start offset (SPSO) and `next_offset` (one past the SPEO) are in flight: each
range of them is AVAILABLE (to be acquired again), ACQUIRED by one member under an acquisition lock (with a
deadline), ACKNOWLEDGED or ARCHIVED. Below the SPSO everything is done; at and above `next_offset` nothing has
been delivered. A range is kept whole as long as its records share their state, so a fetch acquiring a batch of
500 records costs one entry, not 500; an acknowledgement splits only where it must.

A record's delivery count goes up each time it is acquired; one released (or whose lock expires) after
`delivery_count_limit` deliveries is archived instead of becoming available again. At most `max_in_flight`
records (group.share.partition.max.record.locks) lie between the SPSO and `next_offset`.

Pure state: the clock is passed in, reading the log is the caller's (`manager.py`).
"""

from __future__ import annotations

import asyncio
import bisect
import enum
from dataclasses import dataclass

from kbus.server.share.state import ShareStateKey


class RecordState(enum.IntEnum):
    # Kafka's RecordState ids (the ones __share_group_state's StateBatch carries)
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class InvalidRecordState(Exception):
    """An acknowledgement of records this member does not hold (Kafka's INVALID_RECORD_STATE)."""


@dataclass(slots=True)
class Range:
    first: int
    last: int  # inclusive
    state: RecordState
    delivery_count: int
    member_id: str = ""
    deadline: float = 0.0  # of the acquisition lock (ACQUIRED only), in the caller's clock


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    delivery_count: int


class SharePartition:
    def __init__(self, start_offset: int, *, lock_duration_ms: int, delivery_count_limit: int,
                 max_in_flight: int) -> None:
        self.start_offset = start_offset  # SPSO
        self.next_offset = start_offset  # SPEO + 1: the first offset never acquired
        self.ranges: list[Range] = []  # sorted, contiguous from start_offset to next_offset - 1
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        # share.isolation.level=read_committed: acquire up to the LSO only, archive aborted transactions' records
        self.read_committed = False
        self.leader_epoch = -1
        # the durable state: its key in __share_group_state, epoch, the last snapshot written, writes one at a time
        self.state_key: ShareStateKey | None = None
        self.state_epoch = 0
        self.persisted: tuple[int, tuple[tuple[int, int, int, int], ...]] | None = None
        self.write_lock = asyncio.Lock()

    # ---------------------------------------------------------------- reading the state

    @property
    def end_offset(self) -> int:
        """The SPEO, Kafka's last offset in flight (start_offset - 1 when nothing is)."""
        return self.next_offset - 1

    def in_flight(self) -> int:
        return self.next_offset - self.start_offset

    def has_available(self) -> bool:
        return any(r.state is RecordState.AVAILABLE for r in self.ranges)

    def first_available(self) -> int | None:
        for r in self.ranges:
            if r.state is RecordState.AVAILABLE:
                return r.first
        return None

    def earliest_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self.ranges if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def snapshot(self) -> tuple[int, tuple[tuple[int, int, int, int], ...]]:
        """What is kept durably (Kafka's persisted StateBatches): the SPSO and the in-flight ranges, an acquired
        one as AVAILABLE with its delivery count (a new leader delivers it again, counting this delivery)."""
        return self.start_offset, tuple(
            (r.first, r.last, int(RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state),
             r.delivery_count) for r in self.ranges)

    def restore(self, start_offset: int, batches: tuple[tuple[int, int, int, int], ...]) -> None:
        """The state a previous leader wrote: offsets between the batches (none when it was kbus) are done."""
        self.start_offset = self.next_offset = start_offset
        self.ranges = []
        for first, last, state, count in sorted(batches):
            if last < self.next_offset:
                continue
            first = max(first, self.next_offset)
            if first > self.next_offset:
                self.ranges.append(Range(self.next_offset, first - 1, RecordState.ARCHIVED, 0))
            st = RecordState(state) if state in (0, 2, 4) else RecordState.AVAILABLE
            self.ranges.append(Range(first, last, st, count))
            self.next_offset = last + 1
        self._merge_and_advance()

    # ---------------------------------------------------------------- acquiring

    def expire_locks(self, now: float) -> bool:
        """Acquisition locks past their deadline: the records go back (or to the archive). True if any did."""
        changed = False
        for r in self.ranges:
            if r.state is RecordState.ACQUIRED and r.deadline <= now:
                self._release(r)
                changed = True
        if changed:
            self._merge_and_advance()
        return changed

    def acquire(self, member_id: str, data_first: int, data_last: int, max_records: int,
                now: float) -> list[Acquired]:
        """Acquire for `member_id` what lies in [data_first, data_last] (the offsets of the batches just read from
        the log): available records first, then records never delivered, at most `max_records` of them (Kafka
        rounds up to whole batches; kbus stops at the limit) and within the in-flight limit."""
        deadline = now + self.lock_duration_ms / 1000
        out: list[Acquired] = []
        budget = max_records
        i = bisect.bisect_left([r.last for r in self.ranges], data_first)
        while i < len(self.ranges) and budget > 0:
            r = self.ranges[i]
            if r.first > data_last:
                break
            if r.state is RecordState.AVAILABLE:
                lo, hi = max(r.first, data_first), min(r.last, data_last, max(r.first, data_first) + budget - 1)
                i = self._split(i, lo, hi)
                r = self.ranges[i]
                r.state, r.member_id, r.deadline = RecordState.ACQUIRED, member_id, deadline
                r.delivery_count += 1
                out.append(Acquired(r.first, r.last, r.delivery_count))
                budget -= r.last - r.first + 1
            i += 1
        if budget > 0 and data_last >= self.next_offset:
            lo = max(self.next_offset, data_first)
            hi = min(data_last, lo + budget - 1, self.start_offset + self.max_in_flight - 1)
            if hi >= lo:
                if lo > self.next_offset:  # offsets with no record (compacted away, control batches): done
                    self.ranges.append(Range(self.next_offset, lo - 1, RecordState.ARCHIVED, 0))
                self.ranges.append(Range(lo, hi, RecordState.ACQUIRED, 1, member_id, deadline))
                self.next_offset = hi + 1
                out.append(Acquired(lo, hi, 1))
                self._merge_and_advance()
        out.sort(key=lambda a: a.first)
        return out

    def archive_acquired(self, acquired: list[Acquired], aborted: list[tuple[int, int]]) -> list[Acquired]:
        """read_committed (`share.isolation.level`): the records of aborted transactions among those just acquired
        are archived, never delivered (Kafka's SharePartition.filterAbortedTransactionalAcquiredRecords); returns
        what is left to deliver. `aborted`: the inclusive offset ranges of the aborted transactions' batches."""
        if not aborted or not acquired:
            return acquired
        out: list[Acquired] = []
        for a in acquired:
            lo = a.first
            for first, last in sorted(aborted):
                if last < lo or first > a.last:
                    continue
                if first > lo:
                    out.append(Acquired(lo, first - 1, a.delivery_count))
                self._apply(max(first, lo), min(last, a.last), AckType.GAP, 0.0)
                lo = min(last, a.last) + 1
            if lo <= a.last:
                out.append(Acquired(lo, a.last, a.delivery_count))
        self._merge_and_advance()
        return out

    def skip_to(self, offset: int) -> None:
        """Nothing in flight and the log starts later (records deleted or compacted away): move the SPSO."""
        if offset > self.next_offset and not self.ranges:
            self.start_offset = self.next_offset = offset

    # ---------------------------------------------------------------- acknowledging

    def acknowledge(self, member_id: str, first: int, last: int, types: tuple[int, ...], now: float) -> None:
        """One AcknowledgementBatch: one type for the whole range, or one per offset. Every record must be
        ACQUIRED by `member_id` (a GAP is an offset with no record: it is archived whatever its state)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidRecordState("invalid acknowledgement batch")
        if any(t not in AckType.__members__.values() for t in types):
            raise InvalidRecordState(f"unknown acknowledge type in {types}")
        if first < self.start_offset or last >= self.next_offset:
            raise InvalidRecordState(f"offsets {first}-{last} are not in flight")
        for r in self._covering(first, last):
            if r.state is not RecordState.ACQUIRED or r.member_id != member_id:
                gaps_only = all(types[0 if len(types) == 1 else o - first] == AckType.GAP
                                for o in range(max(r.first, first), min(r.last, last) + 1))
                if not gaps_only:
                    raise InvalidRecordState(f"records {max(r.first, first)}-{min(r.last, last)} are not acquired "
                                             "by this member")
        if len(types) == 1:
            self._apply(first, last, AckType(types[0]), now)
        else:
            # runs of one type: a batch acknowledged the same way throughout stays one entry
            start = first
            for o in range(first + 1, last + 2):
                if o > last or types[o - first] != types[start - first]:
                    self._apply(start, o - 1, AckType(types[start - first]), now)
                    start = o
        self._merge_and_advance()

    def release_member(self, member_id: str) -> None:
        """The member's share session closed: what it holds is available to the others again."""
        for r in self.ranges:
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                self._release(r)
        self._merge_and_advance()

    # ---------------------------------------------------------------- internals

    def _covering(self, first: int, last: int) -> list[Range]:
        i = bisect.bisect_left([r.last for r in self.ranges], first)
        out = []
        while i < len(self.ranges) and self.ranges[i].first <= last:
            out.append(self.ranges[i])
            i += 1
        return out

    def _split(self, i: int, lo: int, hi: int) -> int:
        """Split range i so that [lo, hi] is a range of its own; returns its index."""
        r = self.ranges[i]
        if r.first < lo:
            self.ranges.insert(i, Range(r.first, lo - 1, r.state, r.delivery_count, r.member_id, r.deadline))
            i += 1
            r.first = lo
        if r.last > hi:
            self.ranges.insert(i + 1, Range(hi + 1, r.last, r.state, r.delivery_count, r.member_id, r.deadline))
            r.last = hi
        return i

    def _apply(self, first: int, last: int, ack: AckType, now: float) -> None:
        lasts = [r.last for r in self.ranges]
        i = bisect.bisect_left(lasts, first)
        while i < len(self.ranges) and self.ranges[i].first <= last:
            i = self._split(i, max(first, self.ranges[i].first), min(last, self.ranges[i].last))
            r = self.ranges[i]
            if ack is AckType.ACCEPT:
                r.state, r.member_id = RecordState.ACKNOWLEDGED, ""
            elif ack in (AckType.REJECT, AckType.GAP):
                r.state, r.member_id = RecordState.ARCHIVED, ""
            elif ack is AckType.RELEASE:
                self._release(r)
            else:  # RENEW: the member keeps the records for another lock duration
                r.deadline = now + self.lock_duration_ms / 1000
            i += 1

    def _release(self, r: Range) -> None:
        r.member_id, r.deadline = "", 0.0
        r.state = RecordState.ARCHIVED if r.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE

    def _merge_and_advance(self) -> None:
        # the SPSO moves past everything done at the front
        drop = 0
        for r in self.ranges:
            if r.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            drop += 1
        if drop:
            self.start_offset = self.ranges[drop - 1].last + 1
            del self.ranges[:drop]
        # neighbours with the same state and count become one range again (the acquired ones only if the same
        # member holds them under the same lock)
        merged: list[Range] = []
        for r in self.ranges:
            p = merged[-1] if merged else None
            if (p is not None and p.state is r.state and p.delivery_count == r.delivery_count
                    and p.member_id == r.member_id and p.deadline == r.deadline):
                p.last = r.last
            else:
                merged.append(r)
        self.ranges = merged
