"""The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), answered by the leader of
the key's partition of `__share_group_state` (`share.coordinator`). CLUSTER_ACTION on the cluster, as Kafka's
KafkaApis requires of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol, TypeVar

from kio.schema.delete_share_group_state.v0 import response as delete
from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest
from kio.schema.delete_share_group_state.v0.request import PartitionData as DeletePartition
from kio.schema.errors import ErrorCode as E
from kio.schema.initialize_share_group_state.v0 import response as initialize
from kio.schema.initialize_share_group_state.v0.request import InitializeShareGroupStateRequest
from kio.schema.initialize_share_group_state.v0.request import PartitionData as InitializePartition
from kio.schema.read_share_group_state.v0 import response as read
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest
from kio.schema.read_share_group_state_summary.v0 import response as summary
from kio.schema.read_share_group_state_summary.v0.request import PartitionData as ReadSummaryPartition
from kio.schema.read_share_group_state_summary.v0.request import ReadShareGroupStateSummaryRequest
from kio.schema.write_share_group_state.v0 import response as write
from kio.schema.write_share_group_state.v0.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v0.request import WriteShareGroupStateRequest

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import i8_, i16_, i32_, i64_
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
R = TypeVar("R")  # a response's per-partition result (kio has a PartitionResult class per API)
T = TypeVar("T")  # its per-topic result


def _per_partition(topics: Iterable[_Topic[Q]], answer: Callable[[uuid.UUID, Q], R],
                   failed: Callable[[Q, int, str | None], R], topic: Callable[[uuid.UUID | None, tuple[R, ...]], T],
                   ) -> tuple[T, ...]:  # fmt: skip
    return tuple(
        topic(t.topic_id, tuple(answer(t.topic_id, p) if t.topic_id is not None
                                else failed(p, E.invalid_request, "TopicId is null.") for p in t.partitions))
        for t in topics
    )  # fmt: skip


@api(84, 0, 0, request=ReadShareGroupStateRequest)
async def read_share_group_state(
    m: Managers, ctx: RequestContext, req: ReadShareGroupStateRequest
) -> read.ReadShareGroupStateResponse:
    coordinator = m.share_coordinator
    denied = not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)

    def failed(p: ReadPartition, code: int, message: str | None = None) -> read.PartitionResult:
        return read.PartitionResult(partition=p.partition, error_code=E(code), error_message=message,
                                    state_epoch=i32_(0), start_offset=i64_(-1), state_batches=())

    def answer(topic_id: uuid.UUID, p: ReadPartition) -> read.PartitionResult:
        if denied:
            return failed(p, E.cluster_authorization_failed)
        if coordinator is None:
            return failed(p, E.coordinator_not_available)
        try:
            state = coordinator.read(ShareStateKey(req.group_id, topic_id, p.partition), p.leader_epoch)
        except ShareCoordinatorError as exc:
            return failed(p, exc.code)
        if state is None:
            return failed(p, E.none)
        return read.PartitionResult(
            partition=p.partition, error_code=E.none, error_message=None, state_epoch=i32_(state.state_epoch),
            start_offset=i64_(state.start_offset),
            state_batches=tuple(read.StateBatch(first_offset=i64_(f), last_offset=i64_(la), delivery_state=i8_(s),
                                                delivery_count=i16_(c)) for f, la, s, c in state.batches))

    return read.ReadShareGroupStateResponse(results=_per_partition(
        req.topics, answer, failed, lambda topic_id, parts: read.ReadStateResult(topic_id=topic_id, partitions=parts)))


@api(87, 0, 0, request=ReadShareGroupStateSummaryRequest)
async def read_share_group_state_summary(
    m: Managers, ctx: RequestContext, req: ReadShareGroupStateSummaryRequest
) -> summary.ReadShareGroupStateSummaryResponse:
    coordinator = m.share_coordinator
    denied = not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)

    def failed(p: ReadSummaryPartition, code: int, message: str | None = None) -> summary.PartitionResult:
        return summary.PartitionResult(partition=p.partition, error_code=E(code), error_message=message,
                                       state_epoch=i32_(0), leader_epoch=i32_(-1), start_offset=i64_(-1))

    def answer(topic_id: uuid.UUID, p: ReadSummaryPartition) -> summary.PartitionResult:
        if denied:
            return failed(p, E.cluster_authorization_failed)
        if coordinator is None:
            return failed(p, E.coordinator_not_available)
        try:
            state = coordinator.read(ShareStateKey(req.group_id, topic_id, p.partition))
        except ShareCoordinatorError as exc:
            return failed(p, exc.code)
        if state is None:
            return failed(p, E.none)
        return summary.PartitionResult(
            partition=p.partition, error_code=E.none, error_message=None, state_epoch=i32_(state.state_epoch),
            leader_epoch=i32_(state.leader_epoch), start_offset=i64_(state.start_offset))

    return summary.ReadShareGroupStateSummaryResponse(results=_per_partition(
        req.topics, answer, failed,
        lambda topic_id, parts: summary.ReadStateSummaryResult(topic_id=topic_id, partitions=parts)))


async def _each(m: Managers, ctx: RequestContext, req: _Request[Q],
                apply: Callable[[ShareStateKey, Q], Awaitable[None]],
                ) -> list[tuple[uuid.UUID | None, list[tuple[Q, int, str | None]]]]:  # fmt: skip
    """Per topic of the request, (its id, per partition (the partition, its error code, its error message))."""
    coordinator = m.share_coordinator
    denied = not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    results: list[tuple[uuid.UUID | None, list[tuple[Q, int, str | None]]]] = []
    for t in req.topics:
        parts: list[tuple[Q, int, str | None]] = []
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
            parts.append((p, code, message))
        results.append((t.topic_id, parts))
    return results


@api(85, 0, 0, request=WriteShareGroupStateRequest)
async def write_share_group_state(
    m: Managers, ctx: RequestContext, req: WriteShareGroupStateRequest
) -> write.WriteShareGroupStateResponse:
    async def apply(key: ShareStateKey, p: WritePartition) -> None:
        assert m.share_coordinator is not None
        await m.share_coordinator.write(key, ShareState(p.state_epoch, p.leader_epoch, p.start_offset, tuple(
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches)))

    return write.WriteShareGroupStateResponse(results=tuple(
        write.WriteStateResult(topic_id=topic_id, partitions=tuple(
            write.PartitionResult(partition=p.partition, error_code=E(code), error_message=message)
            for p, code, message in parts))
        for topic_id, parts in await _each(m, ctx, req, apply)))  # fmt: skip


@api(83, 0, 0, request=InitializeShareGroupStateRequest)
async def initialize_share_group_state(
    m: Managers, ctx: RequestContext, req: InitializeShareGroupStateRequest
) -> initialize.InitializeShareGroupStateResponse:
    async def apply(key: ShareStateKey, p: InitializePartition) -> None:
        assert m.share_coordinator is not None
        await m.share_coordinator.write(key, ShareState(p.state_epoch, -1, p.start_offset))

    return initialize.InitializeShareGroupStateResponse(results=tuple(
        initialize.InitializeStateResult(topic_id=topic_id, partitions=tuple(
            initialize.PartitionResult(partition=p.partition, error_code=E(code), error_message=message)
            for p, code, message in parts))
        for topic_id, parts in await _each(m, ctx, req, apply)))  # fmt: skip


@api(86, 0, 0, request=DeleteShareGroupStateRequest)
async def delete_share_group_state(
    m: Managers, ctx: RequestContext, req: DeleteShareGroupStateRequest
) -> delete.DeleteShareGroupStateResponse:
    async def apply(key: ShareStateKey, p: DeletePartition) -> None:
        assert m.share_coordinator is not None
        await m.share_coordinator.delete(key)

    return delete.DeleteShareGroupStateResponse(results=tuple(
        delete.DeleteStateResult(topic_id=topic_id, partitions=tuple(
            delete.PartitionResult(partition=p.partition, error_code=E(code), error_message=message)
            for p, code, message in parts))
        for topic_id, parts in await _each(m, ctx, req, apply)))  # fmt: skip
