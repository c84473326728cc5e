"""The transaction coordinator's state machine with fake ports (no broker): Kafka's TransactionCoordinator rules."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.server.transaction.coordinator import TransactionConfig, TransactionCoordinator, TransactionLog
from kbus.server.transaction.records import TransactionState as S
from kbus.server.transaction.records import decode_value


class FakeLog(TransactionLog):
    def __init__(self) -> None:
        self.parts: dict[int, list[bytes]] = {}
        self.fail = False

    async def append(self, partition: int, records: bytes) -> int:
        if self.fail:
            raise TimeoutError("not enough replicas")
        self.parts.setdefault(partition, []).append(records)
        return len(self.parts[partition]) - 1

    async def read(self, partition: int) -> list[bytes]:
        return list(self.parts.get(partition, []))

    def coordinator_epoch(self, partition: int) -> int:
        return 3


class FakeMarkers:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool, int, set[tuple[str, int]]]] = []
        self.versions: list[int] = []  # the transaction version of each call
        self.errors: dict[tuple[str, int], int] = {}

    async def write_markers(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                            partitions: set[tuple[str, int]], transaction_version: int = 0,
                            ) -> dict[tuple[str, int], int]:
        self.calls.append((producer_id, producer_epoch, committed, coordinator_epoch, set(partitions)))
        self.versions.append(transaction_version)
        out = {tp: self.errors.pop(tp, E.none) for tp in partitions}
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def ids() -> Iterator[int]:
    n = 1000
    while True:
        yield n
        n += 1


def make(log: FakeLog | None = None, markers: FakeMarkers | None = None, clock: Clock | None = None
         ) -> tuple[TransactionCoordinator, FakeLog, FakeMarkers, Clock]:
    log = log or FakeLog()
    markers = markers or FakeMarkers()
    clock = clock or Clock()
    gen = ids()
    c = TransactionCoordinator(TransactionConfig(num_partitions=1, max_timeout_ms=60_000), log, markers,
                               lambda: next(gen), clock)
    return c, log, markers, clock


async def loaded(c: TransactionCoordinator) -> TransactionCoordinator:
    c.on_election(0)
    await c.settle()
    return c


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_not_coordinator_until_loaded() -> None:
    async def go() -> None:
        c, *_ = make()
        assert (await c.init_producer_id("t", 1000))[0] == E.not_coordinator
        await loaded(c)
        assert (await c.init_producer_id("t", 1000))[0] == E.none
    run(go())


def test_timeout_above_max_is_refused() -> None:
    async def go() -> None:
        c, *_ = make()
        await loaded(c)
        assert (await c.init_producer_id("t", 60_001))[0] == E.invalid_transaction_timeout
    run(go())


def test_commit_writes_markers_then_complete() -> None:
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        err, pid, epoch = await c.init_producer_id("t", 10_000)
        assert (err, epoch) == (E.none, 0)
        assert await c.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)]) == E.none
        assert c.txns["t"].state == S.ONGOING
        assert await c.end_transaction("t", pid, epoch, True) == E.none
        await c.settle()
        assert markers.calls == [(pid, epoch, True, 3, {("a", 0), ("a", 1)})]
        assert c.txns["t"].state == S.COMPLETE_COMMIT and not c.txns["t"].partitions
        states = []
        for chunk in log.parts[0]:
            from kbus.protocol.record_batch import decode_records, read_header
            rec = decode_records(chunk, read_header(chunk))[0]
            states.append(decode_value(rec.value).state)  # type: ignore[arg-type]
        assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        # a retried EndTxn(commit) succeeds; an abort of a committed transaction is refused
        assert await c.end_transaction("t", pid, epoch, True) == E.none
        assert await c.end_transaction("t", pid, epoch, False) == E.invalid_txn_state
    run(go())


def test_second_init_fences_and_aborts_the_open_transaction() -> None:
    async def go() -> None:
        c, _log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        err, *_ = await c.init_producer_id("t", 10_000)
        assert err == E.concurrent_transactions
        await c.settle()
        assert markers.calls == [(pid, epoch + 1, False, 3, {("a", 0)})]  # aborted with the bumped epoch
        err, pid2, epoch2 = await c.init_producer_id("t", 10_000)
        assert (err, pid2, epoch2) == (E.none, pid, epoch + 2)
        # the zombie is fenced
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == E.producer_fenced
    run(go())


def test_timed_out_transaction_is_aborted() -> None:
    async def go() -> None:
        c, _log, markers, clock = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 5_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        clock.now += 4_000
        assert await c.abort_timed_out() == 0
        clock.now += 2_000
        assert await c.abort_timed_out() == 1
        await c.settle()
        assert c.txns["t"].state == S.COMPLETE_ABORT
        assert markers.calls[-1][:3] == (pid, epoch + 1, False)
        assert await c.end_transaction("t", pid, epoch, False) == E.producer_fenced
    run(go())


def test_marker_errors_are_retried() -> None:
    async def go() -> None:
        markers = FakeMarkers()
        markers.errors = {("a", 0): E.not_leader_or_follower}
        c, *_ = make(markers=markers)
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0), ("b", 0)])
        assert await c.end_transaction("t", pid, epoch, False) == E.none
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == E.concurrent_transactions
        await c.settle()
        assert [call[4] for call in markers.calls] == [{("a", 0), ("b", 0)}, {("a", 0)}]
        assert c.txns["t"].state == S.COMPLETE_ABORT
    run(go())


def test_new_coordinator_finishes_a_prepared_transaction() -> None:
    async def go() -> None:
        log = FakeLog()
        markers = FakeMarkers()
        markers.errors = {("a", 0): E.not_leader_or_follower}
        c, *_ = make(log=log, markers=markers)
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        await c.end_transaction("t", pid, epoch, True)
        c.on_resignation(0)  # the old coordinator dies with the marker unwritten
        await c.settle()
        c2, _, markers2, _ = make(log=log)
        await loaded(c2)
        await c2.settle()
        assert markers2.calls == [(pid, epoch, True, 3, {("a", 0)})]
        assert c2.txns["t"].state == S.COMPLETE_COMMIT
    run(go())


def test_failed_state_write_changes_nothing() -> None:
    async def go() -> None:
        c, log, *_ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        log.fail = True
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == E.coordinator_not_available
        assert c.txns["t"].state == S.EMPTY and not c.txns["t"].partitions
    run(go())


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_without_partitions_is_invalid(committed: bool) -> None:
    async def go() -> None:
        c, *_ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        assert await c.end_transaction("t", pid, epoch, committed) == E.invalid_txn_state
    run(go())


def test_expired_ids_are_tombstoned() -> None:
    async def go() -> None:
        c, log, _, clock = make()
        await loaded(c)
        await c.init_producer_id("t", 10_000)
        clock.now += c.config.id_expiration_ms + 1
        assert await c.remove_expired() == 1
        assert "t" not in c.txns
        c2, *_ = make(log=log)
        await loaded(c2)
        assert "t" not in c2.txns
    run(go())


# ---------------------------------------------------------------- transactions v2 (KIP-890 part 2)


def test_v2_end_bumps_the_epoch_and_the_markers_carry_it() -> None:
    async def go() -> None:
        c, _log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        assert await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2) == E.none
        assert await c.end_transaction_bumping("t", pid, epoch, True, 2) == (E.none, pid, epoch + 1)
        await c.settle()
        assert markers.calls == [(pid, epoch + 1, True, 3, {("a", 0)})]
        # a retry of that end (the old epoch) is answered the same; a commit of nothing with the new epoch is
        # INVALID_TXN_STATE (Kafka 4: only an abort may end a transaction that added nothing)
        assert await c.end_transaction_bumping("t", pid, epoch, True, 2) == (E.none, pid, epoch + 1)
        assert (await c.end_transaction_bumping("t", pid, epoch, False, 2))[0] == E.invalid_txn_state
        assert (await c.end_transaction_bumping("t", pid, epoch + 1, True, 2))[0] == E.invalid_txn_state
        assert (await c.end_transaction_bumping("t", pid, epoch + 2, True, 2))[0] == E.producer_fenced
        # the old epoch cannot add partitions any more, the new one starts the next transaction
        assert await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2) == E.producer_fenced
        assert await c.add_partitions("t", pid, epoch + 1, [("a", 0)], client_tv=2) == E.none
        assert await c.end_transaction_bumping("t", pid, epoch + 1, False, 2) == (E.none, pid, epoch + 2)
        await c.settle()
        assert markers.calls[-1] == (pid, epoch + 2, False, 3, {("a", 0)})
        assert markers.versions == [2, 2]  # WriteTxnMarkers v2's transaction version: the partitions check strictly
    run(go())


def test_v2_abort_of_a_transaction_that_added_nothing_bumps_the_epoch() -> None:
    """Kafka 4's empty abort (transactions v2): a producer whose Produce failed before the implicit add cannot know
    whether a partition was added, so it aborts; after InitProducerId (Empty) or after its last end (Complete*)
    the abort bumps the epoch with no markers to write (franz-go's TestTxnEtl relies on it)."""
    async def go() -> None:
        c, _log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        assert c.txns["t"].state == S.EMPTY
        assert await c.end_transaction_bumping("t", pid, epoch, False, 2) == (E.none, pid, epoch + 1)
        await c.settle()
        assert c.txns["t"].state == S.COMPLETE_ABORT and markers.calls == []
        # its retry (the old epoch) is answered the same, and another empty abort bumps again
        assert await c.end_transaction_bumping("t", pid, epoch, False, 2) == (E.none, pid, epoch + 1)
        assert await c.end_transaction_bumping("t", pid, epoch + 1, False, 2) == (E.none, pid, epoch + 2)
        await c.settle()
        # after a committed transaction, too
        assert await c.add_partitions("t", pid, epoch + 2, [("a", 0)], client_tv=2) == E.none
        assert await c.end_transaction_bumping("t", pid, epoch + 2, True, 2) == (E.none, pid, epoch + 3)
        await c.settle()
        assert await c.end_transaction_bumping("t", pid, epoch + 3, False, 2) == (E.none, pid, epoch + 4)
        await c.settle()
        assert c.txns["t"].state == S.COMPLETE_ABORT and markers.calls == [(pid, epoch + 3, True, 3, {("a", 0)})]
        # transactions v1 (EndTxn v0-4) keeps refusing it
        _, pid1, epoch1 = await c.init_producer_id("u", 10_000)
        assert await c.end_transaction("u", pid1, epoch1, False) == E.invalid_txn_state
    run(go())


def test_v2_next_end_while_the_last_completes_is_concurrent_not_fenced() -> None:
    """KAFKA-18464: the producer's next EndTxn (the epoch the last one returned) while the last end's markers are
    still being written is CONCURRENT_TRANSACTIONS (retriable), not PRODUCER_FENCED."""
    async def go() -> None:
        c, *_ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2)
        assert await c.end_transaction_bumping("t", pid, epoch, True, 2) == (E.none, pid, epoch + 1)
        assert c.txns["t"].pending is not None  # the markers are not written yet
        assert (await c.end_transaction_bumping("t", pid, epoch + 1, False, 2))[0] == E.concurrent_transactions
        await c.settle()
        assert await c.end_transaction_bumping("t", pid, epoch + 1, False, 2) == (E.none, pid, epoch + 2)
    run(go())


def test_v1_end_keeps_the_epoch() -> None:
    async def go() -> None:
        c, _log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        assert await c.end_transaction_bumping("t", pid, epoch, True, 0) == (E.none, pid, epoch)
        await c.settle()
        assert markers.calls == [(pid, epoch, True, 3, {("a", 0)})]
        assert markers.versions == [0]
    run(go())


def test_v2_bump_past_the_last_epoch_moves_to_a_new_producer_id() -> None:
    async def go() -> None:
        c, _log, markers, _ = make()
        await loaded(c)
        _, pid, _epoch = await c.init_producer_id("t", 10_000)
        c.txns["t"].producer_epoch = 32766  # Short.MAX_VALUE - 1: the bump takes the last epoch
        assert await c.add_partitions("t", pid, 32766, [("a", 0)], client_tv=2) == E.none
        err, new_pid, new_epoch = await c.end_transaction_bumping("t", pid, 32766, True, 2)
        assert (err, new_epoch) == (E.none, 0) and new_pid != pid
        await c.settle()
        assert markers.calls == [(pid, 32767, True, 3, {("a", 0)})]  # the markers under the old id
        meta = c.txns["t"]
        assert (meta.producer_id, meta.producer_epoch, meta.state) == (new_pid, 0, S.COMPLETE_COMMIT)
        # the producer's retry with the old id and epoch is recognised
        assert await c.end_transaction_bumping("t", pid, 32766, True, 2) == (E.none, new_pid, 0)
        assert await c.add_partitions("t", new_pid, 0, [("a", 0)], client_tv=2) == E.none
    run(go())


def test_v2_timeout_abort_bumps_the_epoch_once() -> None:
    """Kafka 4's abortTimedOutTransactions with transactions v2: prepareFenceProducerEpoch's bumped epoch is only
    the fence's; the abort (prepareAbortOrCommit) bumps the current epoch once, so the producer's own abort of the
    timed-out transaction is a retry of that end, answered with the epoch to go on with (a 4.x client keeps
    working), while a commit of it is INVALID_TXN_STATE."""
    async def go() -> None:
        c, _log, markers, clock = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2)
        clock.now += 20_000
        assert await c.abort_timed_out() == 1
        await c.settle()
        assert markers.calls == [(pid, epoch + 1, False, 3, {("a", 0)})] and markers.versions == [2]
        meta = c.txns["t"]
        assert (meta.producer_epoch, meta.last_producer_epoch, meta.state) == (epoch + 1, epoch, S.COMPLETE_ABORT)
        assert (await c.end_transaction_bumping("t", pid, epoch, True, 2))[0] == E.invalid_txn_state
        assert await c.end_transaction_bumping("t", pid, epoch, False, 2) == (E.none, pid, epoch + 1)
        # the old epoch is fenced; the next transaction runs at the returned one
        assert await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2) == E.producer_fenced
        assert await c.add_partitions("t", pid, epoch + 1, [("a", 0)], client_tv=2) == E.none
        assert await c.end_transaction_bumping("t", pid, epoch + 1, True, 2) == (E.none, pid, epoch + 2)
    run(go())


def test_v2_timeout_abort_at_the_last_epoch_moves_to_a_new_producer_id() -> None:
    """Kafka 4 allocates the next producer id when the fence's abort takes the last epoch (isProducerEpochExhausted):
    the markers carry Short.MAX_VALUE, then the producer goes on with the new id at epoch 0, which its retried
    abort of the old id and epoch is answered with."""
    async def go() -> None:
        c, _log, markers, clock = make()
        await loaded(c)
        _, pid, _epoch = await c.init_producer_id("t", 10_000)
        c.txns["t"].producer_epoch = 32766
        await c.add_partitions("t", pid, 32766, [("a", 0)], client_tv=2)
        clock.now += 20_000
        assert await c.abort_timed_out() == 1
        await c.settle()
        assert markers.calls == [(pid, 32767, False, 3, {("a", 0)})]
        meta = c.txns["t"]
        new_pid = meta.producer_id
        assert new_pid != pid and (meta.producer_epoch, meta.state) == (0, S.COMPLETE_ABORT)
        assert await c.end_transaction_bumping("t", pid, 32766, False, 2) == (E.none, new_pid, 0)
    run(go())


def test_v2_init_producer_id_fences_an_open_transaction_with_one_bump() -> None:
    """A new incarnation's InitProducerId aborts the open v2 transaction through the same fence (one bump), and its
    retry bumps again, as Kafka 4 does."""
    async def go() -> None:
        c, _log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2)
        assert (await c.init_producer_id("t", 10_000))[0] == E.concurrent_transactions
        await c.settle()
        assert markers.calls == [(pid, epoch + 1, False, 3, {("a", 0)})]
        assert await c.init_producer_id("t", 10_000) == (E.none, pid, epoch + 2)
    run(go())


def test_v2_state_survives_a_coordinator_failover() -> None:
    async def go() -> None:
        c, log, _markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2)
        assert (await c.end_transaction_bumping("t", pid, epoch, True, 2))[0] == E.none
        await c.settle()
        # a new coordinator loads the log: the transaction is a v2 one, so the old epoch's EndTxn is a retry
        c2, *_ = make(log=log)
        await loaded(c2)
        meta = c2.txns["t"]
        assert (meta.producer_epoch, meta.client_tv, meta.state) == (epoch + 1, 2, S.COMPLETE_COMMIT)
        assert await c2.end_transaction_bumping("t", pid, epoch, True, 2) == (E.none, pid, epoch + 1)
    run(go())


def test_v2_failover_mid_commit_finishes_with_the_bumped_epoch_and_the_next_producer_id() -> None:
    """Review of issue 22: PrepareCommit of an overflowing v2 end is written, its markers are not; the coordinator
    taking over writes them at the bumped epoch (Short.MAX_VALUE) and moves the producer to the persisted next
    producer id."""
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        _, pid, _epoch = await c.init_producer_id("t", 10_000)
        c.txns["t"].producer_epoch = 32766
        assert await c.add_partitions("t", pid, 32766, [("a", 0), ("b", 0)], client_tv=2) == E.none
        sticky = markers.write_markers

        async def b_never_written(producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                                  partitions: set[tuple[str, int]], transaction_version: int = 0,
                                  ) -> dict[tuple[str, int], int]:
            out = await sticky(producer_id, producer_epoch, committed, coordinator_epoch, partitions,
                               transaction_version)
            return {**out, **({("b", 0): E.not_leader_or_follower} if ("b", 0) in partitions else {})}

        markers.write_markers = b_never_written  # type: ignore[method-assign]
        err, next_pid, next_epoch = await c.end_transaction_bumping("t", pid, 32766, True, 2)
        assert (err, next_epoch) == (E.none, 0)
        await asyncio.sleep(0.3)  # "a" is marked, "b" is retried
        assert c.txns["t"].state == S.PREPARE_COMMIT
        c.on_resignation(0)  # this coordinator goes before "b" got its marker: its retry loop stops
        await c.settle()
        c2, _, markers2, _ = make(log=log)
        await loaded(c2)
        await c2.settle()
        assert markers2.calls and all(call[:3] == (pid, 32767, True) for call in markers2.calls)
        meta = c2.txns["t"]
        assert (meta.producer_id, meta.producer_epoch, meta.state) == (next_pid, 0, S.COMPLETE_COMMIT)
        assert await c2.end_transaction_bumping("t", pid, 32766, True, 2) == (E.none, next_pid, 0)
    run(go())


def test_timeout_abort_at_the_last_epoch_still_fences() -> None:
    """Review of issue 22: a transactions-v1 transaction at epoch Short.MAX_VALUE - 1 that times out is aborted
    with markers of a higher epoch (Kafka's prepareFenceProducerEpoch refuses only Short.MAX_VALUE), so the producer
    cannot go on writing or end it at its old epoch; it must re-initialise (and gets a new producer id). (A v2 one
    moves to a new producer id with the abort: test_v2_timeout_abort_at_the_last_epoch_moves_to_a_new_producer_id.)"""
    client_tv = 0

    async def go() -> None:
        c, _log, markers, clock = make()
        await loaded(c)
        _, pid, _epoch = await c.init_producer_id("t", 10_000)
        c.txns["t"].producer_epoch = 32766
        assert await c.add_partitions("t", pid, 32766, [("a", 0)], client_tv=client_tv) == E.none
        clock.now += 20_000
        assert await c.abort_timed_out() == 1
        await c.settle()
        assert len(markers.calls) == 1 and markers.calls[0][1] > 32766  # the old epoch is fenced on "a"
        assert await c.add_partitions("t", pid, 32766, [("a", 0)], client_tv=client_tv) == E.producer_fenced
        for committed in (True, False):
            assert (await c.end_transaction_bumping("t", pid, 32766, committed, client_tv))[0] == E.producer_fenced
        err, new_pid, new_epoch = await c.init_producer_id("t", 10_000)
        assert (err, new_epoch) == (E.none, 0) and new_pid != pid
    run(go())


def test_v2_implicit_add_during_end_txn_is_concurrent_then_fenced() -> None:
    """Review of issue 22: a partition leader's implicit add (Produce v12) for the transaction being ended answers
    CONCURRENT_TRANSACTIONS while the PrepareCommit is written and PRODUCER_FENCED once it is (the epoch is bumped),
    never adding the partition to the ending transaction; at the bumped epoch it waits for the markers, then opens
    the next transaction."""
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        assert await c.add_partitions("t", pid, epoch, [("a", 0)], client_tv=2) == E.none
        gate = asyncio.Event()
        append = log.append

        async def slow_append(partition: int, records: bytes) -> int:
            await gate.wait()
            return await append(partition, records)

        log.append = slow_append  # type: ignore[method-assign]
        end = asyncio.ensure_future(c.end_transaction_bumping("t", pid, epoch, True, 2))
        await asyncio.sleep(0.01)  # the PrepareCommit is being written
        assert await c.add_partitions("t", pid, epoch, [("b", 0)], client_tv=2) == E.concurrent_transactions
        gate.set()
        assert await end == (E.none, pid, epoch + 1)
        assert await c.add_partitions("t", pid, epoch, [("b", 0)], client_tv=2) == E.producer_fenced
        await c.settle()
        assert markers.calls == [(pid, epoch + 1, True, 3, {("a", 0)})]  # "b" was never part of it
        assert await c.add_partitions("t", pid, epoch + 1, [("b", 0)], client_tv=2) == E.none
        assert c.txns["t"].topic_partitions() == {("b", 0)}
    run(go())


def test_v2_empty_abort_starts_when_it_ends() -> None:
    """Review of issue 22: Kafka's prepareAbortOrCommit(noPartitionAdded) gives an empty abort the update time as
    its start (DescribeTransactions, the __transaction_state record): not -1 after InitProducerId, nor the previous
    transaction's start."""
    async def go() -> None:
        c, log, _markers, clock = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        clock.now += 5
        assert (await c.end_transaction_bumping("t", pid, epoch, False, 2))[0] == E.none
        await c.settle()
        assert c.txns["t"].start_ms == clock.now
        assert await c.add_partitions("t", pid, epoch + 1, [("a", 0)], client_tv=2) == E.none
        assert (await c.end_transaction_bumping("t", pid, epoch + 1, True, 2))[0] == E.none
        await c.settle()
        clock.now += 7
        assert (await c.end_transaction_bumping("t", pid, epoch + 2, False, 2))[0] == E.none
        await c.settle()
        assert c.txns["t"].start_ms == clock.now
        c2, *_ = make(log=log)
        await loaded(c2)
        assert c2.txns["t"].start_ms == clock.now
    run(go())


def test_init_producer_id_retry_of_a_bump_gets_the_same_epoch() -> None:
    """Kafka's prepareIncrementProducerEpoch (KIP-360): InitProducerId with the producer's id and epoch bumps it;
    a retry of that call (its answer lost: the epoch it gives is now the last one) gets the same epoch again, not
    PRODUCER_FENCED nor a second bump; an older epoch is fenced, and a new incarnation (no epoch given) forgets the
    last epoch, so the previous instance cannot pass for a retry."""
    async def go() -> None:
        c, *_ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 10_000)
        assert await c.init_producer_id("t", 10_000, pid, epoch) == (E.none, pid, epoch + 1)
        assert await c.init_producer_id("t", 10_000, pid, epoch + 1) == (E.none, pid, epoch + 2)
        assert await c.init_producer_id("t", 10_000, pid, epoch + 1) == (E.none, pid, epoch + 2)  # the retry
        assert (await c.init_producer_id("t", 10_000, pid, epoch))[0] == E.producer_fenced
        assert await c.init_producer_id("t", 10_000) == (E.none, pid, epoch + 3)  # a new incarnation
        assert (await c.init_producer_id("t", 10_000, pid, epoch + 2))[0] == E.producer_fenced
        assert (await c.init_producer_id("t", 10_000, pid + 1, epoch + 3))[0] == E.producer_fenced
    run(go())


def test_init_producer_id_retry_after_a_v2_end_moved_the_producer_id() -> None:
    """A v2 end that took the last epoch moved the producer to a new id; its InitProducerId from the old id and
    the last epoch it saw (Short.MAX_VALUE - 1, Kafka's isValidProducerId with isEpochExhausted) is a retry: the
    new id at epoch 0. Kafka keeps that epoch as the last one through the completion (prepareComplete)."""
    async def go() -> None:
        c, *_ = make()
        await loaded(c)
        _, pid, _epoch = await c.init_producer_id("t", 10_000)
        c.txns["t"].producer_epoch = 32766
        assert await c.add_partitions("t", pid, 32766, [("a", 0)], client_tv=2) == E.none
        _, new_pid, _ = await c.end_transaction_bumping("t", pid, 32766, True, 2)
        await c.settle()
        assert c.txns["t"].last_producer_epoch == 32766
        assert await c.init_producer_id("t", 10_000, pid, 32766) == (E.none, new_pid, 0)
        assert await c.init_producer_id("t", 10_000, new_pid, 0) == (E.none, new_pid, 1)
    run(go())
