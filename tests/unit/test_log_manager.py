"""LogManager: checkpoints, clean/unclean startup, create/delete, retention passes, the dir lock."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kbus.protocol import record_batch as rb
from kbus.server.log import KafkaStorageError, Log, LogConfig, LogManager
from kbus.server.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointFile,
    read_checkpoint,
)

CFG = LogConfig(file_delete_delay_ms=0)


def batch(n: int = 2, tag: str = "k") -> bytes:
    return rb.build_batch([(f"{tag}{i}".encode(), b"value" * 4) for i in range(n)], timestamp_ms=1_000)


def test_checkpoint_file_format(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    assert CheckpointFile(path).write({("b", 1): 7, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert read_checkpoint(path) == {("a", 0): 42, ("b", 1): 7}
    path.write_text("0\n3\na 0 1\n")  # truncated file: ignored, not fatal
    assert read_checkpoint(path) == {}
    assert read_checkpoint(tmp_path / "missing") == {}


def test_create_append_shutdown_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, CFG)
    mgr.startup()
    logs = [mgr.create_log("orders", p, CFG) for p in range(4)]
    assert mgr.create_log("orders", 0) is logs[0]  # idempotent
    # placement balances partitions over the dirs
    assert sorted(len(list(d.glob("orders-*"))) for d in dirs) == [2, 2]
    for lg in logs:
        lg.append_as_leader(batch(3))
    logs[1].delete_records(2)
    mgr.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
    rp = {**read_checkpoint(dirs[0] / RECOVERY_POINT_CHECKPOINT),
          **read_checkpoint(dirs[1] / RECOVERY_POINT_CHECKPOINT)}
    assert rp == {("orders", p): 3 for p in range(4)}
    starts = {**read_checkpoint(dirs[0] / LOG_START_OFFSET_CHECKPOINT),
              **read_checkpoint(dirs[1] / LOG_START_OFFSET_CHECKPOINT)}
    assert starts == {("orders", 1): 2}

    mgr2 = LogManager(dirs, CFG)
    mgr2.startup()
    assert all(mgr2.had_clean_shutdown.values())
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # a crash from now on is unclean
    assert sorted(mgr2.logs()) == [("orders", p) for p in range(4)]
    lg1 = mgr2.get_log("orders", 1)
    assert lg1 is not None and lg1.log_start_offset == 2 and lg1.log_end_offset == 3
    assert mgr2.get_log("orders", 0).append_as_leader(batch(1)).first_offset == 3  # type: ignore[union-attr]
    assert mgr2.get_log("nope", 0) is None
    mgr2.shutdown()


def test_unclean_startup_recovers_torn_tail(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    lg = mgr.create_log("t", 0, CFG)
    for i in range(10):
        lg.append_as_leader(batch(2, tag=f"x{i}-"))
    mgr.checkpoint()
    # crash: no shutdown (no marker), plus a half-written batch at the end of the segment
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(batch(2)[:50])
    for fd in mgr._lock_fds.values():  # a crashed process' lock goes away with it
        os.close(fd)
    mgr2 = LogManager([tmp_path], CFG)
    mgr2.startup()
    assert mgr2.had_clean_shutdown == {tmp_path: False}
    lg2 = mgr2.get_log("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 20
    data = lg2.read(0, 1 << 20).to_bytes()
    assert [h.base_offset for h in rb.iter_batches(data, verify_crc=True)] == list(range(0, 20, 2))
    assert lg2.append_as_leader(batch(1)).first_offset == 20
    mgr2.shutdown()


def test_unreadable_partition_does_not_stop_startup(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    mgr.create_log("good", 0, CFG).append_as_leader(batch())
    mgr.create_log("bad", 0, CFG).append_as_leader(batch())
    mgr.shutdown()
    # garbage where the segment should be: the log opens empty-but-usable after truncation
    (tmp_path / "bad-0" / "00000000000000000000.log").write_bytes(b"\xff" * 500)
    (tmp_path / "bad-0" / "00000000000000000000.index").write_bytes(b"\x01" * 7)
    mgr2 = LogManager([tmp_path], CFG)
    mgr2.startup()
    assert mgr2.get_log("good", 0).log_end_offset == 2  # type: ignore[union-attr]
    bad = mgr2.get_log("bad", 0)
    assert bad is not None and bad.log_end_offset == 0
    assert bad.append_as_leader(batch(1)).first_offset == 0
    mgr2.shutdown()


def test_delete_log_and_leftover_delete_dirs(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    mgr.create_log("gone", 0, CFG).append_as_leader(batch())
    mgr.create_log("kept", 0, CFG)
    mgr.delete_log("gone", 0)
    mgr.delete_log("gone", 0)  # idempotent
    assert mgr.get_log("gone", 0) is None
    # at once: renamed out of the way (a restart would finish the job); then removed by a background thread
    assert not (tmp_path / "gone-0").exists()
    deadline = time.monotonic() + 10
    while any(p.name.startswith("gone-0") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline, "the renamed log directory was never removed"
        time.sleep(0.01)
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT).keys() == {("kept", 0)}
    mgr.shutdown()
    leftover = tmp_path / "old-0.0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    mgr2 = LogManager([tmp_path], CFG)
    mgr2.startup()
    assert not leftover.exists()
    assert sorted(mgr2.logs()) == [("kept", 0)]
    mgr2.shutdown()


def test_retention_pass_over_logs_of_one_segment_many_segments_producers_and_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_retention's walk (compiled, log.retention_pass): a log of one segment keeps it whatever its age (the
    active segment is never deleted); a log of several loses the segments retention.ms has passed, never one
    holding offsets at or above its high watermark; producer ids idle for producer.id.expiration.ms are forgotten;
    a log whose deletion fails reports its dir and the walk goes on to the logs after it."""
    now = 1_700_000_000_000
    mgr = LogManager([tmp_path / "a", tmp_path / "b"], CFG, time_ms=lambda: now)
    mgr.startup()
    mgr.producer_id_expiration_ms = 60_000
    one = len(rb.build_batch([(b"k", b"v" * 20)], timestamp_ms=now))
    old = now - 10_000  # past retention.ms below
    cfg = CFG.with_overrides({"retention.ms": "1000", "segment.bytes": str(one)})

    def append(lg: Log, **kw: int) -> None:
        lg.append_as_leader(rb.build_batch([(b"k", b"v" * 20)], timestamp_ms=old, **kw))

    bad = mgr.create_log("bad", 0, cfg)
    alone = mgr.create_log("alone", 0, cfg)
    rolled = mgr.create_log("rolled", 0, cfg)
    producing = mgr.create_log("producing", 0, CFG)
    for lg in (bad, bad, alone, rolled, rolled, rolled):
        append(lg)
    append(producing, producer_id=7, producer_epoch=0, base_sequence=0)
    assert (bad.num_segments, alone.num_segments, rolled.num_segments) == (2, 1, 3)
    assert set(producing.producer_state.producers) == {7}
    failed_dirs: list[Path] = []
    mgr.failure_channel.add_listener(failed_dirs.append)
    bad_dir = bad.dir
    unlink = Path.unlink

    def failing_unlink(path: Path, missing_ok: bool = False) -> None:
        if path.parent == bad_dir:
            raise OSError(5, "Input/output error", str(path))
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", failing_unlink)
    hws = {("bad", 0): 2, ("alone", 0): 1, ("rolled", 0): 1, ("producing", 0): 1}
    assert mgr.run_retention(now, hws) == 1  # rolled's first segment; its second holds offset 1, the HW
    assert failed_dirs == [mgr.log_dir_of("bad", 0)]
    assert alone.num_segments == 1 and alone.log_end_offset == 1
    assert [s.base_offset for s in rolled.segments] == [1, 2] and rolled.log_start_offset == 1
    assert set(producing.producer_state.producers) == {7}  # written 10 s ago: not idle for 60 s yet
    monkeypatch.setattr(Path, "unlink", unlink)
    hws[("rolled", 0)] = 3
    assert mgr.run_retention(now + 60_000, hws) == 1
    assert [s.base_offset for s in rolled.segments] == [2] and not producing.producer_state.producers
    mgr.shutdown()


def test_topic_config_and_retention_pass(tmp_path: Path) -> None:
    now = [1_000_000]  # close to the batches' timestamps: retention.ms does not apply
    mgr = LogManager([tmp_path], CFG, time_ms=lambda: now[0])
    mgr.startup()
    one = len(batch())
    lg = mgr.create_log("r", 0, CFG.with_overrides({"segment.bytes": str(one)}))
    for _ in range(5):
        lg.append_as_leader(batch())
    assert lg.num_segments == 5
    assert mgr.run_retention() == 0
    mgr.update_config("r", lg.config.with_overrides({"retention.bytes": str(one * 2)}))
    assert lg.config.retention_bytes == one * 2
    assert mgr.run_retention() == 3
    assert lg.log_start_offset == 6
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("r", 0): 6}
    mgr.shutdown()
    mgr2 = LogManager([tmp_path], CFG)
    mgr2.startup(topic_configs={"r": CFG.with_overrides({"segment.bytes": str(one)})})
    lg2 = mgr2.get_log("r", 0)
    assert lg2 is not None and lg2.log_start_offset == 6 and lg2.config.segment_bytes == one
    mgr2.shutdown()


def test_second_manager_on_same_dir_is_refused(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    other = LogManager([tmp_path], CFG)
    with pytest.raises(KafkaStorageError, match="lock"):
        other.startup()
    mgr.shutdown()
    other.startup()
    other.shutdown()


def test_flush_all_moves_recovery_points(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    lg = mgr.create_log("f", 0, CFG)
    lg.append_as_leader(batch(4))
    assert lg.recovery_point == 0
    mgr.flush_all()
    mgr.checkpoint()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("f", 0): 4}
    mgr.shutdown()


def test_recovery_threads_recover_every_log_of_a_dir(tmp_path: Path) -> None:
    """num.recovery.threads.per.data.dir: logs are opened and recovered several at a time; each torn tail is
    cut, and the same logs come back as with one thread."""
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    for p in range(6):
        lg = mgr.create_log("t", p, CFG)
        for _ in range(p + 1):
            lg.append_as_leader(batch(2))
    mgr.checkpoint()
    for p in range(6):  # crash with a half-written batch at the end of each log
        with open(tmp_path / f"t-{p}" / "00000000000000000000.log", "ab") as f:
            f.write(batch(2)[:50])
    for fd in mgr._lock_fds.values():
        os.close(fd)
    mgr2 = LogManager([tmp_path], CFG, recovery_threads_per_dir=4)
    mgr2.startup()
    assert {p: mgr2.get_log("t", p).log_end_offset for p in range(6)} == {p: 2 * (p + 1) for p in range(6)}
    mgr2.shutdown()
