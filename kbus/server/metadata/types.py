"""The cluster metadata every store (local file or ZooKeeper) hands the broker."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataStore(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def brokers(self) -> list[BrokerInfo]: ...
    def topics(self) -> dict[str, TopicMetadata]: ...
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata: ...
    def delete_topic(self, name: str) -> None: ...
    def create_partitions(self, name: str, total_count: int) -> TopicMetadata: ...
    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> None: ...
    def add_listener(self, callback: Callable[[], None]) -> None: ...
