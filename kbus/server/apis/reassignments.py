"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), answered by the controller (other brokers
say NOT_CONTROLLER and the client goes there); kafka-reassign-partitions.sh uses both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.alter_partition_reassignments.v0.request import AlterPartitionReassignmentsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from kbus.common.acl import Operation, ResourceType
from kbus.common.errors import KafkaError
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

_MESSAGES = {
    "NO_REASSIGNMENT_IN_PROGRESS": "No partition reassignment is in progress.",
    "INVALID_REPLICA_ASSIGNMENT": "The replica assignment is invalid.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "REQUEST_TIMED_OUT": "The request timed out.",
}


@api(45, 0, 0, request=AlterPartitionReassignmentsRequest)
async def alter_partition_reassignments(
    m: Managers, ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> Any:
    requests: dict[tuple[str, int], list[int] | None] = {
        (t.name, int(p.partition_index)): None if p.replicas is None else [int(b) for b in p.replicas]
        for t in request.topics
        for p in t.partitions
    }
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return ctx.build(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, error_message=None,
                         responses=[])  # fmt: skip
    try:
        results = await m.admin.alter_reassignments(requests)
    except KafkaError as exc:
        return ctx.build(throttle_time=0, error_code=error_code_for(exc), error_message=error_message(exc),
                         responses=[])  # fmt: skip
    by_topic: dict[str, list[Any]] = {}
    for (name, p), error in sorted(results.items()):
        code = ErrorCode.none if error is None else ErrorCode[error.lower()]
        by_topic.setdefault(name, []).append(
            ctx.nested("ReassignablePartitionResponse", partition_index=p, error_code=code,
                       error_message=None if error is None else _MESSAGES.get(error))
        )  # fmt: skip
    responses = [ctx.nested("ReassignableTopicResponse", name=n, partitions=ps) for n, ps in by_topic.items()]
    return ctx.build(throttle_time=0, error_code=ErrorCode.none, error_message=None, responses=responses)


@api(46, 0, 0, request=ListPartitionReassignmentsRequest)
async def list_partition_reassignments(
    m: Managers, ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> Any:
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.name, int(p)) for t in request.topics for p in t.partition_indexes}
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return ctx.build(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, error_message=None,
                         topics=[])  # fmt: skip
    try:
        ongoing = await m.admin.list_reassignments(wanted)
    except KafkaError as exc:
        return ctx.build(throttle_time=0, error_code=error_code_for(exc), error_message=error_message(exc), topics=[])
    by_topic: dict[str, list[Any]] = {}
    for (name, p), pa in sorted(ongoing.items()):
        by_topic.setdefault(name, []).append(
            ctx.nested("OngoingPartitionReassignment", partition_index=p, replicas=pa.replicas,
                       adding_replicas=pa.adding, removing_replicas=pa.removing)
        )  # fmt: skip
    topics = [ctx.nested("OngoingTopicReassignment", name=n, partitions=ps) for n, ps in by_topic.items()]
    return ctx.build(throttle_time=0, error_code=ErrorCode.none, error_message=None, topics=topics)
