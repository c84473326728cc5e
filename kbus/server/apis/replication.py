"""OffsetForLeaderEpoch (23): where a leader epoch ends in this leader's log (followers truncate to it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest

from kbus.common.acl import Operation, ResourceType
from kbus.server.apis.errors import leader_epoch_error
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


@api(23, 2, 4, request=OffsetForLeaderEpochRequest)
async def offset_for_leader_epoch(m: Managers, ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> Any:
    topics = []
    # followers need ClusterAction on the cluster; consumers (replica_id -1, or v2's absent one: its schema
    # default, -2) Describe on the topic
    follower = request.replica_id >= 0
    for t in request.topics:
        parts = []
        for p in t.partitions:
            fields: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            part, error = m.replicas.leader_partition(t.topic, p.partition)
            if not (
                ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
                if follower
                else ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)
            ):
                fields["error_code"] = ErrorCode.topic_authorization_failed
            elif part is None:
                fields["error_code"] = error
            elif (err := leader_epoch_error(part, p.current_leader_epoch)) is not None:
                fields["error_code"] = err
            else:
                epoch, end = part.end_offset_for_epoch(p.leader_epoch)
                fields.update(error_code=ErrorCode.none, leader_epoch=epoch, end_offset=end)
            parts.append(ctx.nested("EpochEndOffset", **fields))
        topics.append(ctx.nested("OffsetForLeaderTopicResult", topic=t.topic, partitions=parts))
    return ctx.build(throttle_time=0, topics=topics)
