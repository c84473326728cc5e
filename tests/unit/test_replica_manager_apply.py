"""ReplicaManager.apply_metadata: the file work of new replicas (directories, segments, partition.metadata) runs
on a worker thread, not on the event loop, and a log prepared for a topic that is gone (or re-created) before
reconcile() hosts it is not served."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path

import pytest

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.topic_config import LogConfig
from kbus.server.log import background_sync
from kbus.server.log.epochs import CHECKPOINT_FILE
from kbus.server.log.log import Log
from kbus.server.log.manager import LogManager
from kbus.server.metadata.identity import read_partition_topic_id
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.replication.replica_manager import ReplicaManager


class RecordingLogManager(LogManager):
    def __init__(self, dirs: list[Path], config: LogConfig) -> None:
        super().__init__(dirs, config)
        self.created_on: list[threading.Thread] = []

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        self.created_on.append(threading.current_thread())
        return super().create_log(topic, partition, config)


def broker(tmp_path: Path) -> tuple[ReplicaManager, LocalMetadataStore, RecordingLogManager]:
    config = KafkaConfig.from_properties({"broker.id": "0", "log.dirs": str(tmp_path / "logs")})
    store = LocalMetadataStore(tmp_path / "logs", BrokerInfo(0, "127.0.0.1", 9092))
    store.start()
    logs = RecordingLogManager(config.log_dirs, config.log_defaults)
    logs.startup()
    return ReplicaManager(config, 0, store, logs), store, logs


def test_new_replicas_logs_are_created_off_the_event_loop(tmp_path: Path) -> None:
    replicas, store, logs = broker(tmp_path)
    topic = store.create_topic("wide", 40, 1, {})

    async def apply() -> threading.Thread:
        await asyncio.gather(replicas.apply_metadata(), replicas.apply_metadata())  # the second shares a pass
        return threading.current_thread()

    loop_thread = asyncio.run(apply())
    assert len(logs.created_on) == 40 and loop_thread not in logs.created_on
    assert sorted(i for (t, i), p in replicas.partitions.items() if t == "wide" and p.is_leader) == list(range(40))
    assert read_partition_topic_id(replicas.partitions[("wide", 39)].log.dir) == topic.topic_id
    asyncio.run(replicas.stop())


def test_a_prepared_log_of_a_topic_deleted_or_recreated_meanwhile_is_not_served(tmp_path: Path) -> None:
    replicas, store, logs = broker(tmp_path)
    store.create_topic("gone", 2, 1, {})
    store.create_topic("again", 1, 1, {})
    replicas.prepare_logs()  # the worker thread's step, then the metadata moves before reconcile()
    store.delete_topic("gone")
    store.delete_topic("again")
    recreated = store.create_topic("again", 1, 1, {})
    replicas.reconcile()
    assert logs.get_log("gone", 0) is None and ("gone", 0) not in replicas.partitions
    part = replicas.partitions[("again", 0)]
    assert part.topic_id == recreated.topic_id != uuid.UUID(int=0)
    assert read_partition_topic_id(part.log.dir) == recreated.topic_id
    asyncio.run(replicas.stop())


def test_a_metadata_pass_skips_unchanged_leaders_but_applies_config_changes(tmp_path: Path) -> None:
    replicas, store, _ = broker(tmp_path)
    store.create_topic("a", 3, 1, {})
    store.create_topic("b", 2, 1, {})
    asyncio.run(replicas.apply_metadata())
    # Partition.update_state gives a leader a new followers dict (and the state it is passed): a partition whose
    # state and followers are the same objects after the pass was not touched (Partition is compiled: its methods
    # cannot be wrapped to count calls)
    before = {key: (part.state, part.followers) for key, part in replicas.partitions.items()}
    replicas.reconcile()
    touched = [key for key, part in replicas.partitions.items()
               if part.state is not before[key][0] or part.followers is not before[key][1]]
    assert touched == []  # nothing changed: no partition was touched
    store.alter_topic_configs("b", {"retention.ms": "1234"})
    replicas.reconcile()
    assert [replicas.partitions[("b", i)].log.config.retention_ms for i in range(2)] == [1234, 1234]
    assert replicas.partitions[("a", 0)].log.config.retention_ms != 1234
    asyncio.run(replicas.stop())


def test_new_replicas_are_hosted_a_batch_at_a_time(tmp_path: Path) -> None:
    replicas, store, _ = broker(tmp_path)
    store.create_topic("many", 5, 1, {})
    replicas.prepare_logs()
    assert replicas.reconcile(max_new=2) is False and len(replicas.partitions) == 2
    assert replicas.reconcile(max_new=2) is False and len(replicas.partitions) == 4
    assert replicas.reconcile(max_new=2) is True and len(replicas.partitions) == 5
    assert replicas.reconcile(max_new=2) is True
    asyncio.run(replicas.stop())


def test_new_logs_partition_metadata_is_made_durable_by_one_syncfs_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating a 10,000-partition topic spent most of its time in two fsyncs per partition.metadata: the stamps
    are now written unsynced and one syncfs makes a batch durable, before prepare_logs() counts them as ready."""
    import os

    from kbus.server.log import background_sync

    replicas, store, logs = broker(tmp_path)
    topic = store.create_topic("wide", 40, 1, {})
    fsyncs: list[int] = []
    synced: list[bool] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    def syncfs(fd: int) -> int:
        synced.append(bool(replicas._prepared))  # nothing counts as prepared before its sync
        return 0

    # what the background thread still has queued (an earlier test's leader-epoch checkpoints, written and fsynced
    # there) is done first: only prepare_logs()'s own syncs are counted
    background_sync.wait_for_background_syncs()
    monkeypatch.setattr(os, "fsync", counting_fsync)
    monkeypatch.setattr(background_sync, "_syncfs", syncfs)
    replicas.prepare_logs()
    monkeypatch.undo()
    assert fsyncs == [] and synced == [False]
    assert len(replicas._prepared) == 40
    assert all(read_partition_topic_id(logs.get_log("wide", i).dir) == topic.topic_id for i in range(40))
    asyncio.run(replicas.stop())


class GatedLogManager(LogManager):
    """create_log of `gated_topic` waits for `release`: a pass held in prepare_logs, as a slow disk would hold it."""

    def __init__(self, dirs: list[Path], config: LogConfig, gated_topic: str) -> None:
        super().__init__(dirs, config)
        self.gated_topic = gated_topic
        self.entered, self.release = threading.Event(), threading.Event()

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        if topic == self.gated_topic:
            self.entered.set()
            assert self.release.wait(10)
        return super().create_log(topic, partition, config)


def test_a_caller_cancelled_while_its_pass_is_queued_does_not_stop_later_passes(tmp_path: Path) -> None:
    """A request waiting for a metadata pass is cancelled when its client disconnects. When the queued pass ran in
    its first caller's task, that left a finished "queued pass" behind that every later caller waited for instead
    of running one: the broker stopped hosting new partitions (test_security's module broker, CI and session 9)."""
    config = KafkaConfig.from_properties({"broker.id": "0", "log.dirs": str(tmp_path / "logs")})
    store = LocalMetadataStore(tmp_path / "logs", BrokerInfo(0, "127.0.0.1", 9092))
    store.start()
    logs = GatedLogManager(config.log_dirs, config.log_defaults, gated_topic="first")
    logs.startup()
    replicas = ReplicaManager(config, 0, store, logs)

    async def scenario() -> None:
        store.create_topic("first", 1, 1, {})
        running = asyncio.create_task(replicas.apply_metadata())
        while not logs.entered.is_set():  # the first pass is in prepare_logs, holding the pass lock
            await asyncio.sleep(0.01)
        store.create_topic("second", 1, 1, {})
        queued = asyncio.create_task(replicas.apply_metadata())  # the pass queued behind it
        await asyncio.sleep(0.05)
        queued.cancel()  # its client went away
        with pytest.raises(asyncio.CancelledError):
            await queued
        logs.release.set()
        await running
        store.create_topic("third", 1, 1, {})
        await asyncio.wait_for(replicas.apply_metadata(), 10)
        assert {("first", 0), ("second", 0), ("third", 0)} <= set(replicas.partitions)
        await replicas.stop()

    asyncio.run(scenario())


def test_new_leaders_checkpoint_their_epoch_at_creation_in_one_background_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's Partition.makeLeader: the leader epoch of a new topic's partitions is cached and checkpointed as
    they become leaders (their creation), not at their first produce; the checkpoints of one metadata pass are
    written by one background job and made durable by one syncfs (background_sync.batch)."""
    background: list[str] = []  # what the background thread did: "syncfs", "fsync"

    def fake_syncfs(fd: int) -> int:
        if threading.current_thread().name.startswith("kbus-file-sync"):
            background.append("syncfs")
        return 0

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if threading.current_thread().name.startswith("kbus-file-sync"):
            background.append("fsync")
        real_fsync(fd)

    background_sync.wait_for_background_syncs()  # nothing of an earlier test's left on the background thread
    monkeypatch.setattr(background_sync, "_syncfs", fake_syncfs)
    monkeypatch.setattr(os, "fsync", fsync)
    replicas, store, _ = broker(tmp_path)
    store.create_topic("wide", 1200, 1, {})  # more than one OPEN_BATCH: the pass yields to the loop in between
    asyncio.run(replicas.apply_metadata())
    background_sync.wait_for_background_syncs()
    for i in (0, 700, 1199):
        part = replicas.partitions[("wide", i)]
        assert part.epochs.entries == [(0, 0)] and part.end_offset_for_epoch(0) == (0, 0)
        assert (part.log.dir / CHECKPOINT_FILE).read_text() == "0\n1\n0 0\n"
    assert background == ["syncfs"]
    asyncio.run(replicas.stop())
