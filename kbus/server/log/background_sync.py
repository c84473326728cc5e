"""Small files the request path rewrites, made durable off it (Kafka 3.x flushes leader-epoch checkpoints and
producer snapshots asynchronously too: KAFKA-15046, KAFKA-13790).

The first append of a new leader epoch rewrites the partition's `leader-epoch-checkpoint`; a roll writes a producer
snapshot. With fsync on the event loop that is two disk flushes per partition before any other request is served:
a first produce spread over 10,000 partitions stalled the broker for tens of seconds. Here the file is replaced
atomically at once (a crash of the process, kill -9 included, keeps what was written: the page cache survives it)
and its fsync runs on a background thread. Only a power loss can lose the newest version, as it can lose the
unflushed log records the file describes; a checkpoint that is gone or torn is rebuilt from the batch headers.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

_syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbus-file-sync")


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
    """`replace_file` now, its fsync (file and directory) on the background thread."""
    replace_file(path, data, sync=False)
    return _syncer.submit(_fsync_path, path)


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
    whole host's dirty pages, as sync(2) would), sync(2) where syncfs is missing."""
    seen: set[int] = set()
    for d in dirs:
        try:
            fd = os.open(d, os.O_RDONLY)
        except OSError:
            continue  # an offline or missing dir: nothing of it to keep
        try:
            dev = os.fstat(fd).st_dev
            if dev in seen:
                continue
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
