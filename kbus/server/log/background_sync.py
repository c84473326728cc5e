"""Small files the request path rewrites, made durable off it (Kafka 3.x flushes producer snapshots and the
leader-epoch checkpoints of truncations asynchronously too: KAFKA-15046, KAFKA-13790; Kafka 3.9's
LeaderEpochFileCache.assign, a new epoch's first append, still fsyncs on the request thread since KAFKA-16541,
so there kbus is the weaker of the two: see kbus.server.log.epochs).

The first append of a new leader epoch rewrites the partition's `leader-epoch-checkpoint`; a roll writes a producer
snapshot. With fsync on the event loop that is two disk flushes per partition before any other request is served:
a first produce spread over 10,000 partitions stalled the broker for tens of seconds. Here the file is replaced
atomically at once (a crash of the process, kill -9 included, keeps what was written: the page cache survives it)
and its fsync runs on a background thread. Only a power loss can lose the newest version, as it can lose the
unflushed log records the file describes; a checkpoint that is gone or torn is rebuilt from the batch headers.

The fsyncs are coalesced: the files replaced while the background thread is busy are made durable together, by an
fsync of each file and its directory when there are few, by one syncfs(2) per file system from SYNCFS_FROM files
on. A first produce spread over 10,000 partitions otherwise queued 20,000 fsyncs (file and directory per
partition), a share of the broker's CPU per message there. A partition's first checkpoint is even written here
(write_file_later): losing it costs nothing, its entries are rebuilt from the batch headers on load.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger(__name__)
_syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbus-file-sync")
SYNCFS_FROM = 16  # pending files from which one syncfs per file system replaces an fsync of each file and dir
_pending_lock = threading.Lock()
_pending: list[Path] = []  # replaced files whose fsync the queued drain (_drain_future) has not taken yet
# files the queued drain writes first (write_file_later): each one's writer replaces it with its content then
_pending_writes: list[tuple[Path, Callable[[], None]]] = []
_drain_future: Future[None] | None = None


def replace_file(path: Path, data: str | bytes, *, sync: bool) -> None:
    """Write `path` through a temporary file and a rename, so a reader sees the old or the new content, never a
    mix; with `sync`, both are on disk (file and directory) before this returns."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def replace_file_sync_later(path: Path, data: str | bytes) -> Future[None]:
    """`replace_file` now, its fsync (file and directory) on the background thread, with every other file replaced
    before that thread gets to it (the returned future is theirs too: done once all of them are durable)."""
    replace_file(path, data, sync=False)
    with _pending_lock:
        _pending.append(path)
        return _queue_drain()


def write_file_later(path: Path, write: Callable[[], None]) -> Future[None]:
    """`write()` (which replaces `path`, e.g. through `replace_file(..., sync=False)`) and then the fsync of
    `path`, both on the background thread; the returned future is done once they have run. For a file whose loss
    in a crash costs nothing (its content can be rebuilt), so the caller's thread skips the open, write and rename:
    a first produce spread over 10,000 new partitions spent ~40 % of the event loop's time creating their
    leader-epoch checkpoints. A `write()` that finds its directory gone (the partition deleted or moved
    meanwhile) is skipped, as Kafka's writeIfDirExists does."""
    with _pending_lock:
        _pending_writes.append((path, write))
        return _queue_drain()


def _queue_drain() -> Future[None]:
    """The drain that has not started yet (queued if there is none: a running one took its files); call with
    _pending_lock held."""
    global _drain_future
    fut = _drain_future
    if fut is None:
        fut = _drain_future = _syncer.submit(_drain_pending)
    return fut


def _drain_pending() -> None:
    global _drain_future
    with _pending_lock:
        paths = _pending[:]
        writes = _pending_writes[:]
        _pending.clear()
        _pending_writes.clear()
        _drain_future = None  # files replaced from now on need a drain of their own
    for path, write in writes:
        try:
            write()
        except (FileNotFoundError, NotADirectoryError):
            continue  # the partition was deleted or moved: nothing to write
        except OSError as exc:  # the others' writes and fsyncs still run; the file is rebuilt on the next load
            log.warning("could not write %s: %s", path, exc)
            continue
        paths.append(path)
    if len(paths) < SYNCFS_FROM:
        for path in paths:
            _fsync_path(path)
        return
    # many at once (a produce spread over thousands of new partitions): one syncfs per file system makes every
    # file and every rename durable; a partition deleted meanwhile is skipped with its directory
    sync_filesystems(list(dict.fromkeys(path.parent for path in paths)))


def wait_for_background_syncs() -> None:
    """Every fsync submitted so far has run (a clean shutdown waits before it writes its marker)."""
    _syncer.submit(lambda: None).result()


def _load_syncfs() -> ctypes._NamedFuncPointer | None:
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).syncfs
    return None


_syncfs = _load_syncfs()


def sync_filesystems(dirs: list[Path]) -> None:
    """Everything written to the file systems holding `dirs` is on disk: syncfs(2) once per file system (not the
    whole host's dirty pages, as sync(2) would), sync(2) where syncfs is missing. A stat per dir, one open per
    file system (thousands of partition dirs share one)."""
    seen: set[int] = set()
    for d in dirs:
        try:
            dev = os.stat(d).st_dev
            if dev in seen:
                continue
            fd = os.open(d, os.O_RDONLY)
        except OSError:
            continue  # an offline or missing dir: nothing of it to keep
        try:
            seen.add(dev)
            if _syncfs is None or _syncfs(fd) != 0:
                os.sync()
        finally:
            os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_path(path: Path) -> None:
    # the partition may have been deleted or moved meanwhile: nothing left to make durable
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(path.parent)
