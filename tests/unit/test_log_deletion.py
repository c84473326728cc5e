"""A topic's logs deleted together (LogManager.delete_logs, as Kafka's LogManager.asyncDelete): each renamed to a
``-delete`` dir, then one fsync and one write of the checkpoint files per log dir for all of them, not one per
partition (quadratic for a 10,000-partition topic); and whatever point a crash stops it at, a restart recovers the
logs that were kept with their recovery points and none of the deleted ones."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol import record_batch as rb
from kbus.server.log import LogConfig, LogManager
from kbus.server.log import manager as manager_module
from kbus.server.log.manager import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, read_checkpoint
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.replication.replica_manager import ReplicaManager

CFG = LogConfig(file_delete_delay_ms=0)


def batch(n: int = 2) -> bytes:
    return rb.build_batch([(f"k{i}".encode(), b"value") for i in range(n)], timestamp_ms=1_000)


def two_dirs_with_logs(tmp_path: Path) -> tuple[LogManager, Path, Path]:
    """Two log dirs, topic "doomed" (8 partitions) and "kept" (4), each log with records, flushed (recovery point
    2) and a log start offset moved to 1, all checkpointed."""
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    mgr = LogManager([d0, d1], CFG)
    mgr.startup()
    for topic, count in (("doomed", 8), ("kept", 4)):
        for p in range(count):
            lg = mgr.create_log(topic, p, CFG)
            lg.append_as_leader(batch())
            lg.flush()
            lg.delete_records(1)
    mgr.checkpoint()
    return mgr, d0, d1


def checkpoints(d: Path) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    return read_checkpoint(d / RECOVERY_POINT_CHECKPOINT), read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)


def test_a_topic_deletion_writes_each_dirs_checkpoints_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mgr, d0, d1 = two_dirs_with_logs(tmp_path)
    assert {d for d, tps in mgr.partitions_by_dir() if any(t == "doomed" for t, _ in tps)} == {d0, d1}
    writes: list[Path] = []
    synced: list[Path] = []
    real_write, real_sync = manager_module._write_lines, manager_module._fsync_dir
    monkeypatch.setattr(manager_module, "_write_lines", lambda path, *a: writes.append(path) or real_write(path, *a))
    monkeypatch.setattr(manager_module, "_fsync_dir", lambda path: synced.append(path) or real_sync(path))
    mgr.delete_logs([("doomed", p) for p in range(8)] + [("doomed", 99)])  # one it never had: nothing to do
    # both files of each dir once (partition by partition it was 4 writes of each file per dir)...
    assert sorted(writes) == sorted(d / name for d in (d0, d1)
                                    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT))  # fmt: skip
    # ...and each dir fsynced once for the renames, once per file written (partition by partition: 4 + 8)
    assert [synced.count(d) for d in (d0, d1)] == [3, 3]
    assert sorted(mgr.logs()) == [("kept", p) for p in range(4)]
    for d in (d0, d1):
        recovery, start = checkpoints(d)
        kept = {tp for tp in mgr.logs() if mgr.log_dir_of(*tp) == d}
        assert recovery == dict.fromkeys(kept, 2) and start == dict.fromkeys(kept, 1)
        assert not [c for c in d.iterdir() if c.name.startswith("doomed-") and not c.name.endswith("-delete")]
    deadline = time.monotonic() + 10
    while any(c.name.startswith("doomed-") for d in (d0, d1) for c in d.iterdir()):
        assert time.monotonic() < deadline, "the renamed log directories were never removed"
        time.sleep(0.01)
    mgr.shutdown()


@pytest.mark.parametrize("crash_at", ["renamed", "synced", "checkpointed"])
def test_a_crash_during_a_deletion_recovers_the_kept_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: str
) -> None:
    """The dirs as a crash would leave them (copied at that moment; the renames taken as reached disk): after every
    rename, after the dirs' fsyncs, after the checkpoints (the -delete dirs not removed yet). The restart opens the
    kept logs with the recovery points and log start offsets checkpointed before, and none of the deleted ones."""
    mgr, _, _ = two_dirs_with_logs(tmp_path)
    crashed = tmp_path / "crashed"

    def snapshot() -> None:
        if not crashed.exists():
            shutil.copytree(tmp_path / "d0", crashed / "d0")
            shutil.copytree(tmp_path / "d1", crashed / "d1")

    real_sync, real_checkpoint = manager_module._fsync_dir, LogManager._checkpoint_dir
    if crash_at == "renamed":
        monkeypatch.setattr(manager_module, "_fsync_dir", lambda path: snapshot() or real_sync(path))
    elif crash_at == "synced":
        monkeypatch.setattr(LogManager, "_checkpoint_dir", lambda self, d: snapshot() or real_checkpoint(self, d))
    monkeypatch.setattr(manager_module, "_remove_dirs", lambda paths: None)  # the removal never ran
    mgr.delete_logs([("doomed", p) for p in range(8)])
    snapshot()  # "checkpointed": after delete_logs returned
    assert any(c.name.endswith("-delete") for c in (crashed / "d0").iterdir())
    mgr.shutdown()
    again = LogManager([crashed / "d0", crashed / "d1"], CFG)
    again.startup()
    try:
        assert not again.had_clean_shutdown[crashed / "d0"]  # copied while running: a crash
        assert sorted(again.logs()) == [("kept", p) for p in range(4)]
        for lg in again.logs().values():
            assert (lg.recovery_point, lg.log_start_offset, lg.log_end_offset) == (2, 1, 2)
        assert not [c for d in ("d0", "d1") for c in (crashed / d).iterdir() if c.name.endswith("-delete")]
        for d in ("d0", "d1"):
            recovery, start = checkpoints(crashed / d)
            assert {t for t, _ in recovery} <= {"kept"} and {t for t, _ in start} <= {"kept"}
    finally:
        again.shutdown()


def test_a_deleted_topics_replicas_go_in_one_deletion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ReplicaManager hands every replica of a deleted topic to LogManager.delete_logs at once."""
    config = KafkaConfig.from_properties({"broker.id": "0", "log.dirs": str(tmp_path / "logs")})
    store = LocalMetadataStore(tmp_path / "logs", BrokerInfo(0, "127.0.0.1", 9092))
    store.start()
    logs = LogManager(config.log_dirs, config.log_defaults)
    logs.startup()
    replicas = ReplicaManager(config, 0, store, logs)
    store.create_topic("doomed", 6, 1, {})
    store.create_topic("kept", 2, 1, {})
    asyncio.run(replicas.apply_metadata())
    calls: list[list[tuple[str, int]]] = []
    real = logs.delete_logs
    monkeypatch.setattr(logs, "delete_logs", lambda tps: calls.append(sorted(tps)) or real(tps))
    store.delete_topic("doomed")
    asyncio.run(replicas.apply_metadata())
    assert calls == [[("doomed", p) for p in range(6)]]
    assert sorted(replicas.partitions) == sorted(logs.logs()) == [("kept", 0), ("kept", 1)]
    assert set(read_checkpoint(config.log_dirs[0] / RECOVERY_POINT_CHECKPOINT)) == {("kept", 0), ("kept", 1)}
    asyncio.run(replicas.stop())
    logs.shutdown()
