"""The share group APIs of KIP-932 that the group coordinator answers: ShareGroupHeartbeat (76) and
ShareGroupDescribe (77). Topic ids become names at this edge (the coordinator works with names), and back.
The records themselves are served by ShareFetch/ShareAcknowledge (share_fetch.py) on the partition leaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from kbus.common.acl import Operation, ResourceType
from kbus.server.apis.consumer_groups import topic_partitions
from kbus.server.apis.groups import NOT_REQUESTED_OPERATIONS, client_host, group_operations
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.consumer_group import TopicImage
from kbus.server.coordinator.share_membership import ShareHeartbeatRequest

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


@api(76, 1, 1)
async def share_group_heartbeat(m: Managers, ctx: RequestContext, req: Any) -> Any:
    coordinator = m.groups

    def error(code: int, message: str | None = None) -> Any:
        return ctx.build(throttle_time=0, error_code=code, error_message=message, member_id=None, member_epoch=0,
                         heartbeat_interval=0, assignment=None)

    # Kafka's KafkaApis.handleShareGroupHeartbeatRequest: READ on the group, DESCRIBE on every subscribed topic
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, req.group_id):
        return error(E.group_authorization_failed)
    names = req.subscribed_topic_names
    if names:
        denied = sorted(t for t in names if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t))
        if denied:
            return error(E.topic_authorization_failed,
                         f"The group has subscribed to topics that are not authorized: {', '.join(denied)}.")
    if coordinator is None:
        return error(E.coordinator_not_available)
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
        return error(result.error, result.error_message)
    assignment = None
    if result.assignment is not None:
        assignment = ctx.nested("Assignment", topic_partitions=topic_partitions(
            ctx, coordinator.topic_image, result.assignment, "TopicPartitions", with_names=False))
    return ctx.build(
        throttle_time=0,
        error_code=E.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


@api(77, 1, 1)
async def share_group_describe(m: Managers, ctx: RequestContext, req: Any) -> Any:
    coordinator = m.groups
    include_ops = bool(req.include_authorized_operations)
    allowed = [g for g in req.group_ids if ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, g)]
    results = {} if coordinator is None else {r[0]: r for r in coordinator.describe_share_groups(allowed)}
    image = coordinator.topic_image if coordinator is not None else TopicImage()
    described = []
    for group_id in req.group_ids:
        base: dict[str, Any] = {"group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                                "assignor_name": "", "members": [],
                                "authorized_operations": NOT_REQUESTED_OPERATIONS}
        if group_id not in results:
            code = int(E.coordinator_not_available if coordinator is None else E.group_authorization_failed)
            described.append(ctx.nested("DescribedGroup", error_code=code, error_message=None, **base))
            continue
        _, code, message, summary = results[group_id]
        if summary is None:
            described.append(ctx.nested("DescribedGroup", error_code=code, error_message=message, **base))
            continue
        members = [
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
        described.append(ctx.nested(
            "DescribedGroup",
            error_code=E.none,
            error_message=None,
            group_id=group_id,
            group_state=summary.state,
            group_epoch=summary.group_epoch,
            assignment_epoch=summary.assignment_epoch,
            assignor_name=summary.assignor_name,
            members=members,
            authorized_operations=group_operations(ctx, group_id) if include_ops else NOT_REQUESTED_OPERATIONS,
        ))
    return ctx.build(throttle_time=0, groups=described)
