"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Request in, response out: topic ids become names at this edge (the coordinator works with names), and back. The
state lives in the group coordinator (kbus.server.coordinator.consumer_membership).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kio.schema.errors import ErrorCode as E
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

from kbus.common.acl import Operation, ResourceType
from kbus.common.broker_config import parse_rebalance_protocols
from kbus.protocol.codec import ms
from kbus.server.apis.groups import NOT_REQUESTED_OPERATIONS, client_host, group_operations
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.assignors import Assignment
from kbus.server.coordinator.consumer_group import TopicImage
from kbus.server.coordinator.consumer_membership import ConsumerGroupSummary, HeartbeatRequest, HeartbeatResponse
from kbus.server.coordinator.share_membership import ShareHeartbeatResponse

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.coordinator.coordinator import GroupCoordinator

MEMBER_TYPE_CONSUMER = 1


class GroupSummary(Protocol):
    """What ConsumerGroupDescribe and ShareGroupDescribe both tell of a group (its members aside)."""

    @property
    def state(self) -> str: ...
    @property
    def group_epoch(self) -> int: ...
    @property
    def assignment_epoch(self) -> int: ...
    @property
    def assignor_name(self) -> str: ...


S = TypeVar("S", bound=GroupSummary)


def _owned(image: TopicImage, topic_partitions: tuple[TopicPartitions, ...] | None) -> Assignment | None:
    if topic_partitions is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in topic_partitions:
        name = None if tp.topic_id is None else image.names_by_id.get(tp.topic_id)
        if name is not None:  # a deleted topic (or the zero id, read by kio as None): nothing of it is owned
            out[name] = out.get(name, frozenset()) | frozenset(int(p) for p in tp.partitions)
    return out


def topic_partitions(ctx: RequestContext, image: TopicImage, assignment: Assignment, cls: str,
                      *, with_names: bool) -> list[Any]:
    out = []
    for topic in sorted(assignment):
        topic_id = image.ids.get(topic)
        if topic_id is None or not assignment[topic]:
            continue
        fields: dict[str, Any] = {"topic_id": topic_id, "partitions": tuple(sorted(assignment[topic]))}
        if with_names:
            fields["topic_name"] = topic
        out.append(ctx.nested(cls, **fields))
    return out


def heartbeat_error(ctx: RequestContext, code: int, message: str | None = None) -> Any:
    """A ConsumerGroupHeartbeat/ShareGroupHeartbeat response that carries only an error."""
    return ctx.build(throttle_time=0, error_code=code, error_message=message, member_id=None, member_epoch=0,
                     heartbeat_interval=0, assignment=None)


def heartbeat_denied(ctx: RequestContext, group_id: str, names: Sequence[str] | None) -> Any | None:
    """Kafka's KafkaApis.handle{Consumer,Share}GroupHeartbeatRequest: READ on the group, DESCRIBE on every subscribed
    topic (the error names those without it). The error response, or None when the member may go on."""
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, group_id):
        return heartbeat_error(ctx, E.group_authorization_failed)
    denied = sorted(t for t in names or () if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t))
    if denied:
        return heartbeat_error(ctx, E.topic_authorization_failed,
                               f"The group has subscribed to topics that are not authorized: {', '.join(denied)}.")
    return None


def heartbeat_response(ctx: RequestContext, image: TopicImage,
                       result: HeartbeatResponse | ShareHeartbeatResponse) -> Any:
    if result.error != E.none:
        return heartbeat_error(ctx, result.error, result.error_message)
    assignment = None
    if result.assignment is not None:
        assignment = ctx.nested("Assignment", topic_partitions=topic_partitions(
            ctx, image, result.assignment, "TopicPartitions", with_names=False))
    return ctx.build(
        throttle_time=0,
        error_code=E.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def describe_groups(ctx: RequestContext, req: ConsumerGroupDescribeRequest | ShareGroupDescribeRequest,
                    coordinator: GroupCoordinator | None,
                    describe: Callable[[GroupCoordinator, list[str]], list[tuple[str, int, str | None, S | None]]],
                    members: Callable[[S, TopicImage], list[Any]]) -> Any:
    """ConsumerGroupDescribe and ShareGroupDescribe: a group not authorized (DESCRIBE), or with no coordinator to ask,
    gets that error; one the coordinator has no summary of carries the coordinator's error."""
    include_ops = bool(req.include_authorized_operations)
    allowed: list[str] = [g for g in req.group_ids if ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, g)]
    results = {} if coordinator is None else {r[0]: r for r in describe(coordinator, allowed)}
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
        described.append(ctx.nested(
            "DescribedGroup",
            error_code=E.none,
            error_message=None,
            group_id=group_id,
            group_state=summary.state,
            group_epoch=summary.group_epoch,
            assignment_epoch=summary.assignment_epoch,
            assignor_name=summary.assignor_name,
            members=members(summary, image),
            authorized_operations=group_operations(ctx, group_id) if include_ops else NOT_REQUESTED_OPERATIONS,
        ))
    return ctx.build(throttle_time=0, groups=described)


@api(68, 0, 1, request=ConsumerGroupHeartbeatRequest)
async def consumer_group_heartbeat(m: Managers, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Any:
    coordinator = m.groups
    if "consumer" not in parse_rebalance_protocols(m.config.group_coordinator_rebalance_protocols):
        return heartbeat_error(ctx, E.unsupported_version, "The consumer group protocol is disabled "
                                                           "(group.coordinator.rebalance.protocols).")
    names = req.subscribed_topic_names
    denied = heartbeat_denied(ctx, req.group_id, names)
    if denied is not None:
        return denied
    if coordinator is None:
        return heartbeat_error(ctx, E.coordinator_not_available)
    image = coordinator.topic_image
    result = await coordinator.consumer_group_heartbeat(HeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=ms(req.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor,
        owned=_owned(image, req.topic_partitions),
        client_id=ctx.client_id,
        client_host=client_host(ctx),
        api_version=ctx.api_version,
    ))
    return heartbeat_response(ctx, image, result)


@api(69, 0, 1, request=ConsumerGroupDescribeRequest)
async def consumer_group_describe(m: Managers, ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Any:
    def members(summary: ConsumerGroupSummary, image: TopicImage) -> list[Any]:
        def assignment(a: Assignment) -> Any:
            return ctx.nested("Assignment", topic_partitions=topic_partitions(
                ctx, image, a, "TopicPartitions", with_names=True))

        return [
            ctx.nested(
                "Member",
                member_id=s.member.member_id,
                instance_id=s.member.instance_id,
                rack_id=s.member.rack_id,
                member_epoch=s.member.member_epoch,
                client_id=s.member.client_id,
                client_host=s.member.client_host,
                subscribed_topic_names=tuple(s.member.subscribed_topic_names),
                subscribed_topic_regex=s.member.subscribed_topic_regex or None,
                assignment=assignment(s.member.assigned),
                target_assignment=assignment(s.target),
                member_type=MEMBER_TYPE_CONSUMER,
            )
            for s in summary.members
        ]

    return describe_groups(ctx, req, m.groups, lambda c, ids: c.describe_consumer_groups(ids), members)
