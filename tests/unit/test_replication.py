"""Replication logic without sockets: leader epochs, follower truncation (KIP-279), the high watermark."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log.epochs import UNDEFINED_EPOCH, LeaderEpochCache
from kbus.server.log.log import Log
from kbus.server.log.manager import LogManager
from kbus.server.metadata.identity import read_partition_topic_id, write_partition_topic_id
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.errors import NotEnoughReplicasAfterAppendError
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
