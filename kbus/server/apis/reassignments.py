"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), answered by the controller (other brokers
say NOT_CONTROLLER and the client goes there); kafka-reassign-partitions.sh uses both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.alter_partition_reassignments.v0 import response as apr
from kio.schema.alter_partition_reassignments.v0.request import AlterPartitionReassignmentsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0 import response as lpr
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from kbus.common.acl import Operation, ResourceType
from kbus.common.errors import KafkaError
from kbus.protocol.kio_types import NO_TIME, brokers, i32_, topic
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
) -> apr.AlterPartitionReassignmentsResponse:
    requests: dict[tuple[str, int], list[int] | None] = {
        (t.name, int(p.partition_index)): None if p.replicas is None else [int(b) for b in p.replicas]
        for t in request.topics
        for p in t.partitions
    }
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return apr.AlterPartitionReassignmentsResponse(
            throttle_time=NO_TIME, error_code=ErrorCode.cluster_authorization_failed, error_message=None, responses=())
    try:
        results = await m.admin.alter_reassignments(requests)
    except KafkaError as exc:
        return apr.AlterPartitionReassignmentsResponse(
            throttle_time=NO_TIME, error_code=error_code_for(exc), error_message=error_message(exc), responses=())
    by_topic: dict[str, list[apr.ReassignablePartitionResponse]] = {}
    for (name, p), error in sorted(results.items()):
        code = ErrorCode.none if error is None else ErrorCode[error.lower()]
        by_topic.setdefault(name, []).append(
            apr.ReassignablePartitionResponse(partition_index=i32_(p), error_code=code,
                                              error_message=None if error is None else _MESSAGES.get(error))
        )  # fmt: skip
    responses = tuple(apr.ReassignableTopicResponse(name=topic(n), partitions=tuple(ps)) for n, ps in by_topic.items())
    return apr.AlterPartitionReassignmentsResponse(throttle_time=NO_TIME, error_code=ErrorCode.none, error_message=None,
                                                   responses=responses)


@api(46, 0, 0, request=ListPartitionReassignmentsRequest)
async def list_partition_reassignments(
    m: Managers, ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> lpr.ListPartitionReassignmentsResponse:
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.name, int(p)) for t in request.topics for p in t.partition_indexes}
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return lpr.ListPartitionReassignmentsResponse(
            throttle_time=NO_TIME, error_code=ErrorCode.cluster_authorization_failed, error_message=None, topics=())
    try:
        ongoing = await m.admin.list_reassignments(wanted)
    except KafkaError as exc:
        return lpr.ListPartitionReassignmentsResponse(
            throttle_time=NO_TIME, error_code=error_code_for(exc), error_message=error_message(exc), topics=())
    by_topic: dict[str, list[lpr.OngoingPartitionReassignment]] = {}
    for (name, p), pa in sorted(ongoing.items()):
        by_topic.setdefault(name, []).append(
            lpr.OngoingPartitionReassignment(partition_index=i32_(p), replicas=brokers(pa.replicas),
                                             adding_replicas=brokers(pa.adding), removing_replicas=brokers(pa.removing))
        )  # fmt: skip
    topics = tuple(lpr.OngoingTopicReassignment(name=topic(n), partitions=tuple(ps)) for n, ps in by_topic.items())
    return lpr.ListPartitionReassignmentsResponse(throttle_time=NO_TIME, error_code=ErrorCode.none, error_message=None,
                                                  topics=topics)
