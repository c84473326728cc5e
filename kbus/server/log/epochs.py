"""Leader epoch cache (Kafka's LeaderEpochFileCache): which leader epoch wrote which offsets.

Entries are (epoch, start_offset), strictly increasing in both. A follower that was away asks the leader
(OffsetForLeaderEpoch) where its latest epoch ends in the leader's log and truncates what diverges, instead of
trusting a high watermark that may be stale (KIP-101 / KIP-279). Persisted as `leader-epoch-checkpoint` in the
partition directory, in Kafka's checkpoint format. A replica becoming leader of a new epoch caches it at its log end
offset (Partition._start_leader_epoch: Kafka's Partition.makeLeader); a follower learns the epochs of the batches it
appends; when the checkpoint is written is `LeaderEpochCache.flush`'s rule.
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
        # replaced, never changed in place: the background writer's copy (_content) and `_saved` are snapshots
        self.entries: list[tuple[int, int]] = list(entries)
        # whether a checkpoint file of this partition exists (loaded, or written or queued by flush): only the
        # first one is written off the caller's thread
        self._on_disk = on_disk
        # the entries the file says, or will say once the queued first write ran (it writes the newest ones)
        self._saved: list[tuple[int, int]] = self.entries if on_disk else []
        # a queued first write (background thread), a later flush (caller's thread) and close() each act under it,
        # so the older content never lands after the newer, and nothing lands once the cache is closed
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
        entries = self.entries  # one snapshot: the loop replaces the list while the background writer reads it
        body = "".join(f"{e} {o}\n" for e, o in entries)
        return f"0\n{len(entries)}\n{body}"

    def save(self) -> None:
        """Rewrite the checkpoint now, fsync it off the caller's thread (kbus.server.log.background_sync)."""
        if self.path is not None:
            with self._write_lock:
                if self.path is not None:  # not closed meanwhile
                    replace_file_sync_later(self.path, self._content())
            self._on_disk = True
            self._saved = self.entries

    def flush(self) -> None:
        """Make the checkpoint say what the entries say, as Kafka's LeaderEpochFileCache writes it after every
        change (assign: at once, with an fsync; truncations: in the background). kbus's rule, kept here alone:
        - no checkpoint file yet: the first one is written and fsynced on the background thread
          (write_file_later; the writes of a become-leader of many partitions are one job, background_sync.batch).
          Until then there is no file, and a partition loaded without one rebuilds its entries from its batch
          headers (Partition._load_epochs), so a crash before the write loses nothing: every entry with records
          behind it comes back as it was, and an entry past them (a new leader's epoch, which starts at the log
          end offset) is one that loading drops anyway (Kafka's LogLoader truncates the cache to the log end
          offset) and that the replica assigns again when it becomes leader again.
        - a file exists: on load it would be trusted, stale, so it is replaced at once; its fsync is on the
          background thread (background_sync), where Kafka's assign fsyncs on the calling thread.
        - the entries are the file's: nothing to write (a restarted leader of an empty partition: the load drops
          its epoch, which starts at the log end, and becoming leader assigns it again)."""
        if self.path is None or self.entries == self._saved:
            return
        if self._on_disk:
            self.save()
            return
        self._on_disk = True
        self._saved = self.entries
        write_file_later(self.path, self._write_queued)

    def _write_queued(self) -> bool:
        with self._write_lock:
            if self.path is None:
                return False  # closed: the partition's directory may be another topic's now
            replace_file(self.path, self._content(), sync=False)
            return True

    def close(self) -> None:
        """The partition is no longer hosted here (its log is deleted or its dir offline): nothing is written to
        its directory from now on, a queued first write included. Its path may be a new topic's of the same name
        by the time the background thread gets to the write."""
        with self._write_lock:
            self.path = None

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset` (no-op unless it is a newer epoch). Returns True if changed."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return False
        self.entries = [*self._before(start_offset), (epoch, start_offset)]
        if flush:
            self.flush()
        return True

    def _before(self, offset: int) -> list[tuple[int, int]]:
        """The entries that start before `offset` (an older epoch can never start at or after a newer one)."""
        n = len(self.entries)
        while n and self.entries[n - 1][1] >= offset:
            n -= 1
        return self.entries[:n]

    def assign_from_headers(self, headers: Iterable[tuple[int, int]], *, flush: bool = True) -> None:
        """(partition_leader_epoch, base_offset) of appended batches, in order."""
        entries = self.entries
        changed = False
        for epoch, offset in headers:
            if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                if not changed:
                    entries = list(entries)  # a copy of its own: self.entries is replaced, never changed in place
                    changed = True
                while entries and entries[-1][1] >= offset:
                    entries.pop()
                entries.append((epoch, offset))
        if changed:
            self.entries = entries
            if flush:
                self.flush()

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        """The log was truncated to `end_offset`: forget epochs that start at or after it."""
        kept = self._before(end_offset)
        if len(kept) != len(self.entries):
            self.entries = kept
            if flush:
                self.flush()

    def truncate_fully(self) -> None:
        """The log was emptied (a follower restarting from the leader's log start): no epoch is left."""
        self.entries = []
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset` (retention, DeleteRecords): the epoch covering it starts there."""
        i = bisect.bisect_right([o for _, o in self.entries], start_offset) - 1
        if i > 0 or (i == 0 and self.entries[0][1] < start_offset):
            kept = self.entries[i:]
            kept[0] = (kept[0][0], start_offset)
            self.entries = kept
            self.flush()

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
