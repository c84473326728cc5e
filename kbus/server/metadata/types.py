"""The cluster metadata every store (local file or ZooKeeper) hands the broker."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kbus.common.acl import AclBinding
from kbus.common.cluster import BrokerInfo
from kbus.common.quotas import QuotaEntity
from kbus.zk.reassignment import PartitionAssignment


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


class MetadataStore(Protocol):
    """Where the broker's cluster metadata lives: a JSON file for a standalone broker (`local.py`), ZooKeeper in a
    cluster (`zk_store.py`). Calls may block (ZooKeeper round trips): the broker makes them off its event loop,
    except the reads, which answer from memory. Listeners may be called on any thread."""

    # "" until start() when the store does not know it (a standalone broker keeps it in meta.properties)
    cluster_id: str

    def start(self) -> None: ...
    def stop(self) -> None: ...

    # ---- reads (from memory)
    def brokers(self) -> list[BrokerInfo]: ...
    def topics(self) -> dict[str, TopicMetadata]: ...
    def topic(self, name: str) -> TopicMetadata | None:
        """One topic, without the copy of every topic that topics() makes (per-request lookups: an OffsetCommit
        checks each partition it commits)."""
        ...

    def controller_id(self) -> int: ...
    def add_listener(self, callback: Callable[[], None]) -> None: ...

    # ---- ACLs (Kafka's AclAuthorizer store); may block
    def acls(self) -> list[AclBinding]: ...
    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None: ...
    def watch_acls(self, on_change: Callable[[], None]) -> None: ...

    # ---- users' SCRAM credentials ({mechanism: Kafka's credential string}); may block
    def user_credentials(self, user: str) -> dict[str, str]: ...
    def users_credentials(self) -> dict[str, dict[str, str]]: ...
    def alter_user_credential(self, user: str, mechanism: str, credential: str | None) -> None: ...

    # ---- client quotas: the configs of users, clients and users+clients entities (a user's also holds its
    # SCRAM credentials in ZooKeeper); may block
    def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]: ...
    def quota_entity_config(self, entity: QuotaEntity) -> dict[str, str]: ...
    def set_quota_entity_config(self, entity: QuotaEntity, configs: dict[str, str]) -> None:
        """Write the entity's whole config (and, in ZooKeeper, the change notification every broker follows)."""
        ...
    def watch_quotas(self, on_change: Callable[[QuotaEntity, dict[str, str]], None]) -> None:
        """Call `on_change(entity, its config)` whenever an entity's config changes, on any broker."""
        ...

    # ---- topic administration
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata: ...
    def delete_topic(self, name: str) -> None: ...
    def create_partitions(
        self, name: str, total_count: int, assignment: dict[int, list[int]] | None = None
    ) -> TopicMetadata:
        """Grow a topic to total_count partitions; `assignment` names the new partitions' replicas (validated by
        the caller), None assigns them round robin."""
        ...
    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> None: ...

    # ---- replication and producers
    def alter_isr(
        self, topic: str, partition: int, isr: list[int], expected: PartitionState | None = None
    ) -> PartitionState | None:
        """A partition leader changing its ISR, compare-and-set against the state it decided on (`expected`).
        The new state, or None when this broker no longer leads or the state moved on."""
        ...

    def controlled_shutdown(self) -> list[tuple[str, int]]:
        """Move leadership of this broker's partitions to other in-sync replicas before a clean stop; the
        partitions nobody could take over."""
        ...

    def allocate_producer_id(self) -> int: ...

    def propagate_log_dir_event(self) -> None:
        """A log dir of this broker went offline: tell the controller (Kafka's
        /log_dir_event_notification/log_dir_event_<seq>), which moves leadership and ISR membership of the
        replicas in it to other brokers."""
        ...

    # ---- dynamic broker configs (kafka-configs --entity-type brokers)
    def broker_configs(self) -> dict[str, dict[str, str]]:
        """The dynamic configs this broker follows: {"<default>": cluster-wide, "<id>": its own}."""
        ...

    def alter_broker_configs(self, entity: str, changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) dynamic configs of broker `entity` (an id or "<default>")."""
        ...

    # ---- group configs (kafka-configs --entity-type groups; ZooKeeper /config/groups/<group>)
    def group_config(self, group: str) -> dict[str, str]:
        """The configs set on one group (KIP-932's share.* keys)."""
        ...

    def alter_group_config(self, group: str, changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) configs of one group."""
        ...

    # ---- operator requests answered by the controller
    def alter_reassignments(
        self, requests: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        """Start (target replicas) or cancel (None) partition reassignments; per partition None or the Kafka
        error name. Raises NotControllerError on a broker that is not the controller."""
        ...

    def list_reassignments(self, partitions: set[tuple[str, int]] | None) -> dict[tuple[str, int], PartitionAssignment]:
        """Reassignments under way (None: all)."""
        ...

    def elect_leaders(self, kind: str, partitions: set[tuple[str, int]] | None) -> dict[tuple[str, int], str | None]:
        """ElectLeaders ("preferred" or "unclean"; None: every partition): per partition None when a leader was
        elected, else the Kafka error name. Raises NotControllerError on a broker that is not the controller."""
        ...
