"""Leader epoch cache (Kafka's LeaderEpochFileCache): which leader epoch wrote which offsets.

Entries are (epoch, start_offset), strictly increasing in both. A follower that was away asks the leader
(OffsetForLeaderEpoch) where its latest epoch ends in the leader's log and truncates what diverges, instead of
trusting a high watermark that may be stale (KIP-101 / KIP-279). Persisted as `leader-epoch-checkpoint` in the
partition directory, in Kafka's checkpoint format.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from pathlib import Path

from kbus.server.log.background_sync import replace_file, replace_file_sync_later, write_file_later

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path | None, entries: Iterable[tuple[int, int]] = (), *, on_disk: bool = False) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = list(entries)
        # whether a checkpoint file of this partition exists (loaded, or written or queued by save): only the
        # first one is written off the request path (_save_appended)
        self._on_disk = on_disk
        # a queued first write (background thread) and a later save (caller's thread) each write the entries of
        # their moment under it, so the older content never lands after the newer
        self._write_lock = threading.Lock()

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache | None:
        """None when there is no checkpoint (the caller rebuilds from batch headers)."""
        path = directory / CHECKPOINT_FILE
        try:
            lines = path.read_text().split("\n")
        except FileNotFoundError:
            return None
        # Kafka's CheckpointFile: version 0, the entry count, then exactly that many "epoch offset" lines; anything
        # else is corrupt and the cache is rebuilt from the batch headers
        try:
            if int(lines[0]) != 0:
                return None
            count = int(lines[1])
            rows = lines[2 : 2 + count]
            if len(rows) != count:
                return None
            entries: list[tuple[int, int]] = []
            for line in rows:
                epoch, offset = line.split()  # ValueError unless exactly two fields
                entries.append((int(epoch), int(offset)))
        except (ValueError, IndexError):
            return None
        return cls(path, entries, on_disk=True)

    def _content(self) -> str:
        entries = list(self.entries)  # one copy: the background writer reads while the loop may append
        body = "".join(f"{e} {o}\n" for e, o in entries)
        return f"0\n{len(entries)}\n{body}"

    def save(self) -> None:
        """Rewrite the checkpoint now, fsync it off the caller's thread (kbus.server.log.background_sync): a new
        leader epoch's first append does this once per partition, on the request path."""
        if self.path is not None:
            with self._write_lock:
                replace_file_sync_later(self.path, self._content())
            self._on_disk = True

    def _save_appended(self) -> None:
        """save() after entries learnt from appended batches (`assign`, `assign_from_headers`). A partition's
        first checkpoint is written and fsynced on the background thread instead (write_file_later): until then
        there is no checkpoint file, and a partition loaded without one rebuilds these very entries from its
        batch headers (Partition._load_epochs), so a crash before the write loses nothing. Every later save
        replaces an existing file, whose stale content would be trusted on load: that one is written at once.
        Kafka 3.9 writes and fsyncs the checkpoint in LeaderEpochFileCache.assign, on the request thread
        (KAFKA-16541); kbus's fsync was already on the background thread (background_sync), now the first write too."""
        if self._on_disk or self.path is None:
            self.save()
            return
        self._on_disk = True
        write_file_later(self.path, self._write_queued)

    def _write_queued(self) -> None:
        if self.path is not None:
            with self._write_lock:
                replace_file(self.path, self._content(), sync=False)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (no-op unless it is a newer epoch). Returns True if changed."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return False
        # an older epoch can never start at or after a newer one
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self._save_appended()
        return True

    def assign_from_headers(self, headers: Iterable[tuple[int, int]]) -> None:
        """(partition_leader_epoch, base_offset) of appended batches, in order."""
        changed = False
        for epoch, offset in headers:
            if epoch >= 0 and (not self.entries or epoch > self.entries[-1][0]):
                while self.entries and self.entries[-1][1] >= offset:
                    self.entries.pop()
                self.entries.append((epoch, offset))
                changed = True
        if changed:
            self._save_appended()

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: forget epochs that start at or after it."""
        before = len(self.entries)
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        if len(self.entries) != before:
            self.save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset` (retention, DeleteRecords): the epoch covering it starts there."""
        i = bisect.bisect_right([o for _, o in self.entries], start_offset) - 1
        if i > 0 or (i == 0 and self.entries[0][1] < start_offset):
            kept = self.entries[i:]
            kept[0] = (kept[0][0], start_offset)
            self.entries = kept
            self.save()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's endOffsetFor: the largest epoch <= requested, and the start offset of
        the next epoch (or the log end offset when it is the latest)."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch >= self.entries[-1][0]:
            return self.entries[-1][0], log_end_offset
        epochs = [e for e, _ in self.entries]
        i = bisect.bisect_right(epochs, requested_epoch)
        if i == 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        return epochs[i - 1], self.entries[i][1]
