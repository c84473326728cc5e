"""OffsetCommit (8), compiled (setup.py COMPILED): a consumer commits after every poll, and this handler's own body
(authorization per topic, one OffsetAndMetadata per partition, the errors grouped per topic) was ~6 µs of each
one-record commit interpreted. The group coordinator's part is compiled too (coordinator/commit_path.py), and the
response is encoded by hand (protocol/group_responses.py). groups.py holds the other group APIs.

`m` is the broker's Managers (or a test's stand-in): only its `groups`, `cluster` and `quotas` are read, through
Python attribute access (Managers is an interpreted dataclass).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from kio.schema.errors import ErrorCode as E
from kio.schema.offset_commit.v9 import response as v9
from kio.schema.offset_commit.v10 import response as v10

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.codec import Response, ms
from kbus.protocol.group_requests import OffsetCommitRequest
from kbus.protocol.group_responses import encode_offset_commit_one, encode_offset_commit_response, errors_by_topic
from kbus.protocol.kio_types import NO_TIME, i32_, topic
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.commit_batch import OffsetAndMetadata
from kbus.server.coordinator.commit_path import CommitPath

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

# OffsetCommit and OffsetFetch v10 (Kafka 4.1) name topics by id only; offsets are still kept by topic name
FIRST_VERSION_WITH_TOPIC_IDS: Final = 10
NO_TOPIC_ID: Final = uuid.UUID(int=0)

# plain ints (the kio enum's members are looked up through its class on each use)
_GROUP_AUTHORIZATION_FAILED: Final = int(E.group_authorization_failed)
_TOPIC_AUTHORIZATION_FAILED: Final = int(E.topic_authorization_failed)
_COORDINATOR_NOT_AVAILABLE: Final = int(E.coordinator_not_available)
_UNKNOWN_TOPIC_ID: Final = int(E.unknown_topic_id)
_READ: Final = Operation.READ
_GROUP: Final = ResourceType.GROUP
_TOPIC: Final = ResourceType.TOPIC

TopicPartition = tuple[str, int]


def topic_names_by_id(m: Managers) -> Mapping[uuid.UUID, str]:
    return {t.topic_id: name for name, t in m.cluster.topics().items() if t.topic_id != NO_TOPIC_ID}


@api(8, 2, 10)
async def offset_commit(m: Managers, ctx: RequestContext, req: OffsetCommitRequest) -> Response:
    """v10 names topics by id (Kafka 4.1's KafkaApis: an id the cluster does not know gets UNKNOWN_TOPIC_ID on
    each of its partitions; the response names topics by id too)."""
    coordinator = m.groups
    version: int = ctx.api_version
    retention_ms = ms(req.retention_time) if 2 <= version <= 4 else -1
    now: int = coordinator.clock() if coordinator is not None else 0
    # Kafka: only -1 (DEFAULT_RETENTION_TIME) means the broker's retention; any other value, negative too, expires
    # at now + retention
    expire = now + retention_ms if retention_ms != -1 else None
    with_epoch = version >= 6  # committed_leader_epoch
    by_id = version >= FIRST_VERSION_WITH_TOPIC_IDS
    names_by_id = topic_names_by_id(m) if by_id else {}
    ids: dict[str, uuid.UUID] = {}  # topic name -> the id the request used for it
    unknown_ids: dict[uuid.UUID, list[int]] = {}
    # authorized per topic, not per partition: the offsets to commit, and the errors of the partitions refused
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    refused: dict[TopicPartition, int] = {}
    group_id: str = req.group_id
    group_allowed = ctx.authorized(_READ, _GROUP, group_id)
    for t in req.topics:
        name: str
        if by_id:
            topic_id: uuid.UUID = t.topic_id
            found = names_by_id.get(topic_id)
            if found is None:
                unknown_ids.setdefault(topic_id, []).extend([p.partition_index for p in t.partitions])
                continue
            ids[found] = topic_id
            name = found
        else:
            name = t.name
        if not group_allowed or not ctx.authorized(_READ, _TOPIC, name):
            denied = _GROUP_AUTHORIZATION_FAILED if not group_allowed else _TOPIC_AUTHORIZATION_FAILED
            for p in t.partitions:
                refused[(name, p.partition_index)] = denied
            continue
        for p in t.partitions:
            epoch: int = p.committed_leader_epoch if with_epoch else -1
            metadata: str | None = p.committed_metadata
            offsets[(name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, epoch, metadata or "", now, expire
            )
    errors: dict[TopicPartition, int] = {}
    if offsets and coordinator is None:
        errors = dict.fromkeys(offsets, _COORDINATOR_NOT_AVAILABLE)
    elif offsets and coordinator is not None:
        # GroupCoordinator.commit_offsets delegates to its compiled CommitPath: called directly, one interpreted
        # coroutine fewer per commit
        path: CommitPath = coordinator.commit_path
        errors = await path.commit(
            group_id,
            req.member_id,
            req.group_instance_id if version >= 7 else None,
            req.generation_id_or_member_epoch,
            offsets,
            version,
            now,
        )
    if refused:
        errors.update(refused)
    quota = m.quotas.request.enabled  # the network layer writes the request quota's throttle time into kio objects
    if len(errors) == 1 and not by_id and not quota:
        # a consumer's commit of one partition: no per-topic regrouping, its answer kept (group_responses)
        for tp, error in errors.items():
            return encode_offset_commit_one(version, tp[0], tp[1], error)
    topics: list[tuple[str | None, uuid.UUID | None, list[tuple[int, int]]]] = [
        (name, ids.get(name, NO_TOPIC_ID), parts) for name, parts in errors_by_topic(errors).items()
    ]
    for unknown_id, partitions in unknown_ids.items():
        topics.append((None, unknown_id, [(p, _UNKNOWN_TOPIC_ID) for p in partitions]))
    if quota:
        return _kio_response(version, topics)
    return encode_offset_commit_response(version, topics)  # by hand: kio's writer was a tenth of its CPU


def _kio_response(
    version: int, topics: list[tuple[str | None, uuid.UUID | None, list[tuple[int, int]]]]
) -> v9.OffsetCommitResponse | v10.OffsetCommitResponse:
    """The response as kio's class, which the network layer writes a request quota's throttle time into: v10 names
    topics by id, the versions before by name (Kafka removed the name at v10, so v9's class is the older ones')."""
    if version >= 10:
        return v10.OffsetCommitResponse(throttle_time=NO_TIME, topics=tuple(
            v10.OffsetCommitResponseTopic(topic_id=topic_id, partitions=tuple(
                v10.OffsetCommitResponsePartition(partition_index=i32_(p), error_code=E(e)) for p, e in parts))
            for _, topic_id, parts in topics))  # fmt: skip
    return v9.OffsetCommitResponse(throttle_time=NO_TIME, topics=tuple(
        v9.OffsetCommitResponseTopic(name=topic(name or ""), partitions=tuple(
            v9.OffsetCommitResponsePartition(partition_index=i32_(p), error_code=E(e)) for p, e in parts))
        for name, _, parts in topics))  # fmt: skip
