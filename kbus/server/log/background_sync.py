"""Small files the request path rewrites, made durable off it (Kafka 3.x flushes producer snapshots and the
leader-epoch checkpoints of truncations asynchronously too: KAFKA-15046, KAFKA-13790; Kafka 3.9's
LeaderEpochFileCache.assign, a replica becoming leader of a new epoch or a follower appending one, still writes and
fsyncs on the calling thread, so there kbus is the weaker of the two: see kbus.server.log.epochs).

A new leader epoch rewrites the partition's `leader-epoch-checkpoint`; a roll writes a producer snapshot. With
fsync on the event loop that is two disk flushes per partition before any other request is served: 10,000
partitions changing leader stalled the broker for tens of seconds. Here the file is replaced atomically at once (a
crash of the process, kill -9 included, keeps what was written: the page cache survives it) and its fsync runs on
a background thread. Only a power loss can lose the newest version, as it can lose the unflushed log records the
file describes; a checkpoint that is gone or torn is rebuilt from the batch headers.

The fsyncs are coalesced: the files replaced while the background thread is busy are made durable together, by an
fsync of each file and its directory when there are few, by one syncfs(2) per file system from SYNCFS_FROM files
on. 10,000 partitions' checkpoints otherwise queued 20,000 fsyncs (file and directory per partition). A
partition's first checkpoint is even written here (write_file_later): losing it costs nothing, its entries are
rebuilt from the batch headers on load. A become-leader of many partitions (a 10,000-partition topic's creation)
hands over one first checkpoint per partition: `batch()` keeps them for one job, queued when the batch ends,
instead of one job (and one syncfs) each time the background thread, woken by the first file, comes back for the
files handed over meanwhile.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger(__name__)
_syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbus-file-sync")
SYNCFS_FROM = 16  # pending files from which one syncfs per file system replaces an fsync of each file and dir
_pending_lock = threading.Lock()
_pending: list[Path] = []  # replaced files whose fsync the next drain (_drain_future) has not taken yet
# files the next drain writes first (write_file_later): each one's writer replaces it with its content then, and
# says whether it wrote anything (False: its partition is no longer hosted)
_pending_writes: list[tuple[Path, Callable[[], bool]]] = []
_drain_future: Future[None] | None = None  # the next drain's: done once the files handed over until it starts are
_drain_submitted = False  # whether that drain is queued on the background thread (not while a batch() holds it)
_batches = 0  # batch() blocks open: the next drain waits for the last one to end


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


def write_file_later(path: Path, write: Callable[[], bool]) -> Future[None]:
    """`write()` (which replaces `path`, e.g. through `replace_file(..., sync=False)`, and returns whether it
    did) and then the fsync of `path`, both on the background thread; the returned future is done once they have
    run. For a file whose loss in a crash costs nothing (its content can be rebuilt), so the caller's thread skips
    the open, write and rename: 10,000 new partitions' leader-epoch checkpoints cost ~0.3 s of open, write and
    rename. A `write()` that finds its directory gone (the partition deleted or moved meanwhile) is skipped, as
    Kafka's writeIfDirExists does."""
    with _pending_lock:
        _pending_writes.append((path, write))
        return _queue_drain()


@contextlib.contextmanager
def batch() -> Iterator[None]:
    """The files handed to the background thread inside the block (write_file_later, replace_file_sync_later) are
    written and made durable by one job, queued when the block ends (the outermost one, if nested): a
    become-leader of 10,000 new partitions is one job and one syncfs, not one per file the background thread
    found when it came back for more. The callers' own writes (replace_file_sync_later's) still happen at once."""
    global _batches
    with _pending_lock:
        _batches += 1
    try:
        yield
    finally:
        with _pending_lock:
            _batches -= 1
            if _drain_future is not None:
                _queue_drain()


def _queue_drain() -> Future[None]:
    """The drain that has not started yet (made if there is none: a running one took its files), queued on the
    background thread unless a batch() is open; call with _pending_lock held."""
    global _drain_future, _drain_submitted
    fut = _drain_future
    if fut is None:
        fut = _drain_future = Future()
        _drain_submitted = False
    if not _drain_submitted and not _batches:
        _syncer.submit(_drain_pending, fut)
        _drain_submitted = True
    return fut


def _drain_pending(fut: Future[None]) -> None:
    global _drain_future
    with _pending_lock:
        paths = _pending[:]
        writes = _pending_writes[:]
        _pending.clear()
        _pending_writes.clear()
        _drain_future = None  # files handed over from now on need a drain of their own
    try:
        _write_and_sync(paths, writes)
    except BaseException as exc:
        fut.set_exception(exc)
        raise
    fut.set_result(None)


def _write_and_sync(paths: list[Path], writes: list[tuple[Path, Callable[[], bool]]]) -> None:
    for path, write in writes:
        try:
            if not write():
                continue
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
    # many at once (10,000 partitions' checkpoints): one syncfs per file system makes every file and every rename
    # durable; a partition deleted meanwhile is skipped with its directory
    sync_filesystems(list(dict.fromkeys(path.parent for path in paths)))


def wait_for_background_syncs() -> None:
    """Every file handed over so far is written and durable (a clean shutdown waits before it writes its marker),
    those of an open batch() too."""
    global _drain_submitted
    with _pending_lock:
        if _drain_future is not None and not _drain_submitted:
            _syncer.submit(_drain_pending, _drain_future)
            _drain_submitted = True
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
