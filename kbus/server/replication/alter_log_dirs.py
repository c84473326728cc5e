"""Moving a replica to another log dir of the same broker (Kafka's ReplicaAlterLogDirsManager/Thread).

AlterReplicaLogDirs creates a ``<topic>-<partition>.<uuid>-future`` log in the destination dir; a task per moving
replica copies the current log into it (batches as they are, in chunks of replica.fetch.max.bytes, the file work on
a worker thread) while the replica keeps serving and appending. Once the copy has caught up, the last few batches
are copied and the logs swapped without yielding the event loop, so no append falls between them. A truncation of
the current log (a follower's divergence) is applied to the copy before it goes on; a move whose replica goes away
(deleted, moved off the broker, its dir failed) is abandoned and its copy removed; one under way when the broker
stops resumes at the next start (the log manager loads the future log).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kbus.protocol.record_batch import CorruptRecordError
from kbus.server.log.epochs import CHECKPOINT_FILE, LeaderEpochCache
from kbus.server.log.log import Log
from kbus.server.log.manager import LogManager
from kbus.server.metadata.identity import write_partition_topic_id
from kbus.server.partition.partition import Partition

log = logging.getLogger("kbus.replication")

TopicPartition = tuple[str, int]
_CAUGHT_UP_CHUNKS = 1  # within this many chunks of the log end: finish on the loop in one go
_NOT_WATCHING = 1 << 62


class MoveHost(Protocol):
    """What the mover needs from the replica manager."""

    def get_partition(self, topic: str, index: int) -> Partition | None: ...
    def storage_error(self, part: Partition, what: str, error: OSError) -> Exception: ...


class ReplicaAlterLogDirsManager:
    def __init__(self, host: MoveHost, log_manager: LogManager, chunk_bytes: Callable[[], int]) -> None:
        self._host = host
        self._logs = log_manager
        self._chunk_bytes = chunk_bytes
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self._rate: int | None = None  # replica.alter.log.dirs.io.max.bytes.per.second (None: unlimited)
        self._next_slot = 0.0  # the throttle is the broker's, shared by every move: when the next copy may start

    def set_rate(self, bytes_per_second: int | None) -> None:
        """replica.alter.log.dirs.io.max.bytes.per.second (dynamic; kafka-reassign-partitions
        --replica-alter-log-dirs-throttle): how fast moves copy."""
        self._rate = bytes_per_second if bytes_per_second is None or bytes_per_second > 0 else None

    def _chunk(self) -> int:
        chunk = self._chunk_bytes()
        return chunk if self._rate is None else max(min(chunk, self._rate), 1024)
    def moving(self, tp: TopicPartition) -> Path | None:
        """The dir the replica is being moved to, if it is."""
        found = self._logs.future_log(tp)
        return None if found is None else found[1]

    def start(self, part: Partition, dest: Path) -> None:
        """Start moving `part` to `dest` (a different, online dir); a move elsewhere is abandoned first."""
        tp = (part.topic, part.index)
        self.cancel(tp)
        future = self._logs.create_future_log(tp, dest)
        part.truncated_since_copy = _NOT_WATCHING
        log.info("Moving replica %s-%d from %s to %s", *tp, part.log.dir.parent, dest)
        self._tasks[tp] = asyncio.get_running_loop().create_task(self._move(part, future), name=f"move-{tp[0]}-{tp[1]}")

    def resume(self, part: Partition) -> None:
        """A move the broker was making when it stopped (its future log loaded at start-up) goes on. A truncation
        of the current log just before the stop may not have reached the copy: the copy is cut back to the high
        watermark first (nothing below it is ever truncated)."""
        tp = (part.topic, part.index)
        found = self._logs.future_log(tp)
        if found is None or tp in self._tasks:
            return
        future, dest = found
        if dest == self._logs.log_dir_of(*tp):
            self._logs.abort_future_log(tp)
            return
        part.truncated_since_copy = min(part.high_watermark, part.log.log_end_offset)
        log.info("Resuming the move of replica %s-%d to %s", *tp, dest)
        self._tasks[tp] = asyncio.get_running_loop().create_task(self._move(part, future), name=f"move-{tp[0]}-{tp[1]}")

    def cancel(self, tp: TopicPartition) -> None:
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        part = self._host.get_partition(*tp)
        if part is not None:
            part.truncated_since_copy = None
        self._logs.abort_future_log(tp)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ the copy
    def _current(self, part: Partition) -> bool:
        return not part.closed and self._host.get_partition(part.topic, part.index) is part

    async def _move(self, part: Partition, future: Log) -> None:
        tp = (part.topic, part.index)
        try:
            while self._current(part):
                self._follow_truncation(part, future)
                behind = part.log.log_end_offset - future.log_end_offset
                if behind <= 0 or self._bytes_behind(part.log, future) <= _CAUGHT_UP_CHUNKS * self._chunk():
                    await asyncio.to_thread(future.flush)
                    if not self._current(part):
                        break
                    # from here to the swap nothing yields the loop: no append can fall in between
                    self._follow_truncation(part, future)
                    while future.log_end_offset < part.log.log_end_offset:
                        if not self._copy_chunk(part.log, future):
                            raise RuntimeError(f"no progress copying at offset {future.log_end_offset}")
                    self._swap(part)
                    return
                await self._throttle()
                before = future.size_bytes
                await asyncio.to_thread(self._copy_chunk, part.log, future)
                if self._rate is not None:  # the bytes just copied take their share of the broker's rate
                    now = asyncio.get_running_loop().time()
                    self._next_slot = max(self._next_slot, now) + max(future.size_bytes - before, 0) / self._rate
        except asyncio.CancelledError:
            raise
        except OSError as e:
            self._host.storage_error(part, "moving", e)
        except CorruptRecordError as e:
            # a chunk read while the current log was truncated under it: start the copy over
            log.warning("Move of %s-%d read a changing log (%s); starting over", *tp, e)
            dest = self.moving(tp)
            self._tasks.pop(tp, None)
            if dest is not None and self._current(part):
                self.start(part, dest)
            return
        except Exception:
            log.exception("Move of %s-%d to another log dir failed", *tp)
        if self._tasks.get(tp) is asyncio.current_task():
            self._tasks.pop(tp, None)
            self._logs.abort_future_log(tp)
            part.truncated_since_copy = None

    async def _throttle(self) -> None:
        while self._rate is not None:
            wait = self._next_slot - asyncio.get_running_loop().time()
            if wait <= 0:
                return
            await asyncio.sleep(min(wait, 1.0))  # re-read: the rate is dynamic

    @staticmethod
    def _bytes_behind(current: Log, future: Log) -> int:
        return max(current.size_bytes - future.size_bytes, 0)

    @staticmethod
    def _follow_truncation(part: Partition, future: Log) -> None:
        current = part.log
        cut = part.truncated_since_copy
        if cut is not None and cut < future.log_end_offset:
            if cut < 0 or cut <= current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
            else:
                future.truncate_to(cut)
        part.truncated_since_copy = _NOT_WATCHING
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif future.log_start_offset < current.log_start_offset:
            future.delete_records(current.log_start_offset)  # retention or DeleteRecords on the current log

    def _copy_chunk(self, current: Log, future: Log) -> bool:
        data = current.read(future.log_end_offset, self._chunk(), max_offset=current.log_end_offset)
        if not data.size:
            return False
        future.append_as_follower(data.to_bytes())
        return True

    def _swap(self, part: Partition) -> None:
        tp = (part.topic, part.index)
        self._tasks.pop(tp, None)
        found = self._logs.future_log(tp)
        assert found is not None
        future, dest = found
        write_partition_topic_id(future.dir, part.topic_id if isinstance(part.topic_id, uuid.UUID) else None)
        moved = self._logs.replace_current_with_future(tp)
        epochs = LeaderEpochCache(moved.dir / CHECKPOINT_FILE, part.epochs.entries)
        epochs.save()
        part.epochs.close()  # the old dir's: a queued write of it goes nowhere now
        part.log, part.epochs = moved, epochs
        part.truncated_since_copy = None
        log.info("Moved replica %s-%d to %s", *tp, dest)
