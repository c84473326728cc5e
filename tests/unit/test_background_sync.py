"""Files rewritten on the request path are replaced at once and fsynced on the background thread, never on the
caller's; a clean shutdown waits for those fsyncs and syncs each log dir's file system once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kbus.server.log import background_sync
from kbus.server.log.background_sync import (
    replace_file,
    replace_file_sync_later,
    sync_filesystems,
    wait_for_background_syncs,
)
from kbus.server.log.epochs import LeaderEpochCache


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread names os.fsync was called from."""
    calls: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        calls.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return calls


def test_a_new_epoch_is_checkpointed_at_once_and_fsynced_off_the_callers_thread(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    """A partition that has a checkpoint: its new epoch is written at once (the file on disk would otherwise be
    trusted, stale, after a crash), the fsync on the background thread."""
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n1\n1 0\n")
    cache = LeaderEpochCache.load(tmp_path)
    assert cache is not None
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)  # the background thread busy: what is readable came from this one
    try:
        assert cache.assign(3, 100)
        assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 100\n"  # readable at once
    finally:
        gate.set()
    assert threading.current_thread().name not in fsyncs
    wait_for_background_syncs()
    assert fsyncs and all(name.startswith("kbus-file-sync") for name in fsyncs)  # file and directory
    loaded = LeaderEpochCache.load(tmp_path)
    assert loaded is not None and loaded.entries == [(1, 0), (3, 100)]


def test_a_partitions_first_checkpoint_is_written_off_the_callers_thread(tmp_path: Path, fsyncs: list[str]) -> None:
    """The first append to a new partition: no checkpoint file yet, so its first one is written (and fsynced) by
    the background thread; the event loop does not create 10,000 files for a produce over 10,000 new partitions.
    A crash before the write leaves no file, and Partition._load_epochs rebuilds the entries from the batches."""
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)
    try:
        cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
        assert cache.assign(3, 0)
        assert not (tmp_path / "leader-epoch-checkpoint").exists()  # queued, not written by the caller
        assert cache.assign(4, 10)  # the file is the background thread's: this later save writes it at once
        assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n4 10\n"
    finally:
        gate.set()
    wait_for_background_syncs()
    # the queued write ran after and wrote the entries of its own moment: never the older content
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n4 10\n"
    assert threading.current_thread().name not in fsyncs and fsyncs
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


def test_a_queued_first_checkpoint_of_a_deleted_partition_is_skipped(tmp_path: Path) -> None:
    d = tmp_path / "topic-0"
    d.mkdir()
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)
    try:
        LeaderEpochCache(d / "leader-epoch-checkpoint").assign(0, 0)
        d.rmdir()  # the partition deleted before the background thread got to it
    finally:
        gate.set()
    wait_for_background_syncs()
    assert not d.exists()


def test_replace_file_sync_now_or_later(tmp_path: Path, fsyncs: list[str]) -> None:
    path = tmp_path / "f"
    replace_file(path, "one", sync=True)
    assert path.read_text() == "one" and len(fsyncs) == 2  # the file, then its directory
    replace_file_sync_later(path, b"two").result()
    assert path.read_bytes() == b"two" and not (tmp_path / "f.tmp").exists()


def test_a_file_gone_before_its_fsync_is_not_an_error(tmp_path: Path) -> None:
    d = tmp_path / "partition-0"
    d.mkdir()
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)  # hold the thread until the partition is deleted
    fut = replace_file_sync_later(d / "leader-epoch-checkpoint", "0\n0\n")
    (d / "leader-epoch-checkpoint").unlink()
    d.rmdir()
    gate.set()
    assert fut.result(timeout=10) is None


def test_sync_filesystems_skips_missing_dirs(tmp_path: Path) -> None:
    sync_filesystems([tmp_path, tmp_path / "missing", tmp_path])


def test_many_files_replaced_at_once_are_made_durable_by_one_syncfs(
    tmp_path: Path, fsyncs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first produce spread over thousands of new partitions rewrites that many leader-epoch checkpoints: those
    waiting for the background thread are made durable together (one syncfs for their file system), not by an
    fsync of each file and its directory."""
    syncfs_calls: list[int] = []

    def fake_syncfs(fd: int) -> int:
        syncfs_calls.append(fd)
        return 0

    monkeypatch.setattr(background_sync, "_syncfs", fake_syncfs)
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)  # the thread busy while the files are replaced
    futures = set()
    for i in range(100):
        d = tmp_path / f"topic-{i}"
        d.mkdir()
        futures.add(replace_file_sync_later(d / "leader-epoch-checkpoint", f"0\n1\n0 {i}\n"))
    assert len(futures) == 1  # one drain for all of them
    gate.set()
    assert futures.pop().result(timeout=10) is None
    assert len(syncfs_calls) == 1 and fsyncs == []
    assert (tmp_path / "topic-7" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 7\n"
    # a few at a time (one partition's new epoch) keep their own fsyncs: no flush of the whole file system
    replace_file_sync_later(tmp_path / "topic-1" / "leader-epoch-checkpoint", "0\n1\n5 10\n").result(timeout=10)
    assert len(syncfs_calls) == 1 and len(fsyncs) == 2


def test_the_files_of_a_batch_are_written_by_one_job_when_it_ends(
    tmp_path: Path, fsyncs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A become-leader of many new partitions hands over one first checkpoint each: inside batch() the idle
    background thread is not woken for the first of them (and then again for those handed over meanwhile), it
    writes them all in one job, made durable by one syncfs, once the batch ends."""
    syncfs_calls: list[str] = []

    def fake_syncfs(fd: int) -> int:
        syncfs_calls.append(threading.current_thread().name)
        return 0

    monkeypatch.setattr(background_sync, "_syncfs", fake_syncfs)
    wait_for_background_syncs()  # idle
    caches = []
    with background_sync.batch():
        for i in range(40):
            d = tmp_path / f"topic-{i}"
            d.mkdir()
            cache = LeaderEpochCache(d / "leader-epoch-checkpoint")
            cache.assign(0, i)
            caches.append(cache)
        with background_sync.batch():  # nested: the outer block's end queues the job
            pass
        threading.Event().wait(0.1)  # time enough for an idle thread to have started on them
        assert not any((tmp_path / f"topic-{i}" / "leader-epoch-checkpoint").exists() for i in range(40))
    wait_for_background_syncs()
    assert (tmp_path / "topic-7" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 7\n"
    assert len(syncfs_calls) == 1 and fsyncs == []


def test_a_shutdown_writes_the_files_of_an_open_batch(tmp_path: Path) -> None:
    with background_sync.batch():
        LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").assign(2, 0)
        wait_for_background_syncs()  # a clean shutdown waits for every file handed over
        assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"
