"""Sparse indexes of a segment, in Kafka's on-disk formats.

``.index``: 8-byte entries (offset relative to the segment base int32, position int32).
``.timeindex``: 12-byte entries (timestamp int64, relative offset int32).

Entries live in memory (Python lists, searched with bisect) and are appended to the file through an O_APPEND
fd. Kafka preallocates and mmaps instead; the files it trims at close hold the same bytes, so tools read both.
The active segment's new entries reach the file in blocks of PENDING_WRITE_BYTES (segment.append), and whole
whenever the segment is flushed, rolled, truncated or closed. An index past the recovery point is never trusted
after a crash: recovery rebuilds it from the log.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path
from typing import Final

_OFFSET_ENTRY: Final = struct.Struct(">ii")
_TIME_ENTRY: Final = struct.Struct(">qi")
_INT32_MAX: Final = 2**31 - 1
# entries an active segment's index holds back before writing them (512 offset or 341 time entries): one write(2)
# per ~2 MB of log at the default index.interval.bytes, not two per 4 KB (a small Produce paid ~0.5 of them)
PENDING_WRITE_BYTES: Final = 4096


class _IndexFile:
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._pending = bytearray()
        self._fd: int | None = None

    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _read_raw(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def flush_pending_over(self, limit: int) -> None:
        """Write the pending entries once they are `limit` bytes or more (the active segment's appends): one
        write(2) per `limit` bytes of entries instead of two (offset and time index) per indexed append."""
        if len(self._pending) >= limit:
            self.flush_pending()

    def flush_pending(self) -> None:
        if self._pending:
            fd = self._open_fd()
            data = bytes(self._pending)
            self._pending.clear()
            while data:
                n = os.write(fd, data)
                data = data[n:]

    def sync(self) -> None:
        self.flush_pending()
        if self._fd is not None:
            os.fsync(self._fd)
        elif self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _rewrite_file(self, entries: int) -> None:
        """Keep only the first ``entries`` entries on disk (entries are appended in order)."""
        self.flush_pending()
        if self._fd is not None:
            os.ftruncate(self._fd, entries * self.entry_size)
            return
        # no fd is kept for an index nobody writes to (idle partitions would cost 2 fds each)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, entries * self.entry_size)
        finally:
            os.close(fd)

    def close(self) -> None:
        try:
            self.flush_pending()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self._offsets: list[int] = []  # relative offsets
        self._positions: list[int] = []

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) when it fails a sanity check and must be rebuilt."""
        raw = self._read_raw()
        self._offsets, self._positions = [], []
        if len(raw) % self.entry_size:
            return False
        last_rel, last_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(raw):
            if rel <= last_rel or pos <= last_pos or pos >= log_size or rel < 0:
                self._offsets, self._positions = [], []
                return False
            self._offsets.append(rel)
            self._positions.append(pos)
            last_rel, last_pos = rel, pos
        return True

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            return
        if self.is_full or not 0 <= rel <= _INT32_MAX:
            return
        # positions first: a reader on another thread bisects _offsets and then indexes _positions
        self._positions.append(position)
        self._offsets.append(rel)
        self._pending += _OFFSET_ENTRY.pack(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target, or (base, 0)."""
        i = bisect.bisect_right(self._offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def position_floor(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0, the first batch, if none)."""
        i = bisect.bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + o, p) for o, p in zip(self._offsets, self._positions, strict=True)]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or past ``position`` (the log was truncated there)."""
        keep = bisect.bisect_left(self._positions, position)
        if keep < len(self._positions):
            del self._offsets[keep:]
            del self._positions[keep:]
            self._rewrite_file(keep)

    def reset(self) -> None:
        self._offsets, self._positions = [], []
        self._pending.clear()
        self._rewrite_file(0)


class TimeIndex(_IndexFile):
    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []  # relative offsets

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def load(self) -> bool:
        raw = self._read_raw()
        self._timestamps, self._offsets = [], []
        if len(raw) % self.entry_size:
            return False
        last_ts, last_rel = -(2**63), -1
        for ts, rel in _TIME_ENTRY.iter_unpack(raw):
            if ts < last_ts or rel < last_rel or rel < 0:
                self._timestamps, self._offsets = [], []
                return False
            self._timestamps.append(ts)
            self._offsets.append(rel)
            last_ts, last_rel = ts, rel
        return True

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Kafka only records a new maximum: entries are increasing in both timestamp and offset."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if (self.is_full and not skip_full_check) or timestamp < 0:
            return
        rel = offset - self.base_offset
        if (self._offsets and rel < self._offsets[-1]) or not 0 <= rel <= _INT32_MAX:
            return
        # offsets first: a reader on another thread bisects _timestamps and then indexes _offsets
        self._offsets.append(rel)
        self._timestamps.append(timestamp)
        self._pending += _TIME_ENTRY.pack(timestamp, rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, or (-1, base)."""
        i = bisect.bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets, strict=True)]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at ``offset`` or later."""
        keep = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if keep < len(self._offsets):
            del self._timestamps[keep:]
            del self._offsets[keep:]
            self._rewrite_file(keep)

    def reset(self) -> None:
        self._timestamps, self._offsets = [], []
        self._pending.clear()
        self._rewrite_file(0)
