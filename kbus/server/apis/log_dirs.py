"""DescribeLogDirs (35): which log dir holds each replica on this broker, how big it is, and the space on the
dir's volume (kafka-log-dirs.sh --describe). Offline dirs answer KAFKA_STORAGE_ERROR, as in Kafka.
AlterReplicaLogDirs (34): move replicas to another log dir of this broker (kafka-reassign-partitions.sh with
"log_dirs")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.alter_replica_log_dirs.v2 import response as alter
from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
from kio.schema.describe_log_dirs.v4 import response as describe
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import NO_TIME, i32_, i64_, topic
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


@api(35, 1, 4, request=DescribeLogDirsRequest)
async def describe_log_dirs(
    m: Managers, ctx: RequestContext, request: DescribeLogDirsRequest
) -> describe.DescribeLogDirsResponse:
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        # Kafka: no log dirs, and (v3+: v1-2 have no field for it, the client sees no dirs) CLUSTER_AUTHORIZATION_FAILED
        code = ErrorCode.cluster_authorization_failed if ctx.api_version >= 3 else ErrorCode.none
        return describe.DescribeLogDirsResponse(throttle_time=NO_TIME, error_code=code, results=())
    # null topics: every partition; otherwise only the ones asked for
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    results: list[describe.DescribeLogDirsResult] = []
    for usage, lags, future_lags in m.replicas.describe_log_dirs():
        by_topic: dict[str, list[describe.DescribeLogDirsPartition]] = {}
        # the replicas of the dir, then those being moved into it (is_future_key: Admin.describeReplicaLogDirs
        # reads the current and the future dir of a replica from these)
        entries = [(tp, size, lags.get(tp, 0), False) for tp, size in usage.partition_sizes.items()]
        entries += [(tp, size, future_lags.get(tp, 0), True) for tp, size in usage.future_sizes.items()]
        for (name, index), size, lag, future in sorted(entries):
            if wanted is not None and (name, index) not in wanted:
                continue
            by_topic.setdefault(name, []).append(
                describe.DescribeLogDirsPartition(partition_index=i32_(index), partition_size=i64_(size),
                                                  offset_lag=i64_(lag), is_future_key=future)
            )  # fmt: skip
        topics = tuple(describe.DescribeLogDirsTopic(name=topic(name), partitions=tuple(parts))
                       for name, parts in by_topic.items())
        results.append(
            describe.DescribeLogDirsResult(
                error_code=ErrorCode.none if usage.online else ErrorCode.kafka_storage_error,
                log_dir=str(usage.path),
                topics=topics,
                total_bytes=i64_(usage.total_bytes),
                usable_bytes=i64_(usage.usable_bytes),
            )
        )
    return describe.DescribeLogDirsResponse(throttle_time=NO_TIME, error_code=ErrorCode.none, results=tuple(results))


@api(34, 1, 2, request=AlterReplicaLogDirsRequest)
async def alter_replica_log_dirs(
    m: Managers, ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> alter.AlterReplicaLogDirsResponse:
    moves: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                moves[(t.name, int(p))] = d.path
    if ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        errors = m.replicas.alter_replica_log_dirs(moves)
    else:
        errors = dict.fromkeys(moves, ErrorCode.cluster_authorization_failed)
    by_topic: dict[str, list[alter.AlterReplicaLogDirPartitionResult]] = {}
    for (name, index), code in sorted(errors.items()):
        by_topic.setdefault(name, []).append(
            alter.AlterReplicaLogDirPartitionResult(partition_index=i32_(index), error_code=code)
        )
    return alter.AlterReplicaLogDirsResponse(
        throttle_time=NO_TIME,
        results=tuple(
            alter.AlterReplicaLogDirTopicResult(topic_name=topic(name), partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
