"""Metadata (3), with auto topic creation."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.common.errors import KafkaError
from kbus.common.topics import is_internal, validate_topic_name
from kbus.protocol.codec import encode_entity
from kbus.protocol.metadata_response import encode_partitions, encode_topic, splice_topics
from kbus.server.apis.endpoints import on_listener
from kbus.server.apis.errors import error_code_for
from kbus.server.apis.registry import RequestContext, api
from kbus.server.metadata.types import TopicMetadata

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

log = logging.getLogger("kbus.server.apis")
# MetadataResponse's default for authorized operations a client did not ask for (Integer.MIN_VALUE)
NOT_REQUESTED_OPERATIONS = -2147483648


# Encoded partition arrays of recent answers: (version, topic) -> (topic object, partition count, live brokers,
# bytes). The metadata stores hand out new TopicMetadata objects whenever a partition's state changes (ZooKeeper)
# or only add partitions to one (standalone), so the same object with as many partitions and the same live brokers
# encodes to the same bytes: a client polling the metadata of 10,000 partitions costs a lookup.
_PARTITIONS_CACHE: dict[tuple[int, str], tuple[TopicMetadata, int, frozenset[int], bytes]] = {}
_PARTITIONS_CACHE_MAX = 1024


def _partitions(version: int, topic: TopicMetadata, live: frozenset[int]) -> bytes:
    key = (version, topic.name)
    cached = _PARTITIONS_CACHE.get(key)
    if cached is not None and cached[0] is topic and cached[1] == len(topic.partitions) and cached[2] == live:
        return cached[3]
    rows = []
    for index in sorted(topic.partitions):
        st = topic.partitions[index]
        leader = st.leader if st.leader in live else -1
        rows.append((
            ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available, index, leader, st.leader_epoch,
            st.replicas, st.isr, () if live.issuperset(st.replicas) else [r for r in st.replicas if r not in live],
        ))  # fmt: skip
    encoded = encode_partitions(version, rows)
    if len(_PARTITIONS_CACHE) >= _PARTITIONS_CACHE_MAX:
        _PARTITIONS_CACHE.clear()
    _PARTITIONS_CACHE[key] = (topic, len(topic.partitions), live, encoded)
    return encoded


def _topic_entry(ctx: RequestContext, m: Managers, topic: TopicMetadata, with_ops: bool) -> bytes:
    return encode_topic(
        ctx.api_version,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal(topic.name),
        partitions=_partitions(ctx.api_version, topic, frozenset(b.broker_id for b in m.cluster.brokers())),
        authorized_operations=(
            ctx.authorized_operations(ResourceType.TOPIC, topic.name) if with_ops else NOT_REQUESTED_OPERATIONS
        ),
    )


def _error_topic(
    ctx: RequestContext, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None
) -> bytes:
    return encode_topic(ctx.api_version, error_code=code, name=name, topic_id=topic_id)


def _by_id(req_topic: Any) -> bool:
    """A requested topic named by id (a null name, or a non-zero topic id)."""
    return req_topic.name is None or getattr(req_topic, "topic_id", None) is not None


@api(3, 0, 12)
async def metadata(m: Managers, ctx: RequestContext, request: Any) -> Any:
    topics = m.cluster.topics()
    requested = request.topics
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = requested is None or (ctx.api_version == 0 and not requested)
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and m.config.auto_create_topics_enable
    # v8+: operations only when asked for (KIP-430); the cluster's only up to v10 (v11 moved it to DescribeCluster)
    topic_ops = ctx.api_version >= 8 and bool(request.include_topic_authorized_operations)
    cluster_ops = 8 <= ctx.api_version <= 10 and bool(request.include_cluster_authorized_operations)
    entries = []
    if not all_topics and ctx.api_version < 12 and any(_by_id(t) for t in requested):
        # Kafka: topic ids (and so null names) are not supported before v12 -> INVALID_REQUEST for every topic,
        # named "" where null (the v10/v11 response has no null name)
        entries = [
            _error_topic(ctx, t.name or "", ErrorCode.invalid_request, getattr(t, "topic_id", None))
            for t in requested
        ]
        all_topics, requested = False, []
    if all_topics:
        entries = [
            _topic_entry(ctx, m, t, topic_ops)
            for t in sorted(topics.values(), key=lambda t: t.name)
            if ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.name)  # Kafka hides the others
        ]
    else:
        by_id = {t.topic_id: t for t in topics.values()}
        for req_topic in requested:
            name = req_topic.name
            # A non-zero id names the topic whatever the name says: the Java client sends the name's default ""
            # beside the id (Kafka's MetadataRequest.Builder(topicIds); KafkaApis looks such topics up by id).
            if getattr(req_topic, "topic_id", None) is not None:
                t = by_id.get(req_topic.topic_id)
                if t is None:
                    entries.append(_error_topic(ctx, None, ErrorCode.unknown_topic_id, req_topic.topic_id))
                elif not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.name):
                    # Kafka: the id is no secret, the name is: null name, the id as asked
                    entries.append(_error_topic(ctx, None, ErrorCode.topic_authorization_failed, req_topic.topic_id))
                else:
                    entries.append(_topic_entry(ctx, m, t, topic_ops))
                continue
            topic = topics.get(name)
            if name and not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, name):
                entries.append(_error_topic(ctx, name, ErrorCode.topic_authorization_failed))
                continue
            if topic is None:
                try:
                    validate_topic_name(name)
                except KafkaError as exc:
                    entries.append(_error_topic(ctx, name or "", error_code_for(exc)))
                    continue
                may_create = ctx.authorized(Operation.CREATE, ResourceType.CLUSTER) or ctx.authorized(
                    Operation.CREATE, ResourceType.TOPIC, name
                )
                if allow_auto and not is_internal(name) and not may_create:
                    entries.append(_error_topic(ctx, name, ErrorCode.topic_authorization_failed))
                    continue
                if allow_auto and not is_internal(name):
                    try:
                        topic = await m.admin.auto_create_topic(name)
                    except KafkaError as exc:
                        entries.append(_error_topic(ctx, name, error_code_for(exc)))
                        continue
            if topic is None:
                entries.append(_error_topic(ctx, name, ErrorCode.unknown_topic_or_partition))
            else:
                entries.append(_topic_entry(ctx, m, topic, topic_ops))
    brokers = [
        ctx.nested("MetadataResponseBroker", node_id=b.broker_id, host=ep.host, port=ep.port, rack=b.rack)
        for b, ep in on_listener(ctx, m.cluster.brokers())
    ]
    without_topics = ctx.build(
        throttle_time=0,
        brokers=brokers,
        cluster_id=m.cluster.cluster_id,
        controller_id=m.cluster.controller_id(),
        topics=(),
        cluster_authorized_operations=(
            ctx.authorized_operations(ResourceType.CLUSTER) if cluster_ops else NOT_REQUESTED_OPERATIONS
        ),
    )
    return splice_topics(ctx.api_version, encode_entity(without_topics), entries)
