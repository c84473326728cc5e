"""Metadata (3), with auto topic creation."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v10 import response as v10
from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
from kio.schema.metadata.v10.request import MetadataRequestTopic as MetadataRequestTopicV10
from kio.schema.metadata.v12 import response as v12
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.protocol import Entity

from kbus.common.acl import Operation, ResourceType
from kbus.common.cluster import BrokerInfo
from kbus.common.errors import KafkaError
from kbus.common.topics import is_internal, validate_topic_name
from kbus.protocol.codec import encode_entity
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.kio_types import NO_TIME, broker, i32_
from kbus.protocol.metadata_response import encode_partitions, encode_topic, splice_topics
from kbus.protocol.upgrade import to_version
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


# The response without its topics (brokers on the listener, cluster id, controller, cluster operations), encoded,
# of recent answers: (version, listener, cluster id, controller id, cluster operations) -> (brokers, bytes). The
# metadata stores hand out a new BrokerInfo whenever a broker's registration changes (it is frozen), so the same
# broker objects in the same order encode to the same bytes; anything else in the key changes the key. A client
# polling the metadata of one topic then costs a lookup instead of kio building and writing the broker list.
_HEAD_CACHE: dict[tuple[int, str, str | None, int, int], tuple[list[BrokerInfo], bytes]] = {}
_HEAD_CACHE_MAX = 64


def _same_brokers(a: list[BrokerInfo], b: list[BrokerInfo]) -> bool:
    # by index: mypyc compiles all() over a range into a loop, but zip() made a zip object and a tuple per broker (2%
    # of a Metadata request)
    return len(a) == len(b) and all(a[i] is b[i] for i in range(len(a)))


def _without_topics(ctx: RequestContext, m: Managers, brokers: list[BrokerInfo], cluster_ops: int) -> bytes:
    cluster_id = m.cluster.cluster_id
    controller_id = m.cluster.controller_id()
    key = (ctx.api_version, ctx.listener.name, cluster_id, controller_id, cluster_ops)
    cached = _HEAD_CACHE.get(key)
    if cached is not None and _same_brokers(cached[0], brokers):
        return cached[1]
    head: v10.MetadataResponse | v12.MetadataResponse
    if ctx.api_version >= 11:  # v11 dropped cluster_authorized_operations: v10's class for the versions before
        head = v12.MetadataResponse(
            throttle_time=NO_TIME, cluster_id=cluster_id, controller_id=broker(controller_id), topics=(),
            brokers=tuple(v12.MetadataResponseBroker(node_id=broker(b.broker_id), host=ep.host, port=i32_(ep.port),
                                                     rack=b.rack) for b, ep in on_listener(ctx, brokers)))
    else:
        head = v10.MetadataResponse(
            throttle_time=NO_TIME, cluster_id=cluster_id, controller_id=broker(controller_id), topics=(),
            brokers=tuple(v10.MetadataResponseBroker(node_id=broker(b.broker_id), host=ep.host, port=i32_(ep.port),
                                                     rack=b.rack) for b, ep in on_listener(ctx, brokers)),
            cluster_authorized_operations=i32_(cluster_ops))
    # once per key (cached): in the request's version, as encode_response writes a handler's kio response
    source: type[Entity] = type(head)
    target = ctx.response_type
    encoded = encode_entity(head if source is target else to_version(source, target)(head))
    if len(_HEAD_CACHE) >= _HEAD_CACHE_MAX:
        _HEAD_CACHE.clear()
    _HEAD_CACHE[key] = (brokers, encoded)
    return encoded


# Encoded topic entries (partitions included) of recent answers without authorized operations (what clients ask for
# but the admin tools): (version, topic) -> (topic object, partition count, live brokers, bytes), kept on the terms
# of _PARTITIONS_CACHE. A client polling the metadata of a topic then costs a lookup, not the entry's encoding.
_ENTRY_CACHE: dict[tuple[int, str], tuple[TopicMetadata, int, frozenset[int], bytes]] = {}


def _topic_entry(
    ctx: RequestContext, m: Managers, topic: TopicMetadata, with_ops: bool, live: frozenset[int]
) -> bytes:
    version = ctx.api_version
    key = (version, topic.name)
    if not with_ops:
        cached = _ENTRY_CACHE.get(key)
        if cached is not None and cached[0] is topic and cached[1] == len(topic.partitions) and cached[2] == live:
            return cached[3]
    entry = encode_topic(
        version,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal(topic.name),
        partitions=_partitions(version, topic, live),
        authorized_operations=(
            ctx.authorized_operations(ResourceType.TOPIC, topic.name) if with_ops else NOT_REQUESTED_OPERATIONS
        ),
    )
    if not with_ops:
        if len(_ENTRY_CACHE) >= _PARTITIONS_CACHE_MAX:
            _ENTRY_CACHE.clear()
        _ENTRY_CACHE[key] = (topic, len(topic.partitions), live, entry)
    return entry


def _error_topic(
    ctx: RequestContext, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None
) -> bytes:
    return encode_topic(ctx.api_version, error_code=code, name=name, topic_id=topic_id)


def _by_id(req_topic: MetadataRequestTopicV10 | MetadataRequestTopic) -> bool:
    """A requested topic named by id (a null name, or a non-zero topic id: kio reads the zero one as None)."""
    return req_topic.name is None or req_topic.topic_id is not None


# v11 dropped include_cluster_authorized_operations (moved to DescribeCluster): v0-v10 reach the handler as v10's
# class, v11-v12 as v12's (kbus.protocol.upgrade), v0-v9's topics with a null topic id
@api(3, 0, 12, request=(MetadataRequestV10, MetadataRequest))
async def metadata(
    m: Managers, ctx: RequestContext, request: MetadataRequestV10 | MetadataRequest
) -> EncodedBody:
    cluster = m.cluster
    brokers = cluster.brokers()
    live = frozenset(b.broker_id for b in brokers)
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    requested: tuple[MetadataRequestTopicV10 | MetadataRequestTopic, ...] = request.topics or ()
    # v0-v3 have none: its schema default, true
    allow_auto = request.allow_auto_topic_creation and m.config.auto_create_topics_enable
    # v8+: operations only when asked for (KIP-430; v0-v7 have no such fields: false); the cluster's only up to v10
    topic_ops = request.include_topic_authorized_operations
    cluster_ops = isinstance(request, MetadataRequestV10) and request.include_cluster_authorized_operations
    entries = []
    if not all_topics and ctx.api_version < 12 and any(_by_id(t) for t in requested):
        # Kafka: topic ids (and so null names) are not supported before v12 -> INVALID_REQUEST for every topic,
        # named "" where null (the v10/v11 response has no null name)
        entries = [
            _error_topic(ctx, t.name or "", ErrorCode.invalid_request, t.topic_id)
            for t in requested
        ]
        all_topics, requested = False, ()
    if all_topics:
        entries = [
            _topic_entry(ctx, m, t, topic_ops, live)
            for t in sorted(cluster.topics().values(), key=lambda t: t.name)
            if ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.name)  # Kafka hides the others
        ]
    else:
        by_id: dict[uuid.UUID, TopicMetadata] | None = None  # built only if a topic is asked for by id
        for req_topic in requested:
            name = req_topic.name
            # A non-zero id names the topic whatever the name says: the Java client sends the name's default ""
            # beside the id (Kafka's MetadataRequest.Builder(topicIds); KafkaApis looks such topics up by id).
            if req_topic.topic_id is not None:
                if by_id is None:
                    by_id = {t.topic_id: t for t in cluster.topics().values()}
                t = by_id.get(req_topic.topic_id)
                if t is None:
                    entries.append(_error_topic(ctx, None, ErrorCode.unknown_topic_id, req_topic.topic_id))
                elif not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.name):
                    # Kafka: the id is no secret, the name is: null name, the id as asked
                    entries.append(_error_topic(ctx, None, ErrorCode.topic_authorization_failed, req_topic.topic_id))
                else:
                    entries.append(_topic_entry(ctx, m, t, topic_ops, live))
                continue
            if name is None:  # neither a name nor an id: what validate_topic_name answers for an empty name
                entries.append(_error_topic(ctx, "", ErrorCode.invalid_topic_exception))
                continue
            # one topic looked up, not a copy of them all (the metadata store's topics() copies its view under its
            # lock: a Python-level Condition, on every request)
            topic = cluster.topic(name)
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
                entries.append(_topic_entry(ctx, m, topic, topic_ops, live))
    cluster_ops_field = ctx.authorized_operations(ResourceType.CLUSTER) if cluster_ops else NOT_REQUESTED_OPERATIONS
    return splice_topics(ctx.api_version, _without_topics(ctx, m, brokers, cluster_ops_field), entries)
