"""OffsetCommit v10 and OffsetFetch v10 (Kafka 4.1): topics named by id only, in raw frames against a real broker.
An unknown topic id gets UNKNOWN_TOPIC_ID on each of its partitions; offsets committed by id are the same offsets
a client fetching by name (v9, librdkafka) sees, and the other way round."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_commit.v10 import request as commit
from kio.schema.offset_commit.v10.response import OffsetCommitResponse
from kio.schema.offset_fetch.v10 import request as fetch
from kio.schema.offset_fetch.v10.response import OffsetFetchResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from tests.kbus_processes import BrokerProcess
from tests.txn_forgery import call

pytestmark = pytest.mark.integration


def topic_id(b: BrokerProcess, name: str) -> uuid.UUID:
    r = call(b.bootstrap, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(name)),),
                                          allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False), MetadataResponse)
    assert r.topics[0].error_code == 0
    return r.topics[0].topic_id


Committed = dict[tuple[uuid.UUID, int], str]


def commit_v10(b: BrokerProcess, group: str, offsets: dict[uuid.UUID, dict[int, int]]) -> Committed:
    """OffsetCommit v10 (retried while the group's coordinator is not ready); the error name per partition."""
    deadline = time.monotonic() + 20
    while (answer := commit_once(b, group, offsets)) and time.monotonic() < deadline and any(
            e in ("not_coordinator", "coordinator_not_available", "coordinator_load_in_progress")
            for e in answer.values()):
        time.sleep(0.2)
    return answer


def commit_once(b: BrokerProcess, group: str, offsets: dict[uuid.UUID, dict[int, int]]) -> Committed:
    r = call(b.bootstrap, commit.OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
        topics=tuple(commit.OffsetCommitRequestTopic(topic_id=tid, partitions=tuple(
            commit.OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(o),
                                                committed_leader_epoch=i32(-1), committed_metadata="m")
            for p, o in parts.items())) for tid, parts in offsets.items()),
    ), OffsetCommitResponse)
    return {(t.topic_id, p.partition_index): p.error_code.name for t in r.topics for p in t.partitions}


def fetch_v10(b: BrokerProcess, group: str, wanted: dict[uuid.UUID, list[int]] | None
              ) -> dict[tuple[uuid.UUID, int], tuple[int, str]]:
    topics = None if wanted is None else tuple(
        fetch.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=tuple(i32(p) for p in ps))
        for tid, ps in wanted.items())
    r = call(b.bootstrap, fetch.OffsetFetchRequest(groups=(fetch.OffsetFetchRequestGroup(
        group_id=GroupId(group), topics=topics),)), OffsetFetchResponse)
    g = r.groups[0]
    assert g.error_code == 0, g.error_code
    return {(t.topic_id, p.partition_index): (int(p.committed_offset), p.error_code.name)
            for t in g.topics for p in t.partitions}


def test_offsets_by_topic_id(broker: BrokerProcess) -> None:
    name, group = f"oid-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(15)
    tid, nobody = topic_id(broker, name), uuid.uuid4()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.committed([TopicPartition(name, 0)], 10)  # FindCoordinator: __consumer_offsets is created, its coordinator
    assert commit_v10(broker, group, {tid: {0: 5, 1: 7}, nobody: {0: 1}}) == {
        (tid, 0): "none", (tid, 1): "none", (nobody, 0): "unknown_topic_id"}
    assert fetch_v10(broker, group, {tid: [0, 1], nobody: [3]}) == {
        (tid, 0): (5, "none"), (tid, 1): (7, "none"), (nobody, 3): (-1, "unknown_topic_id")}
    assert fetch_v10(broker, group, None) == {(tid, 0): (5, "none"), (tid, 1): (7, "none")}
    # the same offsets by name (librdkafka's OffsetFetch), and a commit by name seen by id
    try:
        got = c.committed([TopicPartition(name, 0), TopicPartition(name, 1)], 10)
        assert [tp.offset for tp in got] == [5, 7]
        c.commit(offsets=[TopicPartition(name, 1, 9)], asynchronous=False)
    finally:
        c.close()
    assert fetch_v10(broker, group, {tid: [1]}) == {(tid, 1): (9, "none")}
