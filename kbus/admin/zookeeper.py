"""ZkTopicAdmin: `kbus topics --zookeeper host:port[/chroot]`, straight against ZooKeeper as Kafka 2.x's
kafka-topics.sh did. Create writes /config/topics/<t> and /brokers/topics/<t>, delete writes
/admin/delete_topics/<t>; the controller broker does the rest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from kazoo.exceptions import KazooException

from kbus.admin.errors import AdminError
from kbus.admin.models import PartitionDescription, TopicDescription
from kbus.common.errors import InvalidPartitionsError, InvalidReplicationFactorError, KafkaError
from kbus.common.sanitizer import desanitize, sanitize
from kbus.common.topics import is_internal
from kbus.zk import codec, paths
from kbus.zk.admin_zk import AdminZkClient
from kbus.zk.client import KafkaZkClient

# kazoo warns on every reconnect attempt; a command-line tool reports one clear error instead
_quiet = logging.getLogger("kbus.admin.zookeeper.kazoo")
_quiet.setLevel(logging.CRITICAL)
CONNECTION_TIMEOUT_S = 10.0
P = ParamSpec("P")
R = TypeVar("R")


class ZkTopicAdmin:
    """The TopicAdmin protocol (kbus.admin.base) over ZooKeeper."""

    def __init__(self, connect: str, timeout_s: float = CONNECTION_TIMEOUT_S) -> None:
        try:
            self._zk = KafkaZkClient.connect(connect, 30.0, timeout_s, logger=_quiet)
        except KafkaError as e:
            raise AdminError(str(e), "_TIMED_OUT") from None
        self._admin = AdminZkClient(self._zk)

    def list_topics(self) -> list[str]:
        return self._call(self._zk.get_topics)

    def describe_topics(self, names: list[str]) -> list[TopicDescription]:
        return [self._call(self._describe, name) for name in names]

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
        replica_assignment: list[list[int]] | None = None,
    ) -> None:
        assignment = dict(enumerate(replica_assignment)) if replica_assignment else None
        if assignment is None:
            # ZooKeeper knows no broker defaults, so Kafka 2.x insisted on both (TopicCommand's checkRequiredArgs)
            if partitions is None:
                raise AdminError(
                    'Missing required argument "[partitions]"', InvalidPartitionsError.error_code.name.upper()
                )
            if replication_factor is None:
                raise AdminError(
                    'Missing required argument "[replication-factor]"',
                    InvalidReplicationFactorError.error_code.name.upper(),
                )
        self._call(self._admin.create_topic, name, partitions or 0, replication_factor or 0, configs or {}, assignment)

    def delete_topic(self, name: str) -> None:
        self._call(self._zk.mark_topic_for_deletion, name)

    def create_partitions(self, name: str, total_count: int) -> None:
        self._call(self._admin.add_partitions, name, total_count)

    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> None:
        self._call(self._admin.alter_topic_configs, name, configs)

    def close(self) -> None:
        self._zk.close()

    # ---- internals ----

    def _describe(self, name: str) -> TopicDescription:
        found = self._zk.get_topic(name)
        if found is None:
            raise AdminError(f"Topic '{name}' does not exist as expected", "UNKNOWN_TOPIC_OR_PARTITION")
        assignment, _ = found
        partitions = []
        for partition, replicas in sorted(assignment.partitions.items()):
            state = self._zk.get_partition_state(name, partition)
            leader = state.leader if state is not None and state.leader != codec.NO_LEADER else None
            partitions.append(PartitionDescription(partition, leader, list(replicas), list(state.isr) if state else []))
        return TopicDescription(
            name=name,
            partitions=partitions,
            topic_id=codec.uuid_to_kafka(assignment.topic_id) if assignment.topic_id else None,
            is_internal=is_internal(name),
            configs=self._zk.get_topic_config(name),
            marked_for_deletion=self._zk.zk.exists(paths.delete_topic_marker(name)) is not None,
        )

    def _call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KafkaError as e:
            raise AdminError(str(e), e.error_code.name.upper()) from None
        except KazooException as e:
            raise AdminError(f"ZooKeeper error: {type(e).__name__} {e}".strip(), "UNKNOWN_SERVER_ERROR") from None


class ZkUserAdmin:
    """SCRAM users straight in ZooKeeper (/config/users/<user>), as kafka-configs.sh --zookeeper did."""

    def __init__(self, connect: str, timeout_s: float = CONNECTION_TIMEOUT_S) -> None:
        try:
            self._zk = KafkaZkClient.connect(connect, 30.0, timeout_s, logger=_quiet)
        except KafkaError as e:
            raise AdminError(str(e), "_TIMED_OUT") from None

    def describe(self, users: list[str] | None) -> dict[str, dict[str, str]]:
        names = [sanitize(u) for u in users] if users is not None else self._zk.entity_names("users")
        return {desanitize(u): self._zk.get_entity_config("users", u) for u in names}

    def alter(self, user: str, changes: dict[str, str | None]) -> None:
        user = sanitize(user)  # the znode name, as Kafka's ConfigCommand writes it
        configs = self._zk.get_entity_config("users", user)
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = value
        self._zk.change_entity_config("users", user, configs)

    def close(self) -> None:
        self._zk.close()
