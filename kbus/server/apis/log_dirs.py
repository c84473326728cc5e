"""DescribeLogDirs (35): which log dir holds each replica on this broker, how big it is, and the space on the
dir's volume (kafka-log-dirs.sh --describe). Offline dirs answer KAFKA_STORAGE_ERROR, as in Kafka.
AlterReplicaLogDirs (34): move replicas to another log dir of this broker (kafka-reassign-partitions.sh with
"log_dirs")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


@api(35, 1, 4, request=DescribeLogDirsRequest)
async def describe_log_dirs(m: Managers, ctx: RequestContext, request: DescribeLogDirsRequest) -> Any:
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        # Kafka: no log dirs, and (v3+) CLUSTER_AUTHORIZATION_FAILED
        return ctx.build(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=[])
    # null topics: every partition; otherwise only the ones asked for
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    results = []
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return ctx.build(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=[])
    for usage, lags, future_lags in m.replicas.describe_log_dirs():
        by_topic: dict[str, list[Any]] = {}
        # the replicas of the dir, then those being moved into it (is_future_key: Admin.describeReplicaLogDirs
        # reads the current and the future dir of a replica from these)
        entries = [(tp, size, lags.get(tp, 0), False) for tp, size in usage.partition_sizes.items()]
        entries += [(tp, size, future_lags.get(tp, 0), True) for tp, size in usage.future_sizes.items()]
        for (topic, index), size, lag, future in sorted(entries):
            if wanted is not None and (topic, index) not in wanted:
                continue
            by_topic.setdefault(topic, []).append(
                ctx.nested("DescribeLogDirsPartition", partition_index=index, partition_size=size,
                           offset_lag=lag, is_future_key=future)
            )  # fmt: skip
        topics = [ctx.nested("DescribeLogDirsTopic", name=name, partitions=parts) for name, parts in by_topic.items()]
        results.append(
            ctx.nested(
                "DescribeLogDirsResult",
                error_code=ErrorCode.none if usage.online else ErrorCode.kafka_storage_error,
                log_dir=str(usage.path),
                topics=topics,
                total_bytes=usage.total_bytes,
                usable_bytes=usage.usable_bytes,
            )
        )
    return ctx.build(throttle_time=0, error_code=ErrorCode.none, results=results)


@api(34, 1, 2, request=AlterReplicaLogDirsRequest)
async def alter_replica_log_dirs(m: Managers, ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> Any:
    moves: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                moves[(t.name, int(p))] = d.path
    if ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        errors = m.replicas.alter_replica_log_dirs(moves)
    else:
        errors = dict.fromkeys(moves, ErrorCode.cluster_authorization_failed)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in sorted(errors.items()):
        by_topic.setdefault(topic, []).append(
            ctx.nested("AlterReplicaLogDirPartitionResult", partition_index=index, error_code=code)
        )
    return ctx.build(
        throttle_time=0,
        results=[
            ctx.nested("AlterReplicaLogDirTopicResult", topic_name=name, partitions=parts)
            for name, parts in by_topic.items()
        ],
    )
