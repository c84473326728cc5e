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
from typing import TYPE_CHECKING, Any

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorRequestV3
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic as OffsetFetchRequestTopicV7
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetchRequestV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestGroup as OffsetFetchRequestGroupV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestTopics as OffsetFetchRequestTopicsV9
from kio.schema.offset_fetch.v10.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.sync_group.v5.request import SyncGroupRequest

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.codec import ms
from kbus.protocol.group_requests import HeartbeatRequest
from kbus.protocol.group_responses import encode_heartbeat_response
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
) -> Any:
    key_type = req.key_type  # v0 has none: its schema default, GROUP (0)
    if isinstance(req, FindCoordinatorRequest):
        coordinators = []
        for key in req.coordinator_keys:
            error, node_id, host, port = await _find_coordinator(m, key, key_type, ctx.listener.name, ctx)
            coordinators.append(
                ctx.nested(
                    "Coordinator",
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=_error_message(error),
                )
            )
        return ctx.build(throttle_time=0, coordinators=coordinators)
    error, node_id, host, port = await _find_coordinator(m, req.key, key_type, ctx.listener.name, ctx)
    return ctx.build(
        throttle_time=0, error_code=error, error_message=_error_message(error), node_id=node_id, host=host, port=port
    )


# ---------------------------------------------------------------- JoinGroup / SyncGroup / Heartbeat / LeaveGroup


@api(11, 0, 9, request=JoinGroupRequest)
async def join_group(m: Managers, ctx: RequestContext, req: JoinGroupRequest) -> Any:
    version = ctx.api_version
    coordinator = _coordinator(m)
    if coordinator is None or not _group(ctx, Operation.READ, req.group_id):
        return ctx.build(
            throttle_time=0,
            error_code=E.coordinator_not_available if coordinator is None else E.group_authorization_failed,
            generation_id=-1,
            member_id=req.member_id,
            protocol_name=None if version >= 7 else "",
            leader="",
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
    members = [
        ctx.nested("JoinGroupResponseMember", member_id=mid, group_instance_id=iid, metadata=meta)
        for mid, iid, meta in result.members
    ]
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return ctx.build(
        throttle_time=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


@api(14, 0, 5, request=SyncGroupRequest)
async def sync_group(m: Managers, ctx: RequestContext, req: SyncGroupRequest) -> Any:
    coordinator = _coordinator(m)
    if not _group(ctx, Operation.READ, req.group_id):
        return ctx.build(throttle_time=0, error_code=E.group_authorization_failed, assignment=b"")
    if coordinator is None:
        return ctx.build(throttle_time=0, error_code=E.coordinator_not_available, assignment=b"")
    result = await coordinator.sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        group_instance_id=req.group_instance_id,
        protocol_type=req.protocol_type,
        protocol_name=req.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return ctx.build(
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


@api(12, 0, 4)
async def heartbeat(m: Managers, ctx: RequestContext, req: HeartbeatRequest) -> object:
    coordinator = _coordinator(m)
    if not _group(ctx, Operation.READ, req.group_id):
        error = int(E.group_authorization_failed)
    elif coordinator is None:
        error = int(E.coordinator_not_available)
    else:
        error = coordinator.heartbeat(
            req.group_id, req.generation_id, req.member_id, req.group_instance_id
        )
    if m.quotas.request.enabled:  # the network layer writes the request quota's throttle time into kio objects
        return ctx.build(throttle_time=0, error_code=error)
    return encode_heartbeat_response(ctx.api_version, error)  # by hand: kio's writer was a tenth of its CPU


@api(13, 0, 5, request=(LeaveGroupRequestV2, LeaveGroupRequest))  # v3: a list of members, not one member_id
async def leave_group(m: Managers, ctx: RequestContext, req: LeaveGroupRequestV2 | LeaveGroupRequest) -> Any:
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
        return ctx.build(throttle_time=0, error_code=top)
    members = [
        ctx.nested("MemberResponse", member_id=mid, group_instance_id=iid, error_code=err)
        for (mid, iid), err in zip(identities, errors, strict=False)
    ]
    return ctx.build(throttle_time=0, error_code=top, members=members)


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


def _offset_topics(
    ctx: RequestContext, offsets: dict[tuple[str, int], OffsetAndMetadata | None], *, partition_cls: str,
    topic_cls: str,
    error: int = E.none, unstable: set[tuple[str, int]] | None = None, denied: set[tuple[str, int]] | None = None,
    ids: Mapping[str, uuid.UUID] | None = None,
) -> list[Any]:
    """The response's topics; with `ids` (v10) named by topic id, a topic with none (deleted) left out."""
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), om in offsets.items():
        if denied and (topic, partition) in denied:
            part_error = int(E.topic_authorization_failed)
        elif unstable and (topic, partition) in unstable:
            # KIP-447: a transactional commit is pending for it; the consumer retries until it is decided
            om, part_error = None, int(E.unstable_offset_commit)
        else:
            part_error = error
        by_topic[topic].append(
            ctx.nested(
                partition_cls,
                partition_index=partition,
                committed_offset=-1 if om is None else om.offset,
                committed_leader_epoch=-1 if om is None else om.leader_epoch,
                metadata="" if om is None else om.metadata,
                error_code=part_error,
            )
        )
    if ids is not None:
        return [ctx.nested(topic_cls, topic_id=ids[name], partitions=parts) for name, parts in by_topic.items()
                if name in ids]
    return [ctx.nested(topic_cls, name=name, partitions=parts) for name, parts in by_topic.items()]


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
) -> Any:
    """v10 names topics by id (Kafka 4.1): an unknown id gets UNKNOWN_TOPIC_ID on each requested partition."""
    coordinator = _coordinator(m)
    if not isinstance(req, OffsetFetchRequestV7):
        by_id = isinstance(req, OffsetFetchRequest)  # v10 (FIRST_VERSION_WITH_TOPIC_IDS)
        names_by_id = topic_names_by_id(m) if by_id else {}
        ids = _topic_ids(m) if by_id else None
        groups = []
        for g in req.groups:
            epoch_error = _member_epoch_error(coordinator, ctx, g)
            if epoch_error is not None:
                groups.append(ctx.nested("OffsetFetchResponseGroup", group_id=g.group_id, topics=[],
                                         error_code=epoch_error))
                continue
            unknown: dict[uuid.UUID | None, list[int]] = {}
            if isinstance(g, OffsetFetchRequestGroup):
                requested, unknown = _requested_by_id(g.topics, names_by_id)
            else:
                requested = _requested(g.topics)
            error, offsets, denied = _fetch_group(coordinator, g.group_id, requested, ctx)
            # a refused partition stays refused
            unstable = _unstable(coordinator, req.require_stable, g.group_id, offsets)
            topics = _offset_topics(
                ctx, offsets, partition_cls="OffsetFetchResponsePartitions", topic_cls="OffsetFetchResponseTopics",
                unstable=unstable, denied=denied, ids=ids,
            )
            if error == E.none:
                topics += [
                    ctx.nested("OffsetFetchResponseTopics", topic_id=topic_id, partitions=[
                        ctx.nested("OffsetFetchResponsePartitions", partition_index=p, committed_offset=-1,
                                   committed_leader_epoch=-1, metadata="", error_code=E.unknown_topic_id)
                        for p in partitions])
                    for topic_id, partitions in unknown.items()
                ]  # fmt: skip
            groups.append(ctx.nested("OffsetFetchResponseGroup", group_id=g.group_id, topics=topics, error_code=error))
        return ctx.build(throttle_time=0, groups=groups)
    requested = _requested(req.topics)
    error, offsets, denied = _fetch_group(coordinator, req.group_id, requested, ctx)
    if error != E.none and ctx.api_version < 2:
        # v1 has no group-level error: report it on every requested partition.
        offsets = dict.fromkeys(requested or [], None)
        topics = _offset_topics(
            ctx,
            offsets,
            partition_cls="OffsetFetchResponsePartition",
            topic_cls="OffsetFetchResponseTopic",
            error=error,
        )
    else:
        topics = _offset_topics(
            ctx, offsets, partition_cls="OffsetFetchResponsePartition", topic_cls="OffsetFetchResponseTopic",
            unstable=_unstable(coordinator, req.require_stable, req.group_id, offsets), denied=denied,
        )
    return ctx.build(throttle_time=0, topics=topics, error_code=error)


@api(47, 0, 0, request=OffsetDeleteRequest)
async def offset_delete(m: Managers, ctx: RequestContext, req: OffsetDeleteRequest) -> Any:
    coordinator = _coordinator(m)
    partitions: list[tuple[str, int]] = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    if not _group(ctx, Operation.DELETE, req.group_id):
        error, errors = int(E.group_authorization_failed), dict[tuple[str, int], int]()
    elif coordinator is None:
        error, errors = int(E.coordinator_not_available), dict[tuple[str, int], int]()
    else:
        error, errors = await coordinator.delete_offsets(req.group_id, partitions)
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), err in errors.items():
        by_topic[topic].append(ctx.nested("OffsetDeleteResponsePartition", partition_index=partition, error_code=err))
    topics = [ctx.nested("OffsetDeleteResponseTopic", name=n, partitions=ps) for n, ps in by_topic.items()]
    return ctx.build(throttle_time=0, error_code=error, topics=topics)


# ---------------------------------------------------------------- ListGroups / DescribeGroups / DeleteGroups


@api(16, 0, 5, request=ListGroupsRequest)
async def list_groups(m: Managers, ctx: RequestContext, req: ListGroupsRequest) -> Any:
    coordinator = _coordinator(m)
    if coordinator is None:
        return ctx.build(throttle_time=0, error_code=E.coordinator_not_available, groups=[])
    error, overviews = coordinator.list_groups(req.states_filter, req.types_filter)
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        overviews = [o for o in overviews if _group(ctx, Operation.DESCRIBE, o.group_id)]
    groups = [
        ctx.nested(
            "ListedGroup",
            group_id=o.group_id,
            protocol_type=o.protocol_type,
            group_state=o.state,
            group_type=o.group_type,
        )
        for o in overviews
    ]
    return ctx.build(throttle_time=0, error_code=error, groups=groups)


@api(15, 0, 5, request=DescribeGroupsRequest)
async def describe_groups(m: Managers, ctx: RequestContext, req: DescribeGroupsRequest) -> Any:
    coordinator = _coordinator(m)
    include_ops = req.include_authorized_operations
    described = []
    for group_id in req.groups:
        if not _group(ctx, Operation.DESCRIBE, group_id):
            error, summary = int(E.group_authorization_failed), EMPTY_SUMMARY
        elif coordinator is None:
            error, summary = int(E.coordinator_not_available), EMPTY_SUMMARY
        else:
            error, summary = coordinator.describe_group(group_id)
        members = [
            ctx.nested(
                "DescribedGroupMember",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in summary.members
        ]
        described.append(
            ctx.nested(
                "DescribedGroup",
                error_code=error,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=members,
                authorized_operations=group_operations(ctx, group_id) if include_ops else NOT_REQUESTED_OPERATIONS,
            )
        )
    return ctx.build(throttle_time=0, groups=described)


@api(42, 0, 2, request=DeleteGroupsRequest)
async def delete_groups(m: Managers, ctx: RequestContext, req: DeleteGroupsRequest) -> Any:
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
    results = [ctx.nested("DeletableGroupResult", group_id=n, error_code=errors[n]) for n in names]
    return ctx.build(throttle_time=0, results=results)
