"""ElectLeaders (43): preferred or unclean leader election on request (kafka-leader-election.sh). Answered by the
controller, as in Kafka's ZooKeeper mode; any other broker says NOT_CONTROLLER and the client goes there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.common.errors import KafkaError
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

ELECTION_TYPES = {0: "preferred", 1: "unclean"}
# Kafka's messages for the per-partition outcomes (Errors.<NAME>.message())
_MESSAGES = {
    "ELECTION_NOT_NEEDED": "Leader election not needed for topic partition.",
    "PREFERRED_LEADER_NOT_AVAILABLE": "The preferred leader was not available.",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": "Eligible topic partition leaders are not available.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "LEADER_NOT_AVAILABLE": "There is no leader for this topic-partition as we are in the middle of a leadership "
    "election.",
    "REQUEST_TIMED_OUT": "The request timed out.",
}


def _results(ctx: RequestContext, outcome: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (code, message) in sorted(outcome.items()):
        by_topic.setdefault(topic, []).append(
            ctx.nested("PartitionResult", partition_id=partition, error_code=code, error_message=message)
        )
    return [ctx.nested("ReplicaElectionResult", topic=t, partition_result=r) for t, r in by_topic.items()]


@api(43, 0, 2, request=ElectLeadersRequest)
async def elect_leaders(m: Managers, ctx: RequestContext, request: ElectLeadersRequest) -> Any:
    # v0 has no election type: it is a preferred election
    kind = ELECTION_TYPES.get(int(request.election_type) if ctx.api_version >= 1 else 0)
    partitions: set[tuple[str, int]] | None = None
    if request.topic_partitions is not None:
        partitions = {(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions}
    if kind is None:
        return ctx.build(throttle_time=0, error_code=ErrorCode.invalid_request, replica_election_results=[])
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        # Kafka: every partition asked for gets CLUSTER_AUTHORIZATION_FAILED (v1+ also at the top)
        denied: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {
            tp: (ErrorCode.cluster_authorization_failed, None) for tp in partitions or set()
        }
        return ctx.build(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                         replica_election_results=_results(ctx, denied))  # fmt: skip
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return ctx.build(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                         replica_election_results=[])
    try:
        results = await m.admin.elect_leaders(kind, partitions)
    except KafkaError as exc:
        code = error_code_for(exc)
        if ctx.api_version >= 1:
            return ctx.build(throttle_time=0, error_code=code, replica_election_results=[])
        # v0 has no top-level error: every partition asked for carries it
        failed: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {
            tp: (code, error_message(exc)) for tp in partitions or set()
        }
        return ctx.build(throttle_time=0, replica_election_results=_results(ctx, failed))
    outcome = {
        tp: (ErrorCode.none, None) if name is None else (ErrorCode[name.lower()], _MESSAGES.get(name))
        for tp, name in results.items()
    }
    return ctx.build(throttle_time=0, error_code=ErrorCode.none, replica_election_results=_results(ctx, outcome))
