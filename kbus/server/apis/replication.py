"""OffsetForLeaderEpoch (23): where a leader epoch ends in this leader's log (followers truncate to it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import NO_TIME, i32_, i64_
from kbus.server.apis.errors import leader_epoch_error
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


@api(23, 2, 4, request=OffsetForLeaderEpochRequest)
async def offset_for_leader_epoch(
    m: Managers, ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics: list[OffsetForLeaderTopicResult] = []
    # followers need ClusterAction on the cluster; consumers (replica_id -1, or v2's absent one: its schema
    # default, -2) Describe on the topic
    follower = request.replica_id >= 0
    for t in request.topics:
        parts: list[EpochEndOffset] = []
        for p in t.partitions:
            part, error = m.replicas.leader_partition(t.topic, p.partition)
            epoch, end = -1, -1
            if not (
                ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
                if follower
                else ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)
            ):
                code = ErrorCode.topic_authorization_failed
            elif part is None:
                code = error
            elif (err := leader_epoch_error(part, p.current_leader_epoch)) is not None:
                code = err
            else:
                code = ErrorCode.none
                epoch, end = part.end_offset_for_epoch(p.leader_epoch)
            parts.append(EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=i32_(epoch),
                                        end_offset=i64_(end)))
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(parts)))
    return OffsetForLeaderEpochResponse(throttle_time=NO_TIME, topics=tuple(topics))
