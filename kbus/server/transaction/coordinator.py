"""The transaction coordinator: Kafka's TransactionCoordinator state machine over `__transaction_state`.

Each transactional id maps to one partition of `__transaction_state` (Java hashCode, as Kafka); the broker leading
that partition is its coordinator. Every state change is written to that partition (acks=all) before it takes
effect or is answered, so a new coordinator elected after a failover loads the same state and finishes what the
old one started: a transaction in PrepareCommit/PrepareAbort gets its markers written again (markers are
idempotent on the partitions), an Ongoing one is aborted when it times out.

I/O goes through three ports, so the state machine is tested without a broker: `TransactionLog` (append to /
read back one partition), `MarkerWriter` (WriteTxnMarkers to the leaders of the partitions), and the producer-id
allocator.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode as E

from kbus.common.topics import TRANSACTION_STATE_TOPIC
from kbus.protocol.record_batch import build_batch, decode_records, iter_complete_batches
from kbus.server.coordinator.state_topic import BackgroundTasks, StateCoordinator, StatePartitions
from kbus.server.transaction.records import (
    RecordFormatError,
    TransactionLogValue,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)

log = logging.getLogger(__name__)

S = TransactionState
TopicPartition = tuple[str, int]
MAX_EPOCH = 32767  # Short.MAX_VALUE; the last usable epoch is MAX_EPOCH - 1 (KIP-360 bumps after an abort)
_MARKER_RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_check_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms


class TransactionLog(Protocol):
    """The coordinator's view of `__transaction_state`."""

    async def append(self, partition: int, records: bytes) -> int: ...

    async def read(self, partition: int) -> list[bytes]: ...

    def coordinator_epoch(self, partition: int) -> int:
        """The partition's leader epoch: markers carry it so an older coordinator's markers are fenced."""
        ...


class MarkerWriter(Protocol):
    async def write_markers(
        self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
        partitions: set[TopicPartition], transaction_version: int,
    ) -> dict[TopicPartition, int]:
        """Write one marker on each partition's leader; the error code per partition (0 when written).
        `transaction_version`: the transaction's (Kafka's clientTransactionVersion), which WriteTxnMarkers v2
        carries so that the partitions check a transactions-v2 marker's bumped epoch strictly."""
        ...


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    partition: int  # of __transaction_state
    producer_id: int
    producer_epoch: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    timeout_ms: int = 60_000
    state: TransactionState = S.EMPTY
    partitions: dict[str, set[int]] = field(default_factory=dict)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TransactionState | None = None  # a transition being written: others get CONCURRENT_TRANSACTIONS
    # transactions v2 (KIP-890 part 2): the transaction.version the client used for this transaction (2: its
    # epoch is bumped when it ends), and the producer id it moves to when that bump exhausts the epoch
    client_tv: int = 0
    next_producer_id: int = -1

    def topic_partitions(self) -> set[TopicPartition]:
        return {(t, p) for t, ps in self.partitions.items() for p in ps}

    def to_value(self, state: TransactionState | None = None) -> TransactionLogValue:
        st = self.state if state is None else state
        # PrepareEpochFence is never written: Kafka stores it as the PrepareAbort it leads to
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.timeout_ms,
                                   S.PREPARE_ABORT if st == S.PREPARE_EPOCH_FENCE else st,
                                   {t: set(ps) for t, ps in self.partitions.items()}, self.last_update_ms,
                                   self.start_ms, self.last_producer_id, self.next_producer_id, self.client_tv)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: TransactionState


class TransactionCoordinator(StateCoordinator[list[TransactionMetadata]]):
    def __init__(
        self,
        config: TransactionConfig,
        txn_log: TransactionLog,
        markers: MarkerWriter,
        allocate_producer_id: Callable[[], int],
        clock_ms: Callable[[], int],
        *,
        state_partitions: Callable[[], int | None] | None = None,
    ) -> None:
        self.config = config
        self.log = txn_log
        self.markers = markers
        self._allocate = allocate_producer_id
        self.clock = clock_ms
        self._state_partitions = state_partitions
        self.txns: dict[str, TransactionMetadata] = {}
        self._tasks = BackgroundTasks("transaction coordinator")
        # which __transaction_state partitions are loaded here (or loading), shared with the group coordinator
        self.partitions = StatePartitions(
            TRANSACTION_STATE_TOPIC, txn_log, self._replay, self._install, self._uninstall, self._spawn
        )
        self.epochs: dict[int, int] = {}  # owned partition -> coordinator epoch (its leader epoch when loaded)
        self.active = True

    # ================================================================ ownership

    def partition_for(self, transactional_id: str) -> int:
        count = self._state_partitions() if self._state_partitions is not None else None
        return partition_for(transactional_id, count or self.config.num_partitions)

    def status(self, transactional_id: str) -> int:
        """NONE when this broker coordinates the id now; else Kafka's error for the client to act on."""
        error = self.ownership_error(self.partition_for(transactional_id))
        return E.not_coordinator if error == E.none and not self.active else error

    def _install(self, partition: int, loaded: list[TransactionMetadata]) -> None:
        self.epochs[partition] = self.log.coordinator_epoch(partition)
        for meta in loaded:
            self.txns[meta.transactional_id] = meta
        log.info("Loaded %d transactional id(s) from __transaction_state-%d", len(loaded), partition)
        for meta in loaded:
            # a transaction whose markers a previous coordinator may not have finished: finish them (these tasks
            # run once the partition is owned)
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                meta.pending = S.COMPLETE_COMMIT if meta.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
                self._spawn(self._complete(meta))

    def _uninstall(self, partition: int) -> None:
        self.epochs.pop(partition, None)
        for tid in [t for t, m in self.txns.items() if m.partition == partition]:
            del self.txns[tid]

    def _replay(self, partition: int, chunks: list[bytes]) -> list[TransactionMetadata]:
        values: dict[str, TransactionLogValue | None] = {}
        for chunk in chunks:
            for header in iter_complete_batches(chunk):
                if header.is_control:
                    continue
                try:
                    records = decode_records(chunk, header)
                except ValueError as exc:
                    log.warning("Skipping undecodable batch at offset %d: %s", header.base_offset, exc)
                    continue
                for rec in records:
                    if rec.key is None:
                        continue
                    try:
                        tid = decode_key(rec.key)
                        values[tid] = None if rec.value is None else decode_value(rec.value)
                    except (RecordFormatError, UnicodeDecodeError, struct.error) as exc:
                        log.warning("Skipping undecodable record at offset %d: %s", rec.offset, exc)
        out = []
        for tid, v in values.items():
            if v is None:
                continue
            out.append(TransactionMetadata(tid, partition, v.producer_id, v.producer_epoch,
                                           last_producer_id=v.previous_producer_id, timeout_ms=v.timeout_ms,
                                           state=v.state, partitions=v.partitions, start_ms=v.start_ms,
                                           last_update_ms=v.last_update_ms, client_tv=v.client_transaction_version,
                                           next_producer_id=v.next_producer_id))
        return out

    # ================================================================ writing state

    async def _persist(self, meta: TransactionMetadata, value: TransactionLogValue | None) -> int:
        """Write one state record (None: a tombstone) and wait for the in-sync replicas."""
        batch = build_batch([(encode_key(meta.transactional_id), None if value is None else encode_value(value))],
                            timestamp_ms=self.clock())
        try:
            await self.log.append(meta.partition, batch)
        except Exception as exc:
            log.warning("Writing transaction state of %r failed: %s", meta.transactional_id, exc)
            # Kafka maps append failures to NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: the client re-finds us
            return E.not_coordinator if meta.partition not in self.owned else E.coordinator_not_available
        if meta.partition not in self.owned:
            return E.not_coordinator
        return E.none

    async def _transit(self, meta: TransactionMetadata, target: TransactionMetadata) -> int:
        """Write ``target`` (a copy of ``meta`` with the new fields), then apply it to ``meta``."""
        meta.pending = target.state
        try:
            error = await self._persist(meta, target.to_value())
        finally:
            meta.pending = None
        if error == E.none:
            for name in ("producer_id", "producer_epoch", "last_producer_id", "last_producer_epoch", "timeout_ms",
                         "partitions", "start_ms", "last_update_ms", "client_tv", "next_producer_id"):
                setattr(meta, name, getattr(target, name))
            meta.state = S.PREPARE_ABORT if target.state == S.PREPARE_EPOCH_FENCE else target.state
        return error

    @staticmethod
    def _copy(meta: TransactionMetadata, **changes: object) -> TransactionMetadata:
        c = TransactionMetadata(meta.transactional_id, meta.partition, meta.producer_id, meta.producer_epoch,
                                meta.last_producer_id, meta.last_producer_epoch, meta.timeout_ms, meta.state,
                                {t: set(ps) for t, ps in meta.partitions.items()}, meta.start_ms, meta.last_update_ms,
                                client_tv=meta.client_tv, next_producer_id=meta.next_producer_id)
        for k, v in changes.items():
            setattr(c, k, v)
        return c

    # ================================================================ the APIs

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int = -1, expected_epoch: int = -1
    ) -> tuple[int, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        if not transactional_id:
            return E.invalid_request, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return E.invalid_transaction_timeout, -1, -1
        if (err := self.status(transactional_id)) != E.none:
            return err, -1, -1
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self.partition_for(transactional_id), self._allocate(),
                                       timeout_ms=timeout_ms, last_update_ms=self.clock())
            self.txns[transactional_id] = meta
        if meta.pending is not None:
            return E.concurrent_transactions, -1, -1
        expected = expected_pid >= 0  # KIP-360: a producer re-initialising after an error gives its id and epoch
        # Kafka's isValidProducerId: the current producer id, or the previous one from its exhausted last epoch (a
        # retry of the bump that moved it to a new id); the epoch is checked below
        if expected and not (meta.producer_epoch == -1 or expected_pid == meta.producer_id
                             or (expected_pid == meta.last_producer_id and expected_epoch >= MAX_EPOCH - 1)):
            return E.producer_fenced, -1, -1
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.concurrent_transactions, -1, -1
        if meta.state == S.ONGOING:
            # a new incarnation of the producer: fence the old one and abort its transaction; the client retries
            await self._fence_and_abort(meta)
            return E.concurrent_transactions, -1, -1
        epoch = meta.producer_epoch
        if epoch >= MAX_EPOCH - 1 and (not expected or expected_epoch == epoch):
            # Kafka's prepareProducerIdRotation
            new_pid, new_epoch, last_pid, last_epoch = self._allocate(), 0, meta.producer_id, epoch if expected else -1
        elif not expected or epoch == -1 or expected_epoch == epoch:
            # Kafka's prepareIncrementProducerEpoch; a new incarnation (no expected epoch) forgets the last epoch,
            # so an older instance cannot pass for a retry of its bump
            new_pid, new_epoch, last_pid, last_epoch = meta.producer_id, epoch + 1, -1, epoch if expected else -1
        elif expected_epoch == meta.last_producer_epoch:
            # a retry of the bump this producer made (its answer lost): the same epoch again, not a new bump
            return E.none, meta.producer_id, epoch
        else:
            return E.producer_fenced, -1, -1
        target = self._copy(meta, producer_id=new_pid, producer_epoch=new_epoch, last_producer_id=last_pid,
                            last_producer_epoch=last_epoch, timeout_ms=timeout_ms, state=S.EMPTY,
                            partitions={}, start_ms=-1, last_update_ms=self.clock(), client_tv=0,
                            next_producer_id=-1)
        error = await self._transit(meta, target)
        if error != E.none:
            return error, -1, -1
        return E.none, meta.producer_id, meta.producer_epoch

    def _check_producer(self, meta: TransactionMetadata | None, producer_id: int, epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            return E.producer_fenced
        if meta.pending is not None:
            return E.concurrent_transactions
        return E.none

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition],
        client_tv: int = 0,
    ) -> int:
        """AddPartitionsToTxn / AddOffsetsToTxn: one error for all the partitions. `client_tv` 2: the implicit add
        of a transactions-v2 client's Produce v12+ or TxnOffsetCommit v5+ (a partition leader or the group
        coordinator asks, Kafka's AddPartitionsToTxn v5 between brokers): the transaction's epoch is bumped when
        it ends."""
        if (err := self.status(transactional_id)) != E.none:
            return err
        meta = self.txns.get(transactional_id)
        if (err := self._check_producer(meta, producer_id, epoch)) != E.none:
            return err
        assert meta is not None
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.concurrent_transactions
        wanted = set(partitions)
        if meta.state == S.ONGOING and wanted <= meta.topic_partitions():
            return E.none
        merged = {t: set(ps) for t, ps in meta.partitions.items()}
        for t, p in wanted:
            merged.setdefault(t, set()).add(p)
        now = self.clock()
        target = self._copy(meta, state=S.ONGOING, partitions=merged, last_update_ms=now,
                            start_ms=meta.start_ms if meta.state == S.ONGOING else now, client_tv=client_tv)
        return await self._transit(meta, target)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4 verify_only (Kafka's handleVerifyPartitionsInTransaction), asked by a partition
        leader before a transaction's first write there: an error per partition, NONE when the partition was added
        to the ongoing transaction of this producer id and epoch. Nothing is written."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, E.invalid_request)
        error = self.status(transactional_id)
        meta = self.txns.get(transactional_id)
        if error == E.none:
            if meta is None or meta.producer_id != producer_id:
                error = E.invalid_producer_id_mapping
            elif meta.producer_epoch != epoch:
                error = E.producer_fenced
            elif meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = E.concurrent_transactions
        if error != E.none:
            return dict.fromkeys(wanted, error)
        assert meta is not None
        # the partitions of the transaction are set once its AddPartitionsToTxn is written, and cleared once its
        # Complete state is; a partition not among them gets Kafka 3.9's TRANSACTION_ABORTABLE
        return {tp: E.none if tp[1] in meta.partitions.get(tp[0], ()) else E.transaction_abortable for tp in wanted}

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, committed: bool) -> int:
        """EndTxn v0-4 (transactions v1): the error alone."""
        return (await self.end_transaction_bumping(transactional_id, producer_id, epoch, committed, 0))[0]

    async def end_transaction_bumping(
        self, transactional_id: str, producer_id: int, epoch: int, committed: bool, client_tv: int
    ) -> tuple[int, int, int]:
        """EndTxn (Kafka's TransactionCoordinator.endTransaction): (error, producer id, epoch). With `client_tv` 2
        (EndTxn v5, KIP-890 part 2) the epoch is bumped as the transaction ends, its markers carry the new epoch
        (fencing every write of the old one on the partitions), and the new producer id and epoch are returned;
        a bump past the last epoch moves the producer to a new producer id, effective once the markers are
        written."""
        if (err := self.status(transactional_id)) != E.none:
            return err, -1, -1
        meta = self.txns.get(transactional_id)
        if meta is None:
            return E.invalid_producer_id_mapping, -1, -1
        state = meta.state
        v2 = meta.client_tv >= 2  # the transaction being ended (or retried) bumps its epoch
        # a v2 retry: the end was written (its epoch bumped) but the producer never got the answer
        # (not a Complete state at Short.MAX_VALUE: only a fence leaves one, as a v2 end that reaches it moves the
        # producer to its next producer id; the fenced producer's end at the epoch below must stay fenced)
        retry_on_bump = v2 and meta.producer_id == producer_id and meta.producer_epoch == epoch + 1 \
            and not (meta.producer_epoch == MAX_EPOCH and state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT))
        # ... or the bump overflowed: the transaction completed under the new producer id at epoch 0
        retry_on_overflow = v2 and meta.last_producer_id == producer_id and epoch == MAX_EPOCH - 1 \
            and meta.producer_epoch == 0
        if not v2 and meta.producer_id == producer_id and epoch < meta.producer_epoch \
                and epoch == meta.last_producer_epoch and not committed \
                and state in (S.PREPARE_ABORT, S.COMPLETE_ABORT):
            # the coordinator aborted (and fenced) this transaction on a timeout; the producer's own abort of
            # it has nothing left to do, but its epoch is gone: it must re-initialise
            return E.producer_fenced, -1, -1
        if meta.producer_id != producer_id and not retry_on_overflow:
            return E.invalid_producer_id_mapping, -1, -1
        # Kafka (KAFKA-18464): an end still being completed answers CONCURRENT_TRANSACTIONS before the epoch is
        # checked, so a v2 producer's next EndTxn (with the epoch the last one returned) is not fenced by it; an
        # epoch fence in progress still fences
        if meta.pending is not None and state != S.PREPARE_EPOCH_FENCE:
            return E.concurrent_transactions, -1, -1
        if v2 or client_tv >= 2:
            # Kafka: with epoch bumps, the same epoch in a Prepare state is not a retry but a next end; in a
            # Complete state it is the end of a next transaction that added nothing (an empty abort, below)
            if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid = retry_on_bump
            elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                valid = retry_on_bump or retry_on_overflow or (client_tv >= 2 and epoch == meta.producer_epoch)
            else:
                valid = epoch == meta.producer_epoch
        else:
            valid = epoch == meta.producer_epoch
        if not valid:
            return E.producer_fenced, -1, -1
        if meta.pending is not None:
            return E.concurrent_transactions, -1, -1
        # Transactions v2 lets a producer abort a transaction that added nothing (its Produce may have failed
        # before the implicit add, so it cannot know): Kafka 4 bumps the epoch through PrepareAbort and
        # CompleteAbort with no partitions, where v1 answered INVALID_TXN_STATE (KAFKA-18464's empty abort)
        empty_abort = client_tv >= 2 and not committed and epoch == meta.producer_epoch \
            and state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        if state == S.ONGOING or empty_abort:
            bump = client_tv >= 2
            next_pid = -1
            if bump and meta.producer_epoch >= MAX_EPOCH - 1:
                next_pid = self._allocate()  # the bump takes the last epoch: a new producer id afterwards
            now = self.clock()
            target = self._copy(meta, state=S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                                last_update_ms=now, client_tv=client_tv, next_producer_id=next_pid)
            if state != S.ONGOING:
                # Kafka's prepareAbortOrCommit with noPartitionAdded: the empty transaction starts as it ends (not
                # the last one's start, nor -1 after InitProducerId)
                target.start_ms = now
            if bump:
                target.producer_epoch, target.last_producer_epoch = meta.producer_epoch + 1, meta.producer_epoch
            error = await self._transit(meta, target)
            if error != E.none:
                return error, -1, -1
            meta.pending = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
            self._spawn(self._complete(meta))
            if next_pid >= 0:
                return E.none, next_pid, 0
            return E.none, meta.producer_id, meta.producer_epoch
        current = (E.none, meta.producer_id, meta.producer_epoch)
        if client_tv >= 2 and state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and epoch == meta.producer_epoch:
            return E.invalid_txn_state, -1, -1  # a commit of a next transaction that added nothing
        if state == S.COMPLETE_COMMIT:
            return current if committed else (E.invalid_txn_state, -1, -1)
        if state == S.COMPLETE_ABORT:
            return (E.invalid_txn_state, -1, -1) if committed else current
        if state == S.PREPARE_COMMIT:
            return (E.concurrent_transactions if committed else E.invalid_txn_state), -1, -1
        if state == S.PREPARE_ABORT:
            return (E.invalid_txn_state if committed else E.concurrent_transactions), -1, -1
        return E.invalid_txn_state, -1, -1  # Empty: nothing was added to a transaction

    async def _fence_and_abort(self, meta: TransactionMetadata) -> int:
        """Abort the open transaction with a bumped epoch (a timeout, or a new incarnation's InitProducerId), so the
        old producer is fenced on every partition by the abort markers.

        Transactions v1: Kafka's prepareFenceProducerEpoch bump, up to Short.MAX_VALUE, which no producer is ever
        given (from the last usable epoch the markers still carry a higher one, and the producer's next
        InitProducerId gets a new id). Transactions v2: Kafka 4's fence followed by its v2 end bumps the epoch once
        (prepareAbortOrCommit bumps the current epoch; the fence's bumped epoch only marks the end as a fence), and
        a bump that takes the last epoch moves the producer to a new producer id once the markers are written. The
        producer's own abort of the transaction is then a retry of that end (the epoch below the current one), which
        answers the epoch to go on with: a 4.x producer keeps working after a timeout, where v1 fences it."""
        epoch = meta.producer_epoch
        if meta.client_tv >= 2:
            next_pid = self._allocate() if epoch >= MAX_EPOCH - 1 else -1
            target = self._copy(meta, producer_epoch=min(epoch + 1, MAX_EPOCH), last_producer_epoch=epoch,
                                next_producer_id=next_pid, state=S.PREPARE_EPOCH_FENCE,
                                last_update_ms=self.clock())
        else:
            # no last epoch (Kafka's endTransactionWithTV1 on a fence): the fenced producer's InitProducerId at its
            # old epoch is not a retry of a bump it made
            target = self._copy(meta, producer_epoch=min(epoch + 1, MAX_EPOCH), last_producer_epoch=-1,
                                state=S.PREPARE_EPOCH_FENCE, last_update_ms=self.clock())
        error = await self._transit(meta, target)
        if error == E.none:
            meta.pending = S.COMPLETE_ABORT
            self._spawn(self._complete(meta))
        return error

    async def _complete(self, meta: TransactionMetadata) -> None:
        """Write the markers of a prepared transaction on every partition, then its Complete state."""
        committed = meta.state == S.PREPARE_COMMIT
        remaining = meta.topic_partitions()
        while remaining and self.active and meta.partition in self.owned and self.txns.get(
                meta.transactional_id) is meta:
            errors = await self.markers.write_markers(meta.producer_id, meta.producer_epoch, committed,
                                                      self.epochs[meta.partition], remaining, meta.client_tv)
            for tp, code in errors.items():
                if code == E.none or code == E.unknown_topic_or_partition:
                    remaining.discard(tp)  # written, or the partition is gone with its topic
            if remaining:
                await asyncio.sleep(_MARKER_RETRY_BACKOFF_S)
        if remaining:
            meta.pending = None
            return  # resigned: the next coordinator loads PrepareX and finishes
        target = self._copy(meta, state=S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT, partitions={},
                            last_update_ms=self.clock())
        if meta.next_producer_id >= 0:
            # the v2 bump took the last epoch: the markers are written, the producer goes on with the new id
            target.producer_id, target.producer_epoch, target.next_producer_id = meta.next_producer_id, 0, -1
            # the last epoch stays the one before the bump (Short.MAX_VALUE - 1), the last the producer saw (Kafka's
            # prepareComplete): its InitProducerId retry from there is recognised
            target.last_producer_id = meta.producer_id
        meta.pending = None
        if await self._transit(meta, target) != E.none:
            log.warning("Could not write the completion of transaction %r", meta.transactional_id)

    # ================================================================ timeouts and expiration

    async def abort_timed_out(self) -> int:
        """Abort (with an epoch bump) every Ongoing transaction older than its timeout; returns how many."""
        now = self.clock()
        aborted = 0
        for meta in list(self.txns.values()):
            if meta.state == S.ONGOING and meta.pending is None and meta.partition in self.owned \
                    and now - meta.start_ms > meta.timeout_ms:
                log.info("Aborting transaction %r (producer %d epoch %d): older than its timeout of %d ms",
                         meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
                if await self._fence_and_abort(meta) == E.none:
                    aborted += 1
        return aborted

    async def remove_expired(self) -> int:
        """Tombstone transactional ids idle for transactional.id.expiration.ms."""
        now = self.clock()
        removed = 0
        for meta in list(self.txns.values()):
            if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and meta.pending is None \
                    and meta.partition in self.owned and now - meta.last_update_ms > self.config.id_expiration_ms:
                meta.pending = S.DEAD
                try:
                    error = await self._persist(meta, None)
                finally:
                    meta.pending = None
                if error == E.none and self.txns.get(meta.transactional_id) is meta:
                    del self.txns[meta.transactional_id]
                    removed += 1
        return removed

    # ================================================================ describing

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1) -> list[TransactionListing]:
        """ListTransactions: filtered by state names, producer ids, and (KIP-994) running for at least
        ``min_duration_ms``."""
        now = self.clock()
        wanted_states = {s.lower() for s in states}
        wanted_pids = set(producer_ids)
        out = []
        for meta in self.txns.values():
            if meta.partition not in self.owned:
                continue
            if wanted_states and meta.state.kafka_name.lower() not in wanted_states:
                continue
            if wanted_pids and meta.producer_id not in wanted_pids:
                continue
            if min_duration_ms >= 0 and (meta.state != S.ONGOING or now - meta.start_ms < min_duration_ms):
                continue
            out.append(TransactionListing(meta.transactional_id, meta.producer_id, meta.state))
        return out

    def describe(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        if (err := self.status(transactional_id)) != E.none:
            return err, None
        meta = self.txns.get(transactional_id)
        return (E.none, meta) if meta is not None else (E.transactional_id_not_found, None)

    # ================================================================ background work

    def _spawn(self, coro: Awaitable[object]) -> None:
        self._tasks.spawn(coro)

    async def settle(self) -> None:
        """Wait for the background work in flight (tests)."""
        await self._tasks.settle()

    async def shutdown(self) -> None:
        self.active = False
        await self._tasks.cancel()
