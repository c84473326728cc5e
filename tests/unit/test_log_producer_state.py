"""Producer state snapshots: written at roll/close, ignored when unreadable, dropped past a truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbus.protocol import record_batch as rb
from kbus.server.log import Log, LogConfig, OutOfOrderSequenceError
from kbus.server.log.producer_state import ProducerStateManager


def pbatch(seq: int, n: int = 2, pid: int = 5, epoch: int = 0) -> bytes:
    return rb.build_batch([(b"k", b"v")] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def snapshots(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.snapshot"))


def test_snapshot_round_trip(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    for h in rb.iter_batches(pbatch(0) + pbatch(2, pid=6, epoch=3), verify_crc=True):
        m.replay(h)
    m.take_snapshot(4)
    assert snapshots(tmp_path) == ["00000000000000000004.snapshot"]
    m2 = ProducerStateManager(tmp_path)
    assert m2.load(0, 4) == 4
    e = m2.get(6)
    assert e is not None and e.producer_epoch == 3 and e.last_seq == 3
    assert m2.load(0, 3) == 0  # snapshot past the log end: deleted, replay from the start
    assert snapshots(tmp_path) == []


def test_unreadable_snapshot_is_ignored_and_state_rebuilt(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig())
    b0, b1 = pbatch(0), pbatch(2)
    lg.append_as_leader(b0)
    lg.append_as_leader(b1)
    lg.close()
    snap = tmp_path / "t-0" / "00000000000000000004.snapshot"
    assert snap.exists()
    snap.write_bytes(b"\x00\x01binary kafka snapshot")  # what Kafka itself would have written
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True, recovery_point=4)
    assert lg.append_as_leader(b1).duplicate  # rebuilt from the batch headers
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(pbatch(9))
    lg.close()


def test_truncation_rewinds_producer_state(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(file_delete_delay_ms=0))
    lg.append_as_leader(pbatch(0))
    lg.roll()  # snapshot at 2
    lg.append_as_leader(pbatch(2))
    lg.roll()  # snapshot at 4
    assert snapshots(tmp_path / "t-0")[-1] == "00000000000000000004.snapshot"
    lg.truncate_to(2)
    assert "00000000000000000004.snapshot" not in snapshots(tmp_path / "t-0")
    # the batch with sequence 2 is gone: it is the next expected one again, not a duplicate
    r = lg.append_as_leader(pbatch(2))
    assert not r.duplicate and r.first_offset == 2
    lg.close()


def test_expired_producers_are_removed(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    for h in rb.iter_batches(pbatch(0), verify_crc=True):
        m.replay(h)
    ts = m.get(5).last_timestamp  # type: ignore[union-attr]
    assert m.remove_expired(ts + 1000, expiration_ms=10_000) == 0
    assert m.remove_expired(ts + 10_000, expiration_ms=10_000) == 1
    assert m.get(5) is None
