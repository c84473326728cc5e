"""The admin client over the Kafka wire protocol, built on confluent-kafka's AdminClient (librdkafka).

Every call waits at most `timeout_s`; every failure surfaces as one AdminError with Kafka's error name, so the
CLI can print one line and exit instead of hanging or dumping a traceback.

Why ~600 lines: one class, one short method per admin operation the CLI offers (cluster, topics, configs, groups,
offsets, ACLs, SCRAM users, records), each a translation to and from librdkafka."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    TopicMetadata,
)
from confluent_kafka.admin import ConfigEntry as CfgEntry

from kbus.admin.errors import AdminError
from kbus.admin.models import (
    BrokerNode,
    ClusterDescription,
    ConfigEntry,
    ConfigSynonym,
    DeletedRecords,
    GroupDescription,
    GroupListing,
    GroupMember,
    GroupOffset,
    PartitionDescription,
    PartitionOffset,
    TopicDescription,
)
from kbus.common.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from kbus.common.topics import is_internal

# Kafka's Topic.isInternal: the two topics the brokers own.

# librdkafka's ConsumerGroupState names -> the names Kafka's tools print.
_GROUP_STATES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}

# The local librdkafka errors that mean "no broker answered".
_UNREACHABLE = frozenset({"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_WAIT_COORD"})

# librdkafka's names that differ from the Java client's (what Kafka's tools and docs print).
_KAFKA_NAMES = {
    "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION",
    "TOPIC_EXCEPTION": "INVALID_TOPIC_EXCEPTION",
    "INVALID_MSG": "CORRUPT_MESSAGE",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "INVALID_MSG_SIZE": "INVALID_FETCH_SIZE",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
}

# Kafka's own wording (org.apache.kafka.common.protocol.Errors) for codes librdkafka only names generically
# ("Broker: Unknown topic or partition"); a message the broker sent itself is always kept instead.
_KAFKA_MESSAGES = {
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "_UNKNOWN_PARTITION": "This server does not host this topic-partition.",
    "_UNKNOWN_TOPIC": "This server does not host this topic-partition.",
    "OFFSET_OUT_OF_RANGE": "The requested offset is not within the range of offsets maintained by the server.",
    "INVALID_PARTITIONS": "Number of partitions is below 1.",
    "INVALID_REPLICATION_FACTOR": "Replication factor is below 1 or larger than the number of available brokers.",
    "TOPIC_ALREADY_EXISTS": "Topic with this name already exists.",
    "INVALID_TOPIC_EXCEPTION": "The request attempted to perform an operation on an invalid topic.",
    "GROUP_ID_NOT_FOUND": "The group id does not exist.",
    "NON_EMPTY_GROUP": "The group is not empty.",
    "INVALID_CONFIG": "Configuration is invalid.",
    "POLICY_VIOLATION": "Request parameters do not satisfy the configured policy.",
    "UNSUPPORTED_VERSION": "The version of API is not supported.",
    "NOT_CONTROLLER": "This is not the correct controller for this cluster.",
}

# Offset specs accepted by list_offsets, as kafka-get-offsets.sh spells them.
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3

_URL_SAFE = str.maketrans("+/", "-_")


def _resource_type(entity_type: str) -> Any:
    try:
        return {"topic": ConfigResource.Type.TOPIC, "broker": ConfigResource.Type.BROKER}[entity_type]
    except KeyError:
        raise AdminError(f"Unsupported entity type {entity_type}", "INVALID_REQUEST") from None


def _source_name(source: Any) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def _config_entry(e: Any) -> ConfigEntry:
    synonyms = [
        ConfigSynonym(_source_name(s.source), s.name, s.value) for s in (e.synonyms or {}).values()
    ]
    # librdkafka keys synonyms by name, so a topic override loses to the broker default of the same name
    # (retention.ms); Kafka lists the override first, as kafka-configs.sh prints it
    source = _source_name(e.source)
    if source == "DYNAMIC_TOPIC_CONFIG" and all(s.source != source for s in synonyms):
        synonyms.insert(0, ConfigSynonym(source, e.name, e.value))
    return ConfigEntry(
        name=e.name,
        value=e.value,
        is_default=e.is_default,
        is_sensitive=e.is_sensitive,
        is_read_only=e.is_read_only,
        source=source,
        synonyms=synonyms,
    )


def _group_state(state: Any) -> str:
    name = getattr(state, "name", None) or str(state)
    return _GROUP_STATES.get(name, name)


class KafkaAdmin:
    """Topic, offset, cluster and consumer-group administration against a running broker.

    Satisfies `kbus.admin.base.TopicAdmin`."""

    def __init__(
        self,
        bootstrap: str,
        config: dict[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        conf: dict[str, Any] = {
            "client.id": "kbus-admin",
            "socket.timeout.ms": int(timeout_s * 1000),
            # librdkafka would otherwise print its own connection-failure lines on stderr; our callers
            # report failures themselves, in one line.
            "log_level": 0,
        }
        conf.update(config or {})
        conf["bootstrap.servers"] = bootstrap
        try:
            self._client = AdminClient(conf)
        except KafkaException as exc:
            raise self._error(exc.args[0], "invalid admin client configuration") from None
        except (TypeError, ValueError) as exc:
            raise AdminError(f"Invalid admin client configuration: {exc}", "INVALID_CONFIG") from None

    # --- error handling -------------------------------------------------------------------------

    def _error(self, err: Any, what: str) -> AdminError:
        if not isinstance(err, KafkaError):
            return AdminError(f"{what}: {err}")
        name = _KAFKA_NAMES.get(err.name(), err.name())
        if name in _UNREACHABLE:
            return AdminError(
                f"Timed out waiting for a broker at {self.bootstrap} ({what}): {err.str()}", name
            )
        text = err.str()
        generic = text.startswith(("Broker: ", "Local: "))
        if generic and name in _KAFKA_MESSAGES:
            text = _KAFKA_MESSAGES[name]
        # librdkafka prefixes broker-side codes with "Broker: "; Kafka's tools print the plain message.
        text = text.removeprefix("Broker: ")
        return AdminError(text, name)

    def _wait(self, future: Future[Any], what: str) -> Any:
        try:
            return future.result(timeout=self.timeout_s + 1)
        except KafkaException as exc:
            raise self._error(exc.args[0], what) from None
        except TimeoutError:
            raise AdminError(
                f"Timed out waiting for a broker at {self.bootstrap} ({what})", "_TIMED_OUT"
            ) from None

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self._client.list_topics(topic=topic, timeout=self.timeout_s)
        except KafkaException as exc:
            raise self._error(exc.args[0], "fetching metadata") from None

    # --- cluster --------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        md = self._metadata()
        brokers = [BrokerNode(b.id, b.host, b.port) for b in sorted(md.brokers.values(), key=lambda b: b.id)]
        controller = md.controller_id if md.controller_id >= 0 else None
        return ClusterDescription(md.cluster_id, controller, brokers)

    # --- topics ---------------------------------------------------------------------------------

    def list_topics(self) -> list[str]:
        return sorted(self._metadata().topics)

    def describe_topics(self, names: list[str]) -> list[TopicDescription]:
        if not names:
            return []
        md = self._metadata()
        missing = [n for n in names if n not in md.topics]
        if missing:
            raise AdminError(f"Topic '{missing[0]}' does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
        topic_ids = self._topic_ids(names)
        configs = self._non_default_configs(names)
        out: list[TopicDescription] = []
        for name in names:
            tmd = md.topics[name]
            # A topic whose leaders are still being elected is described with "Leader: none", as Kafka does.
            if tmd.error is not None and tmd.error.code() != KafkaError.NO_ERROR and not tmd.partitions:
                raise self._error(tmd.error, f"describing topic {name}")
            parts = _partition_descriptions(tmd)
            out.append(
                TopicDescription(
                    name=name,
                    partitions=parts,
                    topic_id=topic_ids.get(name),
                    is_internal=is_internal(name),
                    configs=configs.get(name, {}),
                )
            )
        return out

    def describe_all_partitions(self) -> list[TopicDescription]:
        """Every topic's partitions (leader, replicas, ISR) from one Metadata request: no topic ids or configs,
        so a console can poll it every few seconds (kbus ui's overview)."""
        md = self._metadata()
        out: list[TopicDescription] = []
        for name in sorted(md.topics):
            parts = _partition_descriptions(md.topics[name])
            out.append(TopicDescription(name=name, partitions=parts, is_internal=is_internal(name)))
        return out

    def _topic_ids(self, names: list[str]) -> dict[str, str]:
        """Topic ids come only from DescribeTopics (Metadata v10+); a broker without them just gets none."""
        try:
            futures = self._client.describe_topics(TopicCollection(names), request_timeout=self.timeout_s)
        except (KafkaException, ValueError):
            return {}
        ids: dict[str, str] = {}
        for name, fut in futures.items():
            try:
                desc = fut.result(timeout=self.timeout_s + 1)
            except (KafkaException, TimeoutError):
                continue
            # librdkafka prints standard base64 (+/); Kafka's Uuid.toString is URL-safe base64 (-_)
            tid = str(desc.topic_id).translate(_URL_SAFE) if desc.topic_id is not None else ""
            if tid and tid != "AAAAAAAAAAAAAAAAAAAAAA":  # the zero UUID, base64: Kafka omits it
                ids[name] = tid
        return ids

    def _non_default_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        """kafka-topics --describe prints every entry not at its default; a broker that cannot describe
        configs just gets an empty Configs column instead of a failed describe."""
        try:
            futures = self._client.describe_configs(
                [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names], request_timeout=self.timeout_s
            )
        except (KafkaException, ValueError):
            return {}
        out: dict[str, dict[str, str]] = {}
        for res, fut in futures.items():
            try:
                entries = fut.result(timeout=self.timeout_s + 1)
            except (KafkaException, TimeoutError):
                continue
            out[res.name] = {
                e.name: e.value
                for e in sorted(entries.values(), key=lambda e: e.name)
                if not e.is_default
                and e.source != ConfigSource.DEFAULT_CONFIG.value
                and e.value is not None
                and not e.is_sensitive
            }
        return out

    def describe_configs(self, entity_type: str, name: str) -> list[ConfigEntry]:
        """Every config of a topic or broker ("" for the cluster-wide broker defaults), with its synonyms."""
        futures = self._client.describe_configs(
            [ConfigResource(_resource_type(entity_type), name)], request_timeout=self.timeout_s
        )
        entries = self._wait(next(iter(futures.values())), f"describing configs of {entity_type} {name}")
        return [_config_entry(e) for e in sorted(entries.values(), key=lambda e: e.name)]

    def describe_topic_configs(self, name: str) -> list[ConfigEntry]:
        return self.describe_configs("topic", name)

    def alter_configs(self, entity_type: str, name: str, set_: dict[str, str], delete: list[str]) -> None:
        """IncrementalAlterConfigs: set some keys and remove others, leaving the rest alone."""
        ops = [CfgEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        ops += [CfgEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        resource = ConfigResource(_resource_type(entity_type), name, incremental_configs=ops)
        futures = self._client.incremental_alter_configs([resource], request_timeout=self.timeout_s)
        self._wait(next(iter(futures.values())), f"altering configs of {entity_type} {name}")

    # --- ACLs --------------------------------------------------------------------------------------------

    def create_acls(self, bindings: list[AclBinding]) -> None:
        from confluent_kafka.admin import AclBinding as CkBinding

        ck = [
            CkBinding(int(b.resource_type), b.name, int(b.pattern), b.principal, b.host, int(b.operation),
                      int(b.permission))
            for b in bindings
        ]
        for fut in self._client.create_acls(ck, request_timeout=self.timeout_s).values():
            self._wait(fut, "creating ACLs")

    def describe_acls(self, flt: AclFilter) -> list[AclBinding]:
        future = self._client.describe_acls(_ck_filter(flt), request_timeout=self.timeout_s)
        return [_from_ck(b) for b in self._wait(future, "describing ACLs")]

    def delete_acls(self, filters: list[AclFilter]) -> list[AclBinding]:
        futures = self._client.delete_acls([_ck_filter(f) for f in filters], request_timeout=self.timeout_s)
        return [_from_ck(b) for fut in futures.values() for b in self._wait(fut, "deleting ACLs")]

    # --- SCRAM users (KIP-554) ----------------------------------------------------------------------

    def describe_scram_users(self, users: list[str] | None) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations}; secrets never leave the broker."""
        if users is None:
            everyone = self._client.describe_user_scram_credentials()
            assert isinstance(everyone, Future)  # one future for all users
            described = self._wait(everyone, "describing SCRAM users")
        else:
            futures = self._client.describe_user_scram_credentials(users)
            assert isinstance(futures, dict)  # one future per user
            described = {u: self._wait(f, f"describing SCRAM user {u}") for u, f in futures.items()}
        return {
            user: {info.mechanism.name.replace("_", "-"): info.iterations for info in d.scram_credential_infos}
            for user, d in described.items()
        }

    def alter_scram_user(self, user: str, upserts: dict[str, tuple[int, str]], deletes: list[str]) -> None:
        """upserts: mechanism -> (iterations, password); the client salts and hashes, the password is not sent."""
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialDeletion,
            UserScramCredentialUpsertion,
        )

        def mechanism(name: str) -> ScramMechanism:
            try:
                return ScramMechanism[name.replace("-", "_")]
            except KeyError:
                raise AdminError(f"Unknown SCRAM mechanism {name}", "UNSUPPORTED_SASL_MECHANISM") from None

        alterations: list[Any] = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism(m), it), pw.encode())
            for m, (it, pw) in upserts.items()
        ]
        alterations += [UserScramCredentialDeletion(user, mechanism(m)) for m in deletes]
        futures = self._client.alter_user_scram_credentials(alterations)
        for fut in futures.values():
            self._wait(fut, f"altering SCRAM credentials of user {user}")

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
        replica_assignment: list[list[int]] | None = None,
    ) -> None:
        if replica_assignment:
            # librdkafka takes an assignment only beside its partition count (with the default, -1, it raises
            # "Specifying a default partition count and a replica assignment are mutually exclusive"); Kafka's
            # kafka-topics.sh takes --replica-assignment alone, its length being the count.
            new = NewTopic(
                name, num_partitions=len(replica_assignment), replica_assignment=replica_assignment,
                config=configs or {},
            )
        else:
            new = NewTopic(
                name,
                num_partitions=partitions if partitions is not None else -1,
                replication_factor=replication_factor if replication_factor is not None else -1,
                config=configs or {},
            )
        futures = self._client.create_topics(
            [new], operation_timeout=self.timeout_s, request_timeout=self.timeout_s
        )
        try:
            self._wait(futures[name], f"creating topic {name}")
        except AdminError as err:
            if err.name == "TOPIC_ALREADY_EXISTS":
                raise AdminError(f"Topic '{name}' already exists.", err.name) from None
            raise

    def delete_topic(self, name: str) -> None:
        futures = self._client.delete_topics(
            [name], operation_timeout=self.timeout_s, request_timeout=self.timeout_s
        )
        try:
            self._wait(futures[name], f"deleting topic {name}")
        except AdminError as err:
            if err.name == "UNKNOWN_TOPIC_OR_PARTITION":
                raise AdminError(f"Topic '{name}' does not exist", "UNKNOWN_TOPIC_OR_PARTITION") from None
            raise

    def create_partitions(self, name: str, total_count: int) -> None:
        futures = self._client.create_partitions(
            [NewPartitions(name, total_count)], operation_timeout=self.timeout_s, request_timeout=self.timeout_s
        )
        self._wait(futures[name], f"adding partitions to topic {name}")

    # --- offsets and records --------------------------------------------------------------------

    def partitions_of(self, topic: str) -> list[int]:
        md = self._metadata()
        if topic not in md.topics:
            raise AdminError(f"Topic '{topic}' does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
        return sorted(md.topics[topic].partitions)

    def list_offsets(self, partitions: Iterable[tuple[str, int]], spec: int) -> list[PartitionOffset]:
        """spec: LATEST (-1), EARLIEST (-2), MAX_TIMESTAMP (-3) or a timestamp in ms."""
        if spec == LATEST:
            offset_spec = OffsetSpec.latest()
        elif spec == EARLIEST:
            offset_spec = OffsetSpec.earliest()
        elif spec == MAX_TIMESTAMP:
            offset_spec = OffsetSpec.max_timestamp()
        else:
            offset_spec = OffsetSpec.for_timestamp(spec)
        request = {TopicPartition(t, p): offset_spec for t, p in partitions}
        if not request:
            return []
        futures = self._client.list_offsets(request, request_timeout=self.timeout_s)
        out: list[PartitionOffset] = []
        for tp, fut in futures.items():
            info = self._wait(fut, f"listing offsets of {tp.topic}-{tp.partition}")
            out.append(PartitionOffset(tp.topic, tp.partition, info.offset, info.timestamp))
        return sorted(out, key=lambda o: (o.topic, o.partition))

    def delete_records(self, before: Iterable[tuple[str, int, int]]) -> list[DeletedRecords]:
        """Delete every record below `offset` in each (topic, partition, offset); -1 means the high watermark."""
        request = [TopicPartition(t, p, o) for t, p, o in before]
        if not request:
            return []
        futures = self._client.delete_records(
            request, request_timeout=self.timeout_s, operation_timeout=self.timeout_s
        )
        out: list[DeletedRecords] = []
        for tp, fut in futures.items():
            try:
                res = self._wait(fut, f"deleting records of {tp.topic}-{tp.partition}")
                out.append(DeletedRecords(tp.topic, tp.partition, low_watermark=res.low_watermark))
            except AdminError as err:
                if err.name in _UNREACHABLE:
                    raise
                out.append(DeletedRecords(tp.topic, tp.partition, error=err.message))
        return sorted(out, key=lambda d: (d.topic, d.partition))

    # --- consumer groups ------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        result = self._wait(
            self._client.list_consumer_groups(request_timeout=self.timeout_s), "listing consumer groups"
        )
        return sorted(
            (GroupListing(g.group_id, _group_state(g.state), g.is_simple_consumer_group) for g in result.valid),
            key=lambda g: g.group_id,
        )

    def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        futures = self._client.describe_consumer_groups(group_ids, request_timeout=self.timeout_s)
        out: list[GroupDescription] = []
        for gid in group_ids:
            g = self._wait(futures[gid], f"describing consumer group {gid}")
            coordinator = (
                BrokerNode(g.coordinator.id, g.coordinator.host, g.coordinator.port)
                if g.coordinator is not None
                else None
            )
            members = [
                GroupMember(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.host,
                    assignment=sorted(
                        (tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])
                    ),
                    group_instance_id=m.group_instance_id,
                    target_assignment=(
                        sorted((tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions)
                        if m.target_assignment is not None
                        else None
                    ),
                )
                for m in g.members
            ]
            out.append(
                GroupDescription(
                    group_id=g.group_id,
                    state=_group_state(g.state),
                    partition_assignor=g.partition_assignor or "",
                    coordinator=coordinator,
                    members=members,
                    is_simple=g.is_simple_consumer_group,
                    group_type="consumer" if g.type == ConsumerGroupType.CONSUMER else "classic",
                )
            )
        return out

    def delete_groups(self, group_ids: list[str]) -> dict[str, AdminError | None]:
        """Per group: None when deleted, else the error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...)."""
        futures = self._client.delete_consumer_groups(group_ids, request_timeout=self.timeout_s)
        out: dict[str, AdminError | None] = {}
        for gid in group_ids:
            try:
                self._wait(futures[gid], f"deleting consumer group {gid}")
                out[gid] = None
            except AdminError as err:
                if err.name in _UNREACHABLE:
                    raise
                out[gid] = err
        return out

    def list_group_offsets(self, group_id: str) -> list[GroupOffset]:
        futures = self._client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout_s
        )
        res = self._wait(futures[group_id], f"fetching offsets of consumer group {group_id}")
        return sorted(
            (
                GroupOffset(tp.topic, tp.partition, tp.offset, tp.metadata)
                for tp in res.topic_partitions
                if tp.error is None
            ),
            key=lambda o: (o.topic, o.partition),
        )

    def alter_group_offsets(self, group_id: str, offsets: Iterable[tuple[str, int, int]]) -> None:
        request = [
            ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for t, p, o in offsets])
        ]
        futures = self._client.alter_consumer_group_offsets(request, request_timeout=self.timeout_s)
        res = self._wait(futures[group_id], f"altering offsets of consumer group {group_id}")
        for tp in res.topic_partitions:
            if tp.error is not None:
                raise self._error(tp.error, f"altering offset of {tp.topic}-{tp.partition}")

    def close(self) -> None:
        # AdminClient has no close(); dropping the reference lets librdkafka tear down its threads.
        self._client = None  # type: ignore[assignment]

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The name the topic command and the ZooKeeper back end refer to: the wire implementation of TopicAdmin.
KafkaTopicAdmin = KafkaAdmin


def _ck_filter(f: AclFilter) -> Any:
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(  # None matches any name, principal or host (librdkafka's filter)
        int(f.resource_type), f.name, int(f.pattern), f.principal, f.host,  # type: ignore[arg-type]
        int(f.operation), int(f.permission),
    )


def _from_ck(b: Any) -> AclBinding:
    return AclBinding(
        ResourceType(b.restype.value), b.name, PatternType(b.resource_pattern_type.value), b.principal, b.host,
        Operation(b.operation.value), Permission(b.permission_type.value),
    )


def _partition_descriptions(tmd: TopicMetadata) -> list[PartitionDescription]:
    """A librdkafka TopicMetadata's partitions in id order; a leader being elected (-1) is None ("Leader: none")."""
    return [
        PartitionDescription(
            partition=p.id, leader=p.leader if p.leader >= 0 else None, replicas=list(p.replicas), isr=list(p.isrs)
        )
        for p in sorted(tmd.partitions.values(), key=lambda p: p.id)
    ]
