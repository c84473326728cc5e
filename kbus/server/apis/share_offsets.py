"""A share group's start offsets (KIP-932), answered by the group's coordinator: DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92). The offsets are the share-partitions' start offsets
(SPSO) kept by the share coordinator, read and written through the persister.

Alter and Delete need an empty group (NON_EMPTY_GROUP otherwise, as Kafka). Both bump the share-partition's state
epoch, so its leader's next write is fenced and it reads the state again: Alter sets the SPSO with nothing in
flight, Delete leaves the start offset unset (-1) so `share.auto.offset.reset` applies again on the next fetch.

ACLs as Kafka's KafkaApis: Describe needs DESCRIBE on the group and the topics, Alter READ on both, Delete DELETE
on the group and READ on the topics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.alter_share_group_offsets.v0 import response as alter
from kio.schema.alter_share_group_offsets.v0.request import AlterShareGroupOffsetsRequest
from kio.schema.delete_share_group_offsets.v0 import response as delete
from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequest
from kio.schema.describe_share_group_offsets.v1 import response as describe
from kio.schema.describe_share_group_offsets.v1.request import DescribeShareGroupOffsetsRequest
from kio.schema.errors import ErrorCode as E

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import NO_TIME, i32_, i64_
from kbus.protocol.kio_types import topic as topic_name
from kbus.server.apis.registry import RequestContext, api
from kbus.server.share.manager import PersisterError
from kbus.server.share.state import ShareState, ShareStateKey

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.coordinator.share_group import ShareGroup


def _group(m: Managers, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
    coordinator = m.groups
    if coordinator is None:
        return int(E.coordinator_not_available), None, None
    error = coordinator.validate_group_status(group_id, "describe")
    if error is not None:
        return int(error), None, None
    group = coordinator.share_groups.get(group_id)
    if group is None or group.dead:
        return int(E.group_id_not_found), f"Group {group_id} is not a share group.", None
    return int(E.none), None, group


async def _reset(m: Managers, key: ShareStateKey, start_offset: int) -> int:
    persister = m.share.persister
    if persister is None:
        return int(E.coordinator_not_available)
    try:
        current = await persister.read(key, -1)
        epoch = 0 if current is None else current.state_epoch + 1
        leader_epoch = -1 if current is None else current.leader_epoch
        await persister.write(key, ShareState(epoch, leader_epoch, start_offset))
    except PersisterError as exc:
        return exc.code
    return int(E.none)


async def reset_partitions(m: Managers, group: ShareGroup, partitions: dict[str, frozenset[int]]) -> int:
    """DeleteShareGroupOffsets' (and DeleteGroups') reset of the share-partitions' state: the first error, if any."""
    ids = m.groups.topic_image.ids if m.groups is not None else {}
    code = int(E.none)
    for topic, ps in sorted(partitions.items()):
        topic_id = ids.get(topic)
        if topic_id is None:
            continue
        for p in sorted(ps):
            code = code or await _reset(m, ShareStateKey(group.group_id, topic_id, p), -1)
    return code


@api(90, 0, 1, request=DescribeShareGroupOffsetsRequest)
async def describe_share_group_offsets(
    m: Managers, ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
) -> describe.DescribeShareGroupOffsetsResponse:
    ids = m.groups.topic_image.ids if m.groups is not None else {}
    groups_out: list[describe.DescribeShareGroupOffsetsResponseGroup] = []
    for g in req.groups:
        if not ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, g.group_id):
            groups_out.append(describe.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=(), error_code=E.group_authorization_failed, error_message=None))
            continue
        error, message, group = _group(m, g.group_id)
        if group is None:
            groups_out.append(describe.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=(), error_code=E(error), error_message=message))
            continue
        wanted: dict[str, list[int]] = (
            {t: sorted(ps) for t, ps in sorted(group.initialized.items())} if g.topics is None
            else {t.topic_name: list(t.partitions) for t in g.topics})
        topics: list[describe.DescribeShareGroupOffsetsResponseTopic] = []
        for name, partitions in wanted.items():
            topic_id = ids.get(name)
            parts: list[describe.DescribeShareGroupOffsetsResponsePartition] = []
            for p in partitions:
                start, leader_epoch, lag, code = -1, -1, -1, int(E.none)
                if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, name):
                    code = int(E.topic_authorization_failed)
                elif topic_id is None:
                    code = int(E.unknown_topic_or_partition)
                elif m.share.persister is not None:
                    try:
                        state = await m.share.persister.read(ShareStateKey(g.group_id, topic_id, p), -1)
                    except PersisterError as exc:
                        code = exc.code
                    else:
                        if state is not None and state.start_offset >= 0:
                            start, leader_epoch = state.start_offset, state.leader_epoch
                            lag = _lag(m, name, p, state)
                parts.append(describe.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=i32_(p), start_offset=i64_(start), leader_epoch=i32_(leader_epoch), lag=i64_(lag),
                    error_code=E(code), error_message=None))
            topics.append(describe.DescribeShareGroupOffsetsResponseTopic(
                topic_name=topic_name(name), topic_id=topic_id, partitions=tuple(parts)))
        groups_out.append(describe.DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, topics=tuple(topics), error_code=E.none, error_message=None))
    return describe.DescribeShareGroupOffsetsResponse(throttle_time=NO_TIME, groups=tuple(groups_out))


def _lag(m: Managers, topic: str, partition: int, state: ShareState) -> int:
    """Records from the SPSO to the high watermark not yet done (acknowledged or archived); -1 when the partition's
    high watermark is not known here (another broker leads it)."""
    part, _ = m.replicas.leader_partition(topic, partition)
    if part is None:
        return -1
    done = sum(last - first + 1 for first, last, st, _ in state.batches if st in (2, 4))
    return max(part.high_watermark - state.start_offset - done, 0)


@api(91, 0, 0, request=AlterShareGroupOffsetsRequest)
async def alter_share_group_offsets(
    m: Managers, ctx: RequestContext, req: AlterShareGroupOffsetsRequest
) -> alter.AlterShareGroupOffsetsResponse:
    def top(code: int, message: str | None = None) -> alter.AlterShareGroupOffsetsResponse:
        return alter.AlterShareGroupOffsetsResponse(throttle_time=NO_TIME, error_code=E(code), error_message=message,
                                                    responses=())

    if not ctx.authorized(Operation.READ, ResourceType.GROUP, req.group_id):
        return top(E.group_authorization_failed)
    if m.groups is None:
        return top(E.coordinator_not_available)
    error, message, group = await m.groups.ensure_share_group(req.group_id)
    if group is None:
        return top(error, message)
    if group.members:
        return top(E.non_empty_group, "The group is not empty.")
    ids = m.groups.topic_image.ids
    altered: dict[str, frozenset[int]] = {}
    responses: list[alter.AlterShareGroupOffsetsResponseTopic] = []
    for t in req.topics:
        topic_id = ids.get(t.topic_name)
        parts: list[alter.AlterShareGroupOffsetsResponsePartition] = []
        for p in t.partitions:
            if not ctx.authorized(Operation.READ, ResourceType.TOPIC, t.topic_name):
                code = int(E.topic_authorization_failed)
            elif topic_id is None:
                code = int(E.unknown_topic_or_partition)
            else:
                code = await _reset(m, ShareStateKey(req.group_id, topic_id, p.partition_index), p.start_offset)
                if code == E.none:
                    altered[t.topic_name] = altered.get(t.topic_name, frozenset()) | {int(p.partition_index)}
            parts.append(alter.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                                       error_code=E(code), error_message=None))
        responses.append(alter.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=topic_id,
                                                                   partitions=tuple(parts)))
    if altered:
        await m.groups.mark_initialized(group, altered)
    return alter.AlterShareGroupOffsetsResponse(throttle_time=NO_TIME, error_code=E.none, error_message=None,
                                                responses=tuple(responses))


@api(92, 0, 0, request=DeleteShareGroupOffsetsRequest)
async def delete_share_group_offsets(
    m: Managers, ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
) -> delete.DeleteShareGroupOffsetsResponse:
    def top(code: int, message: str | None = None) -> delete.DeleteShareGroupOffsetsResponse:
        return delete.DeleteShareGroupOffsetsResponse(throttle_time=NO_TIME, error_code=E(code), error_message=message,
                                                      responses=())

    if not ctx.authorized(Operation.DELETE, ResourceType.GROUP, req.group_id):
        return top(E.group_authorization_failed)
    error, message, group = _group(m, req.group_id)
    if group is None:
        return top(error, message)
    if group.members:
        return top(E.non_empty_group, "The group is not empty.")
    ids = m.groups.topic_image.ids if m.groups is not None else {}
    responses: list[delete.DeleteShareGroupOffsetsResponseTopic] = []
    for t in req.topics:
        topic_id = ids.get(t.topic_name)
        if not ctx.authorized(Operation.READ, ResourceType.TOPIC, t.topic_name):
            code = int(E.topic_authorization_failed)
        elif topic_id is None:
            code = int(E.unknown_topic_or_partition)
        else:
            code = await reset_partitions(m, group, {t.topic_name: group.initialized.get(t.topic_name, frozenset())})
        responses.append(delete.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=topic_id,
                                                                     error_code=E(code), error_message=None))
    return delete.DeleteShareGroupOffsetsResponse(throttle_time=NO_TIME, error_code=E.none, error_message=None,
                                                  responses=tuple(responses))
