"""The share-partition state machine (kbus.server.share.partition) and the records of __share_group_state
(kbus.server.share.state): ranges kept whole, split only where acknowledgements differ, delivery-count limits,
lock expiry, the in-flight limit, and the snapshot a new leader restores."""

from __future__ import annotations

import struct
import uuid

import pytest

from kbus.server.share import state as st
from kbus.server.share.partition import InvalidRecordState, RecordState, SharePartition

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def sp(limit: int = 3, locks: int = 100) -> SharePartition:
    return SharePartition(0, lock_duration_ms=1000, delivery_count_limit=limit, max_in_flight=locks)


def test_a_batch_is_one_range_until_acknowledged_differently() -> None:
    p = sp(locks=1000)
    assert [(a.first, a.last, a.delivery_count) for a in p.acquire("m", 0, 499, 500, now=0)] == [(0, 499, 1)]
    assert len(p.ranges) == 1
    p.acknowledge("m", 0, 2, (ACCEPT, ACCEPT, REJECT), now=0)
    assert p.start_offset == 3 and len(p.ranges) == 1  # the SPSO moved past what is done
    p.acknowledge("m", 10, 19, (RELEASE,), now=0)
    assert [(r.first, r.last, r.state) for r in p.ranges] == [
        (3, 9, RecordState.ACQUIRED), (10, 19, RecordState.AVAILABLE), (20, 499, RecordState.ACQUIRED)]
    # another member takes the released ones, delivery count 2
    assert [(a.first, a.last, a.delivery_count) for a in p.acquire("n", 0, 499, 500, now=0)] == [(10, 19, 2)]
    with pytest.raises(InvalidRecordState):
        p.acknowledge("m", 10, 10, (ACCEPT,), now=0)  # not m's any more


def test_delivery_count_limit_and_lock_expiry() -> None:
    p = sp(limit=2)
    p.acquire("m", 0, 4, 10, now=0)
    assert p.expire_locks(now=0.5) is False
    assert p.expire_locks(now=1.0) is True  # lock of 1000 ms ran out: available again
    assert [(a.first, a.last, a.delivery_count) for a in p.acquire("n", 0, 4, 10, now=1)] == [(0, 4, 2)]
    p.acknowledge("n", 0, 4, (RELEASE,), now=1)  # delivered twice, the limit: archived, not available
    assert p.ranges == [] and p.start_offset == 5 and p.acquire("m", 0, 4, 10, now=2) == []


def test_in_flight_limit_and_max_records() -> None:
    p = sp(locks=100)
    assert [(a.first, a.last) for a in p.acquire("m", 0, 999, 30, now=0)] == [(0, 29)]
    assert [(a.first, a.last) for a in p.acquire("m", 0, 999, 500, now=0)] == [(30, 99)]
    assert p.acquire("m", 0, 999, 500, now=0) == []  # 100 in flight
    p.acknowledge("m", 0, 9, (ACCEPT,), now=0)
    assert [(a.first, a.last) for a in p.acquire("m", 0, 999, 500, now=0)] == [(100, 109)]


def test_gaps_are_archived_and_wrong_batches_refused() -> None:
    p = sp()
    p.acquire("m", 0, 9, 10, now=0)
    with pytest.raises(InvalidRecordState):
        p.acknowledge("m", 0, 3, (ACCEPT, ACCEPT), now=0)  # neither one type nor one per offset
    with pytest.raises(InvalidRecordState):
        p.acknowledge("m", 5, 12, (ACCEPT,), now=0)  # beyond what is in flight
    p.acknowledge("m", 0, 9, (ACCEPT, GAP, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT), now=0)
    assert p.start_offset == 10 and p.ranges == []


def test_snapshot_restore_makes_acquired_available_again() -> None:
    p = sp()
    p.acquire("m", 0, 19, 20, now=0)
    p.acknowledge("m", 0, 4, (ACCEPT,), now=0)
    p.acknowledge("m", 8, 9, (REJECT,), now=0)
    start, batches = p.snapshot()
    assert (start, batches) == (5, ((5, 7, 0, 1), (8, 9, 4, 1), (10, 19, 0, 1)))
    q = sp()
    q.restore(start, batches)
    assert [(a.first, a.last, a.delivery_count) for a in q.acquire("n", 0, 19, 50, now=0)] == [(5, 7, 2), (10, 19, 2)]


def test_share_snapshot_records_as_kafka_writes_them() -> None:
    key = st.ShareStateKey("g", uuid.UUID(int=1), 3)
    raw = st.encode_key(key)
    assert raw == struct.pack(">hh", 0, 1) + b"g" + uuid.UUID(int=1).bytes + struct.pack(">i", 3)
    assert st.decode_key(raw) == (0, key)
    state = st.ShareState(1, 7, 100, ((100, 109, 0, 2), (110, 119, 2, 1)), 4, 1000, 2000)
    assert st.decode_snapshot(st.encode_value(state)) == state
    # Kafka's coordinator key uses Uuid.toString (URL-safe base64, no padding)
    assert key.coordinator_key() == "g:AAAAAAAAAAAAAAAAAAAAAQ:3"
    # an update's batches override the snapshot's where they overlap, its start offset prunes
    assert st.combine(((100, 119, 0, 1),), ((105, 109, 2, 1),), 102) == (
        (102, 104, 0, 1), (105, 109, 2, 1), (110, 119, 0, 1))


def test_read_committed_archives_aborted_records_among_the_acquired() -> None:
    p = sp(locks=1000)
    acquired = p.acquire("m", 0, 9, 100, now=0)
    left = p.archive_acquired(acquired, [(3, 4), (8, 8)])
    assert [(a.first, a.last) for a in left] == [(0, 2), (5, 7), (9, 9)]
    assert [(r.first, r.last) for r in p.ranges if r.state is RecordState.ARCHIVED] == [(3, 4), (8, 8)]
    # the aborted records are never offered again; accepting the rest moves the SPSO past all of them
    p.acknowledge("m", 0, 2, (ACCEPT,), now=0)
    p.acknowledge("m", 5, 7, (ACCEPT,), now=0)
    p.acknowledge("m", 9, 9, (ACCEPT,), now=0)
    assert p.start_offset == 10 and p.first_available() is None
