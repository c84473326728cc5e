"""Transactions in the log: markers complete transactions, the LSO, the aborted-transaction index (.txnindex)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kbus.protocol import record_batch as rb
from kbus.protocol.control import ABORT, COMMIT, build_marker_batch, parse_marker
from kbus.server.log import Log, LogConfig
from kbus.server.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kbus.server.log.txn_index import ENTRY_SIZE, AbortedTxn


def txn_batch(seq: int, n: int = 2, pid: int = 7, epoch: int = 0) -> bytes:
    return rb.build_batch([(b"k", b"v")] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          is_transactional=True)


def plain(n: int = 1) -> bytes:
    return rb.build_batch([(None, b"x")] * n)


def marker(pid: int = 7, epoch: int = 0, commit: bool = False, coordinator_epoch: int = 0) -> bytes:
    return build_marker_batch(pid, epoch, commit, coordinator_epoch)


def test_marker_round_trip() -> None:
    m = parse_marker(marker(commit=True, coordinator_epoch=4))
    assert m is not None and m.control_type == COMMIT and m.coordinator_epoch == 4
    m = parse_marker(marker(commit=False))
    assert m is not None and m.control_type == ABORT and m.is_abort


def test_clients_cannot_write_markers(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    with pytest.raises(rb.InvalidRecordError):
        lg.append_as_leader(marker())
    assert lg.log_end_offset == 0
    lg.close()


def test_open_transaction_holds_the_lso_and_abort_is_indexed(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(plain())  # 0
    lg.append_as_leader(txn_batch(0))  # 1-2, open transaction
    lg.append_as_leader(plain())  # 3
    assert lg.last_stable_offset(high_watermark=4) == 1
    lg.append_as_leader(marker(commit=False), from_coordinator=True)  # 4: ABORT
    # the marker is not replicated yet (HW 4): the transaction still bounds the LSO
    assert lg.last_stable_offset(high_watermark=4) == 1
    assert lg.last_stable_offset(high_watermark=5) == 5
    aborted = lg.collect_aborted_txns(0, 5)
    assert aborted == [AbortedTxn(7, 1, 4, 5)]
    assert lg.collect_aborted_txns(5, 6) == []
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    data = index.read_bytes()
    assert len(data) == ENTRY_SIZE
    assert struct.unpack(">hqqqq", data) == (0, 7, 1, 4, 5)
    lg.close()


def test_commit_is_not_indexed_and_lso_skips_past_other_open_txn(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0, pid=1))  # 0-1
    lg.append_as_leader(txn_batch(0, pid=2))  # 2-3
    lg.append_as_leader(marker(pid=1, commit=False), from_coordinator=True)  # 4
    assert lg.collect_aborted_txns(0, 10) == [AbortedTxn(1, 0, 4, 2)]  # LSO after it: pid 2's first offset
    assert lg.last_stable_offset(high_watermark=5) == 2
    lg.append_as_leader(marker(pid=2, commit=True), from_coordinator=True)  # 5
    assert lg.last_stable_offset(high_watermark=6) == 6
    assert len(lg.collect_aborted_txns(0, 10)) == 1
    lg.close()


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0))
    idem = rb.build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=2)
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(idem)
    lg.close()


def test_older_coordinator_epoch_is_fenced(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0))
    lg.append_as_leader(marker(commit=True, coordinator_epoch=3), from_coordinator=True)
    lg.append_as_leader(txn_batch(2))
    with pytest.raises(TransactionCoordinatorFencedError):
        lg.append_as_leader(marker(commit=True, coordinator_epoch=2), from_coordinator=True)
    lg.close()


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restart(tmp_path: Path, clean: bool) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0, pid=1))  # 0-1
    lg.append_as_leader(marker(pid=1, commit=False), from_coordinator=True)  # 2
    lg.append_as_leader(txn_batch(0, pid=2))  # 3-4 still open
    if clean:
        lg.close()
    else:  # a crash: no snapshot, no clean marker, and the index entry lost
        lg.flush()
        (tmp_path / "t-0" / "00000000000000000000.txnindex").unlink()
        for seg in lg.segments:
            seg.close()
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=clean, recovery_point=0)
    assert lg.last_stable_offset(high_watermark=5) == 3
    assert lg.collect_aborted_txns(0, 5) == [AbortedTxn(1, 0, 2, 3)]
    lg.close()


def test_truncation_drops_index_entries(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0))  # 0-1
    lg.append_as_leader(marker(commit=False), from_coordinator=True)  # 2
    lg.truncate_to(2)
    assert lg.collect_aborted_txns(0, 10) == []
    lg.close()


def test_follower_indexes_aborts(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "a-0", LogConfig())
    leader.append_as_leader(txn_batch(0))
    leader.append_as_leader(marker(commit=False), from_coordinator=True)
    data = leader.read_bytes(0, 1 << 20)
    follower = Log.open(tmp_path / "b-0", LogConfig())
    follower.append_as_follower(data)
    assert follower.collect_aborted_txns(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    leader.close()
    follower.close()


def test_the_lso_follows_the_first_transactional_batch_however_it_arrives(tmp_path: Path) -> None:
    """A log that never stored a transactional batch answers the LSO from the high watermark alone (Fetch asks for
    it per partition); the first one holds it back whether appended as leader, as follower, or loaded back."""
    leader = Log.open(tmp_path / "a-0", LogConfig())
    leader.append_as_leader(plain(2))  # 0-1
    assert leader.last_stable_offset(high_watermark=2) == 2
    leader.append_as_leader(txn_batch(0))  # 2-3, open
    assert leader.last_stable_offset(high_watermark=4) == 2
    follower = Log.open(tmp_path / "b-0", LogConfig())
    follower.append_as_follower(leader.read_bytes(0, 1 << 20))
    assert follower.last_stable_offset(high_watermark=4) == 2
    follower.close()
    reopened = Log.open(tmp_path / "b-0", LogConfig(), clean_shutdown=True)  # from its producer snapshot
    assert reopened.last_stable_offset(high_watermark=4) == 2
    reopened.close()
    leader.close()


def test_transactions_v2_marker_needs_an_epoch_above_the_current_one(tmp_path: Path) -> None:
    """KIP-890 part 2 / KIP-1228: a WriteTxnMarkers v2 marker with transaction version 2 carries the epoch the
    coordinator bumped; one at the epoch the next transaction already writes with is a late duplicate of the
    previous marker and must not end that transaction (Kafka's ProducerAppendInfo.checkProducerEpoch)."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0, epoch=0))  # 0-1
    lg.append_as_leader(marker(epoch=1, commit=True), from_coordinator=True, transaction_version=2)  # 2
    lg.append_as_leader(txn_batch(0, epoch=1))  # 3-4: the next transaction, at the bumped epoch
    with pytest.raises(InvalidProducerEpochError):  # the first marker again (a coordinator's retry, late)
        lg.append_as_leader(marker(epoch=1, commit=False), from_coordinator=True, transaction_version=2)
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(marker(epoch=0, commit=False), from_coordinator=True, transaction_version=2)
    assert lg.log_end_offset == 5
    assert lg.last_stable_offset(high_watermark=5) == 3  # still open
    assert lg.collect_aborted_txns(0, 10) == []
    lg.append_as_leader(marker(epoch=2, commit=False), from_coordinator=True, transaction_version=2)  # 5
    assert lg.collect_aborted_txns(0, 10) == [AbortedTxn(7, 3, 5, 6)]
    # with no transaction open, the same epoch is a retry of a marker already written (KAFKA-19999): written
    lg.append_as_leader(marker(epoch=2, commit=False), from_coordinator=True, transaction_version=2)  # 6
    assert lg.log_end_offset == 7
    lg.close()


def test_legacy_markers_keep_the_epoch_check_of_transactions_v1(tmp_path: Path) -> None:
    """Before v2 (transaction version 0/1) a marker has the transaction's own epoch: equal is valid."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0, epoch=3))  # 0-1
    lg.append_as_leader(marker(epoch=3, commit=True), from_coordinator=True)  # 2
    lg.append_as_leader(txn_batch(2, epoch=3))  # 3-4
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(marker(epoch=2, commit=True), from_coordinator=True, transaction_version=1)
    lg.append_as_leader(marker(epoch=3, commit=False), from_coordinator=True, transaction_version=1)  # 5
    assert lg.collect_aborted_txns(0, 10) == [AbortedTxn(7, 3, 5, 6)]
    lg.close()


def test_transactions_v2_next_transaction_starts_at_sequence_0(tmp_path: Path) -> None:
    """A transactions-v2 marker bumps the producer's epoch and clears its batches; the next transaction writes at
    that epoch, and its first batch must have sequence 0 (Kafka's inSequence(NO_SEQUENCE, seq)), not any."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0, epoch=0))  # 0-1
    lg.append_as_leader(marker(epoch=1, commit=True), from_coordinator=True, transaction_version=2)  # 2
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(txn_batch(2, epoch=1))
    lg.append_as_leader(txn_batch(0, epoch=1))  # 3-4
    lg.append_as_leader(txn_batch(2, epoch=1))  # 5-6
    assert lg.log_end_offset == 7
    lg.close()


@pytest.mark.parametrize("supports_epoch_bump", [True, False])
def test_transactions_v2_first_batch_of_a_producer_new_here_has_sequence_0(
    tmp_path: Path, supports_epoch_bump: bool
) -> None:
    """Kafka 4's checkSequence: a transactions-v2 write (its verification supports the epoch bump) from a producer
    with no batch on the partition must start at sequence 0; before v2 any first sequence is taken (Kafka >= 2.5:
    the producer's earlier batches may have been removed by retention)."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    guard = lg.maybe_start_transaction_verification(7, 2, 0, supports_epoch_bump)
    batch = txn_batch(2, epoch=0)
    if supports_epoch_bump:
        with pytest.raises(OutOfOrderSequenceError):
            lg.append_as_leader(batch, verify_transactions=True, verification_guard=guard)
        guard = lg.maybe_start_transaction_verification(7, 0, 0, supports_epoch_bump)
        lg.append_as_leader(txn_batch(0, epoch=0), verify_transactions=True, verification_guard=guard)
    else:
        lg.append_as_leader(batch, verify_transactions=True, verification_guard=guard)
    assert lg.log_end_offset == 2
    lg.close()


def test_non_transactional_write_of_a_newer_epoch_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    """Kafka's appendDataBatch refuses a non-transactional batch while the producer's transaction is open whatever
    the batch's epoch: a newer epoch does not end the transaction (only its marker does)."""
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0, epoch=0))  # 0-1, open
    idem = rb.build_batch([(b"k", b"v")], producer_id=7, producer_epoch=1, base_sequence=0)
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(idem)
    lg.append_as_leader(marker(epoch=1, commit=False), from_coordinator=True, transaction_version=2)  # 2
    lg.append_as_leader(idem)  # 3: the transaction is over
    assert lg.log_end_offset == 4
    lg.close()


def test_an_abort_indexed_after_a_read_committed_fetch_asked_is_found(tmp_path: Path) -> None:
    # a log with no abort answers read_committed fetches without looking at its indexes again (Log._may_hold_aborts);
    # the first abort indexed afterwards, on the leader or on a follower, is found by the next fetch
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(txn_batch(0))  # 0-1
    assert lg.collect_aborted_txns(0, 2) == []
    lg.append_as_leader(marker(commit=False), from_coordinator=True)  # 2: ABORT
    assert lg.collect_aborted_txns(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    follower = Log.open(tmp_path / "f-0", LogConfig())
    follower.append_as_follower(lg.read_bytes(0, 1 << 20, max_offset=2))  # the transaction's batch alone
    assert follower.collect_aborted_txns(0, 2) == []
    follower.append_as_follower(lg.read_bytes(2, 1 << 20))  # its ABORT marker
    assert follower.collect_aborted_txns(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    lg.close()
    follower.close()
