"""All partition logs under ``log.dirs``, with Kafka's checkpoint files and clean-shutdown marker.

Per log dir: ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` (format: version line
``0``, a count line, then ``<topic> <partition> <offset>`` lines) and ``.kafka_cleanshutdown``, written at a
clean shutdown and removed at startup, so a crash is always followed by recovery of what was not flushed.
Each checkpoint file is a CheckpointFile, which does not rewrite offsets it last wrote (see there).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import operator
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kbus.common.topic_config import LogConfig
from kbus.server.log.background_sync import sync_filesystems, wait_for_background_syncs
from kbus.server.log.dir_failure import LogDirFailureChannel
from kbus.server.log.errors import KafkaStorageError
from kbus.server.log.log import Log, TimeFn, now_ms, parse_topic_partition, retention_pass
from kbus.server.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
_CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]

# C-level readers of (partition, log) items (no Python frame per log), typed for what they read
_PARTITION: Callable[[tuple[TopicPartition, Log]], TopicPartition] = operator.itemgetter(0)
_LOG: Callable[[tuple[TopicPartition, Log]], Log] = operator.itemgetter(1)


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """One log dir as DescribeLogDirs reports it: its partitions' sizes and the volume's space."""

    path: Path
    online: bool
    partition_sizes: dict[TopicPartition, int]
    future_sizes: dict[TopicPartition, int]  # replicas being moved into this dir (AlterReplicaLogDirs)
    total_bytes: int  # -1 when unknown (offline dir)
    usable_bytes: int


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Kafka's offset checkpoint file; a missing or malformed file reads as empty (with a warning)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION:
            raise ValueError(f"unknown version {lines[0]}")
        count = int(lines[1])
        out: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError(f"expected {count} entries, found {len(out)}")
        return out
    except (ValueError, IndexError) as e:
        log.warning("%s is malformed (%s); ignoring it", path, e)
        return {}


def _write_lines(path: Path, count: int, lines: Iterable[str]) -> bool:
    """The file's content, the offsets' `count` lines (sorted), written atomically: a temporary file fsynced, then
    renamed over the old one, then the dir fsynced. Whether that last fsync succeeded (the rename is durable)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(f"{_CHECKPOINT_VERSION}\n{count}\n" + "".join(lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        return False  # (some filesystems refuse an fsync of a dir)
    return True


def _remove_dirs(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


class CheckpointFile:
    """One offset checkpoint file (Kafka's OffsetCheckpointFile) and the offsets this process last wrote to it.

    Kafka rewrites its checkpoints on timers whether or not an offset moved (replication-offset-checkpoint every
    replica.high.watermark.checkpoint.interval.ms, 5 s); at 11,111 partitions each rewrite cost kbus 35-66 ms of CPU
    (bench/notes/spikes-2026-11-27-s15.md). The content is a function of the offsets alone (sorted lines), so offsets
    equal to the last ones written would write the same bytes: they are not written again. Only a durable write
    counts (file fsynced, renamed, dir fsynced): after a failed or undurable write, or in a new process, the next
    write goes to disk whatever it holds. This object is the file's only writer while the broker holds the dir's
    lock (LogManager.checkpoint_file).

    The offsets come as two lists (partitions, offsets) in the caller's order, a dict's: while the same partitions
    come in the same order, telling that nothing moved is two list comparisons (no hashing), and a write reuses the
    last one's sorted order and lines and formats only the lines whose offset moved (a few partitions under a light
    load)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # a timer's worker thread and the broker's stop() may write at once
        self._durable = False  # whether the file holds what the fields below say
        self._keys: list[TopicPartition] = []
        self._values: list[int] = []
        self._lines: list[str] = []  # the line of each partition, in _keys's order
        self._order: list[int] = []  # _keys's indices, sorted by partition

    def write(self, offsets: Mapping[TopicPartition, int]) -> bool:
        return self.write_entries(list(offsets), list(offsets.values()))

    def write_entries(self, keys: list[TopicPartition], values: list[int]) -> bool:
        """Write the offsets (`values[i]` is partition `keys[i]`'s; no partition twice) unless they are what the
        file durably holds; whether it wrote. The lists are copied. An OSError passes through (the caller takes the
        dir offline)."""
        with self._lock:
            if self._durable and keys == self._keys:
                if values == self._values:
                    return False
                lines, order = self._lines, self._order
                for i in itertools.compress(itertools.count(), map(operator.ne, values, self._values)):
                    t, p = keys[i]
                    lines[i] = f"{t} {p} {values[i]}\n"
            else:
                lines = [f"{t} {p} {o}\n" for (t, p), o in zip(keys, values, strict=True)]
                order = sorted(range(len(keys)), key=keys.__getitem__)
            self._durable = False  # until this write is known durable (self._lines may be half updated)
            if _write_lines(self.path, len(order), map(lines.__getitem__, order)):
                self._keys, self._values, self._lines, self._order = list(keys), list(values), lines, order
                self._durable = True
            return True


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        time_ms: TimeFn = now_ms,
        failure_channel: LogDirFailureChannel | None = None,
        recovery_threads_per_dir: int = 1,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        # Kafka's num.recovery.threads.per.data.dir: how many logs of one dir are opened (and, after a crash,
        # recovered: segment scans, CRC checks, index rebuilds) at once at start-up
        self.recovery_threads_per_dir = max(recovery_threads_per_dir, 1)
        self.log_dirs = [Path(d) for d in log_dirs]
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.default_config = default_config
        self._time_ms = time_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        # the same logs grouped by their dir: a checkpoint of a dir reads its own, with no Path compared per log
        self._dir_logs: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
        self._checkpoint_files: dict[Path, CheckpointFile] = {}
        self._lock = threading.RLock()
        self._lock_fds: dict[Path, int] = {}
        self.offline_dirs: list[Path] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._started = False
        self.producer_id_expiration_ms = DEFAULT_PRODUCER_ID_EXPIRATION_MS
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._cleaner_lock = threading.Lock()
        # AlterReplicaLogDirs: the "-future" copy of a replica being moved, and where a replica not created yet
        # should go (Kafka's preferredLogDirs)
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self.file_delete_delay_s = 60.0  # file.delete.delay.ms: a replaced log stays open for in-flight reads

    # --- startup ----------------------------------------------------------------------------------------

    def _lock_dir(self, d: Path) -> None:
        fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(
                f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another process or thread is "
                f"using this directory."
            ) from None
        self._lock_fds[d] = fd

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Load every ``<topic>-<partition>`` directory. ``topic_configs`` gives per-topic overrides known to the
        metadata store; other logs use the default config."""
        topic_configs = topic_configs or {}
        with self._lock:
            for d in self.log_dirs:
                # Kafka's createAndValidateLogDirs + lockLogDirs + loadLogs: a dir that cannot be created, locked
                # (the .lock file is written) or read is offline from the start, the others serve
                try:
                    d.mkdir(parents=True, exist_ok=True)
                    self._lock_dir(d)
                    self._load_dir(d, topic_configs)
                except KafkaStorageError:
                    raise
                except OSError as e:
                    self._forget_dir(d)
                    self.offline_dirs.append(d)
                    self.failure_channel.maybe_add_offline_log_dir(d, f"Failed to load log dir {d}", e)
            if len(self.offline_dirs) == len(self.log_dirs):
                for fd in self._lock_fds.values():
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._lock_fds = {}
                raise KafkaStorageError(f"no usable log dir among {', '.join(map(str, self.log_dirs))}")
            self._started = True
            self.checkpoint()

    def _load_dir(self, d: Path, topic_configs: Mapping[str, LogConfig]) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[d] = clean
        recovery_points = read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        self._cleaner_offsets.update(read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT))
        found: list[tuple[TopicPartition, Path]] = []
        futures: list[tuple[TopicPartition, Path]] = []
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                # a topic deletion interrupted by a crash: finish it
                shutil.rmtree(child, ignore_errors=True)
                continue
            if child.name.endswith(FUTURE_DIR_SUFFIX):
                # a log dir move interrupted by a restart: loaded, and resumed once the replica is hosted
                with contextlib.suppress(ValueError):
                    futures.append((parse_topic_partition(child.name), child))
                continue
            try:
                tp = parse_topic_partition(child.name)
            except ValueError:
                continue
            if tp in self._logs:
                log.error("duplicate log directories for %s-%d: %s and %s; ignoring the second", tp[0], tp[1],
                          self._log_dir_of[tp], d)
                continue
            found.append((tp, child))

        def open_one(item: tuple[TopicPartition, Path]) -> Log | None:
            tp, child = item
            config = topic_configs.get(tp[0], self.default_config)
            return self._open_existing(child, config, recovery_points.get(tp, 0), start_offsets.get(tp), clean)

        workers = min(self.recovery_threads_per_dir, len(found))
        if workers > 1:
            # the reads, CRC32C and index writes release the GIL; registration stays on this thread, in order
            with ThreadPoolExecutor(workers, thread_name_prefix=f"log-recovery-{d.name}") as pool:
                opened = list(pool.map(open_one, found))
        else:
            opened = [open_one(item) for item in found]
        for (tp, _), lg in zip(found, opened, strict=True):
            if lg is not None:
                self._register(tp, lg, d)
        for tp, child in futures:
            config = topic_configs.get(tp[0], self.default_config)
            future = None if tp in self._future_logs else self._open_existing(child, config, 0, None, clean)
            if future is None:
                shutil.rmtree(child, ignore_errors=True)
                continue
            self._adopt_future(tp, future, d)
        # from now on a crash must trigger recovery
        marker.unlink(missing_ok=True)
        count = len(self._dir_logs[d])
        after = "clean shutdown" if clean else ("unclean shutdown" if count else "no previous logs")
        log.info("loaded %d logs from %s (%s)", count, d, after)

    def _open_existing(
        self, path: Path, config: LogConfig, recovery_point: int, log_start: int | None, clean: bool
    ) -> Log | None:
        try:
            return Log.open(path, config, recovery_point=recovery_point, log_start_offset=log_start,
                            clean_shutdown=clean, time_ms=self._time_ms)
        except Exception as e:
            log.warning("loading log %s failed (%s); retrying with full recovery", path, e)
        try:
            return Log.open(path, config, recovery_point=0, log_start_offset=log_start, clean_shutdown=False,
                            time_ms=self._time_ms)
        except Exception as e:
            if isinstance(e, OSError) or isinstance(e.__cause__, OSError):
                raise OSError(f"cannot load log {path}: {e}") from e  # the disk, not the data: the dir goes offline
            # one unreadable partition must not keep the broker from serving the others
            log.error("cannot load log %s: %s", path, e)
            return None

    def _register(self, tp: TopicPartition, lg: Log, d: Path) -> None:
        previous = self._log_dir_of.get(tp)
        if previous is not None:
            self._dir_logs[previous].pop(tp, None)  # (a replica moved to another dir)
        self._logs[tp] = lg
        self._log_dir_of[tp] = d
        self._dir_logs[d][tp] = lg
        # the log's own background flush (of a rolled segment) reports I/O errors here too
        lg.io_error_listener = lambda e: self.failure_channel.maybe_add_offline_log_dir(
            d, f"Error while flushing log {lg.dir}", e
        )

    def _forget_dir(self, d: Path) -> list[TopicPartition]:
        """Drop every log of `d` (closing fds without flushing: the disk is gone) and its lock."""
        gone = list(self._dir_logs[d])
        self._dir_logs[d] = {}
        for tp in gone:
            lg = self._logs.pop(tp)
            del self._log_dir_of[tp]
            self._cleaner_offsets.pop(tp, None)
            with contextlib.suppress(OSError):
                lg.release()
        for tp in [tp for tp, fd in self._future_dir_of.items() if fd == d]:
            self.abort_future_log(tp)
        fd = self._lock_fds.pop(d, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        return gone

    def handle_log_dir_failure(self, d: Path) -> list[TopicPartition]:
        """Kafka's LogManager.handleLogDirFailure: `d` is offline for good (until a restart): its logs are closed
        and forgotten, no checkpoint or new log goes there. Returns the partitions it held (none if already
        offline)."""
        with self._lock:
            if d in self.offline_dirs or d not in self.log_dirs:
                return []
            self.offline_dirs.append(d)
            gone = self._forget_dir(d)
        log.warning("Logs for partitions %s are offline and logs for future partitions are moved out of %s",
                    ",".join(f"{t}-{p}" for t, p in gone), d)  # fmt: skip
        return gone

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _io_error(self, lg: Log, what: str, e: OSError) -> KafkaStorageError:
        """An I/O error on a log: its dir goes offline (reported to the failure channel)."""
        d = self._log_dir_of.get((lg.topic, lg.partition), lg.dir.parent)
        return self.failure_channel.storage_error(d, f"Error while {what} {lg.dir}", e)

    # --- access -----------------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def partitions_by_dir(self) -> list[tuple[Path, list[TopicPartition]]]:
        """Each online log dir with the partitions whose logs it holds (a snapshot)."""
        with self._lock:
            return [(d, list(self._dir_logs[d])) for d in self.log_dirs if d not in self.offline_dirs]

    def checkpoint_file(self, d: Path, name: str) -> CheckpointFile:
        """The one CheckpointFile of `name` in log dir `d`."""
        path = d / name
        with self._lock:
            found = self._checkpoint_files.get(path)
            if found is None:
                found = self._checkpoint_files[path] = CheckpointFile(path)
            return found

    def describe_dirs(self) -> list[LogDirUsage]:
        """Every configured log dir, offline ones included (DescribeLogDirs answers KAFKA_STORAGE_ERROR for them)."""
        with self._lock:
            sizes: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
            future: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
            for tp, d in self._log_dir_of.items():
                lg = self._logs.get(tp)
                if lg is not None and d in sizes:
                    sizes[d][tp] = lg.size_bytes
            for tp, d in self._future_dir_of.items():
                if d in future:
                    future[d][tp] = self._future_logs[tp].size_bytes
        out = []
        for d in self.log_dirs:
            online = d not in self.offline_dirs
            total = usable = -1
            if online:
                with contextlib.suppress(OSError):
                    st = os.statvfs(d)
                    total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            out.append(LogDirUsage(d.absolute(), online, sizes[d], future[d] if online else {}, total, usable))
        return out

    def _pick_dir(self, tp: TopicPartition | None = None) -> Path:
        usable = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not usable:
            raise KafkaStorageError("no online log dir")
        preferred = self._preferred_dirs.pop(tp, None) if tp is not None else None
        if preferred in usable:
            return preferred  # AlterReplicaLogDirs named it before the replica existed here
        if len(usable) == 1:
            return usable[0]  # counting every log per creation made a 10,000-partition topic quadratic
        return min(usable, key=lambda d: len(self._dir_logs[d]))  # like Kafka: the dir with the fewest partitions

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """Create (or return the existing) log of a partition."""
        tp = (topic, partition)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            d = self._pick_dir(tp)
            try:
                lg = Log.open(d / f"{topic}-{partition}", config or self.default_config, time_ms=self._time_ms)
            except OSError as e:
                raise self.failure_channel.storage_error(d, f"Error while creating log for {topic}-{partition}",
                                                         e) from e  # fmt: skip
            self._register(tp, lg, d)
            return lg

    def delete_log(self, topic: str, partition: int) -> None:
        self.delete_logs([(topic, partition)])

    def delete_logs(self, tps: Iterable[TopicPartition]) -> None:
        """Rename each log to ``<topic>-<partition>.<uuid>-delete`` (atomic, survives a crash), then, once for all
        of them, fsync each dir they were in, write that dir's checkpoints and remove the renamed dirs off the
        caller's thread, like Kafka's LogManager.asyncDelete of a topic's partitions. Per partition this was a dir
        fsync, a thread, and both checkpoint files of the dir rewritten: a 10,000-partition deletion wrote 10,000
        files of up to 11,111 lines each, on the event loop.

        A crash at any point recovers the same: a rename not yet durable leaves the log under its name, opened
        again at start-up with the recovery point the checkpoint still holds; a durable one leaves a ``-delete`` dir,
        removed at start-up, and the checkpoint's line for it names no log (dropped by the next write)."""
        with self._lock:
            dirs: dict[Path, None] = {}  # in the order met
            renamed: list[Path] = []
            kept: list[Path] = []  # not renamed: removed in place
            for tp in tps:
                self.abort_future_log(tp)
                lg = self._logs.pop(tp, None)
                d = self._log_dir_of.pop(tp, None)
                if lg is None or d is None:
                    continue
                del self._dir_logs[d][tp]
                lg.release()
                self._cleaner_offsets.pop(tp, None)
                dirs[d] = None
                target = d / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
                try:
                    os.replace(lg.dir, target)
                    renamed.append(target)
                except OSError as e:
                    log.warning("cannot rename %s for deletion: %s", lg.dir, e)
                    kept.append(lg.dir)
            for d in dirs:
                _fsync_dir(d)
            if renamed:
                # a big topic takes a while to remove: do it off the caller's thread (the broker's event loop);
                # the names are already unique, and a crash mid-way is finished at the next startup
                threading.Thread(target=_remove_dirs, args=(renamed,), name="delete-log", daemon=True).start()
            for path in kept:
                shutil.rmtree(path, ignore_errors=True)
            for d in dirs:
                self._checkpoint_dir(d)

    # --- moving a replica between log dirs (AlterReplicaLogDirs) -----------------------------------------

    def configured_dir(self, path: str) -> Path | None:
        """The configured log dir an AlterReplicaLogDirs path names (Kafka compares absolute paths)."""
        return next((d for d in self.log_dirs if str(d.absolute()) == path or str(d) == path), None)

    def set_preferred_dir(self, tp: TopicPartition, d: Path) -> None:
        with self._lock:
            self._preferred_dirs[tp] = d

    def future_log(self, tp: TopicPartition) -> tuple[Log, Path] | None:
        with self._lock:
            lg = self._future_logs.get(tp)
            return None if lg is None else (lg, self._future_dir_of[tp])

    def create_future_log(self, tp: TopicPartition, d: Path) -> Log:
        """``<topic>-<partition>.<uuid>-future`` in `d`, the copy a move fills before it replaces the current log."""
        with self._lock:
            current = self._logs[tp]
            path = d / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
            try:
                lg = Log.open(path, current.config, log_start_offset=current.log_start_offset, time_ms=self._time_ms)
            except OSError as e:
                raise self.failure_channel.storage_error(d, f"Error while creating future log for {tp[0]}-{tp[1]}",
                                                         e) from e  # fmt: skip
            self._adopt_future(tp, lg, d)
            return lg

    def _adopt_future(self, tp: TopicPartition, lg: Log, d: Path) -> None:
        lg.io_error_listener = lambda e: self.failure_channel.maybe_add_offline_log_dir(
            d, f"Error while flushing future log {lg.dir}", e
        )
        self._future_logs[tp] = lg
        self._future_dir_of[tp] = d

    def abort_future_log(self, tp: TopicPartition) -> None:
        with self._lock:
            lg = self._future_logs.pop(tp, None)
            self._future_dir_of.pop(tp, None)
        if lg is not None:
            with contextlib.suppress(OSError):
                lg.release()
            threading.Thread(target=shutil.rmtree, args=(lg.dir, True), name="delete-future-log", daemon=True).start()

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """The move's last step (Kafka's replaceCurrentWithFutureLog), with no append in between (the caller holds
        the event loop): the future log is closed, renamed to ``<topic>-<partition>`` and opened as the current log;
        the old one is renamed ``-delete`` and closed and removed after file.delete.delay.ms (fetches may still be
        sending from its files). The new name exists before the old one goes: a crash in between leaves two
        complete copies, never none."""
        with self._lock:
            current, source = self._logs[tp], self._log_dir_of[tp]
            future = self._future_logs.pop(tp)
            dest = self._future_dir_of.pop(tp)
            future.close()
            final = dest / f"{tp[0]}-{tp[1]}"
            os.replace(future.dir, final)
            _fsync_dir(dest)
            moved = Log.open(final, future.config, recovery_point=future.log_end_offset,
                             log_start_offset=future.log_start_offset, clean_shutdown=True,
                             time_ms=self._time_ms)  # fmt: skip
            doomed = source / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            try:
                os.replace(current.dir, doomed)
            except OSError as e:
                log.warning("cannot rename %s for deletion: %s", current.dir, e)
                doomed = current.dir
            _fsync_dir(source)
            self._register(tp, moved, dest)
            self._checkpoint_dir(source)
            self._checkpoint_dir(dest)

        def retire() -> None:
            with contextlib.suppress(OSError):
                current.release()
            shutil.rmtree(doomed, ignore_errors=True)

        timer = threading.Timer(self.file_delete_delay_s, retire)
        timer.daemon = True
        timer.start()
        return moved

    def update_config(self, topic: str, config: LogConfig) -> None:
        with self._lock:
            for (t, _p), lg in self._logs.items():
                if t == topic:
                    lg.update_config(config)

    # --- background duties ------------------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None, high_watermarks: Mapping[TopicPartition, int] | None = None
                      ) -> int:
        """One pass of the log cleaner's delete half (log.retention.check.interval.ms); also forgets producer
        ids idle for producer.id.expiration.ms. Returns the number of segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        items = list(self._logs.items())
        # the walk itself is compiled (log.retention_pass); the high watermarks looked up in a C loop
        hws: list[int | None] = (
            [None] * len(items) if high_watermarks is None else list(map(high_watermarks.get, map(_PARTITION, items)))
        )
        failed: list[tuple[Log, OSError]] = []
        deleted = retention_pass(list(map(_LOG, items)), hws, now, self.producer_id_expiration_ms, failed)
        for lg, e in failed:
            self._io_error(lg, "deleting segments of", e)
        if deleted:
            self.checkpoint()
        return deleted

    def run_cleaner(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """One pass of log compaction over logs with cleanup.policy=compact whose dirty ratio reaches
        min.cleanable.dirty.ratio. CPU-heavy (it decodes records): run it on a background thread. Returns the
        number of segments rewritten."""
        from kbus.server.log.cleaner import clean_log

        now = self._time_ms() if now_ms is None else now_ms
        rewritten = 0
        # cleanup.policy parsed once per distinct value in a pass, not once per log (this pass runs every
        # log.cleaner.backoff.ms, 15 s, over every log of the broker). A walk in C loops (map/zip/compress over the
        # logs' configs) measured slower than this loop: bench/notes/periodic-2026-11-27-s17.md
        compact: dict[str, bool] = {}
        with self._cleaner_lock:
            for tp, lg in list(self._logs.items()):
                config = lg.config
                enabled = compact.get(config.cleanup_policy)
                if enabled is None:
                    enabled = compact[config.cleanup_policy] = config.compact_enabled
                if not enabled or lg.closed or tp in self._future_logs:
                    continue  # (a replica being moved is not cleaned: Kafka's abortAndPauseCleaning)
                first_dirty = self._cleaner_offsets.get(tp, 0)
                if first_dirty > lg.log_end_offset:  # the log was truncated below the checkpoint
                    first_dirty = 0
                first_dirty = max(first_dirty, lg.log_start_offset)
                try:
                    result = clean_log(lg, first_dirty, now, force=force)
                except OSError as e:
                    self._io_error(lg, "cleaning", e)
                    continue
                except ValueError as e:
                    log.error("compaction of %s failed: %s", lg.dir, e)
                    continue
                if result is not None:
                    self._cleaner_offsets[tp] = result.next_dirty_offset
                    rewritten += result.segments_rewritten
            if rewritten:
                self.checkpoint()
        return rewritten

    def run_flush(self, now_ms: int | None = None) -> int:
        """Kafka's flushDirtyLogs: flush the logs whose flush.ms has passed since their last flush (the broker's
        log-flusher job, every log.flush.scheduler.interval.ms when that is set). Returns how many it flushed."""
        now = self._time_ms() if now_ms is None else now_ms
        flushed = 0
        for lg in list(self._logs.values()):
            try:
                flushed += lg.maybe_flush(now)
            except OSError as e:
                self._io_error(lg, "flushing", e)
        return flushed

    def flush_all(self) -> None:
        for lg in list(self._logs.values()):
            try:
                lg.flush()
            except OSError as e:
                self._io_error(lg, "flushing", e)

    def checkpoint(self) -> None:
        """Write both checkpoint files of every online log dir."""
        with self._lock:
            for d in self.log_dirs:
                if d not in self.offline_dirs:
                    self._checkpoint_dir(d)

    def _checkpoint_dir(self, d: Path) -> None:
        logs = self._dir_logs[d]
        try:
            self.checkpoint_file(d, RECOVERY_POINT_CHECKPOINT).write_entries(
                list(logs), [lg.recovery_point for lg in logs.values()])
            self.checkpoint_file(d, LOG_START_OFFSET_CHECKPOINT).write(
                {tp: lg.log_start_offset for tp, lg in logs.items() if lg.log_start_offset > 0})
            cleaned = {tp: o for tp, o in self._cleaner_offsets.items() if tp in logs}
            if cleaned or (d / CLEANER_OFFSET_CHECKPOINT).exists():
                self.checkpoint_file(d, CLEANER_OFFSET_CHECKPOINT).write(cleaned)
        except OSError as e:
            self.failure_channel.maybe_add_offline_log_dir(d, f"Disk error while writing checkpoints in {d}", e)

    def shutdown(self) -> None:
        """Close every log (flushing it), write checkpoints and the clean-shutdown marker."""
        with self._lock:
            failed = False
            for lg in list(self._logs.values()):
                try:
                    lg.close(fsync=False)
                except OSError as e:
                    failed = True
                    log.error("closing %s failed: %s", lg.dir, e)
            # One sync of everything written instead of an fsync per segment, index and snapshot (4 per
            # partition): the recovery points in the checkpoints below, and the clean-shutdown marker after them,
            # are only written once the data they vouch for is on disk.
            wait_for_background_syncs()
            sync_filesystems([d for d in self.log_dirs if d not in self.offline_dirs])
            self.checkpoint()
            if not failed:
                for d in self.log_dirs:
                    if d not in self.offline_dirs:
                        (d / CLEAN_SHUTDOWN_FILE).touch()
                        _fsync_dir(d)
            for fut in self._future_logs.values():  # an unfinished move resumes at the next start
                try:
                    fut.close()
                except OSError as e:
                    failed = True
                    log.error("closing %s failed: %s", fut.dir, e)
            for fd in self._lock_fds.values():
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
            self._lock_fds = {}
            self._started = False
