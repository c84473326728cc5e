"""ZkMetadataStore: the MetadataStore of a broker in a ZooKeeper cluster. The view it reads and the event thread that
keeps it current are ZkClusterView's (zk_view.py); this module has the operations: ACLs, SCRAM credentials and
client quotas (entity configs under /config), the admin writes (topics, partitions, configs, reassignments,
elections), the partition leader's ISR writes, controlled shutdown and producer-id blocks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable

from kazoo.exceptions import KazooException

from kbus.common.acl import AclBinding
from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.errors import NotControllerError, UnknownTopicError
from kbus.common.quotas import QuotaEntity
from kbus.common.sanitizer import desanitize, sanitize
from kbus.server.metadata.controller import OfflineReplicaProbe
from kbus.server.metadata.types import PartitionState, TopicMetadata
from kbus.server.metadata.zk_view import _RECHECK, ZkClusterView
from kbus.zk import acls as zk_acls
from kbus.zk.admin_zk import AdminZkClient
from kbus.zk.client import TopicMarkedForDeletionError
from kbus.zk.codec import NO_LEADER, Endpoint, LeaderAndIsr, TopicAssignment
from kbus.zk.config_changes import ConfigChangeListener
from kbus.zk.reassignment import PartitionAssignment
from kbus.zk.security import ZkClientSecurity

log = logging.getLogger(__name__)

# how long admin calls wait for the controller to act on what they wrote (Kafka's CreateTopics timeout role)
ADMIN_WAIT_S = 5.0


class ZkMetadataStore(ZkClusterView):
    """The MetadataStore of a broker in a cluster (see the module docstring)."""

    @classmethod
    def for_broker(cls, config: KafkaConfig, broker_id: int, info: BrokerInfo) -> ZkMetadataStore:
        """The broker's store: advertised listeners, broker.rack, zookeeper.*.timeout.ms, delete.topic.enable,
        unclean.leader.election.enable and the leader rebalance settings come from its config."""
        return cls(
            config.zookeeper_connect,
            broker_id,
            info.host,
            info.port,
            rack=info.rack or config.broker_rack or None,
            endpoints=[Endpoint(e.listener, e.host, e.port, e.security_protocol) for e in info.endpoints],
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            delete_topic_enable=config.delete_topic_enable,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_s=float(config.leader_imbalance_check_interval_seconds),
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
            security=ZkClientSecurity.for_broker(config.raw, os.environ),
        )

    # ---- ACLs (Kafka's /kafka-acl layout) ----

    def acls(self) -> list[AclBinding]:
        return zk_acls.read_all(self._client().zk)

    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None:
        zk_acls.alter(self._client().zk, add, remove)

    def watch_acls(self, on_change: Callable[[], None]) -> None:
        zk_acls.watch(self._client().zk, on_change)

    # ---- users' SCRAM credentials (/config/users/<user>, read on each login: no cache to go stale) -------------

    # (the znode names are sanitized user names, as Kafka's, so credentials made by Kafka's tools are found)

    def user_credentials(self, user: str) -> dict[str, str]:
        return self._client().get_entity_config("users", sanitize(user))

    def users_credentials(self) -> dict[str, dict[str, str]]:
        zk = self._client()
        return {desanitize(u): zk.get_entity_config("users", u) for u in zk.entity_names("users")}

    def alter_user_credential(self, user: str, mechanism: str, credential: str | None) -> None:
        zk = self._client()
        user = sanitize(user)
        configs = zk.get_entity_config("users", user)
        if credential is None:
            configs.pop(mechanism, None)
        else:
            configs[mechanism] = credential
        zk.change_entity_config("users", user, configs)

    # ---- group configs (/config/groups/<group>, read when a share-partition is loaded) ------------------------

    def group_config(self, group: str) -> dict[str, str]:
        return self._client().get_entity_config("groups", sanitize(group))

    def alter_group_config(self, group: str, changes: dict[str, str | None]) -> None:
        zk = self._client()
        configs = zk.get_entity_config("groups", sanitize(group))
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = value
        zk.change_entity_config("groups", sanitize(group), configs)

    # ---- client quotas (/config/users, /config/clients; changes followed through /config/changes) ----------

    def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        return self._client().quota_entity_configs()

    def quota_entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        return self._client().get_quota_entity_config(entity)

    def set_quota_entity_config(self, entity: QuotaEntity, configs: dict[str, str]) -> None:
        self._client().change_quota_entity_config(entity, configs)

    def watch_quotas(self, on_change: Callable[[QuotaEntity, dict[str, str]], None]) -> None:
        """Kafka's DynamicConfigManager for the user and client entities: every change notification naming one
        re-reads its config (written by any broker, kafka-configs --zookeeper, or kbus configs)."""
        zk = self._client()

        def changed(entity_path: str) -> None:
            entity = QuotaEntity.from_path(entity_path)
            if entity is not None:
                on_change(entity, zk.get_quota_entity_config(entity))

        listener = ConfigChangeListener(zk.zk, changed)
        self._config_listeners.append(listener)
        listener.start()

    # ---- writes (admin) ------------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:
        written = AdminZkClient(self._client()).create_topic(
            name, num_partitions, replication_factor, configs, assignment
        )
        self._events.put(("topics",))
        self._wait(lambda: self._has_all_states(name, len(written.partitions)), ADMIN_WAIT_S)
        return self.topics().get(name) or TopicMetadata(
            name,
            written.topic_id or uuid.UUID(int=0),
            {p: PartitionState(NO_LEADER, 0, r, []) for p, r in written.partitions.items()},
            dict(configs),
        )

    def delete_topic(self, name: str) -> None:
        zk = self._client()
        with contextlib.suppress(TopicMarkedForDeletionError):
            zk.mark_topic_for_deletion(name)
        self._events.put(("delete_topics",))
        if self._delete_topic_enable:
            self._wait(lambda: name not in self._assignments, ADMIN_WAIT_S)

    def create_partitions(
        self, name: str, total_count: int, assignment: dict[int, list[int]] | None = None
    ) -> TopicMetadata:
        AdminZkClient(self._client()).add_partitions(name, total_count, assignment)
        self._events.put(("topic", name))
        self._wait(lambda: self._has_all_states(name, total_count), ADMIN_WAIT_S)
        topic = self.topics().get(name)
        if topic is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        return topic

    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> None:
        merged = AdminZkClient(self._client()).alter_topic_configs(name, configs)
        self._events.put(("config", name))
        self._wait(lambda: self._configs.get(name) == merged, ADMIN_WAIT_S)

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def set_offline_replica_probe(self, probe: OfflineReplicaProbe) -> None:
        """How the controller asks a broker that reported a log dir failure which replicas it lost."""
        self._offline_replica_probe = probe

    def propagate_log_dir_event(self) -> None:
        self._client().propagate_log_dir_event(self.broker_id)

    # ---- writes (replication and transactions) ------------------------------------------------------------

    def alter_isr(
        self, topic: str, partition: int, isr: list[int], expected: PartitionState | None = None
    ) -> PartitionState | None:
        """The partition leader shrinking/expanding its ISR (Kafka 2.x writes it straight to the state znode,
        compare-and-set on the version it last saw). None when this broker is not the leader any more or the
        state moved on; the fresh state arrives through the listener."""
        zk = self._client()
        with self._cond:
            current = self._states.get(topic, {}).get(partition)
            replicas = self._assignments.get(topic, (TopicAssignment({}, None), 0))[0].partitions.get(partition)
        if current is None or replicas is None or current.leader != self.broker_id:
            return None
        if expected is not None and (
            list(current.isr) != list(expected.isr) or current.leader_epoch != expected.leader_epoch
        ):
            # the decision was made on an ISR that has changed since (e.g. a concurrent shrink): decide again
            return None
        proposed = LeaderAndIsr(
            current.leader, current.leader_epoch, tuple(isr), current.controller_epoch, current.zk_version
        )
        try:
            written = zk.update_partition_state(topic, partition, proposed)
        except KazooException:
            written = self._isr_write_outcome(topic, partition, proposed)
        if written is None:
            self._events.put(("state", topic, partition))
            return None
        with self._cond:
            if self._states.get(topic, {}).get(partition) == current:
                self._states[topic][partition] = written
                self._topics_view = None
        self._notify()
        return PartitionState(written.leader, written.leader_epoch, list(replicas), list(written.isr))

    def _isr_write_outcome(self, topic: str, partition: int, proposed: LeaderAndIsr) -> LeaderAndIsr | None:
        """An ISR write whose answer was lost with the connection (or the session) may have been applied. Taking
        it as failed is unsafe for an expansion: ZooKeeper's ISR would name a replica the leader's acks=all no
        longer wait for, and a controller may elect it without the records acknowledged meanwhile. So, as Kafka's
        updateLeaderAndIsr checks a BadVersion against its own data, read the znode back once ZooKeeper answers
        (the caller, waiting, keeps counting the joining replica): ours if it holds exactly what was proposed."""
        while True:
            try:
                state = self._client().get_partition_state(topic, partition)
                break
            except KazooException:
                if self._stopping:
                    raise
                time.sleep(0.2)
        if (
            state is not None
            and state.zk_version == proposed.zk_version + 1
            and (state.leader, state.leader_epoch, tuple(state.isr))
            == (proposed.leader, proposed.leader_epoch, tuple(proposed.isr))
        ):
            log.info("ISR change of %s-%d to %s was applied although its answer was lost", topic, partition,
                     list(proposed.isr))  # fmt: skip
            return state
        return None  # not applied, or superseded since: the store reads the znode and the listener brings it

    def controlled_shutdown(self) -> list[tuple[str, int]]:
        """Hand leadership to other in-sync replicas before a clean stop (see Controller.controlled_shutdown).
        Returns the partitions nobody could take over."""
        stranded, touched = self._controller.controlled_shutdown()
        if touched:
            self._notify()
        return stranded

    def broker_configs(self) -> dict[str, dict[str, str]]:
        with self._cond:
            return {e: dict(self._broker_configs.get(e, {})) for e in self._broker_entities()}

    def alter_broker_configs(self, entity: str, changes: dict[str, str | None]) -> None:
        zk = self._client()
        merged = zk.get_broker_config(entity)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        zk.change_broker_config(entity, merged)
        if entity in self._broker_entities():
            self._events.put(("broker_config", entity))
            self._wait(lambda: self._broker_configs.get(entity, {}) == merged, ADMIN_WAIT_S)

    def alter_reassignments(
        self, requests: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        self._controller_only()
        results = self._reassigner.alter(requests)
        self._events.put(_RECHECK)  # a target already in sync completes at once
        self._notify()
        return results

    def list_reassignments(self, partitions: set[tuple[str, int]] | None) -> dict[tuple[str, int], PartitionAssignment]:
        self._controller_only()
        return self._reassigner.in_progress(partitions)

    def _controller_only(self) -> None:
        with self._cond:
            if self._controller_epoch is None:
                raise NotControllerError(f"broker {self.broker_id} is not the controller")

    def elect_leaders(self, kind: str, partitions: set[tuple[str, int]] | None) -> dict[tuple[str, int], str | None]:
        with self._cond:
            epoch = self._controller_epoch
        if epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        results = self._controller.elect_leaders(epoch, kind, partitions)
        if any(r is None for r in results.values()):
            self._notify()
        return results

    def allocate_producer_id(self) -> int:
        with self._pid_lock:
            if self._next_producer_id > self._producer_id_end:
                self._next_producer_id, self._producer_id_end = self._client().allocate_producer_id_block(
                    self.broker_id
                )
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

