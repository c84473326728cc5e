"""The share group APIs of KIP-932 that the group coordinator answers: ShareGroupHeartbeat (76) and
ShareGroupDescribe (77). Topic ids become names at this edge (the coordinator works with names), and back.
The records themselves are served by ShareFetch/ShareAcknowledge (share_fetch.py) on the partition leaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode as E
from kio.schema.share_group_describe.v1 import response as sgd
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1 import response as sgh
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse

from kbus.protocol.kio_types import NO_TIME, group, i32_, ms32, topic
from kbus.server.apis.consumer_groups import describe_groups, heartbeat_denied, topic_partitions
from kbus.server.apis.groups import client_host
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.consumer_group import TopicImage
from kbus.server.coordinator.share_membership import ShareGroupSummary, ShareHeartbeatRequest

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


def _heartbeat_error(code: int, message: str | None = None) -> ShareGroupHeartbeatResponse:
    """A ShareGroupHeartbeat response that carries only an error."""
    return ShareGroupHeartbeatResponse(throttle_time=NO_TIME, error_code=E(code), error_message=message,
                                       member_id=None, member_epoch=i32_(0), heartbeat_interval=NO_TIME,
                                       assignment=None)


@api(76, 1, 1, request=ShareGroupHeartbeatRequest)
async def share_group_heartbeat(
    m: Managers, ctx: RequestContext, req: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    coordinator = m.groups
    names = req.subscribed_topic_names
    denied = heartbeat_denied(ctx, req.group_id, names)
    if denied is not None:
        return _heartbeat_error(*denied)
    if coordinator is None:
        return _heartbeat_error(E.coordinator_not_available)
    result = await coordinator.share_group_heartbeat(ShareHeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        rack_id=req.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id,
        client_host=client_host(ctx),
    ))
    if result.error != E.none:
        return _heartbeat_error(result.error, result.error_message)
    assignment = None
    if result.assignment is not None:
        assignment = sgh.Assignment(topic_partitions=tuple(
            sgh.TopicPartitions(topic_id=topic_id, partitions=partitions)
            for topic_id, _, partitions in topic_partitions(coordinator.topic_image, result.assignment)))
    return ShareGroupHeartbeatResponse(
        throttle_time=NO_TIME,
        error_code=E.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=i32_(result.member_epoch),
        heartbeat_interval=ms32(result.heartbeat_interval_ms),
        assignment=assignment,
    )


@api(77, 1, 1, request=ShareGroupDescribeRequest)
async def share_group_describe(
    m: Managers, ctx: RequestContext, req: ShareGroupDescribeRequest
) -> sgd.ShareGroupDescribeResponse:
    coordinator = m.groups
    image = coordinator.topic_image if coordinator is not None else TopicImage()

    def members(summary: ShareGroupSummary) -> tuple[sgd.Member, ...]:
        return tuple(
            sgd.Member(
                member_id=member.member_id,
                rack_id=member.rack_id,
                member_epoch=i32_(member.member_epoch),
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=tuple(topic(t) for t in member.subscribed_topic_names),
                assignment=sgd.Assignment(topic_partitions=tuple(
                    sgd.TopicPartitions(topic_id=topic_id, topic_name=topic(name), partitions=partitions)
                    for topic_id, name, partitions in topic_partitions(image, member.assigned))),
            )
            for member in summary.members
        )

    described = describe_groups(ctx, req, coordinator, lambda c, ids: c.describe_share_groups(ids))
    return sgd.ShareGroupDescribeResponse(throttle_time=NO_TIME, groups=tuple(
        sgd.DescribedGroup(
            error_code=E(code), error_message=message, group_id=group(group_id),
            group_state="" if summary is None else summary.state,
            group_epoch=i32_(0 if summary is None else summary.group_epoch),
            assignment_epoch=i32_(0 if summary is None else summary.assignment_epoch),
            assignor_name="" if summary is None else summary.assignor_name,
            members=() if summary is None else members(summary), authorized_operations=i32_(ops))
        for group_id, code, message, summary, ops in described))
