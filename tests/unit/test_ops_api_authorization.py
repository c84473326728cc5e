"""With an authorizer, the operations APIs need Kafka's cluster permissions: ElectLeaders,
AlterPartitionReassignments and AlterReplicaLogDirs ALTER, ListPartitionReassignments and DescribeLogDirs DESCRIBE.
A principal without them gets CLUSTER_AUTHORIZATION_FAILED and nothing is done."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.acl import Authorizer
from kbus.protocol.codec import RequestHeader, build, nested, request_type
from kbus.server.apis.registry import API_TABLE, RequestContext


class Untouchable:
    """Managers whose every use fails the test: a refused request must not reach them."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"an unauthorized request reached the managers ({name})")


def call(api_key: int, version: int, **fields: Any) -> Any:
    cls = request_type(api_key, version)
    assert cls is not None
    header = RequestHeader(api_key, version, 7, "client", bool(cls.__flexible__))
    ctx = RequestContext(header, "127.0.0.1", 50000, "c1", authorizer=Authorizer())  # no ACLs: nothing allowed
    return asyncio.run(API_TABLE[api_key].handler(Untouchable(), ctx, build(cls, **fields)))  # type: ignore[arg-type]


def test_cluster_permissions_are_required() -> None:
    topic = build(nested(request_type(43, 2), "TopicPartitions"), topic="t", partitions=[0])
    elect = call(43, 2, election_type=0, topic_partitions=[topic], timeout=1000)
    assert elect.error_code == ErrorCode.cluster_authorization_failed
    assert elect.replica_election_results[0].partition_result[0].error_code == ErrorCode.cluster_authorization_failed

    part = build(nested(request_type(45, 0), "ReassignablePartition"), partition_index=0, replicas=[1])
    reassign_topic = build(nested(request_type(45, 0), "ReassignableTopic"), name="t", partitions=[part])
    alter = call(45, 0, timeout=1000, topics=[reassign_topic])
    assert alter.error_code == ErrorCode.cluster_authorization_failed and alter.responses == ()
    listed = call(46, 0, timeout=1000, topics=None)
    assert listed.error_code == ErrorCode.cluster_authorization_failed
    dirs = call(35, 4, topics=None)
    assert dirs.error_code == ErrorCode.cluster_authorization_failed and dirs.results == ()

    move_topic = build(nested(request_type(34, 2), "AlterReplicaLogDirTopic"), name="t", partitions=[0, 1])
    move_dir = build(nested(request_type(34, 2), "AlterReplicaLogDir"), path="/d1", topics=[move_topic])
    moved = call(34, 2, dirs=[move_dir])
    assert [(p.partition_index, p.error_code) for p in moved.results[0].partitions] == [
        (0, ErrorCode.cluster_authorization_failed), (1, ErrorCode.cluster_authorization_failed)]
