"""Idempotent-producer state of one partition (Kafka's ProducerStateManager), built from batch headers only.

Per producer id: the current epoch and the metadata of its last 5 batches (a retried batch that matches one of
them is a duplicate: acknowledged with its original offsets, stored once). Snapshots (``<offset>.snapshot``,
JSON in kbus, binary in Kafka: one of ours is never confused with Kafka's because a file that does not parse is
ignored and the state rebuilt from the log) let a restart skip re-reading the log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kbus.protocol.control import EndTxnMarker
from kbus.protocol.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from kbus.server.log.background_sync import fsync_dir, replace_file
from kbus.server.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_SNAPSHOT_VERSION = 1
_INT32_MAX = 2**31 - 1
_INT16_MAX = 2**15 - 1  # Short.MAX_VALUE: the epoch a fence at the last usable epoch leaves


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset`` (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset,
        )

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.producer_epoch:
            return None
        first, last = h.base_sequence, h.last_sequence
        for b in self.batches:
            if b.first_seq == first and b.last_seq == last:
                return b
        return None

    def add_batch(self, h: BatchHeader, first_offset: int, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        """Record a stored batch; for a transaction marker, return the transaction it completes."""
        if h.producer_epoch != self.producer_epoch:
            self.producer_epoch = h.producer_epoch
            self.batches.clear()
        last_offset = first_offset + h.last_offset_delta
        if h.base_sequence != NO_SEQUENCE and not h.is_control:
            self.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, first_offset, last_offset,
                                              h.max_timestamp))
        self.last_timestamp = max(self.last_timestamp, h.max_timestamp)
        if h.is_control:
            completed = None
            if marker is not None:
                self.coordinator_epoch = max(self.coordinator_epoch, marker.coordinator_epoch)
                # a marker with no open transaction completes an empty one at its own offset, as Kafka's
                # appendEndTxnMarker does (an admin abort of a hanging transaction, a retried marker)
                start = self.current_txn_first_offset if self.current_txn_first_offset is not None else first_offset
                completed = CompletedTxn(self.producer_id, start, first_offset, marker.is_abort)
            self.current_txn_first_offset = None
            return completed
        if h.is_transactional and self.current_txn_first_offset is None:
            self.current_txn_first_offset = first_offset
        return None


class VerificationGuard:
    """Kafka's VerificationGuard (KIP-890): a unique object made when a partition leader starts verifying that a
    producer's transaction includes the partition. The append that follows must present the same object, so a
    verification answered before a marker ended the transaction cannot admit a write to the next one (ABA)."""

    __slots__ = ()


@dataclass(slots=True)
class VerificationStateEntry:
    """Kafka's VerificationStateEntry: a verification under way for one producer id, until the transaction's
    first batch (or a marker) is appended or it expires with producer.id.expiration.ms."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    # Kafka's supportsEpochBump: a transactions-v2 client's write (Produce v12+), whose first batch on a partition
    # where the producer has no batch must have sequence 0
    supports_epoch_bump: bool = False
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        # the lowest sequence seen while verifying: a later (higher) one must not be written before it, or a
        # retried lower one would loop on OUT_OF_ORDER_SEQUENCE; a new epoch restarts the sequence
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerAppend:
    """Validates the producer batches of one append against the current state, staging the updates so that
    nothing changes if the append fails."""

    def __init__(
        self, manager: ProducerStateManager, *, validate: bool, verify_transactions: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> None:
        self._manager = manager
        self._validate = validate
        self._staged: dict[int, ProducerStateEntry] = {}
        # a client's Produce with transaction.partition.verification.enable: the guard its verification returned
        self._verify = verify_transactions
        self._guard = verification_guard
        self._transactional: set[int] = set()  # producers whose verification state the commit clears

    def _entry(self, producer_id: int) -> tuple[ProducerStateEntry, ProducerStateEntry | None]:
        current = self._manager.producers.get(producer_id)
        staged = self._staged.get(producer_id)
        if staged is None:
            staged = current.copy() if current is not None else ProducerStateEntry(producer_id)
            self._staged[producer_id] = staged
        return staged, current

    def check(self, h: BatchHeader) -> BatchMetadata | None:
        """Raise on a fenced epoch or a sequence gap; return the original batch when ``h`` is a retry."""
        entry, current = self._entry(h.producer_id)
        if not self._validate:
            return None
        duplicate = entry.find_duplicate(h)
        if duplicate is not None:
            return duplicate
        if h.is_control:
            return None
        manager = self._manager
        if self._verify and h.is_transactional and not manager.has_ongoing_transaction(h.producer_id,
                                                                                            h.producer_epoch):
            # Kafka's batchMissingRequiredVerification: a transaction's first write on this partition only with
            # the guard of a verification the coordinator answered (KIP-890)
            state = manager.verification_states.get(h.producer_id)
            if state is None or self._guard is None or state.guard is not self._guard:
                raise InvalidTxnStateError("Record was not part of an ongoing transaction")
        if h.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {h.producer_id} is {h.producer_epoch}, which is smaller than the last seen "
                f"epoch {entry.producer_epoch}"
            )
        if not h.is_transactional and entry.current_txn_first_offset is not None:
            # whatever its epoch (Kafka's appendDataBatch): a newer epoch does not end the open transaction, only
            # its marker does, so a non-transactional write would sit inside it
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {h.producer_id} at offset "
                f"{entry.current_txn_first_offset} but found a non-transactional batch"
            )
        if h.base_sequence == NO_SEQUENCE:
            return None
        verifying = manager.verification_states.get(h.producer_id) if manager.verification_states else None
        if verifying is not None and verifying.supports_epoch_bump and h.base_sequence != 0 \
                and (current is None or not current.batches):
            # Kafka 4's checkSequence: a transactions-v2 producer's first batch where it has no batch starts at 0
            # (a later one arriving first, its predecessor lost or still being retried, is refused)
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for producer {h.producer_id}: {h.base_sequence} (incoming seq. number). "
                f"Expected sequence 0 for transactions v2 idempotent producer with no existing state."
            )
        if verifying is not None and h.base_sequence > verifying.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {h.producer_id}: {h.base_sequence} (incoming seq. "
                f"number), {verifying.lowest_sequence} (earliest seen sequence)"
            )
        if h.producer_epoch != entry.producer_epoch:
            # a new epoch starts at sequence 0, unless nothing is known of the producer (Kafka >= 2.5 accepts
            # any first sequence then: its earlier batches may have been removed by retention)
            if h.base_sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {h.producer_id}: {h.producer_epoch} "
                    f"(request epoch), {h.base_sequence} (seq. number), {entry.producer_epoch} (current epoch)"
                )
            return None
        if entry.batches:
            last_seq = entry.last_seq
        elif current is not None and current.producer_epoch == h.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # with no batch of this epoch known (a transactions-v2 marker bumped the epoch and cleared them) the last
        # sequence is NO_SEQUENCE and only 0 follows it (Kafka's inSequence(-1, seq)); any sequence only when the
        # producer's epoch is unknown here (Kafka >= 2.5: its batches may have been removed by retention)
        known_epoch = current is not None and current.producer_epoch != NO_PRODUCER_EPOCH
        if known_epoch and not _in_sequence(last_seq, h.base_sequence):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {h.producer_id}: {h.base_sequence} (incoming seq. "
                f"number), {last_seq} (current end sequence number)"
            )
        return None

    def check_marker(self, h: BatchHeader, marker: EndTxnMarker, transaction_version: int = 0) -> None:
        """Kafka's appendEndTxnMarker checks: the marker's epoch and coordinator epoch may not go backwards.

        `transaction_version` is the one WriteTxnMarkers v2 gives the marker (KIP-1228; 0 before v2). At 2 the
        coordinator bumped the epoch before writing the marker, so a valid marker's epoch is above the current
        one (Kafka's checkProducerEpoch): one equal to it is a late duplicate of the previous transaction's
        marker, which must not end the next transaction (already writing at that epoch). The same epoch with no
        transaction open is a retry of a marker already written (KAFKA-19999), as is Short.MAX_VALUE (a fence at
        the last epoch cannot bump it): both are written again."""
        entry, _ = self._entry(h.producer_id)
        epoch, current = h.producer_epoch, entry.producer_epoch
        if transaction_version >= 2:
            if epoch <= current and not (epoch == current and (entry.current_txn_first_offset is None
                                                               or epoch == _INT16_MAX)):
                raise InvalidProducerEpochError(
                    f"Transaction marker epoch {epoch} of producer {h.producer_id} is <= the current epoch "
                    f"{current} (TV{transaction_version})"
                )
        elif epoch < current:
            raise InvalidProducerEpochError(
                f"Transaction marker epoch {epoch} of producer {h.producer_id} is older than the current epoch "
                f"{current}"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producer {h.producer_id}: {marker.coordinator_epoch} "
                f"(marker), {entry.coordinator_epoch} (current)"
            )

    def stage(self, h: BatchHeader, first_offset: int, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        entry, _ = self._entry(h.producer_id)
        if h.is_transactional:
            self._transactional.add(h.producer_id)
        return entry.add_batch(h, first_offset, marker)

    def commit(self) -> None:
        manager = self._manager
        manager.producers.update(self._staged)
        if self._transactional:
            manager.transactional = True
        if manager.verification_states:
            # a data batch opened the transaction (it is ongoing now) or a marker ended it: verification is over
            for producer_id in self._transactional:
                manager.verification_states.pop(producer_id, None)


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.verification_states: dict[int, VerificationStateEntry] = {}  # in memory only, as Kafka's
        # False while no transactional batch has been stored (or loaded) since the state was last cleared: no
        # transaction can be open, and first_unstable_offset() answers without a pass over every producer (it runs
        # for each partition of every Fetch, through the last stable offset)
        self.transactional = False

    def begin_append(
        self, *, validate: bool = True, verify_transactions: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> ProducerAppend:
        return ProducerAppend(self, validate=validate, verify_transactions=verify_transactions,
                              verification_guard=verification_guard)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Kafka 4's hasOngoingTransaction: a transaction of this producer id AND epoch is open here. With
        transactions v2 the epoch is bumped at each transaction's end, so a batch of the next transaction that
        arrives before the previous one's marker is not taken for part of it (it must be added first)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None \
            and entry.producer_epoch == producer_epoch

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int, supports_epoch_bump: bool = False
    ) -> VerificationStateEntry:
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch,
                                                                                   supports_epoch_bump)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def replay(self, h: BatchHeader, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        """Rebuild state from a stored batch (recovery, follower appends): no validation."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
        if h.is_transactional:
            self.transactional = True
        return entry.add_batch(h, h.base_offset, marker)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's lastStableOffset(completedTxn): the first offset of the oldest other open transaction, else
        the offset after the marker."""
        offsets = [e.current_txn_first_offset for e in self.producers.values()
                   if e.current_txn_first_offset is not None and e.producer_id != completed.producer_id]
        return min(offsets) if offsets else completed.last_offset + 1

    def ongoing_transactions(self) -> list[tuple[int, int, int]]:
        """(producer id, epoch, first offset) of every open transaction (DescribeProducers, find-hanging)."""
        return [(e.producer_id, e.producer_epoch, e.current_txn_first_offset) for e in self.producers.values()
                if e.current_txn_first_offset is not None]

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def clear(self) -> None:
        self.producers.clear()
        self.verification_states.clear()

    def first_unstable_offset(self) -> int | None:
        """Offset of the first record of the oldest open transaction (the last stable offset's bound)."""
        if not self.transactional:
            return None
        offsets = [e.current_txn_first_offset for e in self.producers.values()
                   if e.current_txn_first_offset is not None]
        return min(offsets) if offsets else None

    def remove_expired(self, now_ms: int, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> int:
        if not self.producers and not self.verification_states:
            return 0  # (most logs, every retention pass: no list made)
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        # verifications that never led to an append (the coordinator said no, the client gave up)
        for pid in [p for p, v in self.verification_states.items() if now_ms - v.timestamp >= expiration_ms]:
            del self.verification_states[pid]
        return len(expired)

    # --- snapshots -------------------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for p in self.dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            with contextlib.suppress(ValueError):
                offsets.append(int(p.name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(offsets)

    def take_snapshot(self, offset: int, fsync: bool = True) -> None:
        """Write the snapshot at `offset`; fsync=False leaves making it durable to the caller (sync_snapshot after
        a roll, one file-system sync at shutdown)."""
        data = {
            "version": _SNAPSHOT_VERSION,
            "offset": offset,
            "producers": [
                {
                    "producer_id": e.producer_id,
                    "producer_epoch": e.producer_epoch,
                    "coordinator_epoch": e.coordinator_epoch,
                    "last_timestamp": e.last_timestamp,
                    "current_txn_first_offset": e.current_txn_first_offset,
                    "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                                for b in e.batches],
                }
                for e in self.producers.values()
            ],
        }
        replace_file(self.snapshot_path(offset), json.dumps(data, separators=(",", ":")), sync=fsync)

    def sync_snapshot(self, offset: int) -> None:
        """fsync the snapshot at `offset` (and its directory) if it is still there."""
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.snapshot_path(offset), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(self.dir)

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry]:
        with open(self.snapshot_path(offset)) as f:
            data = json.load(f)
        if data.get("version") != _SNAPSHOT_VERSION or data.get("offset") != offset:
            raise ValueError("unknown snapshot version or offset")
        producers: dict[int, ProducerStateEntry] = {}
        for p in data["producers"]:
            e = ProducerStateEntry(int(p["producer_id"]), int(p["producer_epoch"]))
            e.coordinator_epoch = int(p["coordinator_epoch"])
            e.last_timestamp = int(p["last_timestamp"])
            e.current_txn_first_offset = p["current_txn_first_offset"]
            for b in p["batches"]:
                e.batches.append(BatchMetadata(*(int(x) for x in b)))
            producers[e.producer_id] = e
        return producers

    def load(self, log_start_offset: int, log_end_offset: int) -> int:
        """Load the newest usable snapshot at or below the log end; returns the offset from which the log must
        be replayed. Snapshots past the log end (the log was truncated) are deleted."""
        self.producers = {}
        self.transactional = False  # until a loaded snapshot or a replayed batch says otherwise
        for tmp in self.dir.glob(f"*{SNAPSHOT_SUFFIX}.tmp"):
            tmp.unlink(missing_ok=True)
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset:
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            if offset < log_start_offset:
                break
            try:
                self.producers = self._read_snapshot(offset)
                self.transactional = any(e.current_txn_first_offset is not None for e in self.producers.values())
                return offset
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("%s: ignoring unreadable producer snapshot %d: %s", self.dir, offset, e)
                self.snapshot_path(offset).unlink(missing_ok=True)
        return log_start_offset

    def delete_snapshots_after(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o > offset:
                self.snapshot_path(o).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int, *, keep_latest: int = 2) -> None:
        offsets = self.snapshot_offsets()
        newest = set(offsets[-keep_latest:]) if keep_latest else set()
        for o in offsets:
            if o < offset or (o not in newest and len(offsets) > keep_latest):
                self.snapshot_path(o).unlink(missing_ok=True)
