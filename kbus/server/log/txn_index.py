"""The aborted-transaction index of one segment (Kafka's ``TransactionIndex``, ``<base>.txnindex``).

One 34-byte entry per transaction aborted by a marker written into the segment: version (int16, 0), producer id
(int64), first offset (int64), last offset (int64, the ABORT marker's offset), last stable offset (int64, the LSO
right after the marker). A read_committed fetch collects the entries that overlap the range it returns, so the
consumer can drop the aborted records without the broker reading any of them. Aborts are rare, so the whole file
is kept in memory (a list) and appended to on disk; nothing here runs per record.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        usable = len(data) - len(data) % ENTRY_SIZE  # a torn last entry is ignored (and cut on the next write)
        for pos in range(0, usable, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                break
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def _rewrite(self) -> None:
        entries = self.entries
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(e.to_bytes() for e in entries))
        os.replace(tmp, self.path)

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset \
                and any(e.last_offset == entry.last_offset for e in entries):
            return  # replayed during recovery: already indexed
        size = self.path.stat().st_size if self.path.exists() else 0
        if size % ENTRY_SIZE or size != ENTRY_SIZE * len(entries):
            entries.append(entry)
            self._rewrite()
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.to_bytes())
        finally:
            os.close(fd)
        entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Forget the aborts whose marker is at or after ``offset`` (the log was truncated there)."""
        entries = self.entries
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries):
            self._entries = kept
            self._rewrite()

    def reset(self) -> None:
        self._entries = []
        self.path.unlink(missing_ok=True)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound); the flag says the search may stop here
        (an entry's LSO reached the upper bound, so no later segment can hold an overlapping one)."""
        out = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
                if e.last_stable_offset >= upper_bound:
                    return out, True
        return out, False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
