"""Consumer-group APIs: FindCoordinator (10), OffsetCommit (8), OffsetFetch (9), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42), OffsetDelete (47).

Request in, response out: the state lives in the group coordinator (kbus.server.coordinator); FindCoordinator
also answers for a transaction coordinator once one is plugged into `Managers.transactions`.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kio.schema.delete_groups.v2 import response as dg
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5 import response as dgr
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v3 import response as fc3
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorRequestV3
from kio.schema.find_coordinator.v4 import response as fc
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.join_group.v9 import response as jg
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v5 import response as lg
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.list_groups.v5 import response as lsg
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_delete.v0 import response as od
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v7 import response as of7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic as OffsetFetchRequestTopicV7
from kio.schema.offset_fetch.v9 import response as of9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetchRequestV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestGroup as OffsetFetchRequestGroupV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestTopics as OffsetFetchRequestTopicsV9
from kio.schema.offset_fetch.v10 import response as of10
from kio.schema.offset_fetch.v10.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.codec import ms
from kbus.protocol.kio_types import NO_TIME, broker, group, i32_, i64_, topic
from kbus.server.apis.endpoints import NO_COORDINATOR, coordinator_endpoint
from kbus.server.apis.offset_commit import NO_TOPIC_ID, topic_names_by_id
from kbus.server.apis.registry import RequestContext, api
from kbus.server.apis.share_offsets import reset_partitions
from kbus.server.apis.transactions import find_transaction_coordinator
from kbus.server.coordinator.consumer_group import validate_offset_fetch
from kbus.server.coordinator.group_admin import EMPTY_SUMMARY
from kbus.server.coordinator.records import OffsetAndMetadata

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.coordinator.coordinator import GroupCoordinator
    from kbus.server.coordinator.state_topic import KeyedCoordinator

log = logging.getLogger("kbus.server.apis.groups")

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE = 0, 1, 2
NOT_REQUESTED_OPERATIONS = -(2**31)


def _coordinator(m: Managers) -> GroupCoordinator | None:
    return m.groups


def _group(ctx: RequestContext, operation: Operation, group_id: str) -> bool:
    return ctx.authorized(operation, ResourceType.GROUP, group_id)


def group_operations(ctx: RequestContext, group_id: str) -> int:
    return ctx.authorized_operations(ResourceType.GROUP, group_id)


def client_host(ctx: RequestContext) -> str:
    # Kafka records InetAddress.toString(), hence the leading slash in `consumer-groups --describe`'s HOST.
    return "/" + ctx.client_host


# ---------------------------------------------------------------- FindCoordinator


async def _find_keyed_coordinator(
    m: Managers, coordinator: KeyedCoordinator, key: str, listener: str
) -> tuple[int, int, str, int]:
    """(error, node_id, host, port) as reached on the client's listener: the leader of the key's partition of the
    coordinator's state topic, which is created on first use, as Kafka does."""
    topic = coordinator.state_topic()
    try:
        await m.admin.ensure_topic(topic.name, topic.num_partitions, topic.replication_factor, topic.configs)
    except Exception as exc:
        log.warning("Could not create %s: %s", topic.name, exc)
        return NO_COORDINATOR
    return coordinator_endpoint(m, topic.name, coordinator.partition_for(key), listener, coordinator.coordinates)


async def _find_coordinator(
    m: Managers, key: str, key_type: int, listener: str, ctx: RequestContext
) -> tuple[int, int, str, int]:
    if key_type == GROUP_KEY_TYPE and not _group(ctx, Operation.DESCRIBE, key):
        return E.group_authorization_failed, -1, "", -1
    if key_type == TRANSACTION_KEY_TYPE and not ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return E.transactional_id_authorization_failed, -1, "", -1
    if key_type == GROUP_KEY_TYPE:
        if m.groups is None:
            return NO_COORDINATOR
        return await _find_keyed_coordinator(m, m.groups, key, listener)
    if key_type == TRANSACTION_KEY_TYPE:
        return await find_transaction_coordinator(m, key, listener)
    if key_type == SHARE_KEY_TYPE:
        # the share coordinator of a share-partition's key "group:topicId:partition": brokers only (KafkaApis)
        if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return E.cluster_authorization_failed, -1, "", -1
        if m.share_coordinator is None:
            return NO_COORDINATOR
        return await _find_keyed_coordinator(m, m.share_coordinator, key, listener)
    return E.invalid_request, -1, "", -1


def _error_message(error: int) -> str | None:
    return None if error == E.none else E(error).name.upper()


@api(10, 0, 4, request=(FindCoordinatorRequestV3, FindCoordinatorRequest))  # v4: a list of keys, not one
async def find_coordinator(
    m: Managers, ctx: RequestContext, req: FindCoordinatorRequestV3 | FindCoordinatorRequest
) -> fc3.FindCoordinatorResponse | fc.FindCoordinatorResponse:
    key_type = req.key_type  # v0 has none: its schema default, GROUP (0)
    if isinstance(req, FindCoordinatorRequest):
        coordinators: list[fc.Coordinator] = []
        for key in req.coordinator_keys:
            error, node_id, host, port = await _find_coordinator(m, key, key_type, ctx.listener.name, ctx)
            coordinators.append(
                fc.Coordinator(
                    key=key,
                    node_id=broker(node_id),
                    host=host,
                    port=i32_(port),
                    error_code=E(error),
                    error_message=_error_message(error),
                )
            )
        return fc.FindCoordinatorResponse(throttle_time=NO_TIME, coordinators=tuple(coordinators))
    # v0-3: v3's class (Kafka removed the top-level coordinator fields at v4)
    error, node_id, host, port = await _find_coordinator(m, req.key, key_type, ctx.listener.name, ctx)
    return fc3.FindCoordinatorResponse(
        throttle_time=NO_TIME, error_code=E(error), error_message=_error_message(error), node_id=broker(node_id),
        host=host, port=i32_(port),
    )


# ---------------------------------------------------------------- JoinGroup / SyncGroup / Heartbeat / LeaveGroup


@api(11, 0, 9, request=JoinGroupRequest)
async def join_group(m: Managers, ctx: RequestContext, req: JoinGroupRequest) -> jg.JoinGroupResponse:
    version = ctx.api_version
    coordinator = _coordinator(m)
    if coordinator is None or not _group(ctx, Operation.READ, req.group_id):
        return jg.JoinGroupResponse(
            throttle_time=NO_TIME,
            error_code=E.coordinator_not_available if coordinator is None else E.group_authorization_failed,
            generation_id=i32_(-1),
            member_id=req.member_id,
            protocol_name=None if version >= 7 else "",
            leader="",
            members=(),
        )
    result = await coordinator.join_group(
        req.group_id,
        req.member_id,
        req.group_instance_id,
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        client_id=ctx.client_id,
        client_host=client_host(ctx),
        rebalance_timeout_ms=ms(req.rebalance_timeout),  # v0 has none: its schema default, -1
        session_timeout_ms=ms(req.session_timeout),
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
    )
    members = tuple(
        jg.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
        for mid, iid, meta in result.members
    )
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return jg.JoinGroupResponse(
        throttle_time=NO_TIME,
        error_code=E(result.error),
        generation_id=i32_(result.generation_id),
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


@api(14, 0, 5, request=SyncGroupRequest)
async def sync_group(m: Managers, ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    coordinator = _coordinator(m)
    if not _group(ctx, Operation.READ, req.group_id):
        return SyncGroupResponse(throttle_time=NO_TIME, error_code=E.group_authorization_failed, assignment=b"")
    if coordinator is None:
        return SyncGroupResponse(throttle_time=NO_TIME, error_code=E.coordinator_not_available, assignment=b"")
    result = await coordinator.sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        group_instance_id=req.group_instance_id,
        protocol_type=req.protocol_type,
        protocol_name=req.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return SyncGroupResponse(
        throttle_time=NO_TIME,
        error_code=E(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


@api(13, 0, 5, request=(LeaveGroupRequestV2, LeaveGroupRequest))  # v3: a list of members, not one member_id
async def leave_group(
    m: Managers, ctx: RequestContext, req: LeaveGroupRequestV2 | LeaveGroupRequest
) -> lg.LeaveGroupResponse:
    coordinator = _coordinator(m)
    identities: list[tuple[str, str | None]]
    if isinstance(req, LeaveGroupRequest):
        identities = [(member.member_id, member.group_instance_id) for member in req.members]
    else:
        identities = [(req.member_id, None)]
    if not _group(ctx, Operation.READ, req.group_id):
        top, errors = int(E.group_authorization_failed), list[int]()
    elif coordinator is None:
        top, errors = int(E.coordinator_not_available), list[int]()
    else:
        top, errors = coordinator.leave_group(req.group_id, identities)
    if ctx.api_version < 3:
        # One member, one error: the member's error becomes the response's error.
        if top == E.none and errors:
            top = errors[0]
        return lg.LeaveGroupResponse(throttle_time=NO_TIME, error_code=E(top), members=())
    members = tuple(
        lg.MemberResponse(member_id=mid, group_instance_id=iid, error_code=E(err))
        for (mid, iid), err in zip(identities, errors, strict=False)
    )
    return lg.LeaveGroupResponse(throttle_time=NO_TIME, error_code=E(top), members=members)


# ---------------------------------------------------------------- OffsetCommit / OffsetFetch / OffsetDelete


# OffsetCommit (8) is compiled: kbus/server/apis/offset_commit.py (imported above, which registers it).


def _topic_ids(m: Managers) -> Mapping[str, uuid.UUID]:
    """The topics v10 can name: not one an old ZooKeeper tool created without an id (shown with the zero UUID
    until the controller gives it one; Kafka never resolves Uuid.ZERO_UUID)."""
    return {name: t.topic_id for name, t in m.cluster.topics().items() if t.topic_id != NO_TOPIC_ID}


def _describable_topics(ctx: RequestContext, topics: set[str]) -> set[str]:
    return {t for t in topics if ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t)}


def _fetch_group(
    coordinator: GroupCoordinator | None, group_id: str, requested: list[tuple[str, int]] | None, ctx: RequestContext
) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None], set[tuple[str, int]]]:
    """(group error, offsets, partitions refused): Kafka's handleOffsetFetchRequestFromCoordinator. Offsets of a
    topic the caller may not Describe are never shown: left out of an all-topics fetch, answered with
    TOPIC_AUTHORIZATION_FAILED and offset -1 when asked for by name (after the partitions that were allowed)."""
    if not _group(ctx, Operation.DESCRIBE, group_id):
        return E.group_authorization_failed, {}, set()
    if coordinator is None:
        return E.coordinator_not_available, {}, set()
    if requested is None:
        error, offsets = coordinator.fetch_offsets(group_id, None)
        allowed = _describable_topics(ctx, {topic for topic, _ in offsets})
        return error, {tp: om for tp, om in offsets.items() if tp[0] in allowed}, set()
    allowed = _describable_topics(ctx, {topic for topic, _ in requested})
    error, offsets = coordinator.fetch_offsets(group_id, [tp for tp in requested if tp[0] in allowed])
    if error != E.none:
        return error, offsets, set()
    denied = {tp for tp in requested if tp[0] not in allowed}
    offsets.update((tp, None) for tp in requested if tp in denied)
    return error, offsets, denied


def _requested(
    topics: tuple[OffsetFetchRequestTopicV7, ...] | tuple[OffsetFetchRequestTopicsV9, ...] | None,
) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(t.name, p) for t in topics for p in t.partition_indexes]


def _requested_by_id(
    topics: tuple[OffsetFetchRequestTopics, ...] | None, names_by_id: Mapping[uuid.UUID, str]
) -> tuple[list[tuple[str, int]] | None, dict[uuid.UUID | None, list[int]]]:
    """OffsetFetch v10: the requested partitions by topic name, and those of topic ids the cluster does not know
    (kio reads the zero uuid as None: never a known topic's)."""
    if topics is None:
        return None, {}
    known: list[tuple[str, int]] = []
    unknown: dict[uuid.UUID | None, list[int]] = defaultdict(list)
    for t in topics:
        name = None if t.topic_id is None else names_by_id.get(t.topic_id)
        if name is None:
            unknown[t.topic_id].extend(t.partition_indexes)
        else:
            known.extend((name, p) for p in t.partition_indexes)
    return known, unknown


# a partition of an OffsetFetch response: (partition, committed offset, committed leader epoch, metadata, error)
_OffsetRow = tuple[int, int, int, str, int]


def _offset_topics(
    offsets: dict[tuple[str, int], OffsetAndMetadata | None], *,
    error: int = E.none, unstable: set[tuple[str, int]] | None = None, denied: set[tuple[str, int]] | None = None,
) -> dict[str, list[_OffsetRow]]:
    """The response's partitions by topic name (each OffsetFetch shape has its own classes to hold them)."""
    by_topic: dict[str, list[_OffsetRow]] = defaultdict(list)
    for (name, partition), om in offsets.items():
        if denied and (name, partition) in denied:
            part_error = int(E.topic_authorization_failed)
        elif unstable and (name, partition) in unstable:
            # KIP-447: a transactional commit is pending for it; the consumer retries until it is decided
            om, part_error = None, int(E.unstable_offset_commit)
        else:
            part_error = error
        by_topic[name].append((partition, -1 if om is None else om.offset, -1 if om is None else om.leader_epoch,
                               "" if om is None else om.metadata, part_error))
    return by_topic


def _partitions_v9(rows: list[_OffsetRow]) -> tuple[of9.OffsetFetchResponsePartitions, ...]:
    return tuple(of9.OffsetFetchResponsePartitions(
        partition_index=i32_(p), committed_offset=i64_(offset), committed_leader_epoch=i32_(epoch), metadata=meta,
        error_code=E(err)) for p, offset, epoch, meta, err in rows)  # fmt: skip


def _partitions_v10(rows: list[_OffsetRow]) -> tuple[of10.OffsetFetchResponsePartitions, ...]:
    return tuple(of10.OffsetFetchResponsePartitions(
        partition_index=i32_(p), committed_offset=i64_(offset), committed_leader_epoch=i32_(epoch), metadata=meta,
        error_code=E(err)) for p, offset, epoch, meta, err in rows)  # fmt: skip


def _unstable(coordinator: GroupCoordinator | None, require_stable: bool, group_id: str,
              offsets: dict[tuple[str, int], OffsetAndMetadata | None]) -> set[tuple[str, int]]:  # fmt: skip
    if coordinator is None or not require_stable:
        return set()
    return coordinator.unstable_offsets(group_id, list(offsets))


def _member_epoch_error(
    coordinator: GroupCoordinator | None, ctx: RequestContext, g: OffsetFetchRequestGroupV9 | OffsetFetchRequestGroup
) -> int | None:
    """OffsetFetch v9+ names the member and its epoch: a consumer-protocol group checks them (Kafka's
    validateOffsetFetch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
    if ctx.api_version < 9 or coordinator is None or not _group(ctx, Operation.DESCRIBE, g.group_id):
        return None
    cgroup = coordinator.consumer_groups.get(g.group_id)
    if cgroup is None or cgroup.dead:
        return None
    return validate_offset_fetch(cgroup, g.member_id, g.member_epoch)


@api(9, 1, 10, request=(OffsetFetchRequestV7, OffsetFetchRequestV9, OffsetFetchRequest))  # v8: groups; v10: ids
async def offset_fetch(
    m: Managers, ctx: RequestContext, req: OffsetFetchRequestV7 | OffsetFetchRequestV9 | OffsetFetchRequest
) -> of7.OffsetFetchResponse | of9.OffsetFetchResponse | of10.OffsetFetchResponse:
    """v10 names topics by id (Kafka 4.1): an unknown id gets UNKNOWN_TOPIC_ID on each requested partition. Each
    shape answers in the last class of its shape (v7: one group; v9: groups, topics by name; v10: by id)."""
    coordinator = _coordinator(m)
    if not isinstance(req, OffsetFetchRequestV7):
        by_id = isinstance(req, OffsetFetchRequest)  # v10 (FIRST_VERSION_WITH_TOPIC_IDS)
        names_by_id = topic_names_by_id(m) if by_id else {}
        ids = _topic_ids(m) if by_id else {}
        groups_v9: list[of9.OffsetFetchResponseGroup] = []
        groups_v10: list[of10.OffsetFetchResponseGroup] = []
        for g in req.groups:
            epoch_error = _member_epoch_error(coordinator, ctx, g)
            unknown: dict[uuid.UUID | None, list[int]] = {}
            if epoch_error is not None:
                error, by_topic = epoch_error, {}
            else:
                if isinstance(g, OffsetFetchRequestGroup):
                    requested, unknown = _requested_by_id(g.topics, names_by_id)
                else:
                    requested = _requested(g.topics)
                error, offsets, denied = _fetch_group(coordinator, g.group_id, requested, ctx)
                # a refused partition stays refused
                unstable = _unstable(coordinator, req.require_stable, g.group_id, offsets)
                by_topic = _offset_topics(offsets, unstable=unstable, denied=denied)
            if not by_id:
                groups_v9.append(of9.OffsetFetchResponseGroup(group_id=g.group_id, error_code=E(error), topics=tuple(
                    of9.OffsetFetchResponseTopics(name=topic(name), partitions=_partitions_v9(rows))
                    for name, rows in by_topic.items())))  # fmt: skip
                continue
            # by id: a topic with none (deleted) left out; the ids the cluster does not know, UNKNOWN_TOPIC_ID
            topics = [of10.OffsetFetchResponseTopics(topic_id=ids[name], partitions=_partitions_v10(rows))
                      for name, rows in by_topic.items() if name in ids]
            if error == E.none:
                topics += [
                    of10.OffsetFetchResponseTopics(topic_id=topic_id, partitions=_partitions_v10(
                        [(p, -1, -1, "", int(E.unknown_topic_id)) for p in partitions]))
                    for topic_id, partitions in unknown.items()
                ]  # fmt: skip
            groups_v10.append(of10.OffsetFetchResponseGroup(group_id=g.group_id, topics=tuple(topics),
                                                            error_code=E(error)))
        if by_id:
            return of10.OffsetFetchResponse(throttle_time=NO_TIME, groups=tuple(groups_v10))
        return of9.OffsetFetchResponse(throttle_time=NO_TIME, groups=tuple(groups_v9))
    requested = _requested(req.topics)
    error, offsets, denied = _fetch_group(coordinator, req.group_id, requested, ctx)
    if error != E.none and ctx.api_version < 2:
        # v1 has no group-level error: report it on every requested partition (Kafka's OffsetFetchResponse sets the
        # top-level one from v2 only)
        rows = _offset_topics(dict.fromkeys(requested or [], None), error=error)
        error = int(E.none)
    else:
        rows = _offset_topics(offsets, unstable=_unstable(coordinator, req.require_stable, req.group_id, offsets),
                              denied=denied)
    return of7.OffsetFetchResponse(throttle_time=NO_TIME, error_code=E(error), topics=tuple(
        of7.OffsetFetchResponseTopic(name=topic(name), partitions=tuple(of7.OffsetFetchResponsePartition(
            partition_index=i32_(p), committed_offset=i64_(offset), committed_leader_epoch=i32_(epoch), metadata=meta,
            error_code=E(err)) for p, offset, epoch, meta, err in parts))
        for name, parts in rows.items()))  # fmt: skip


@api(47, 0, 0, request=OffsetDeleteRequest)
async def offset_delete(m: Managers, ctx: RequestContext, req: OffsetDeleteRequest) -> od.OffsetDeleteResponse:
    coordinator = _coordinator(m)
    partitions: list[tuple[str, int]] = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    if not _group(ctx, Operation.DELETE, req.group_id):
        error, errors = int(E.group_authorization_failed), dict[tuple[str, int], int]()
    elif coordinator is None:
        error, errors = int(E.coordinator_not_available), dict[tuple[str, int], int]()
    else:
        error, errors = await coordinator.delete_offsets(req.group_id, partitions)
    by_topic: dict[str, list[od.OffsetDeleteResponsePartition]] = defaultdict(list)
    for (name, partition), err in errors.items():
        by_topic[name].append(od.OffsetDeleteResponsePartition(partition_index=i32_(partition), error_code=E(err)))
    topics = tuple(od.OffsetDeleteResponseTopic(name=topic(n), partitions=tuple(ps)) for n, ps in by_topic.items())
    return od.OffsetDeleteResponse(throttle_time=NO_TIME, error_code=E(error), topics=topics)


# ---------------------------------------------------------------- ListGroups / DescribeGroups / DeleteGroups


@api(16, 0, 5, request=ListGroupsRequest)
async def list_groups(m: Managers, ctx: RequestContext, req: ListGroupsRequest) -> lsg.ListGroupsResponse:
    coordinator = _coordinator(m)
    if coordinator is None:
        return lsg.ListGroupsResponse(throttle_time=NO_TIME, error_code=E.coordinator_not_available, groups=())
    error, overviews = coordinator.list_groups(req.states_filter, req.types_filter)
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        overviews = [o for o in overviews if _group(ctx, Operation.DESCRIBE, o.group_id)]
    groups = tuple(
        lsg.ListedGroup(
            group_id=group(o.group_id),
            protocol_type=o.protocol_type,
            group_state=o.state,
            group_type=o.group_type,
        )
        for o in overviews
    )
    return lsg.ListGroupsResponse(throttle_time=NO_TIME, error_code=E(error), groups=groups)


@api(15, 0, 5, request=DescribeGroupsRequest)
async def describe_groups(m: Managers, ctx: RequestContext, req: DescribeGroupsRequest) -> dgr.DescribeGroupsResponse:
    coordinator = _coordinator(m)
    include_ops = req.include_authorized_operations
    described: list[dgr.DescribedGroup] = []
    for group_id in req.groups:
        if not _group(ctx, Operation.DESCRIBE, group_id):
            error, summary = int(E.group_authorization_failed), EMPTY_SUMMARY
        elif coordinator is None:
            error, summary = int(E.coordinator_not_available), EMPTY_SUMMARY
        else:
            error, summary = coordinator.describe_group(group_id)
        members = tuple(
            dgr.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in summary.members
        )
        described.append(
            dgr.DescribedGroup(
                error_code=E(error),
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=members,
                authorized_operations=i32_(
                    group_operations(ctx, group_id) if include_ops else NOT_REQUESTED_OPERATIONS),
            )
        )
    return dgr.DescribeGroupsResponse(throttle_time=NO_TIME, groups=tuple(described))


@api(42, 0, 2, request=DeleteGroupsRequest)
async def delete_groups(m: Managers, ctx: RequestContext, req: DeleteGroupsRequest) -> dg.DeleteGroupsResponse:
    coordinator = _coordinator(m)
    names: list[str] = list(req.groups_names)
    denied = [n for n in names if not _group(ctx, Operation.DELETE, n)]
    if coordinator is None:
        errors: dict[str, int] = dict.fromkeys(names, E.coordinator_not_available)
    else:
        allowed = [n for n in names if n not in denied]
        # an empty share group's share-partition state goes first (Kafka deletes it through the share coordinator)
        for name in allowed:
            share_group = coordinator.share_groups.get(name)
            if share_group is not None and not share_group.members:
                await reset_partitions(m, share_group, share_group.initialized)
        errors = await coordinator.delete_groups(allowed)
    errors.update(dict.fromkeys(denied, E.group_authorization_failed))
    results = tuple(dg.DeletableGroupResult(group_id=group(n), error_code=E(errors[n])) for n in names)
    return dg.DeleteGroupsResponse(throttle_time=NO_TIME, results=results)
