"""Offline log dirs without processes: the failure channel, the log manager's side, the controller's rule that a
replica in a failed dir counts as dead, and the notification znode's codec."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbus.protocol import record_batch as rb
from kbus.server.log import KafkaStorageError, LogConfig, LogManager
from kbus.server.log.dir_failure import LogDirFailureChannel
from kbus.zk import codec, paths

CFG = LogConfig(file_delete_delay_ms=0)


def batch() -> bytes:
    return rb.build_batch([(b"k", b"v")], timestamp_ms=1_000)


def test_channel_reports_each_dir_once(tmp_path: Path) -> None:
    channel = LogDirFailureChannel()
    heard: list[Path] = []
    channel.add_listener(heard.append)
    err = channel.storage_error(tmp_path, "Error while appending", OSError(28, "No space left on device"))
    assert isinstance(err, KafkaStorageError) and "No space left" in str(err)
    channel.maybe_add_offline_log_dir(tmp_path, "again", OSError(5, "EIO"))
    assert heard == [tmp_path] and channel.has_failed(tmp_path)


def test_failed_dir_drops_its_logs_and_takes_no_new_ones(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    mgr = LogManager([d0, d1], CFG)
    mgr.startup()
    a, b = mgr.create_log("t", 0), mgr.create_log("t", 1)
    assert {mgr.log_dir_of("t", 0), mgr.log_dir_of("t", 1)} == {d0, d1}
    a.append_as_leader(batch())
    failed = mgr.log_dir_of("t", 1)
    assert failed is not None
    assert mgr.handle_log_dir_failure(failed) == [("t", 1)]
    assert mgr.handle_log_dir_failure(failed) == []  # once
    assert b.closed and mgr.get_log("t", 1) is None and mgr.live_log_dirs == [d0]
    described = {u.path: u for u in mgr.describe_dirs()}
    assert not described[d1.absolute()].online and described[d1.absolute()].partition_sizes == {}
    assert mgr.log_dir_of("t", 2) is None and mgr.create_log("t", 2) is not None
    assert mgr.log_dir_of("t", 2) == d0  # new logs only go to live dirs
    mgr.shutdown()
    assert not (d1 / ".kafka_cleanshutdown").exists() and (d0 / ".kafka_cleanshutdown").exists()


def test_io_error_in_a_background_flush_reports_the_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mgr = LogManager([tmp_path], CFG)
    mgr.startup()
    heard: list[Path] = []
    mgr.failure_channel.add_listener(heard.append)
    lg = mgr.create_log("t", 0)
    lg.append_as_leader(batch())

    def broken_fsync(fd: int) -> None:  # the disk fails under the segment's fsync (the compiled Log cannot be patched)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    mgr.flush_all()
    assert heard == [tmp_path]


def test_unusable_dir_at_startup_is_offline_and_all_unusable_refuses(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    mgr = LogManager([tmp_path / "ok", not_a_dir], CFG)
    mgr.startup()
    assert mgr.offline_dirs == [not_a_dir] and mgr.failure_channel.has_failed(not_a_dir)
    mgr.shutdown()
    with pytest.raises(KafkaStorageError, match="no usable log dir"):
        LogManager([not_a_dir], CFG).startup()


def test_log_dir_event_codec_is_kafkas() -> None:
    assert codec.decode_log_dir_event(codec.encode_log_dir_event(3)) == 3
    assert codec.decode_log_dir_event(b'{"version":1,"broker":4,"event":2}') is None  # not a failure event
    assert paths.parse(paths.LOG_DIR_EVENT_NOTIFICATION) == ("log_dir_events",)


def test_future_log_replaces_the_current_one(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    mgr = LogManager([d0, d1], CFG)
    mgr.startup()
    current = mgr.create_log("t", 0)
    for _ in range(3):
        current.append_as_leader(batch())
    source = mgr.log_dir_of("t", 0)
    dest = d1 if source == d0 else d0
    assert mgr.configured_dir(str(dest.absolute())) == dest and mgr.configured_dir("/elsewhere") is None
    future = mgr.create_future_log(("t", 0), dest)
    assert future.dir.name.startswith("t-0.") and future.dir.name.endswith("-future")
    future.append_as_follower(current.read(0, 1 << 20).to_bytes())
    described = {u.path: u for u in mgr.describe_dirs()}
    assert ("t", 0) in described[dest.absolute()].future_sizes
    assert ("t", 0) in described[source.absolute()].partition_sizes
    moved = mgr.replace_current_with_future(("t", 0))
    assert mgr.get_log("t", 0) is moved and mgr.log_dir_of("t", 0) == dest and moved.dir == dest / "t-0"
    assert future.closed and moved.log_end_offset == 3
    assert moved.read(0, 1 << 20).to_bytes() == current.read(0, 1 << 20).to_bytes()  # the old one: open a while yet
    assert not (source / "t-0").exists()
    mgr.shutdown()


def test_reassignment_json_log_dirs() -> None:
    from kbus.cli.common import UsageError
    from kbus.cli.reassign import parse_reassignment

    targets, dirs = parse_reassignment({"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d1", "any"]},
        {"topic": "a", "partition": 1, "replicas": [2, 3]}]})  # fmt: skip
    assert targets == {("a", 0): [1, 2], ("a", 1): [2, 3]} and dirs == {("a", 0, 1): "/d1"}
    with pytest.raises(UsageError, match=r"Size of replicas list \[1, 2\] is different from size of log dirs list "
                                         r"\[any\] for partition a-0"):  # fmt: skip
        parse_reassignment({"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]})
