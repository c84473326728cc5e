"""One segment: ``<base>.log`` of record batches plus its sparse ``.index`` and ``.timeindex``.

Appends go through os.write on an O_APPEND fd, so an acknowledged append is in the kernel (it survives a
``kill -9`` of the broker); fsync happens only on flush (roll, close, flush.messages/flush.ms). Reads use
os.pread on the same fd and only look at batch headers.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import (
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    iter_complete_batches,
)
from kbus.server.log.index import PENDING_WRITE_BYTES, OffsetIndex, TimeIndex
from kbus.server.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_WALK_WINDOW = 64 * 1024
_RECOVERY_CHUNK = 1 << 20
_INT32_MAX: Final = 2**31 - 1
_NEVER: Final = 2**61  # AppendLimits' flush bounds: never reached, and a native int of compiled code


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    n = os.write(fd, data)
    if n == len(data):
        # the whole of it in one write(2), as a regular file takes it: no memoryview and no slice of it per append
        return
    view = memoryview(data)[n:]
    while view:
        n = os.write(fd, view)
        view = view[n:]


def pread_all(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class AppendLimits:
    """The LogConfig values every append reads, as native fields of a compiled class. LogConfig is an interpreted
    frozen dataclass: each of its fields read from compiled code is a generic attribute lookup and an unboxing,
    about ten of them per append (the sizes, the roll, the index interval, the flush policy, min.insync.replicas
    for acks=-1). A config change replaces the LogConfig object (Log.update_config), so the Log and each segment
    keep one of these for the config object they hold and make a new one only when that object is another
    (`limits_for`)."""

    __slots__ = ("config", "flush_messages", "flush_ms", "index_interval_bytes", "log_append_time",
                 "max_message_bytes", "min_insync_replicas", "roll_after_ms", "segment_bytes")  # fmt: skip

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.segment_bytes: int = config.segment_bytes
        self.roll_after_ms: int = config.segment_ms - config.segment_jitter_ms
        self.index_interval_bytes: int = config.index_interval_bytes
        self.max_message_bytes: int = config.max_message_bytes
        # flush.messages and flush.ms default to Long.MAX_VALUE ("never"), past a native int of compiled code: each
        # append's comparison with it went through CPython's. No count of records or of milliseconds since the last
        # flush reaches 2^61, so a bound past that is kept as 2^61: the same decisions, in native ints.
        self.flush_messages: int = min(config.flush_messages, _NEVER)
        self.flush_ms: int = min(config.flush_ms, _NEVER)
        self.log_append_time: bool = config.log_append_time
        self.min_insync_replicas: int = config.min_insync_replicas  # acks=-1's check, before and after the append


def limits_for(config: LogConfig, kept: AppendLimits | None) -> AppendLimits:
    """`kept` while it was made from `config` (the same object), else new ones."""
    if kept is not None and kept.config is config:
        return kept
    return AppendLimits(config)


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, fd: int, size: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self._limits: AppendLimits | None = None  # config's values as the appends read them (limits_for)
        self.fd = fd
        self.size = size
        prefix = filename_prefix(base_offset)
        self.log_path = directory / (prefix + LOG_SUFFIX)
        self.index = OffsetIndex(directory / (prefix + INDEX_SUFFIX), base_offset, config.max_index_entries)
        self.time_index = TimeIndex(
            directory / (prefix + TIME_INDEX_SUFFIX), base_offset, config.max_time_index_entries
        )
        self.txn_index = TransactionIndex(directory / (prefix + TXN_INDEX_SUFFIX))
        self.next_offset = base_offset  # one past the last offset stored here
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self.rolling_base_ms: int | None = None  # segment.ms counts from the first append
        self.closed = False

    # --- lifecycle --------------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig) -> LogSegment:
        path = directory / (filename_prefix(base_offset) + LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        os.ftruncate(fd, 0)
        seg = cls(directory, base_offset, config, fd, 0)
        seg.index.reset()
        seg.time_index.reset()
        seg.txn_index.reset()
        return seg

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig) -> LogSegment:
        """Open an existing segment without validating it (see ``recover`` and ``load_indexes``)."""
        path = directory / (filename_prefix(base_offset) + LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(fd).st_size
        return cls(directory, base_offset, config, fd, size)

    def load_indexes(self) -> int:
        """Trust the index files if they pass sanity checks (else rebuild them from the log); read the batches
        after the last index entry for the next offset, the max timestamp and a torn tail, which is cut off.
        Returns the number of bytes truncated."""
        ok = self.index.load(self.size) and self.time_index.load()
        idx_offset, idx_pos = self.index.last_entry()
        if ok and len(self.index):
            first = next(self.walk(idx_pos), None)
            ok = first is not None and first.last_offset == idx_offset
        if not ok:
            log.warning("%s: index files fail sanity checks, rebuilding them", self.log_path)
            return self.recover(verify_crc=False)
        tail = list(self.walk(idx_pos))
        end = tail[-1].end_position if tail else idx_pos
        largest = max((h.size for h in tail), default=0)
        if end - idx_pos > 4 * max(self.config.index_interval_bytes, 1) + largest:
            # far more unindexed bytes than the interval allows: the index lost entries
            log.warning("%s: index is missing entries, rebuilding it", self.log_path)
            return self.recover(verify_crc=False)
        truncated = self.size - end
        if truncated:
            log.warning("%s: %d bytes of torn tail after position %d removed", self.log_path, truncated, end)
            self._truncate_file(end)
        self.next_offset = self.base_offset
        if tail:
            self.time_index.truncate_to_offset(tail[-1].next_offset)
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        for h in tail:
            self._track(h)
        if not tail and len(self.index):
            self.next_offset = idx_offset + 1
        self.bytes_since_last_index_entry = end - idx_pos
        self._init_rolling_base()
        return truncated

    def recover(self, *, verify_crc: bool = True) -> int:
        """Re-read every batch (checking CRCs), rebuild both indexes and cut the file at the first invalid or
        torn batch. Returns the number of bytes truncated."""
        self.index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        end = 0
        interval = self.config.index_interval_bytes
        for h in self.iter_batches(verify_crc=verify_crc):
            if h.base_offset < self.next_offset or h.last_offset_delta < 0:
                log.warning(
                    "%s: batch at position %d has offset %d below %d; truncating there",
                    self.log_path,
                    h.position,
                    h.base_offset,
                    self.next_offset,
                )
                break
            self._track(h)
            if self.bytes_since_last_index_entry > interval:
                self.index.append(h.last_offset, h.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.size
            end = h.end_position
        truncated = self.size - end
        if truncated:
            log.warning(
                "%s: invalid or torn data after position %d (%d bytes) truncated", self.log_path, end, truncated
            )
            self._truncate_file(end)
        self.index.flush_pending()
        self.time_index.flush_pending()
        self._init_rolling_base()
        return truncated

    def _init_rolling_base(self) -> None:
        # A reopened segment keeps ageing from its first batch's timestamp, as Kafka does; never from "now",
        # or a broker restarted more often than segment.ms would never roll.
        if self.size == 0:
            self.rolling_base_ms = None
            return
        first = next(self.walk(0), None)
        if first is not None and first.max_timestamp >= 0:
            self.rolling_base_ms = first.max_timestamp
        else:
            self.rolling_base_ms = int(os.fstat(self.fd).st_mtime * 1000)

    def _track(self, h: BatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        self.next_offset = h.next_offset

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size
        self.index.truncate_to_position(size)

    def flush(self) -> None:
        self.index.sync()
        self.time_index.sync()
        os.fsync(self.fd)

    def on_become_inactive(self) -> None:
        """Make the time index's last entry the segment's max timestamp (retention reads it after restart)."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.index.flush_pending()
        self.time_index.flush_pending()

    def release_index_fds(self) -> None:
        """An inactive segment's indexes are rarely written again: give their fds back (reopened lazily)."""
        self.index.close()
        self.time_index.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.index.close()
            self.time_index.close()
        finally:
            os.close(self.fd)

    def mark_deleted(self) -> None:
        """Rename the files to ``*.deleted``; fds stay open so in-flight reads still work."""
        self.index.flush_pending()
        self.time_index.flush_pending()
        for path in (self.log_path, self.index.path, self.time_index.path):
            if path.exists():
                os.replace(path, path.with_name(path.name + DELETED_SUFFIX))
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        self.index.path = self.index.path.with_name(self.index.path.name + DELETED_SUFFIX)
        self.time_index.path = self.time_index.path.with_name(self.time_index.path.name + DELETED_SUFFIX)
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX))

    def delete_files(self) -> None:
        self.close()
        for path in (self.log_path, self.index.path, self.time_index.path):
            path.unlink(missing_ok=True)
        self.txn_index.delete()

    # --- append -----------------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader], now_ms: int) -> None:
        """Write whole batches (already validated, offsets assigned). Header positions are relative to
        ``data``."""
        start = self.size
        try:
            write_all(self.fd, data)
        except OSError:
            # never leave half a batch behind: a later append would land after garbage. The error goes up as it is:
            # the replica manager takes the log dir offline (LogDirFailureChannel) and answers KAFKA_STORAGE_ERROR
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            raise
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        limits = limits_for(self.config, self._limits)
        self._limits = limits
        interval = limits.index_interval_bytes
        index, time_index = self.index, self.time_index
        for h in headers:
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
            if self.bytes_since_last_index_entry > interval:
                index.append(h.base_offset + h.last_offset_delta, start + h.position)
                time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.batch_length + LOG_OVERHEAD
        self.size = start + len(data)
        last = headers[-1]
        self.next_offset = last.base_offset + last.last_offset_delta + 1
        # in blocks (index.PENDING_WRITE_BYTES): the entries are in memory for lookups, and flush(), roll
        # (on_become_inactive), truncation and close write the rest
        index.flush_pending_over(PENDING_WRITE_BYTES)
        time_index.flush_pending_over(PENDING_WRITE_BYTES)

    def should_roll(self, incoming_bytes: int, first_offset: int, last_offset: int, now_ms: int) -> bool:
        if self.size == 0:
            return False
        limits = limits_for(self.config, self._limits)
        self._limits = limits
        if self.size > limits.segment_bytes - incoming_bytes:
            return True
        base_ms = self.rolling_base_ms
        if base_ms is not None and now_ms - base_ms > limits.roll_after_ms:
            return True
        if self.index.is_full or self.time_index.is_full:
            return True
        # relative offsets in the indexes are int32
        return last_offset - self.base_offset > _INT32_MAX or first_offset < self.base_offset

    # --- reading ----------------------------------------------------------------------------------------

    def walk(self, start: int = 0, end: int | None = None, *, window_size: int = _WALK_WINDOW,
             windows: list[tuple[int, bytes]] | None = None) -> Iterator[BatchHeader]:  # fmt: skip
        """Headers of the whole batches in [start, end) without reading their records; stops at a torn tail.

        Reads ``window_size`` windows while batches are small, and just each 61-byte header once they are large.
        ``windows``: each window read is added to it as (file position, bytes) (read() hands the last one on, so
        a small fetch's records need no second pread).
        """
        end = self.size if end is None else end
        fd = self.fd
        window = b""
        window_start = start
        pos = start
        last_size = 0
        unpack = HEADER_STRUCT.unpack_from
        while end - pos >= RECORD_BATCH_OVERHEAD:
            rel = pos - window_start
            if rel + RECORD_BATCH_OVERHEAD > len(window):
                want = RECORD_BATCH_OVERHEAD if last_size > 16384 else min(window_size, end - pos)
                window = os.pread(fd, want, pos)
                window_start = pos
                rel = 0
                if windows is not None:
                    windows.append((pos, window))
                if len(window) < RECORD_BATCH_OVERHEAD:
                    return
            if window[rel + MAGIC_OFFSET] != MAGIC_V2:
                return
            (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
             max_timestamp, producer_id, producer_epoch, base_sequence,
             records_count) = unpack(window, rel)  # fmt: skip
            # arguments by position, not BatchHeader(pos, *unpack(...)): compiled code then calls the native
            # constructor directly, not through a list, a tuple and the type's argument parsing (every Fetch that
            # reads a partition walks at least one header)
            h = BatchHeader(pos, base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
                            base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                            records_count)  # fmt: skip
            size = h.batch_length + LOG_OVERHEAD
            if h.batch_length < MIN_BATCH_LENGTH or pos + size > end:
                return
            yield h
            last_size = size
            pos += size

    def iter_batches(self, *, verify_crc: bool, start: int = 0) -> Iterator[BatchHeader]:
        """Headers of whole, valid batches from ``start``, reading records too when checking CRCs."""
        if not verify_crc:
            yield from self.walk(start)
            return
        end = self.size
        pos = start
        while end - pos >= RECORD_BATCH_OVERHEAD:
            data = pread_all(self.fd, min(_RECOVERY_CHUNK, end - pos), pos)
            consumed = 0
            for h in iter_complete_batches(data, verify_crc=True):
                h.position += pos
                consumed = h.end_position - pos
                yield h
            if consumed:
                pos += consumed
                continue
            # the batch at pos is bigger than the chunk, or it is invalid
            if len(data) < RECORD_BATCH_OVERHEAD or data[MAGIC_OFFSET] != MAGIC_V2:
                return
            (length,) = HEADER_STRUCT.unpack_from(data, 0)[1:2]
            size = length + LOG_OVERHEAD
            if length < MIN_BATCH_LENGTH or pos + size > end or size <= len(data):
                return
            whole = pread_all(self.fd, size, pos)
            found = next(iter_complete_batches(whole, verify_crc=True), None)
            if found is None:
                return
            found.position = pos
            yield found
            pos += size

    def find_batch(
        self, offset: int, end: int | None = None, windows: list[tuple[int, bytes]] | None = None
    ) -> BatchHeader | None:
        """The first batch whose last offset >= ``offset`` (the batch holding it, or the next one)."""
        _, position = self.index.lookup(offset)
        # the index is sparse (an entry per index.interval.bytes): only a short walk is left
        window = min(_WALK_WINDOW, max(4096, 2 * self.config.index_interval_bytes))
        for h in self.walk(position, end, window_size=window, windows=windows):
            if h.base_offset + h.last_offset_delta >= offset:
                return h
        return None

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
        windows: list[tuple[int, bytes]] | None = None,
    ) -> tuple[int, int, int, int] | None:
        """(position, size, first base offset, next offset) of whole batches from the one holding ``offset``;
        None if that is past this segment. Size is 0 when the limits exclude even the first batch. The next
        offset is the one after the last batch in the range (the first batch's base offset when size is 0), so
        the range spans next - first offsets without a header read per batch. ``windows``: what the walks read
        (walk()); the range's bytes are often all in the last one (a consumer near the log end).

        Cost does not grow with the number of batches returned: both ends are found through the offset index
        plus a walk of at most about one index interval.
        """
        end = self.size  # appends may continue: look only at what was there when the read began
        end_offset = self.next_offset  # appends run on the event loop as reads do: this is the offset at `end`
        first = self.find_batch(offset, end, windows)
        if first is None:
            return None
        start, first_offset = first.position, first.base_offset
        limit, limit_offset = end, end_offset
        if max_offset is not None and max_offset < end_offset:
            # batches holding max_offset or later are excluded (the high watermark is a batch boundary); at or past
            # the segment's next offset no batch here holds it, so no walk (a backlog read, or HW = log end)
            stop = self.find_batch(max_offset, end, windows)
            if stop is not None:
                limit, limit_offset = stop.position, stop.base_offset
        first_size = first.batch_length + LOG_OVERHEAD
        if limit <= start:
            return start, 0, first_offset, first_offset
        target = start + max_bytes
        if target >= limit:
            return start, limit - start, first_offset, limit_offset
        if first_size > max_bytes:
            if min_one_batch:
                return start, first_size, first_offset, first.next_offset
            return start, 0, first_offset, first_offset
        # the last batch boundary at or below target: from the nearest indexed batch start, walk forward
        boundary = max(self.index.position_floor(target), start)
        boundary_offset = first_offset if boundary == start else -1
        window = min(_WALK_WINDOW, max(4096, 2 * self.config.index_interval_bytes))
        for h in self.walk(boundary, limit, window_size=window, windows=windows):
            if h.end_position > target:
                boundary_offset = h.base_offset  # h starts at boundary: the first batch left out
                break
            boundary = h.end_position
            boundary_offset = h.next_offset
        if boundary_offset < 0:  # nothing readable at the indexed position (not expected): stop at the first batch
            boundary, boundary_offset = start + first_size, first.next_offset
        return start, boundary - start, first_offset, boundary_offset

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after; returns bytes removed."""
        h = self.find_batch(offset)
        if h is None:
            return 0
        removed = self.size - h.position
        self._truncate_file(h.position)
        self.time_index.truncate_to_offset(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        # recompute what the dropped batches contributed
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_offset
        self.next_offset = self.base_offset
        _idx_offset, idx_pos = self.index.last_entry()
        end = idx_pos
        for b in self.walk(idx_pos if len(self.index) else 0):
            self._track(b)
            end = b.end_position
        self.bytes_since_last_index_entry = end - idx_pos
        if self.size == 0:
            self.rolling_base_ms = None
        return removed

    @property
    def largest_timestamp(self) -> int:
        """For retention.ms: the max timestamp, or the file's mtime if no batch carries one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"


def complete_interrupted_swaps(directory: Path) -> None:
    """A ``<base>.log.swap`` is a complete cleaned segment (see cleaner.py): finish replacing the original.
    Its index files described the old layout, so they go and are rebuilt from the log."""
    for swap in directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}"):
        target = swap.with_name(swap.name[: -len(SWAP_SUFFIX)])
        base = target.name[: -len(LOG_SUFFIX)]
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / (base + suffix)).unlink(missing_ok=True)
        os.replace(swap, target)
        log.warning("%s: completed the swap of cleaned segment %s interrupted by a crash", directory, base)
