"""Topic and config operations (Kafka's ZkAdminManager): create, delete, add partitions, alter configs, and the
internal topics the coordinators create on first use. Every change goes to the metadata store off the event
loop, then the replica manager applies it at once (instead of waiting for the store's listener)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.dynamic_broker_config import BROKER_DEFAULT_ENTITY, check_dynamic_broker_configs
from kbus.common.errors import InvalidReplicationFactorError, InvalidRequestError, TopicExistsError
from kbus.common.topic_config import LogConfig
from kbus.server.metadata.types import MetadataStore, TopicMetadata
from kbus.zk.reassignment import PartitionAssignment

log = logging.getLogger("kbus.server.apis")


class AdminManager:
    def __init__(
        self,
        config: KafkaConfig,
        metadata: MetadataStore,
        apply_metadata: Callable[[], Awaitable[None]],
        default_log_config: Callable[[], LogConfig],
    ) -> None:
        self.config = config
        self.static_config = config  # server.properties and --override; `config` may gain dynamic configs
        self._metadata = metadata
        self._apply = apply_metadata
        self._default_log_config = default_log_config

    # ---- log configs (DescribeConfigs, CreateTopics' answer)
    def default_log_config(self) -> LogConfig:
        return self._default_log_config()

    def log_config_for(self, topic: TopicMetadata) -> LogConfig:
        return self._default_log_config().with_overrides(topic.configs)

    # ---- topics
    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:
        created = await asyncio.to_thread(
            self._metadata.create_topic, name, num_partitions, replication_factor, configs, assignment
        )
        await self._apply()
        return created

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        """Metadata's auto.create.topics.enable: num.partitions and default.replication.factor, no configs."""
        cfg = self.config
        try:
            created = await asyncio.to_thread(
                self._metadata.create_topic, name, cfg.num_partitions, cfg.default_replication_factor, {}
            )
        except TopicExistsError:
            await self._apply()
            return self._metadata.topics().get(name)
        log.info("Auto-created topic %s with %d partition(s)", name, len(created.partitions))
        await self._apply()
        return created

    async def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicMetadata:
        """An internal topic, created on first use. A standalone broker is a cluster of one, so it lowers the
        replication factor; a cluster refuses until enough brokers are up (an internal topic created with too
        few replicas would stay under-replicated forever), as Kafka does."""
        existing = self._metadata.topics().get(name)
        if existing is not None:
            return existing
        live = len(self._metadata.brokers())
        if not self.config.zookeeper_connect:
            replication_factor = max(1, min(replication_factor, live))
        elif replication_factor > live:
            raise InvalidReplicationFactorError(
                f"Number of alive brokers '{live}' does not meet the required replication factor "
                f"'{replication_factor}' for the internal topic {name}"
            )
        return await self.create_topic(name, num_partitions, replication_factor, configs)

    async def delete_topic(self, name: str) -> None:
        await asyncio.to_thread(self._metadata.delete_topic, name)
        await self._apply()

    async def create_partitions(
        self, name: str, total_count: int, assignment: dict[int, list[int]] | None = None
    ) -> None:
        await asyncio.to_thread(self._metadata.create_partitions, name, total_count, assignment)
        await self._apply()

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> None:
        await asyncio.to_thread(self._metadata.alter_topic_configs, name, changes)
        await self._apply()

    # ---- producers
    # ---- dynamic broker configs
    def dynamic_broker_configs(self) -> dict[str, dict[str, str]]:
        """{"<default>": cluster-wide, "<this broker's id>": its own} as stored (ZooKeeper /config/brokers)."""
        return self._metadata.broker_configs()

    async def alter_broker_configs(self, entity: str, changes: dict[str, str | None]) -> None:
        try:
            check_dynamic_broker_configs(changes, self.config)
        except ConfigError as exc:
            name = "" if entity == BROKER_DEFAULT_ENTITY else entity
            raise InvalidRequestError(
                f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {exc}"
            ) from None
        await asyncio.to_thread(self._metadata.alter_broker_configs, entity, changes)

    async def alter_reassignments(
        self, requests: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        return await asyncio.to_thread(self._metadata.alter_reassignments, requests)

    async def list_reassignments(
        self, partitions: set[tuple[str, int]] | None
    ) -> dict[tuple[str, int], PartitionAssignment]:
        return await asyncio.to_thread(self._metadata.list_reassignments, partitions)

    async def elect_leaders(
        self, kind: str, partitions: set[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str | None]:
        return await asyncio.to_thread(self._metadata.elect_leaders, kind, partitions)

    def allocate_producer_id(self) -> int:
        return self._metadata.allocate_producer_id()
