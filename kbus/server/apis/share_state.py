"""The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), answered by the leader of
the key's partition of `__share_group_state` (`share.coordinator`). CLUSTER_ACTION on the cluster, as Kafka's
KafkaApis requires of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest
from kio.schema.delete_share_group_state.v0.request import PartitionData as DeletePartition
from kio.schema.errors import ErrorCode as E
from kio.schema.initialize_share_group_state.v0.request import InitializeShareGroupStateRequest
from kio.schema.initialize_share_group_state.v0.request import PartitionData as InitializePartition
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest
from kio.schema.read_share_group_state_summary.v0.request import PartitionData as ReadSummaryPartition
from kio.schema.read_share_group_state_summary.v0.request import ReadShareGroupStateSummaryRequest
from kio.schema.write_share_group_state.v0.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v0.request import WriteShareGroupStateRequest

from kbus.common.acl import Operation, ResourceType
from kbus.server.apis.registry import RequestContext, api
from kbus.server.share.coordinator import ShareCoordinatorError
from kbus.server.share.state import ShareState, ShareStateKey

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers


class _Partition(Protocol):
    """What the five requests' partition entries share (kio has a PartitionData class per API)."""

    @property
    def partition(self) -> int: ...


P = TypeVar("P", bound=_Partition, covariant=True)


class _Topic(Protocol[P]):
    @property
    def topic_id(self) -> uuid.UUID | None: ...  # kio reads the zero id as None

    @property
    def partitions(self) -> tuple[P, ...]: ...


class _Request(Protocol[P]):
    @property
    def group_id(self) -> str: ...

    @property
    def topics(self) -> tuple[_Topic[P], ...]: ...


Q = TypeVar("Q", bound=_Partition)


def _per_partition(ctx: RequestContext, topics: Iterable[_Topic[Q]], result_topic: str, result_partition: str,
                   answer: Callable[[uuid.UUID, Q], dict[str, Any]], empty: dict[str, Any]) -> list[Any]:
    out = []
    for t in topics:
        parts = [ctx.nested(result_partition, partition=p.partition, **(
            answer(t.topic_id, p) if t.topic_id is not None else {**_error(E.invalid_request, "TopicId is null."),
                                                                   **empty}))
                 for p in t.partitions]
        out.append(ctx.nested(result_topic, topic_id=t.topic_id, partitions=parts))
    return out


def _error(code: int, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


@api(84, 0, 0, request=ReadShareGroupStateRequest)
async def read_share_group_state(m: Managers, ctx: RequestContext, req: ReadShareGroupStateRequest) -> Any:
    coordinator = m.share_coordinator
    denied = not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)

    empty: dict[str, Any] = {"state_epoch": 0, "start_offset": -1, "state_batches": []}

    def answer(topic_id: uuid.UUID, p: ReadPartition) -> dict[str, Any]:
        if denied:
            return {**_error(E.cluster_authorization_failed), **empty}
        if coordinator is None:
            return {**_error(E.coordinator_not_available), **empty}
        try:
            state = coordinator.read(ShareStateKey(req.group_id, topic_id, p.partition), p.leader_epoch)
        except ShareCoordinatorError as exc:
            return {**_error(exc.code), **empty}
        if state is None:
            return {**_error(E.none), **empty}
        return {**_error(E.none), "state_epoch": state.state_epoch, "start_offset": state.start_offset,
                "state_batches": [ctx.nested("StateBatch", first_offset=f, last_offset=la, delivery_state=s,
                                             delivery_count=c) for f, la, s, c in state.batches]}

    return ctx.build(results=_per_partition(ctx, req.topics, "ReadStateResult", "PartitionResult", answer, empty))


@api(87, 0, 0, request=ReadShareGroupStateSummaryRequest)
async def read_share_group_state_summary(
    m: Managers, ctx: RequestContext, req: ReadShareGroupStateSummaryRequest
) -> Any:
    coordinator = m.share_coordinator
    denied = not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)

    empty: dict[str, Any] = {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1}

    def answer(topic_id: uuid.UUID, p: ReadSummaryPartition) -> dict[str, Any]:
        if denied:
            return {**_error(E.cluster_authorization_failed), **empty}
        if coordinator is None:
            return {**_error(E.coordinator_not_available), **empty}
        try:
            state = coordinator.read(ShareStateKey(req.group_id, topic_id, p.partition))
        except ShareCoordinatorError as exc:
            return {**_error(exc.code), **empty}
        if state is None:
            return {**_error(E.none), **empty}
        return {**_error(E.none), "state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset}

    return ctx.build(results=_per_partition(ctx, req.topics, "ReadStateSummaryResult", "PartitionResult", answer,
                                            empty))


async def _each(m: Managers, ctx: RequestContext, req: _Request[Q], result_topic: str,
                apply: Callable[[ShareStateKey, Q], Awaitable[None]]) -> Any:
    coordinator = m.share_coordinator
    denied = not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if denied:
                code, message = int(E.cluster_authorization_failed), None
            elif coordinator is None:
                code, message = int(E.coordinator_not_available), None
            elif t.topic_id is None:
                code, message = int(E.invalid_request), "TopicId is null."
            else:
                try:
                    await apply(ShareStateKey(req.group_id, t.topic_id, p.partition), p)
                    code, message = int(E.none), None
                except ShareCoordinatorError as exc:
                    code, message = exc.code, str(exc)
            parts.append(ctx.nested("PartitionResult", partition=p.partition, error_code=code,
                                    error_message=message))
        results.append(ctx.nested(result_topic, topic_id=t.topic_id, partitions=parts))
    return ctx.build(results=results)


@api(85, 0, 0, request=WriteShareGroupStateRequest)
async def write_share_group_state(m: Managers, ctx: RequestContext, req: WriteShareGroupStateRequest) -> Any:
    async def apply(key: ShareStateKey, p: WritePartition) -> None:
        assert m.share_coordinator is not None
        await m.share_coordinator.write(key, ShareState(p.state_epoch, p.leader_epoch, p.start_offset, tuple(
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches)))

    return await _each(m, ctx, req, "WriteStateResult", apply)


@api(83, 0, 0, request=InitializeShareGroupStateRequest)
async def initialize_share_group_state(m: Managers, ctx: RequestContext, req: InitializeShareGroupStateRequest) -> Any:
    async def apply(key: ShareStateKey, p: InitializePartition) -> None:
        assert m.share_coordinator is not None
        await m.share_coordinator.write(key, ShareState(p.state_epoch, -1, p.start_offset))

    return await _each(m, ctx, req, "InitializeStateResult", apply)


@api(86, 0, 0, request=DeleteShareGroupStateRequest)
async def delete_share_group_state(m: Managers, ctx: RequestContext, req: DeleteShareGroupStateRequest) -> Any:
    async def apply(key: ShareStateKey, p: DeletePartition) -> None:
        assert m.share_coordinator is not None
        await m.share_coordinator.delete(key)

    return await _each(m, ctx, req, "DeleteStateResult", apply)
