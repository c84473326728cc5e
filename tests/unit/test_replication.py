"""Replication logic without sockets: leader epochs, follower truncation (KIP-279), the high watermark."""

from __future__ import annotations

import dataclasses
import threading
import uuid

import pytest

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log import background_sync
from kbus.server.log.background_sync import wait_for_background_syncs
from kbus.server.log.epochs import CHECKPOINT_FILE, UNDEFINED_EPOCH, LeaderEpochCache
from kbus.server.log.log import Log
from kbus.server.log.manager import LogManager
from kbus.server.metadata.identity import read_partition_topic_id, write_partition_topic_id
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.errors import NotEnoughReplicasAfterAppendError, NotEnoughReplicasError
from kbus.server.partition.partition import Partition
from kbus.server.replication.fetcher import ReplicaFetcher, fetcher_id
from kbus.server.replication.replica_manager import ReplicaManager


def follower_with(tmp_path, epochs_and_counts: list[tuple[int, int]], replicas=(1, 2)) -> Partition:
    """A follower (broker 2, leader 1) whose log holds `count` single-record batches per epoch."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    offset = 0
    for epoch, count in epochs_and_counts:
        for _ in range(count):
            log.append_as_follower(build_batch([(None, b"x")], base_offset=offset, partition_leader_epoch=epoch))
            offset += 1
    return Partition("t", 0, log, PartitionState(1, 9, list(replicas), list(replicas)), 2)


def test_epoch_cache_end_offsets_like_kafka(tmp_path):
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in ((1, 0), (2, 40), (4, 60)):
        cache.assign(epoch, start)
    assert cache.end_offset_for(4, 80) == (4, 80)
    assert cache.end_offset_for(3, 80) == (2, 60)
    assert cache.end_offset_for(1, 80) == (1, 40)
    assert cache.end_offset_for(0, 80) == (UNDEFINED_EPOCH, -1)
    cache.truncate_from_end(50)
    assert cache.entries == [(1, 0), (2, 40)]
    assert LeaderEpochCache.load(tmp_path).entries == [(1, 0), (2, 40)]  # persisted
    cache.truncate_from_start(45)
    assert cache.entries == [(2, 45)]


def test_follower_cache_is_rebuilt_from_batch_headers(tmp_path):
    part = follower_with(tmp_path, [(1, 50), (3, 30)])
    assert part.epochs.entries == [(1, 0), (3, 50)]


@pytest.mark.parametrize("body", [
    "0\n2\n1 0\n2 40 7\n",  # a line of three fields
    "0\n3\n1 0\n2 40\n",  # fewer entries than the count says
    "0\n1\n1\n",  # a line of one field
    "1\n1\n1 0\n",  # a version other than 0
])
def test_a_malformed_epoch_checkpoint_is_rebuilt_from_the_log(tmp_path, body):
    """Kafka's CheckpointFile refuses a version other than 0, a line without exactly two fields and a count its
    lines do not match; the cache is then rebuilt from the batch headers (load() gives None). A 3-field line used
    to load as a 3-tuple that later broke unpacking (and that compiled code rejects as the wrong type)."""
    (tmp_path / "leader-epoch-checkpoint").write_text(body)
    assert LeaderEpochCache.load(tmp_path) is None


def test_epoch_checkpoint_round_trips(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n2 40\n")
    loaded = LeaderEpochCache.load(tmp_path)
    assert loaded is not None and loaded.entries == [(1, 0), (2, 40)]


def test_truncation_takes_as_many_rounds_as_epochs_diverge(tmp_path):
    # follower: epoch 1 for 0-49, epoch 3 for 50-79; leader: epoch 1 for 0-39, 2 for 40-59, 4 from 60
    part = follower_with(tmp_path, [(1, 50), (3, 30)])
    leader = LeaderEpochCache(None, [(1, 0), (2, 40), (4, 60)])
    fetcher = ReplicaFetcher(host=None, leader_id=1)  # type: ignore[arg-type]
    rounds = 0
    while True:
        rounds += 1
        epoch, end = leader.end_offset_for(part.epochs.latest_epoch, 100)
        if fetcher._truncate(part, epoch, end):
            break
    assert rounds == 2
    assert part.log.log_end_offset == 40  # offsets 40-49 were epoch 1 here but epoch 2 on the leader
    assert part.epochs.entries == [(1, 0)]


def test_truncation_keeps_a_log_that_agrees(tmp_path):
    part = follower_with(tmp_path, [(1, 50)])
    fetcher = ReplicaFetcher(host=None, leader_id=1)  # type: ignore[arg-type]
    assert fetcher._truncate(part, 1, 70)
    assert part.log.log_end_offset == 50


def test_replicated_replica_starts_from_its_checkpointed_high_watermark(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig())
    for i in range(10):
        log.append_as_follower(build_batch([(None, b"x")], base_offset=i, partition_leader_epoch=0))
    state = PartitionState(2, 1, [1, 2], [1, 2])
    assert Partition("t", 0, log, state, 2, checkpointed_high_watermark=6).high_watermark == 6
    assert Partition("t", 0, log, state, 2, checkpointed_high_watermark=None).high_watermark == 0
    # a sole replica commits everything it has
    assert Partition("t", 0, log, PartitionState(2, 1, [2], [2]), 2).high_watermark == 10


def test_leader_high_watermark_is_the_isr_minimum_and_ignores_diverged_fetches(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig())
    part = Partition("t", 0, log, PartitionState(1, 0, [1, 2, 3], [1, 2, 3]), 1)
    for _ in range(10):
        part.append_as_leader(build_batch([(None, b"x")]))
    assert part.high_watermark == 0  # followers have not fetched yet
    assert not part.update_follower(2, 10, 1000)
    assert part.high_watermark == 0
    part.update_follower(3, 7, 1000)
    assert part.high_watermark == 7
    part.update_follower(3, 25, 1000)  # beyond our log end: not a position, it diverged
    assert part.followers[3].log_end_offset == 7 and part.high_watermark == 7


def test_partition_metadata_file_round_trip(tmp_path):
    tid = uuid.uuid4()
    assert read_partition_topic_id(tmp_path) is None
    write_partition_topic_id(tmp_path, tid)
    assert read_partition_topic_id(tmp_path) == tid
    assert (tmp_path / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")


def test_partitions_spread_over_the_fetchers_of_a_leader() -> None:
    tps = [("t", p) for p in range(64)]
    assert {fetcher_id(tp, 1) for tp in tps} == {0}
    spread = [fetcher_id(tp, 4) for tp in tps]
    assert set(spread) == {0, 1, 2, 3} and spread == [fetcher_id(tp, 4) for tp in tps]  # stable


def test_acks_all_is_satisfied_at_once_only_once_the_high_watermark_passes_the_batch(tmp_path):
    """ReplicaManager.acks_satisfied, which spares the Produce handler its wait (and a coroutine) for a leader alone
    in its ISR, answers as wait_for_acks would: not yet while followers lag, NOT_ENOUGH_REPLICAS_AFTER_APPEND when
    the ISR is below min.insync.replicas once the batch is committed."""
    config = KafkaConfig.from_properties({"broker.id": "2", "log.dirs": str(tmp_path / "logs")})
    store = LocalMetadataStore(tmp_path / "logs", BrokerInfo(2, "127.0.0.1", 9092))
    store.start()
    logs = LogManager(config.log_dirs, config.log_defaults)
    logs.startup()
    replicas = ReplicaManager(config, 2, store, logs)
    alone = Partition("t", 0, Log.open(tmp_path / "t-0", LogConfig()), PartitionState(2, 1, [2], [2]), 2)
    result = replicas.append_records(alone, build_batch([(None, b"x")]), -1)
    assert replicas.acks_satisfied(alone, result, -1)
    shared = Partition("t", 1, Log.open(tmp_path / "t-1", LogConfig()), PartitionState(2, 1, [2, 3], [2, 3]), 2)
    result = replicas.append_records(shared, build_batch([(None, b"x")]), -1)
    assert not replicas.acks_satisfied(shared, result, -1)  # follower 3 has not fetched it yet: wait
    assert replicas.acks_satisfied(shared, result, 1) and replicas.acks_satisfied(shared, result, 0)
    result = replicas.append_records(alone, build_batch([(None, b"y")]), -1)
    alone.log.update_config(dataclasses.replace(LogConfig(), min_insync_replicas=2))  # the ISR shrank below it
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        replicas.acks_satisfied(alone, result, -1)
    # the next acks=-1 append is refused before it is written (the replaced config's min.insync.replicas); acks=1
    # does not ask
    with pytest.raises(NotEnoughReplicasError):
        replicas.append_records(alone, build_batch([(None, b"z")]), -1)
    assert alone.log.log_end_offset == 2
    assert replicas.append_records(alone, build_batch([(None, b"z")]), 1).first_offset == 2


def test_a_new_leader_caches_its_epoch_at_its_log_end_before_any_append(tmp_path):
    """Kafka's Partition.makeLeader (maybeAssignEpochStartOffset): a replica becoming leader of a new epoch caches
    it as starting at its log end offset, before any record of it is appended; OffsetForLeaderEpoch answers it at
    once (Kafka 3.9 answers (0, 0) for a new topic's partition, kbus answered UNDEFINED until the first produce)."""
    fresh = Partition("t", 0, Log.open(tmp_path / "t-0", LogConfig()), PartitionState(1, 0, [1], [1]), 1)
    assert fresh.epochs.entries == [(0, 0)]
    assert fresh.end_offset_for_epoch(0) == (0, 0)
    part = follower_with(tmp_path / "f", [(1, 5)], replicas=(1, 2))  # broker 2 follows 1 at epoch 9
    assert part.epochs.entries == [(1, 0)]  # a follower caches only the epochs of its records
    part.update_state(PartitionState(2, 10, [1, 2], [1, 2]))  # leader at epoch 10
    assert part.epochs.entries == [(1, 0), (10, 5)]
    assert part.end_offset_for_epoch(1) == (1, 5) and part.end_offset_for_epoch(10) == (10, 5)
    part.update_state(PartitionState(2, 10, [1, 2], [2]))  # an ISR change, the same epoch: nothing new
    part.append_as_leader(build_batch([(None, b"x")]))
    assert part.epochs.entries == [(1, 0), (10, 5)]
    part.update_state(PartitionState(1, 11, [1, 2], [1, 2]))  # a follower again, of epoch 11: nothing assigned
    assert part.epochs.entries == [(1, 0), (10, 5)]


def test_a_leaders_first_checkpoint_lost_in_a_crash_is_rebuilt_as_it_was(tmp_path):
    """A new leader's first checkpoint is written by the background thread. A crash before that write leaves no
    file: the partition loaded then rebuilds its entries from the batch headers and, leader again, assigns its epoch
    again at its log end; as a follower it has the entries of its records only (Kafka's load drops an epoch that
    starts at the log end too). Nothing is lost or wrong either way."""
    wait_for_background_syncs()  # no drain of an earlier test's files queued before the gate (it would take these)
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)  # the background thread busy: the queued writes are not on disk
    try:
        led = Partition("t", 0, Log.open(tmp_path / "t-0", LogConfig()), PartitionState(1, 4, [1], [1]), 1)
        empty = Partition("t", 1, Log.open(tmp_path / "t-1", LogConfig()), PartitionState(1, 6, [1], [1]), 1)
        for _ in range(3):
            led.append_as_leader(build_batch([(None, b"x")]))
        assert led.epochs.entries == [(4, 0)] and empty.epochs.entries == [(6, 0)]
        assert not (tmp_path / "t-0" / CHECKPOINT_FILE).exists()
        # the state a crash leaves: the records on disk, no checkpoint
        led.log.close()
        empty.log.close()
        again = Partition("t", 0, Log.open(tmp_path / "t-0", LogConfig()), PartitionState(1, 4, [1], [1]), 1)
        assert again.epochs.entries == [(4, 0)] and again.end_offset_for_epoch(4) == (4, 3)
        assert Partition("t", 1, Log.open(tmp_path / "t-1", LogConfig()), PartitionState(1, 6, [1], [1]),
                         1).epochs.entries == [(6, 0)]
        as_follower = Partition("t", 1, Log.open(tmp_path / "t-1", LogConfig()), PartitionState(2, 7, [1, 2], [2]), 1)
        assert as_follower.epochs.entries == []
        for p in (led, empty, again, as_follower):
            p.close()  # their queued writes are dropped: the directories are the test's to check
    finally:
        gate.set()
    wait_for_background_syncs()
    assert not (tmp_path / "t-0" / CHECKPOINT_FILE).exists()


def test_a_restarted_leader_of_an_empty_partition_rewrites_no_checkpoint(tmp_path):
    """The loaded checkpoint says (5, 0) for an empty log: loading drops the epoch (it starts at the log end),
    becoming leader assigns it again; the entries are then the file's, and nothing is written (10,000 empty
    partitions would otherwise rewrite 10,000 files on the event loop at every start)."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    Partition("t", 0, log, PartitionState(1, 5, [1], [1]), 1)
    wait_for_background_syncs()
    path = tmp_path / "t-0" / CHECKPOINT_FILE
    assert path.read_text() == "0\n1\n5 0\n"
    written = path.stat().st_ino  # a write replaces the file (a temporary file renamed over it): a new inode
    part = Partition("t", 0, log, PartitionState(1, 5, [1], [1]), 1)
    wait_for_background_syncs()
    assert part.epochs.entries == [(5, 0)] and path.stat().st_ino == written
    Partition("t", 0, log, PartitionState(1, 6, [1], [1]), 1)  # a new epoch: written at once (a file exists)
    assert path.read_text() == "0\n1\n6 0\n"  # epoch 5 had no records


def test_a_queued_checkpoint_of_a_deleted_partition_does_not_land_in_its_recreated_directory(tmp_path):
    """A topic deleted and re-created under the same name while the old partition's first checkpoint waits for the
    background thread: the partition's directory is the new topic's by then (here a follower with nothing of its
    own to write yet). The write must not land there: loaded later with records of the new topic's epoch 0, the old
    topic's epoch 3 would be trusted for them."""
    d = tmp_path / "t-0"
    wait_for_background_syncs()  # no drain of an earlier test's files queued before the gate (it would take these)
    gate = threading.Event()
    background_sync._syncer.submit(gate.wait)
    try:
        old = Partition("t", 0, Log.open(d, LogConfig()), PartitionState(1, 3, [1], [1]), 1)
        assert old.epochs.entries == [(3, 0)]  # its first checkpoint queued
        old.close()  # ReplicaManager._drop_partition, then the log's deletion
        old.log.delete()
        new = Partition("t", 0, Log.open(d, LogConfig()), PartitionState(2, 0, [2, 1], [2, 1]), 1)
        assert new.epochs.entries == []
    finally:
        gate.set()
    wait_for_background_syncs()
    assert not (d / CHECKPOINT_FILE).exists()
    new.append_as_follower(build_batch([(None, b"x")], base_offset=0, partition_leader_epoch=0), 1)
    new.log.close()
    assert Partition("t", 0, Log.open(d, LogConfig()), PartitionState(2, 0, [2, 1], [2, 1]), 1).epochs.entries == [
        (0, 0)]
