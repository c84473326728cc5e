"""The share group APIs of KIP-932 that the group coordinator answers: ShareGroupHeartbeat (76) and
ShareGroupDescribe (77). Topic ids become names at this edge (the coordinator works with names), and back.
The records themselves are served by ShareFetch/ShareAcknowledge (share_fetch.py) on the partition leaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

from kbus.server.apis.consumer_groups import (
    describe_groups,
    heartbeat_denied,
    heartbeat_error,
    heartbeat_response,
    topic_partitions,
)
from kbus.server.apis.groups import client_host
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.consumer_group import TopicImage
from kbus.server.coordinator.share_membership import ShareGroupSummary, ShareHeartbeatRequest

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


@api(76, 1, 1, request=ShareGroupHeartbeatRequest)
async def share_group_heartbeat(m: Managers, ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> Any:
    coordinator = m.groups
    names = req.subscribed_topic_names
    denied = heartbeat_denied(ctx, req.group_id, names)
    if denied is not None:
        return denied
    if coordinator is None:
        return heartbeat_error(ctx, E.coordinator_not_available)
    result = await coordinator.share_group_heartbeat(ShareHeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        rack_id=req.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id,
        client_host=client_host(ctx),
    ))
    return heartbeat_response(ctx, coordinator.topic_image, result)


@api(77, 1, 1, request=ShareGroupDescribeRequest)
async def share_group_describe(m: Managers, ctx: RequestContext, req: ShareGroupDescribeRequest) -> Any:
    def members(summary: ShareGroupSummary, image: TopicImage) -> list[Any]:
        return [
            ctx.nested(
                "Member",
                member_id=member.member_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=tuple(member.subscribed_topic_names),
                assignment=ctx.nested("Assignment", topic_partitions=topic_partitions(
                    ctx, image, member.assigned, "TopicPartitions", with_names=True)),
            )
            for member in summary.members
        ]

    return describe_groups(ctx, req, m.groups, lambda c, ids: c.describe_share_groups(ids), members)
