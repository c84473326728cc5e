"""ElectLeaders (43): preferred or unclean leader election on request (kafka-leader-election.sh). Answered by the
controller, as in Kafka's ZooKeeper mode; any other broker says NOT_CONTROLLER and the client goes there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.response import ElectLeadersResponse, PartitionResult, ReplicaElectionResult
from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.common.errors import KafkaError
from kbus.protocol.kio_types import NO_TIME, i32_, topic
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


def _results(outcome: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> tuple[ReplicaElectionResult, ...]:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (name, partition), (code, message) in sorted(outcome.items()):
        by_topic.setdefault(name, []).append(
            PartitionResult(partition_id=i32_(partition), error_code=code, error_message=message)
        )
    return tuple(ReplicaElectionResult(topic=topic(t), partition_result=tuple(r)) for t, r in by_topic.items())


def _response(ctx: RequestContext, code: ErrorCode, results: tuple[ReplicaElectionResult, ...] = ()
              ) -> ElectLeadersResponse:  # fmt: skip
    """v0 has no top-level error: Kafka's ElectLeadersResponse sets it from v1 only (the partitions carry it)."""
    return ElectLeadersResponse(throttle_time=NO_TIME, error_code=code if ctx.api_version >= 1 else ErrorCode.none,
                                replica_election_results=results)


@api(43, 0, 2, request=ElectLeadersRequest)
async def elect_leaders(m: Managers, ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    # v0 has no election type: it is a preferred election
    kind = ELECTION_TYPES.get(int(request.election_type) if ctx.api_version >= 1 else 0)
    partitions: set[tuple[str, int]] | None = None
    if request.topic_partitions is not None:
        partitions = {(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions}
    if kind is None:
        return _response(ctx, ErrorCode.invalid_request)
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        # Kafka: every partition asked for gets CLUSTER_AUTHORIZATION_FAILED (v1+ also at the top)
        denied: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {
            tp: (ErrorCode.cluster_authorization_failed, None) for tp in partitions or set()
        }
        return _response(ctx, ErrorCode.cluster_authorization_failed, _results(denied))
    if not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER):
        return _response(ctx, ErrorCode.cluster_authorization_failed)
    try:
        results = await m.admin.elect_leaders(kind, partitions)
    except KafkaError as exc:
        code = error_code_for(exc)
        if ctx.api_version >= 1:
            return _response(ctx, code)
        # v0 has no top-level error: every partition asked for carries it
        failed: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {
            tp: (code, error_message(exc)) for tp in partitions or set()
        }
        return _response(ctx, ErrorCode.none, _results(failed))
    outcome = {
        tp: (ErrorCode.none, None) if name is None else (ErrorCode[name.lower()], _MESSAGES.get(name))
        for tp, name in results.items()
    }
    return _response(ctx, ErrorCode.none, _results(outcome))
