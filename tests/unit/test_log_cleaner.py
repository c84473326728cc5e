"""Log compaction: latest value per key, tombstones, offsets preserved, crash-safe swap, cleaner checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

from kbus.protocol import record_batch as rb
from kbus.server.log import Log, LogConfig, LogManager
from kbus.server.log.cleaner import clean_log, dirty_ratio
from kbus.server.log.manager import CLEANER_OFFSET_CHECKPOINT, read_checkpoint

NOW = 1_700_000_000_000


def compact_config(**kw: object) -> LogConfig:
    base = {"cleanup_policy": "compact", "file_delete_delay_ms": 0, "segment_bytes": 400}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def put(lg: Log, key: bytes | None, value: bytes | None, ts: int = NOW) -> int:
    return lg.append_as_leader(rb.build_batch([(key, value, ts)])).first_offset


def records(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for seg in lg.segments:
        for h in seg.walk():
            data = os.pread(seg.fd, h.size, h.position)
            out += [(r.offset, r.key, r.value) for r in rb.decode_records(data, rb.read_header(data))]
    return out


def read_all(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20).to_bytes()
        if not data:
            break
        for h in rb.iter_batches(data, verify_crc=True):
            out += [(r.offset, r.key, r.value) for r in rb.decode_records(data, h) if r.offset >= offset]
            offset = h.next_offset
    return out


def test_compaction_keeps_latest_value_per_key_and_offsets(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", compact_config())
    for i in range(30):
        put(lg, f"k{i % 3}".encode(), f"v{i}".encode())
    put(lg, None, b"keyless")
    assert lg.num_segments > 3
    before = lg.size_bytes
    active_base = lg.active_segment.base_offset
    result = clean_log(lg, 0, NOW)
    assert result is not None and result.segments_rewritten > 0
    assert lg.size_bytes < before
    kept = [r for r in records(lg) if r[0] < active_base]
    # in the cleaned part, each key appears at most once and only with its latest value overall
    latest = {}
    for i in range(30):
        latest[f"k{i % 3}".encode()] = (i, f"v{i}".encode())
    for offset, key, value in kept:
        assert key is not None and latest[key] == (offset, value)
    # reading through the gaps works, in offset order, and the log end did not move
    got = read_all(lg)
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
    assert {k: v for _, k, v in got if k is not None} == {k: v for k, (_, v) in latest.items()}
    assert lg.log_end_offset == 31
    assert put(lg, b"k0", b"after") == 31
    # fetching an offset that compaction removed starts at the next surviving batch
    first_kept = kept[0][0]
    if first_kept > 0:
        data = lg.read(0, 1 << 20).to_bytes()
        assert rb.read_header(data).base_offset == first_kept


def test_reopen_after_compaction(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", compact_config())
    for i in range(20):
        put(lg, f"k{i % 2}".encode(), b"x" * 20)
    clean_log(lg, 0, NOW)
    expected = read_all(lg)
    lg.close()
    for clean in (True, False):
        lg2 = Log.open(tmp_path / "c-0", compact_config(), clean_shutdown=clean, recovery_point=0)
        assert read_all(lg2) == expected and lg2.log_end_offset == 20
        lg2.close()


def test_tombstones_survive_until_delete_retention(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", compact_config(delete_retention_ms=1000))
    put(lg, b"a", b"1", ts=NOW)
    put(lg, b"b", b"1", ts=NOW)
    put(lg, b"a", None, ts=NOW)  # tombstone
    for i in range(10):
        put(lg, b"filler", str(i).encode(), ts=NOW)
    clean_log(lg, 0, NOW)
    cleaned = [(k, v) for _, k, v in records(lg)]
    assert (b"a", b"1") not in cleaned and (b"a", None) in cleaned and (b"b", b"1") in cleaned
    # later, past delete.retention.ms, the tombstone itself goes
    clean_log(lg, lg.log_end_offset, NOW + 5000, force=True)
    assert (b"a", None) not in [(k, v) for _, k, v in records(lg)]


def test_dirty_ratio_and_manager_checkpoint(tmp_path: Path) -> None:
    cfg = compact_config(min_cleanable_dirty_ratio=0.5)
    mgr = LogManager([tmp_path], LogConfig(file_delete_delay_ms=0), time_ms=lambda: NOW)
    mgr.startup()
    lg = mgr.create_log("__consumer_offsets", 0, cfg)
    plain = mgr.create_log("plain", 0, LogConfig(file_delete_delay_ms=0, segment_bytes=400))
    for i in range(40):
        put(lg, f"g{i % 4}".encode(), str(i).encode())
        put(plain, f"g{i % 4}".encode(), str(i).encode())
    plain_size = plain.size_bytes
    assert dirty_ratio(lg, 0, NOW) == 1.0
    assert mgr.run_cleaner() > 0
    assert plain.size_bytes == plain_size  # cleanup.policy=delete: never compacted
    cp = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert cp == {("__consumer_offsets", 0): lg.active_segment.base_offset}
    assert mgr.run_cleaner() == 0  # nothing dirty
    mgr.shutdown()


def test_live_producer_keeps_its_last_batch(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", compact_config())
    lg.append_as_leader(rb.build_batch([(b"k", b"old")], producer_id=9, producer_epoch=0, base_sequence=0))
    for i in range(12):
        put(lg, b"k", str(i).encode())
    assert lg.producer_state.get(9) is not None
    clean_log(lg, 0, NOW)
    assert any(k == b"k" and v == b"old" for _, k, v in records(lg))
    # and the producer's next batch is still in sequence
    r = lg.append_as_leader(rb.build_batch([(b"k", b"new")], producer_id=9, producer_epoch=0, base_sequence=1))
    assert not r.duplicate


def test_interrupted_swap_is_completed_on_open(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "c-0", compact_config())
    for i in range(20):
        put(lg, f"k{i % 2}".encode(), b"y" * 10)
    lg.close()
    d = tmp_path / "c-0"
    first = d / "00000000000000000000.log"
    # a crash after the cleaned file became .swap but before it replaced the segment
    data = first.read_bytes()
    h = rb.read_header(data)
    (d / "00000000000000000000.log.swap").write_bytes(data[: h.size])
    (d / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    lg2 = Log.open(d, compact_config(), clean_shutdown=True)
    assert not (d / "00000000000000000000.log.swap").exists()
    assert not (d / "00000000000000000000.log.cleaned").exists()
    assert first.stat().st_size == h.size
    assert lg2.log_end_offset == 20
    lg2.close()


def test_aborted_transactions_are_dropped_and_never_shadow_committed_values(tmp_path: Path) -> None:
    from kbus.protocol.control import build_marker_batch

    lg = Log.open(tmp_path / "t-0", compact_config())

    def txn(key: bytes, value: bytes, seq: int, pid: int = 9) -> None:
        lg.append_as_leader(rb.build_batch([(key, value, NOW)], producer_id=pid, producer_epoch=0,
                                           base_sequence=seq, is_transactional=True))

    put(lg, b"a", b"committed-1")  # 0
    txn(b"a", b"aborted", 0)  # 1
    lg.append_as_leader(build_marker_batch(9, 0, False, 0, timestamp_ms=NOW), from_coordinator=True)  # 2
    txn(b"a", b"committed-2", 1)  # 3
    lg.append_as_leader(build_marker_batch(9, 0, True, 0, timestamp_ms=NOW), from_coordinator=True)  # 4
    txn(b"b", b"open", 2)  # 5: still open, must not be cleaned
    for i in range(20):
        put(lg, b"filler-%d" % (i % 2), b"x" * 20)
    lg.roll()
    assert clean_log(lg, 0, NOW + 1, force=True) is not None
    kept = [(o, k, v) for o, k, v in records(lg) if k in (b"a", b"b")]
    assert (1, b"a", b"aborted") not in kept  # the aborted write is gone
    assert (3, b"a", b"committed-2") in kept  # the committed one survives its aborted predecessor
    assert (0, b"a", b"committed-1") not in kept  # and compaction still works across them
    assert (5, b"b", b"open") in kept
    # both markers stay, and the abort is still indexed for read_committed fetches
    assert lg.collect_aborted_txns(0, lg.log_end_offset) != []
    lg.close()


def test_the_cleaner_scan_reads_every_logs_config_as_it_is_now(tmp_path: Path) -> None:
    """run_cleaner's walk: the logs whose cleanup.policy holds compact ("compact" or "compact,delete", in either
    order) are cleaned, the others never; a log's config changed directly on the log (not through the manager)
    counts from the next pass."""
    mgr = LogManager([tmp_path], LogConfig(file_delete_delay_ms=0), time_ms=lambda: NOW)
    mgr.startup()
    policies = {"plain": "delete", "compact": "compact", "both": "compact,delete", "both2": "delete,compact",
                "later": "delete"}  # fmt: skip
    logs = {name: mgr.create_log(name, 0, compact_config(cleanup_policy=policy)) for name, policy in policies.items()}
    for i in range(40):
        for lg in logs.values():
            put(lg, f"g{i % 4}".encode(), str(i).encode())
    sizes = {name: lg.size_bytes for name, lg in logs.items()}
    assert mgr.run_cleaner() > 0
    shrunk = {name for name, lg in logs.items() if lg.size_bytes < sizes[name]}
    assert shrunk == {"compact", "both", "both2"}
    logs["later"].update_config(compact_config())
    assert mgr.run_cleaner() > 0
    assert logs["later"].size_bytes < sizes["later"] and logs["plain"].size_bytes == sizes["plain"]
    mgr.shutdown()
