"""AdminZkClient: topic creation, growth and config changes written straight to ZooKeeper, with Kafka's
validation; the controller acts on what it writes. Used by brokers (CreateTopics & co.) and `--zookeeper` tools."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kazoo.exceptions import BadVersionError

from kbus.common.errors import InvalidPartitionsError, InvalidTopicError, UnknownTopicError
from kbus.common.topic_config import validate_topic_configs
from kbus.common.topics import collision_key, has_collision_chars, validate_topic_name
from kbus.zk import paths
from kbus.zk.assignment import assign_replicas, start_index_for_new_partitions, validate_assignment
from kbus.zk.client import KafkaZkClient
from kbus.zk.codec import TopicAssignment


class AdminZkClient:
    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        assignment: Mapping[int, list[int]] | None = None,
    ) -> TopicAssignment:
        """Validate, assign replicas over the live brokers (sorted by id, as Kafka does) and write
        /config/topics/<t> then /brokers/topics/<t>."""
        validate_topic_name(name)
        validate_topic_configs(configs)
        self._check_collision(name)
        live = self.zk.get_broker_ids()
        if assignment:
            partitions = {int(p): list(r) for p, r in assignment.items()}
            validate_assignment(partitions, set(live))
        else:
            partitions = assign_replicas(self._racks(live), num_partitions, replication_factor)
        topic = TopicAssignment(partitions, uuid.uuid4())
        self.zk.create_topic(name, topic, dict(configs))
        return topic

    def add_partitions(
        self, name: str, total_count: int, assignment: Mapping[int, list[int]] | None = None
    ) -> TopicAssignment:
        """Kafka's createPartitions: the new partitions get `assignment`'s replicas when given (validated by the
        caller), else continue the round robin where partition 0's leader sits, with partition 0's replication
        factor; a compare-and-set guards against concurrent changes."""
        while True:
            found = self.zk.get_topic(name)
            if found is None:
                raise UnknownTopicError(f"The topic '{name}' does not exist.")
            current, version = found
            if self.zk.zk.exists(paths.delete_topic_marker(name)):
                raise InvalidTopicError(f"The topic '{name}' is queued for deletion.")
            count = len(current.partitions)
            if total_count < count:
                raise InvalidPartitionsError(
                    f"Topic currently has {count} partitions, which is higher than the requested {total_count}."
                )
            if total_count == count:
                raise InvalidPartitionsError(f"Topic already has {count} partitions.")
            live = self.zk.get_broker_ids()
            first = current.partitions[min(current.partitions)]
            added = (
                {int(p): list(r) for p, r in assignment.items()}
                if assignment
                else assign_replicas(
                    self._racks(live),
                    total_count - count,
                    len(first),
                    fixed_start_index=start_index_for_new_partitions(live, first),
                    start_partition_id=count,
                )
            )
            grown = TopicAssignment(
                {**current.partitions, **added},
                current.topic_id,
                current.adding_replicas,
                current.removing_replicas,
            )
            try:
                self.zk.set_topic_assignment(name, grown, version)
                return grown
            except BadVersionError:
                continue

    def alter_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Apply set (value) / delete (None) changes; returns the resulting overrides."""
        validate_topic_configs(changes)
        if not self.zk.topic_exists(name):
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        merged = self.zk.get_topic_config(name)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        self.zk.change_topic_config(name, merged)
        return merged

    def _racks(self, broker_ids: list[int]) -> dict[int, str | None]:
        """broker.rack of each live broker, as registered in /brokers/ids (None: no rack; gone meanwhile: no rack)."""
        out: dict[int, str | None] = {}
        for b in broker_ids:
            info = self.zk.get_broker(b)
            out[b] = info.rack if info is not None else None
        return out

    def _check_collision(self, name: str) -> None:
        """Kafka refuses names that differ only in '.' vs '_' (they share metric names)."""
        if not has_collision_chars(name):
            return
        key = collision_key(name)
        clash = [t for t in self.zk.get_topics() if t != name and collision_key(t) == key]
        if clash:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clash)}")
