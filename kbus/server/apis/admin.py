"""Topic and cluster administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DescribeCluster (60)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from kio.schema.alter_configs.v2 import response as ac
from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.alter_configs.v2.request import AlterConfigsResource as LegacyAlterConfigsResource
from kio.schema.alter_configs.v2.response import AlterConfigsResponse
from kio.schema.create_partitions.v3 import response as cp
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7 import response as ct
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as DeleteTopicsRequestV5
from kio.schema.delete_topics.v6 import response as dtp
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest
from kio.schema.describe_cluster.v1 import response as dcl
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.describe_configs.v4 import response as dc
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import response as iac
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as IncrementalAlterableConfig
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource, IncrementalAlterConfigsRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.types import TopicName

from kbus.common.acl import Operation, ResourceType
from kbus.common.broker_config import BROKER_CONFIGS, ConfigError
from kbus.common.broker_config_describe import (
    ConfigSource,
    ConfigSynonym,
    config_synonyms,
    config_type,
    topic_broker_synonym,
)
from kbus.common.connection_limits import listener_key
from kbus.common.dynamic_broker_config import (
    BROKER_DEFAULT_ENTITY,
    DYNAMIC_ONLY_KEYS,
    check_dynamic_broker_configs,
    is_dynamic_broker_key,
)
from kbus.common.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaError,
    TopicExistsError,
    UnknownTopicError,
)
from kbus.common.group_config import DEFAULTS as GROUP_DEFAULTS
from kbus.common.group_config import GROUP_CONFIGS, validate_group_configs
from kbus.common.other_broker_configs import OTHER_BROKER_CONFIGS, ConfigType
from kbus.common.topic_config import format_value, validate_topic_configs
from kbus.common.topics import check_partitions_per_request, validate_topic_name
from kbus.protocol.kio_types import NO_TIME, broker, i8_, i16_, i32_, ms32, producer
from kbus.protocol.kio_types import topic as topic_name
from kbus.server.apis.endpoints import on_listener
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import RequestContext, api
from kbus.server.apis.throttling import mutation_quota, mutation_throttle
from kbus.server.apis.transactions import init_transactional_producer

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

TOPIC, BROKER, GROUP = 2, 4, 32
GROUP_CONFIG_SOURCE = 8  # Kafka 4's ConfigSource.GROUP_CONFIG
# DescribeConfigs ConfigSource values
ZERO_UUID = uuid.UUID(int=0)
CONFIG_TYPE_STRING, CONFIG_TYPE_BOOLEAN, CONFIG_TYPE_INT, CONFIG_TYPE_LONG, CONFIG_TYPE_DOUBLE = 2, 1, 3, 5, 6
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _config_type(value: str) -> int:
    if value in ("true", "false"):
        return CONFIG_TYPE_BOOLEAN
    try:
        int(value)
        return CONFIG_TYPE_LONG
    except ValueError:
        pass
    try:
        float(value)
        return CONFIG_TYPE_DOUBLE
    except ValueError:
        return CONFIG_TYPE_STRING


def _admin_error(exc: KafkaError) -> tuple[ErrorCode, str | None]:
    """A refused admin request: its Kafka error, INVALID_REQUEST for anything without a more specific code."""
    code = error_code_for(exc)
    return ErrorCode.invalid_request if code == ErrorCode.unknown_server_error else code, error_message(exc)


# ------------------------------------------------------------------------------------------ CreateTopics
def _check_create(
    m: Managers, topic: CreatableTopic
) -> tuple[int, int, dict[int, list[int]] | None, dict[str, str]]:
    validate_topic_name(topic.name)
    if m.cluster.topic(topic.name) is not None:
        raise TopicExistsError(f"Topic '{topic.name}' already exists.")
    configs = {c.name: c.value for c in topic.configs}
    validate_topic_configs(configs)
    assignment: dict[int, list[int]] | None = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    assignment = assignment or None
    partitions: int = topic.num_partitions
    rf: int = topic.replication_factor
    if assignment:
        if partitions != -1 or rf != -1:
            raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set.")
    else:
        partitions = m.config.num_partitions if partitions == -1 else partitions
        rf = m.config.default_replication_factor if rf == -1 else rf
        if partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if rf < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        live = len(m.cluster.brokers())
        if rf > live:
            raise InvalidReplicationFactorError(f"Replication factor: {rf} larger than available brokers: {live}.")
    return partitions, rf, assignment, {k: v for k, v in configs.items() if v is not None}


def _requested_partitions(m: Managers, topic: CreatableTopic) -> int:
    """What Kafka's controller counts against MAX_PARTITIONS_PER_REQUEST for one CreatableTopic."""
    if topic.assignments:
        return len(topic.assignments)
    return m.config.num_partitions if topic.num_partitions == -1 else max(topic.num_partitions, 0)


def _created(name: TopicName, code: ErrorCode, message: str | None = None, topic_id: uuid.UUID = ZERO_UUID,
             partitions: int = -1, rf: int = -1, configs: tuple[ct.CreatableTopicConfigs, ...] = ()
             ) -> ct.CreatableTopicResult:  # fmt: skip
    """A CreateTopics result; an error one keeps Kafka's defaults: no id, -1 partitions and factor, an empty list
    of configs (not null)."""
    return ct.CreatableTopicResult(name=name, topic_id=topic_id, error_code=code, error_message=message,
                                   num_partitions=i32_(partitions), replication_factor=i16_(rf), configs=configs)


@api(19, 2, 7, request=CreateTopicsRequest)
async def create_topics(m: Managers, ctx: RequestContext, request: CreateTopicsRequest) -> ct.CreateTopicsResponse:
    results: list[ct.CreatableTopicResult] = []
    seen: set[str] = set()
    quota = mutation_quota(m, ctx, strict_since=6)
    try:
        check_partitions_per_request(sum(_requested_partitions(m, t) for t in request.topics))
        too_many = None
    except KafkaError as exc:
        too_many = exc
    for topic in request.topics:
        result = partial(_created, topic.name)
        try:
            if too_many is not None:
                raise too_many
            if topic.name in seen:
                raise InvalidRequestError(f"Create topics request from client contains duplicate topic {topic.name}")
            seen.add(topic.name)
            if not (
                ctx.authorized(Operation.CREATE, ResourceType.CLUSTER)
                or ctx.authorized(Operation.CREATE, ResourceType.TOPIC, topic.name)
            ):
                results.append(result(ErrorCode.topic_authorization_failed, "Authorization failed."))
                continue
            partitions, rf, assignment, configs = _check_create(m, topic)
            if request.validate_only:
                tid = ZERO_UUID
                effective = m.admin.default_log_config().with_overrides(configs)
            else:
                if quota is not None:  # controller_mutation_rate counts the partitions created
                    quota.record(len(assignment) if assignment else partitions)
                created = await m.admin.create_topic(topic.name, partitions, rf, configs, assignment)
                tid, partitions = created.topic_id, len(created.partitions)
                rf = len(next(iter(created.partitions.values())).replicas)
                effective = m.admin.log_config_for(created)
            sources = _topic_synonyms(m, configs)
            results.append(result(ErrorCode.none, None, tid, partitions, rf, tuple(
                ct.CreatableTopicConfigs(
                    name=k,
                    value=v,
                    read_only=False,
                    is_sensitive=False,
                    config_source=i8_(_source(sources(k, v))),
                )
                for k, v in effective.to_properties().items()
            )))
        except KafkaError as exc:
            results.append(result(*_admin_error(exc)))
    return ct.CreateTopicsResponse(throttle_time=ms32(mutation_throttle(m, ctx, quota)), topics=tuple(results))


# ------------------------------------------------------------------------------------------ DeleteTopics
@api(20, 1, 6, request=(DeleteTopicsRequestV5, DeleteTopicsRequest))  # v6: topics by name or id, not names
async def delete_topics(
    m: Managers, ctx: RequestContext, request: DeleteTopicsRequestV5 | DeleteTopicsRequest
) -> dtp.DeleteTopicsResponse:
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if isinstance(request, DeleteTopicsRequest):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    by_id = {t.topic_id: t.name for t in m.cluster.topics().values()}
    results: list[dtp.DeletableTopicResult] = []
    quota = mutation_quota(m, ctx, strict_since=5)
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            name = by_id.get(topic_id)
        the_id = topic_id or ZERO_UUID
        message: str | None = None
        try:
            if name is None:
                code = ErrorCode.unknown_topic_id
            elif not ctx.authorized(Operation.DELETE, ResourceType.TOPIC, name):
                code = ErrorCode.topic_authorization_failed
            elif not m.config.delete_topic_enable:
                code = ErrorCode.topic_deletion_disabled
            else:
                meta = m.cluster.topic(name)
                if meta is None:
                    raise UnknownTopicError("This server does not host this topic-partition.")
                the_id = meta.topic_id
                if quota is not None:  # controller_mutation_rate counts the partitions deleted
                    quota.record(len(meta.partitions))
                await m.admin.delete_topic(name)
                code = ErrorCode.none
        except KafkaError as exc:
            code, message = error_code_for(exc), error_message(exc)
        results.append(dtp.DeletableTopicResult(name=None if name is None else topic_name(name), topic_id=the_id,
                                                error_code=code, error_message=message))
    return dtp.DeleteTopicsResponse(throttle_time=ms32(mutation_throttle(m, ctx, quota)), responses=tuple(results))


# ------------------------------------------------------------------------------------------ CreatePartitions
def _new_partitions_assignment(
    m: Managers, t: CreatePartitionsTopic, current: dict[int, list[int]]
) -> dict[int, list[int]] | None:
    """The replicas the request names for the new partitions (ZkAdminManager.createPartitions and
    AdminZkClient.validateReplicaAssignment): known brokers, one list per new partition, partition 0's
    replication factor, no broker twice. None: the controller assigns them round robin."""
    if t.assignments is None:
        return None
    assignments: list[list[int]] = [list(a.broker_ids) for a in t.assignments]
    unknown = sorted({b for r in assignments for b in r} - {b.broker_id for b in m.cluster.brokers()})
    if unknown:
        raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    increment = t.count - len(current)
    if len(assignments) != increment:
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {increment} but {len(assignments)} assignments provided."
        )
    new = {len(current) + i: r for i, r in enumerate(assignments)}
    for p, replicas in new.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} "
                f"for partition id {p}."
            )
    expected = len(current[min(current)])
    bad = {p: len(r) for p, r in new.items() if len(r) != expected}
    if bad:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has {expected} while partitions "
            f"[{', '.join(map(str, bad))}] have replication factors [{', '.join(map(str, bad.values()))}], "
            "respectively."
        )
    return new


@api(37, 0, 3, request=CreatePartitionsRequest)
async def create_partitions(
    m: Managers, ctx: RequestContext, request: CreatePartitionsRequest
) -> cp.CreatePartitionsResponse:
    results: list[cp.CreatePartitionsTopicResult] = []
    quota = mutation_quota(m, ctx, strict_since=3)
    try:
        existing = {t.name: len(topic.partitions) for t in request.topics if (topic := m.cluster.topic(t.name))}
        check_partitions_per_request(sum(max(t.count - existing.get(t.name, 0), 0) for t in request.topics))
        too_many = None
    except KafkaError as exc:
        too_many = exc
    for t in request.topics:
        message: str | None = None
        try:
            if too_many is not None:
                raise too_many
            if not ctx.authorized(Operation.ALTER, ResourceType.TOPIC, t.name):
                results.append(cp.CreatePartitionsTopicResult(
                    name=t.name, error_code=ErrorCode.topic_authorization_failed, error_message=None))
                continue
            topic = m.cluster.topic(t.name)
            if topic is None:
                raise UnknownTopicError(f"The topic '{t.name}' does not exist.")
            current = len(topic.partitions)
            if t.count < current:
                raise InvalidPartitionsError(
                    f"Topic currently has {current} partitions, which is higher than the requested {t.count}."
                )
            if t.count == current:
                raise InvalidPartitionsError(f"Topic already has {current} partitions.")
            assignment = _new_partitions_assignment(
                m, t, {p: list(s.replicas) for p, s in topic.partitions.items()}
            )
            if not request.validate_only:
                if quota is not None:  # controller_mutation_rate counts the partitions added
                    quota.record(t.count - current)
                await m.admin.create_partitions(t.name, t.count, assignment)
            code = ErrorCode.none
        except KafkaError as exc:
            code, message = error_code_for(exc), error_message(exc)
        results.append(cp.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return cp.CreatePartitionsResponse(throttle_time=ms32(mutation_throttle(m, ctx, quota)), results=tuple(results))


# ------------------------------------------------------------------------------------------ DescribeConfigs
def _synonym(syn: ConfigSynonym) -> dc.DescribeConfigsSynonym:
    return dc.DescribeConfigsSynonym(name=syn.name, value=syn.value, source=i8_(syn.source))


def _source(synonyms: list[ConfigSynonym]) -> ConfigSource:
    """A config's source is its first synonym's (Kafka's ConfigHelper), DEFAULT_CONFIG when there is none."""
    return synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG


def _entry(
    key: str, value: str | None, synonyms: list[ConfigSynonym], *, read_only: bool,
    with_synonyms: bool, kafka_type: ConfigType | None = None,
) -> dc.DescribeConfigsResourceResult:
    source = _source(synonyms)
    sensitive = kafka_type == ConfigType.PASSWORD
    if sensitive:  # Kafka never shows a password's value, nor its synonyms'
        value = None
        synonyms = [ConfigSynonym(syn.name, None, syn.source) for syn in synonyms]
    # is_default (v0 only, before kbus's lowest v1) is not in v4's class: the source says it
    return dc.DescribeConfigsResourceResult(
        name=key,
        value=value,
        read_only=read_only,
        config_source=i8_(source),
        is_sensitive=sensitive,
        synonyms=tuple(_synonym(syn) for syn in synonyms) if with_synonyms else (),
        config_type=i8_(kafka_type if kafka_type is not None else _config_type(value or "")),
        documentation=None,
    )


def _topic_synonyms(m: Managers, overrides: Mapping[str, str]) -> Callable[[str, str], list[ConfigSynonym]]:
    """Where a topic's config comes from (ConfigHelper.createTopicConfigEntry), for DescribeConfigs and
    CreateTopics alike: the topic's own override, then where its broker synonym is set on this broker
    (per-broker dynamic, cluster-wide dynamic, server.properties, Kafka's default)."""
    layers = m.admin.dynamic_broker_configs()
    own, cluster_default = layers.get(str(m.broker_id), {}), layers.get(BROKER_DEFAULT_ENTITY, {})
    static = m.admin.static_config.raw

    def synonyms(key: str, value: str) -> list[ConfigSynonym]:
        broker_key = topic_broker_synonym(key)
        out = [] if broker_key is None else config_synonyms(broker_key, own, cluster_default, static)
        if key in overrides:
            out.insert(0, ConfigSynonym(key, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        return out

    return synonyms


def _topic_entries(
    m: Managers, name: str, keys: set[str] | None, with_synonyms: bool
) -> tuple[dc.DescribeConfigsResourceResult, ...]:
    topic = m.cluster.topic(name)
    if topic is None:
        raise UnknownTopicError(f"Topic {name} does not exist.")
    sources = _topic_synonyms(m, topic.configs)
    return tuple(
        _entry(key, value, sources(key, value), read_only=False, with_synonyms=with_synonyms)
        for key, value in m.admin.log_config_for(topic).to_properties().items()
        if keys is None or key in keys
    )


def _broker_entries(
    m: Managers, name: str, keys: set[str] | None, with_synonyms: bool
) -> tuple[dc.DescribeConfigsResourceResult, ...]:
    """A broker's configs with their sources (ConfigHelper.createBrokerConfigEntry); name "" is the cluster-wide
    dynamic default entity, which lists only what is set there, with only its own synonyms."""
    layers = m.admin.dynamic_broker_configs()
    cluster_default = layers.get(BROKER_DEFAULT_ENTITY, {})
    static = m.admin.static_config.raw
    if name == "":
        out: list[dc.DescribeConfigsResourceResult] = []
        for key, value in sorted(cluster_default.items()):
            if keys is None or key in keys:
                synonyms = [s for s in config_synonyms(key, {}, cluster_default, {})
                            if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]  # fmt: skip
                out.append(_entry(key, value, synonyms, read_only=not is_dynamic_broker_key(key),
                                  with_synonyms=with_synonyms, kafka_type=config_type(key)))  # fmt: skip
        return tuple(out)
    own = layers.get(str(m.broker_id), {})
    entries: list[dc.DescribeConfigsResourceResult] = []
    # every key of Kafka's KafkaConfig (those kbus does not act on too, as Kafka lists them) and the dynamic-only
    # throttles where set
    names = sorted({*BROKER_CONFIGS, *OTHER_BROKER_CONFIGS,
                    *(k for k in (*cluster_default, *own, *static)
                      if k in DYNAMIC_ONLY_KEYS or listener_key(k) is not None)})  # fmt: skip
    for key in names:
        if keys is not None and key not in keys:
            continue
        synonyms = config_synonyms(key, own, cluster_default, static)
        spec = BROKER_CONFIGS.get(key)
        if spec is not None:
            value = vars(m.config)[spec.attr]
            text = None if value in (None, "") else format_value(value)  # Kafka's null: not set and no default
        else:
            text = synonyms[0].value if synonyms else None
        entries.append(_entry(key, text, synonyms, read_only=not is_dynamic_broker_key(key),
                              with_synonyms=with_synonyms, kafka_type=config_type(key)))  # fmt: skip
    return tuple(entries)


def _config_authorized(ctx: RequestContext, resource_type: int, name: str, op: Operation) -> bool:
    """Kafka: topic configs need the operation on the topic, broker configs on the cluster."""
    if resource_type == TOPIC:
        return ctx.authorized(op, ResourceType.TOPIC, name)
    if resource_type == GROUP:
        return ctx.authorized(op, ResourceType.GROUP, name)
    return ctx.authorized(op, ResourceType.CLUSTER)


def _config_denied(resource_type: int) -> ErrorCode:
    return (ErrorCode.topic_authorization_failed if resource_type == TOPIC else ErrorCode.group_authorization_failed
            if resource_type == GROUP else ErrorCode.cluster_authorization_failed)


@api(32, 1, 4, request=DescribeConfigsRequest)
async def describe_configs(
    m: Managers, ctx: RequestContext, request: DescribeConfigsRequest
) -> dc.DescribeConfigsResponse:
    results: list[dc.DescribeConfigsResult] = []
    for res in request.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        configs: tuple[dc.DescribeConfigsResourceResult, ...] = ()
        code, message = ErrorCode.none, None
        try:
            if not _config_authorized(ctx, res.resource_type, res.resource_name, Operation.DESCRIBE_CONFIGS):
                code = _config_denied(res.resource_type)
            elif res.resource_type == TOPIC:
                configs = _topic_entries(m, res.resource_name, keys, request.include_synonyms)
            elif res.resource_type == GROUP:
                configs = await _group_entries(m, res.resource_name, keys)
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", str(m.broker_id)):
                    raise InvalidRequestError(f"Unexpected broker id, expected {m.broker_id}")
                configs = _broker_entries(m, res.resource_name, keys, request.include_synonyms)
            else:
                code, message = ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
        except KafkaError as exc:
            (code, message), configs = _admin_error(exc), ()
        results.append(dc.DescribeConfigsResult(error_code=code, error_message=message,
                                                resource_type=res.resource_type, resource_name=res.resource_name,
                                                configs=configs))
    return dc.DescribeConfigsResponse(throttle_time=NO_TIME, results=tuple(results))


async def _group_entries(
    m: Managers, group: str, keys: set[str] | None
) -> tuple[dc.DescribeConfigsResourceResult, ...]:
    """Kafka 4's group configs: the group's own value (GROUP_CONFIG) or the broker's (DEFAULT_CONFIG)."""
    if not group:
        raise InvalidRequestError("Group name must not be empty")
    own = await asyncio.to_thread(m.group_configs.group_config, group) if m.group_configs is not None else {}
    out: list[dc.DescribeConfigsResourceResult] = []
    for key, (kind, broker_key) in sorted(GROUP_CONFIGS.items()):
        if keys is not None and key not in keys:
            continue
        default = str(getattr(m.config, broker_key.replace(".", "_"))) if broker_key else GROUP_DEFAULTS[key]
        value = own.get(key, default)
        out.append(dc.DescribeConfigsResourceResult(
            name=key, value=value, read_only=False,
            config_source=i8_(GROUP_CONFIG_SOURCE if key in own else ConfigSource.DEFAULT_CONFIG),
            is_sensitive=False, synonyms=(), config_type=i8_(ConfigType[kind]), documentation=None))
    return tuple(out)


# ------------------------------------------------------------------------------------------ AlterConfigs
async def _alter_topic(
    m: Managers, name: str, changes: dict[str, str | None], validate_only: bool, replace: bool
) -> None:
    topic = m.cluster.topic(name)
    if topic is None:
        raise UnknownTopicError(f"Topic {name} does not exist.")
    if replace:  # legacy AlterConfigs replaces the whole set
        changes = {**dict.fromkeys(topic.configs), **changes}
    validate_topic_configs(changes)
    if not validate_only:
        await m.admin.alter_topic_configs(name, changes)


def _broker_entity(name: str) -> str:
    """A BROKER resource name: "" is the cluster-wide default (/config/brokers/<default>), else a broker id."""
    if name == "":
        return BROKER_DEFAULT_ENTITY
    if not name.isdigit():
        raise InvalidRequestError(f"Broker id must be an integer, got '{name}'")
    return str(int(name))


async def _alter_broker(
    m: Managers, entity: str, changes: dict[str, str | None], validate_only: bool, replace: bool
) -> None:
    if replace:  # legacy AlterConfigs replaces the whole set (of the broker's entity as this broker knows it)
        changes = {**dict.fromkeys(m.admin.dynamic_broker_configs().get(entity, {})), **changes}
    if validate_only:
        changes = {k: v for k, v in changes.items() if v is not None}
        try:
            check_dynamic_broker_configs(changes, m.config)
        except ConfigError as exc:
            raise InvalidRequestError(str(exc)) from None
        return
    await m.admin.alter_broker_configs(entity, changes)


async def _alter_group(
    m: Managers, res: LegacyAlterConfigsResource | AlterConfigsResource, validate_only: bool
) -> None:
    """A GROUP resource (KIP-932's share.* group configs), kept by the metadata store (/config/groups/<group>)."""
    if not res.resource_name:
        raise InvalidRequestError("Group name must not be empty")
    store = m.group_configs
    current = await asyncio.to_thread(store.group_config, res.resource_name) if store is not None else {}
    incremental = isinstance(res, AlterConfigsResource)
    changes: dict[str, str | None] = {} if incremental else dict.fromkeys(current)
    for c in res.configs:
        op = c.config_operation if isinstance(c, IncrementalAlterableConfig) else SET
        if op in (APPEND, SUBTRACT):
            raise InvalidRequestError(f"A {c.name} group config cannot be appended to or subtracted from")
        changes[c.name] = c.value if op == SET else None
    validate_group_configs(changes)
    if store is None:
        raise InvalidRequestError("This broker keeps no group configs")
    if not validate_only:
        await asyncio.to_thread(store.alter_group_config, res.resource_name, changes)


async def _alter_responses(
    m: Managers, ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest
) -> list[tuple[int, str, ErrorCode, str | None]]:
    """Per resource: (its type, its name, its error, the error's message)."""
    incremental = isinstance(request, IncrementalAlterConfigsRequest)
    out: list[tuple[int, str, ErrorCode, str | None]] = []
    for res in request.resources:
        code, message = ErrorCode.none, None
        try:
            if not _config_authorized(ctx, res.resource_type, res.resource_name, Operation.ALTER_CONFIGS):
                code = _config_denied(res.resource_type)
            elif res.resource_type == GROUP:
                await _alter_group(m, res, request.validate_only)
            elif res.resource_type not in (TOPIC, BROKER):
                code, message = ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
            else:
                entity = None
                if res.resource_type == BROKER:
                    entity = _broker_entity(res.resource_name)
                    current = m.admin.dynamic_broker_configs().get(entity, {})
                else:
                    topic = m.cluster.topic(res.resource_name)
                    current = dict(topic.configs) if topic else {}
                changes: dict[str, str | None] = {}
                for c in res.configs:
                    op = c.config_operation if isinstance(c, IncrementalAlterableConfig) else SET
                    if op == SET:
                        changes[c.name] = c.value
                    elif op == DELETE:
                        changes[c.name] = None
                    else:
                        items = [x for x in current.get(c.name, "").split(",") if x]
                        vals = [x for x in (c.value or "").split(",") if x]
                        items = (
                            items + [v for v in vals if v not in items]
                            if op == APPEND
                            else [x for x in items if x not in vals]
                        )
                        changes[c.name] = ",".join(items) if items else None
                if entity is not None:
                    await _alter_broker(m, entity, changes, request.validate_only, replace=not incremental)
                else:
                    await _alter_topic(m, res.resource_name, changes, request.validate_only, replace=not incremental)
        except KafkaError as exc:
            code, message = _admin_error(exc)
        out.append((res.resource_type, res.resource_name, code, message))
    return out


@api(33, 0, 2, request=AlterConfigsRequest)
async def alter_configs(m: Managers, ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    return AlterConfigsResponse(throttle_time=NO_TIME, responses=tuple(
        ac.AlterConfigsResourceResponse(error_code=code, error_message=message, resource_type=i8_(kind),
                                        resource_name=name)
        for kind, name, code, message in await _alter_responses(m, ctx, request)))


@api(44, 0, 1, request=IncrementalAlterConfigsRequest)
async def incremental_alter_configs(
    m: Managers, ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> iac.IncrementalAlterConfigsResponse:
    return iac.IncrementalAlterConfigsResponse(throttle_time=NO_TIME, responses=tuple(
        iac.AlterConfigsResourceResponse(error_code=code, error_message=message, resource_type=i8_(kind),
                                         resource_name=name)
        for kind, name, code, message in await _alter_responses(m, ctx, request)))


# ------------------------------------------------------------------------------------------ DescribeCluster
@api(60, 0, 1, request=DescribeClusterRequest)
async def describe_cluster(
    m: Managers, ctx: RequestContext, request: DescribeClusterRequest
) -> dcl.DescribeClusterResponse:
    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return dcl.DescribeClusterResponse(
            throttle_time=NO_TIME, error_code=ErrorCode.cluster_authorization_failed, error_message=None,
            endpoint_type=i8_(1), cluster_id="", controller_id=broker(-1), brokers=(),
            cluster_authorized_operations=i32_(-2147483648))
    brokers = tuple(
        dcl.DescribeClusterBroker(broker_id=broker(b.broker_id), host=ep.host, port=i32_(ep.port), rack=b.rack)
        for b, ep in on_listener(ctx, m.cluster.brokers())
    )
    return dcl.DescribeClusterResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=i8_(1),
        cluster_id=m.cluster.cluster_id,
        controller_id=broker(m.cluster.controller_id()),
        brokers=brokers,
        cluster_authorized_operations=i32_(  # Kafka's INT32_MIN when not asked for
            ctx.authorized_operations(ResourceType.CLUSTER) if request.include_cluster_authorized_operations
            else -2147483648),
    )


# ------------------------------------------------------------------------------------------ InitProducerId
def _may_write_idempotently(m: Managers, ctx: RequestContext) -> bool:
    """Kafka (KIP-679): IdempotentWrite on the cluster, or Write on any topic."""
    if ctx.authorizer is None or ctx.authorized(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER):
        return True
    return any(ctx.authorized(Operation.WRITE, ResourceType.TOPIC, t) for t in m.cluster.topics())


@api(22, 0, 4, request=InitProducerIdRequest)
async def init_producer_id(m: Managers, ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    def answer(code: ErrorCode, pid: int, epoch: int) -> InitProducerIdResponse:
        return InitProducerIdResponse(throttle_time=NO_TIME, error_code=code, producer_id=producer(pid),
                                      producer_epoch=i16_(epoch))

    if request.transactional_id is not None and not ctx.authorized(
        Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return answer(ErrorCode.transactional_id_authorization_failed, -1, -1)
    if request.transactional_id is None and not _may_write_idempotently(m, ctx):
        return answer(ErrorCode.cluster_authorization_failed, -1, -1)
    if request.transactional_id is not None:
        error, pid, epoch = await init_transactional_producer(m, ctx, request.transactional_id, request)
        return answer(ErrorCode(error), pid, epoch)
    pid, epoch = request.producer_id, request.producer_epoch  # v0-v2 have none: their schema default, -1
    if pid >= 0 and 0 <= epoch < 32766:
        # KIP-360: an idempotent producer bumps its epoch to reset sequences after an error.
        return answer(ErrorCode.none, pid, epoch + 1)
    return answer(ErrorCode.none, m.admin.allocate_producer_id(), 0)
