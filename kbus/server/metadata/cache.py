"""The broker's read-only view of the cluster for request handlers (Kafka's MetadataCache): live brokers, topics,
the controller, the cluster id, partition leaders. Reads answer from the store's memory."""

from __future__ import annotations

from kbus.common.cluster import BrokerInfo
from kbus.server.metadata.types import MetadataStore, TopicMetadata


class MetadataCache:
    def __init__(self, store: MetadataStore, cluster_id: str = "") -> None:
        self._store = store
        self.cluster_id = cluster_id  # settled by the broker once the store has started

    def brokers(self) -> list[BrokerInfo]:
        return self._store.brokers()

    def topics(self) -> dict[str, TopicMetadata]:
        return self._store.topics()

    def topic(self, name: str) -> TopicMetadata | None:
        return self._store.topic(name)

    def controller_id(self) -> int:
        return self._store.controller_id()

    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None:
        t = self.topic(topic)
        if t is None or index not in t.partitions:
            return None
        leader = t.partitions[index].leader
        return next((b for b in self.brokers() if b.broker_id == leader), None)
