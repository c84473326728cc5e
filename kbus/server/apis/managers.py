"""What API handlers are given (Kafka's KafkaApis constructor): the managers they call, each seen through the
narrow interface the handlers use. `Broker` builds one `Managers` and the network passes it to every handler;
unit tests pass fakes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from kbus.common.acl import AclBinding
from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.quotas import QuotaEntity
from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import BatchHeader
from kbus.server.log.log import AppendResult
from kbus.server.log.manager import LogDirUsage
from kbus.server.log.producer_state import VerificationGuard
from kbus.server.metadata.types import TopicMetadata
from kbus.server.partition.partition import Partition
from kbus.server.quotas.manager import QuotaManagers
from kbus.server.replication.fetch_session import FetchSessionCache
from kbus.server.share.coordinator import ShareCoordinator
from kbus.server.share.manager import ShareConfig, SharePartitionManager
from kbus.zk.reassignment import PartitionAssignment

if TYPE_CHECKING:
    from kbus.server.coordinator.coordinator import GroupCoordinator
    from kbus.server.replication.replica_manager import PartitionRead
    from kbus.server.security.manager import SecurityManager
    from kbus.server.transaction.service import TransactionService


class Replicas(Protocol):
    """Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch (the replica manager)."""

    @property
    def stopping(self) -> bool: ...
    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]: ...
    def append_records(
        self, part: Partition, records: bytes | bytearray | memoryview, acks: int, *,
        from_coordinator: bool = False, verify_transactions: bool = False,
        verification_guard: VerificationGuard | None = None,
        transaction_version: int = 0, validated: BatchHeader | None = None,
    ) -> AppendResult: ...
    def acks_satisfied(self, part: Partition, result: AppendResult, acks: int) -> bool: ...
    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None: ...
    def read(
        self,
        part: Partition,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int = -1,
        read_committed: bool = False,
        min_one_batch: bool = True,
        report_progress: bool = True,
    ) -> PartitionRead: ...
    def follower_fetched(self, part: Partition, replica_id: int, fetch_offset: int) -> None: ...
    def describe_log_dirs(
        self,
    ) -> list[tuple[LogDirUsage, dict[tuple[str, int], int], dict[tuple[str, int], int]]]: ...
    def alter_replica_log_dirs(self, moves: dict[tuple[str, int], str]) -> dict[tuple[str, int], ErrorCode]: ...
    @property
    def leader_throttling(self) -> bool: ...
    def leader_throttled(self, topic: str, index: int) -> bool: ...
    def record_leader_replication(self, nbytes: int) -> None: ...


class Cluster(Protocol):
    """Metadata, DescribeCluster, FindCoordinator (the metadata cache)."""

    cluster_id: str

    def brokers(self) -> list[BrokerInfo]: ...
    def topics(self) -> dict[str, TopicMetadata]: ...
    def topic(self, name: str) -> TopicMetadata | None: ...
    def controller_id(self) -> int: ...
    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None: ...


class TopicAdmin(Protocol):
    """CreateTopics, DeleteTopics, CreatePartitions, the configs APIs, auto topic creation, internal topics,
    InitProducerId (the admin manager)."""

    def default_log_config(self) -> LogConfig: ...
    def log_config_for(self, topic: TopicMetadata) -> LogConfig: ...
    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata: ...
    async def auto_create_topic(self, name: str) -> TopicMetadata | None: ...
    async def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicMetadata: ...
    async def delete_topic(self, name: str) -> None: ...
    async def create_partitions(
        self, name: str, total_count: int, assignment: dict[int, list[int]] | None = None
    ) -> None: ...
    async def alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> None: ...
    def allocate_producer_id(self) -> int: ...
    @property
    def static_config(self) -> KafkaConfig: ...
    def dynamic_broker_configs(self) -> dict[str, dict[str, str]]: ...
    async def alter_broker_configs(self, entity: str, changes: dict[str, str | None]) -> None: ...
    async def alter_reassignments(
        self, requests: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], str | None]: ...
    async def list_reassignments(
        self, partitions: set[tuple[str, int]] | None
    ) -> dict[tuple[str, int], PartitionAssignment]: ...
    async def elect_leaders(
        self, kind: str, partitions: set[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str | None]: ...


class UserCredentials(Protocol):
    """Describe/AlterUserScramCredentials: users' SCRAM credentials as Kafka stores them (the metadata store);
    calls may block (ZooKeeper)."""

    def user_credentials(self, user: str) -> dict[str, str]: ...
    def users_credentials(self) -> dict[str, dict[str, str]]: ...
    def alter_user_credential(self, user: str, mechanism: str, credential: str | None) -> None: ...


class AclStore(Protocol):
    """Create/Describe/DeleteAcls: where ACLs live (ZooKeeper's /kafka-acl, or the local metadata file); may block."""

    def acls(self) -> list[AclBinding]: ...
    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None: ...


class QuotaStore(Protocol):
    """Describe/AlterClientQuotas: users' and clients' quota configs (ZooKeeper's /config/users and
    /config/clients, or the local metadata file); may block."""

    def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]: ...
    def quota_entity_config(self, entity: QuotaEntity) -> dict[str, str]: ...
    def set_quota_entity_config(self, entity: QuotaEntity, configs: dict[str, str]) -> None: ...


class GroupConfigStore(Protocol):
    """Group configs (kafka-configs --entity-type groups): ZooKeeper's /config/groups, or the local metadata
    file; may block."""

    def group_config(self, group: str) -> dict[str, str]: ...
    def alter_group_config(self, group: str, changes: dict[str, str | None]) -> None: ...


@dataclass
class Managers:
    config: KafkaConfig
    broker_id: int
    cluster: Cluster
    replicas: Replicas
    admin: TopicAdmin
    groups: GroupCoordinator | None
    transactions: TransactionService | None = None
    share_coordinator: ShareCoordinator | None = None  # KIP-932's __share_group_state
    security: SecurityManager | None = None  # listeners' TLS/SASL settings (SaslHandshake, SaslAuthenticate)
    users: UserCredentials | None = None
    acls: AclStore | None = None
    quota_store: QuotaStore | None = None
    group_configs: GroupConfigStore | None = None
    # Kafka's QuotaManagers: produce/fetch/request quotas per (user, client-id); none configured by default
    quotas: QuotaManagers = field(default_factory=QuotaManagers)
    # Kafka's FetchManager: incremental fetch sessions (KIP-227), sized by the broker config
    fetch_sessions: FetchSessionCache = field(init=False)
    # Kafka's SharePartitionManager: the share-partitions this broker leads and the share sessions (KIP-932)
    share: SharePartitionManager = field(init=False)

    def __post_init__(self) -> None:
        self.fetch_sessions = FetchSessionCache(
            self.config.max_incremental_fetch_session_cache_slots, self.config.min_incremental_fetch_session_eviction_ms
        )
        self.share = SharePartitionManager(ShareConfig(
            lock_duration_ms=self.config.group_share_record_lock_duration_ms,
            delivery_count_limit=self.config.group_share_delivery_count_limit,
            max_in_flight=self.config.group_share_partition_max_record_locks,
        ))
