"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Request in, response out: topic ids become names at this edge (the coordinator works with names), and back. The
state lives in the group coordinator (kbus.server.coordinator.consumer_membership).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from kio.schema.consumer_group_describe.v1 import response as cgd
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1 import response as cgh
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode as E
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.static.primitive import i32

from kbus.common.acl import Operation, ResourceType
from kbus.common.broker_config import parse_rebalance_protocols
from kbus.protocol.codec import ms
from kbus.protocol.kio_types import NO_TIME, group, i8_, i32_, i32s, ms32, topic
from kbus.server.apis.groups import NOT_REQUESTED_OPERATIONS, client_host, group_operations
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.assignors import Assignment
from kbus.server.coordinator.consumer_group import TopicImage
from kbus.server.coordinator.consumer_membership import ConsumerGroupSummary, HeartbeatRequest

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


def topic_partitions(image: TopicImage, assignment: Assignment) -> list[tuple[uuid.UUID, str, tuple[i32, ...]]]:
    """An assignment as the responses list it, (topic id, name, partitions) by name; a topic with no id (deleted) or
    no partitions left out. Each API has its own TopicPartitions class to hold them."""
    out = []
    for name in sorted(assignment):
        topic_id = image.ids.get(name)
        if topic_id is None or not assignment[name]:
            continue
        out.append((topic_id, name, i32s(sorted(assignment[name]))))
    return out


def heartbeat_denied(ctx: RequestContext, group_id: str, names: Sequence[str] | None) -> tuple[int, str | None] | None:
    """Kafka's KafkaApis.handle{Consumer,Share}GroupHeartbeatRequest: READ on the group, DESCRIBE on every subscribed
    topic (the error names those without it). The error and its message, or None when the member may go on."""
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, group_id):
        return E.group_authorization_failed, None
    denied = sorted(t for t in names or () if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t))
    if denied:
        return (E.topic_authorization_failed,
                f"The group has subscribed to topics that are not authorized: {', '.join(denied)}.")
    return None


def _heartbeat_error(code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    """A ConsumerGroupHeartbeat response that carries only an error."""
    return ConsumerGroupHeartbeatResponse(throttle_time=NO_TIME, error_code=E(code), error_message=message,
                                          member_id=None, member_epoch=i32_(0), heartbeat_interval=NO_TIME,
                                          assignment=None)


# ConsumerGroupDescribe and ShareGroupDescribe: per group asked for, (group id, error, message, summary or None,
# authorized operations)
Described = tuple[str, int, str | None, S | None, int]


def describe_groups(ctx: RequestContext, req: ConsumerGroupDescribeRequest | ShareGroupDescribeRequest,
                    coordinator: GroupCoordinator | None,
                    describe: Callable[[GroupCoordinator, list[str]], list[tuple[str, int, str | None, S | None]]],
                    ) -> list[Described[S]]:  # fmt: skip
    """ConsumerGroupDescribe and ShareGroupDescribe: a group not authorized (DESCRIBE), or with no coordinator to ask,
    gets that error; one the coordinator has no summary of carries the coordinator's error."""
    include_ops = bool(req.include_authorized_operations)
    allowed: list[str] = [g for g in req.group_ids if ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, g)]
    results = {} if coordinator is None else {r[0]: r for r in describe(coordinator, allowed)}
    described: list[Described[S]] = []
    for group_id in req.group_ids:
        if group_id not in results:
            code = int(E.coordinator_not_available if coordinator is None else E.group_authorization_failed)
            described.append((group_id, code, None, None, NOT_REQUESTED_OPERATIONS))
            continue
        _, code, message, summary = results[group_id]
        if summary is None:
            described.append((group_id, code, message, None, NOT_REQUESTED_OPERATIONS))
            continue
        ops = group_operations(ctx, group_id) if include_ops else NOT_REQUESTED_OPERATIONS
        described.append((group_id, int(E.none), None, summary, ops))
    return described


@api(68, 0, 1, request=ConsumerGroupHeartbeatRequest)
async def consumer_group_heartbeat(
    m: Managers, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    coordinator = m.groups
    if "consumer" not in parse_rebalance_protocols(m.config.group_coordinator_rebalance_protocols):
        return _heartbeat_error(E.unsupported_version, "The consumer group protocol is disabled "
                                                       "(group.coordinator.rebalance.protocols).")
    names = req.subscribed_topic_names
    denied = heartbeat_denied(ctx, req.group_id, names)
    if denied is not None:
        return _heartbeat_error(*denied)
    if coordinator is None:
        return _heartbeat_error(E.coordinator_not_available)
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
    if result.error != E.none:
        return _heartbeat_error(result.error, result.error_message)
    assignment = None
    if result.assignment is not None:
        assignment = cgh.Assignment(topic_partitions=tuple(
            cgh.TopicPartitions(topic_id=topic_id, partitions=partitions)
            for topic_id, _, partitions in topic_partitions(image, result.assignment)))
    return ConsumerGroupHeartbeatResponse(
        throttle_time=NO_TIME,
        error_code=E.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=i32_(result.member_epoch),
        heartbeat_interval=ms32(result.heartbeat_interval_ms),
        assignment=assignment,
    )


@api(69, 0, 1, request=ConsumerGroupDescribeRequest)
async def consumer_group_describe(
    m: Managers, ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> cgd.ConsumerGroupDescribeResponse:
    coordinator = m.groups
    image = coordinator.topic_image if coordinator is not None else TopicImage()

    def assignment(a: Assignment) -> cgd.Assignment:
        return cgd.Assignment(topic_partitions=tuple(
            cgd.TopicPartitions(topic_id=topic_id, topic_name=topic(name), partitions=partitions)
            for topic_id, name, partitions in topic_partitions(image, a)))

    def members(summary: ConsumerGroupSummary) -> tuple[cgd.Member, ...]:
        return tuple(
            cgd.Member(
                member_id=s.member.member_id,
                instance_id=s.member.instance_id,
                rack_id=s.member.rack_id,
                member_epoch=i32_(s.member.member_epoch),
                client_id=s.member.client_id,
                client_host=s.member.client_host,
                subscribed_topic_names=tuple(topic(t) for t in s.member.subscribed_topic_names),
                subscribed_topic_regex=s.member.subscribed_topic_regex or None,
                assignment=assignment(s.member.assigned),
                target_assignment=assignment(s.target),
                member_type=i8_(MEMBER_TYPE_CONSUMER),
            )
            for s in summary.members
        )

    described = describe_groups(ctx, req, coordinator, lambda c, ids: c.describe_consumer_groups(ids))
    return cgd.ConsumerGroupDescribeResponse(throttle_time=NO_TIME, groups=tuple(
        cgd.DescribedGroup(
            error_code=E(code), error_message=message, group_id=group(group_id),
            group_state="" if summary is None else summary.state,
            group_epoch=i32_(0 if summary is None else summary.group_epoch),
            assignment_epoch=i32_(0 if summary is None else summary.assignment_epoch),
            assignor_name="" if summary is None else summary.assignor_name,
            members=() if summary is None else members(summary), authorized_operations=i32_(ops))
        for group_id, code, message, summary, ops in described))
