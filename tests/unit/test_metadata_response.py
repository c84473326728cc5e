"""The hand-encoded topics of a Metadata response are byte for byte what kio writes, for every version."""

from __future__ import annotations

import uuid

import pytest
from kio.serial import entity_reader

from kbus.protocol.codec import build, encode_entity, nested, response_type
from kbus.protocol.metadata_response import encode_partitions, encode_topic, splice_topics

TID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
ROWS = [(0, 0, 1, 4, [1, 2, 3], [1, 3], [2]), (5, 1, -1, 0, [2], [], [2]), (0, 2, 3, 9, [3, 1], [3, 1], [])]


def kio_response(version: int, cluster_ops: int) -> object:
    cls = response_type(3, version)
    part, topic, brk = (nested(cls, n) for n in
                        ("MetadataResponsePartition", "MetadataResponseTopic", "MetadataResponseBroker"))
    return build(cls, throttle_time=3, cluster_id="c1", controller_id=2, cluster_authorized_operations=cluster_ops,
                 brokers=[build(brk, node_id=1, host="h", port=9092, rack="r")], topics=[
        build(topic, error_code=0, name="orders", topic_id=TID, is_internal=False, topic_authorized_operations=8,
              partitions=[build(part, error_code=e, partition_index=i, leader_id=ld, leader_epoch=ep,
                                replica_nodes=r, isr_nodes=s, offline_replicas=o)
                          for e, i, ld, ep, r, s, o in ROWS]),
        build(topic, error_code=3, name="missing", topic_id=None, partitions=()),
        build(topic, error_code=0, name="__consumer_offsets", topic_id=TID, is_internal=True, partitions=()),
    ])  # fmt: skip


@pytest.mark.parametrize("version", range(13))
def test_same_bytes_as_kio(version: int) -> None:
    whole = kio_response(version, 123)
    shell = kio_response(version, 123)
    object.__setattr__(shell, "topics", ())
    mine = splice_topics(version, encode_entity(shell), [
        encode_topic(version, error_code=0, name="orders", topic_id=TID, authorized_operations=8,
                     partitions=encode_partitions(version, ROWS)),
        encode_topic(version, error_code=3, name="missing"),
        encode_topic(version, error_code=0, name="__consumer_offsets", topic_id=TID, is_internal=True),
    ])  # fmt: skip
    assert mine.data == encode_entity(whole)
    decoded, size = entity_reader(response_type(3, version))(mine.data, 0)
    assert size == len(mine.data) and decoded.topics[0].partitions[0].isr_nodes == (1, 3)


def test_a_null_name_for_a_topic_named_by_id() -> None:
    cls = response_type(3, 12)
    kio = build(nested(cls, "MetadataResponseTopic"), error_code=100, name=None, topic_id=TID, partitions=())
    assert encode_topic(12, error_code=100, name=None, topic_id=TID) == encode_entity(kio)


def test_cached_partition_arrays_follow_the_metadata() -> None:
    from kbus.server.apis.metadata import _partitions
    from kbus.server.metadata.types import PartitionState, TopicMetadata

    topic = TopicMetadata("cached", TID, {0: PartitionState(1, 0, [1], [1])})
    live = frozenset({1})
    first = _partitions(12, topic, live)
    assert _partitions(12, topic, live) is first  # same object, same brokers: the cached bytes
    topic.partitions[1] = PartitionState(1, 0, [1], [1])  # the standalone store adds partitions in place
    grown = _partitions(12, topic, live)
    assert grown != first
    moved = TopicMetadata("cached", TID, {0: PartitionState(2, 1, [1, 2], [2]), 1: topic.partitions[1]})
    assert _partitions(12, moved, frozenset({1, 2})) != grown  # ZooKeeper: a new object on every change
    assert _partitions(12, topic, frozenset()) != grown  # the leader died: leader -1, offline replica
