"""Metadata for a standalone broker (zookeeper.connect empty): one JSON file under the first log dir.

The broker is the only replica of every partition, its own controller and the whole cluster. Writes are atomic
(temp file + fsync + rename) so a crash leaves either the old or the new metadata, never a torn file.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from kbus.common.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from kbus.common.cluster import BrokerInfo
from kbus.common.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicError,
)
from kbus.common.quotas import QuotaEntity
from kbus.common.topics import validate_topic_name
from kbus.server.metadata.types import PartitionState, TopicMetadata
from kbus.zk.reassignment import PartitionAssignment

METADATA_FILE = "__kbus_metadata.json"
PRODUCER_ID_BLOCK = 1000


def write_atomically(path: Path, data: str, *, sync: bool = True) -> None:
    """Through a temporary file and a rename; with `sync` (the default) file and directory are fsynced before
    this returns. Without it the caller makes them durable itself (e.g. one syncfs for many such files)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if not sync:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class LocalMetadataStore:
    def __init__(self, log_dir: Path, broker: BrokerInfo) -> None:
        self._path = log_dir / METADATA_FILE
        self._broker = broker
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._topics: dict[str, TopicMetadata] = {}
        self._users: dict[str, dict[str, str]] = {}  # user -> {SCRAM mechanism: credential}, as in /config/users
        self._acls: set[AclBinding] = set()
        # client quotas by entity path ("users/alice", "clients/<default>", "users/alice/clients/app"): only the
        # quota keys (SCRAM credentials live in _users, so neither can clobber the other)
        self._quotas: dict[str, dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}  # ZooKeeper's /config/groups, kept here
        self._quota_watchers: list[Callable[[QuotaEntity, dict[str, str]], None]] = []
        self._acl_watchers: list[Callable[[], None]] = []
        self._next_producer_id = 0
        self._producer_id_limit = 0
        # dynamic broker configs: {"<default>": {...}, "<id>": {...}} (ZooKeeper's /config/brokers, kept here)
        self._broker_configs: dict[str, dict[str, str]] = {}
        self.cluster_id = ""  # a standalone broker keeps its cluster id in meta.properties

    # ---- lifecycle ----
    def start(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        if self._path.exists():
            doc = json.loads(self._path.read_text())
            for name, t in doc.get("topics", {}).items():
                parts = {
                    int(p): PartitionState(
                        self._broker.broker_id,
                        s.get("leader_epoch", 0),
                        [self._broker.broker_id],
                        [self._broker.broker_id],
                    )
                    for p, s in t["partitions"].items()
                }
                self._topics[name] = TopicMetadata(name, uuid.UUID(t["topic_id"]), parts, dict(t.get("configs", {})))
            self._users = {u: dict(c) for u, c in doc.get("users", {}).items()}
            self._quotas = {str(e): {str(k): str(v) for k, v in c.items()}
                            for e, c in doc.get("client_quotas", {}).items()}  # fmt: skip
            self._group_configs = {str(g): {str(k): str(v) for k, v in c.items()}
                                   for g, c in doc.get("group_configs", {}).items()}  # fmt: skip
            self._acls = {
                AclBinding(ResourceType(a[0]), a[1], PatternType(a[2]), a[3], a[4], Operation(a[5]), Permission(a[6]))
                for a in doc.get("acls", [])
            }
            # Never hand out an id twice across restarts: resume from the end of the last reserved block.
            self._producer_id_limit = self._next_producer_id = int(doc.get("producer_id_block_end", 0))
            self._broker_configs = {str(e): {str(k): str(v) for k, v in c.items()}
                                    for e, c in doc.get("broker_configs", {}).items()}  # fmt: skip

    def stop(self) -> None:
        pass

    def propagate_log_dir_event(self) -> None:
        pass  # standalone: no other replica to take over; the offline replicas answer KAFKA_STORAGE_ERROR

    # ---- reads ----
    def brokers(self) -> list[BrokerInfo]:
        return [self._broker]

    def topics(self) -> dict[str, TopicMetadata]:
        with self._lock:
            return dict(self._topics)

    def topic(self, name: str) -> TopicMetadata | None:
        with self._lock:
            return self._topics.get(name)

    def controller_id(self) -> int:
        return self._broker.broker_id

    # ---- writes ----
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:
        validate_topic_name(name)
        if assignment:
            num_partitions = len(assignment)
            bad = {b for replicas in assignment.values() for b in replicas} - {self._broker.broker_id}
            if bad:
                raise InvalidReplicationFactorError(f"Unknown broker(s) {sorted(bad)} in replica assignment")
            replication_factor = len(next(iter(assignment.values())))
        if num_partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: 1."
            )
        with self._lock:
            if name in self._topics:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            me = self._broker.broker_id
            topic = TopicMetadata(
                name, uuid.uuid4(), {p: PartitionState(me, 0, [me], [me]) for p in range(num_partitions)}, dict(configs)
            )
            self._topics[name] = topic
            self._save()
        self._notify()
        return topic

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if self._topics.pop(name, None) is None:
                raise UnknownTopicError("This server does not host this topic-partition.")
            self._save()
        self._notify()

    def create_partitions(
        self, name: str, total_count: int, assignment: dict[int, list[int]] | None = None
    ) -> TopicMetadata:
        # one broker: the only valid assignment names it, so `assignment` changes nothing here
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicError(f"The topic '{name}' does not exist.")
            current = len(topic.partitions)
            if total_count <= current:
                raise InvalidPartitionsError(
                    f"Topic currently has {current} partitions, which is higher than the requested {total_count}."
                    if total_count < current
                    else f"Topic already has {current} partitions."
                )
            me = self._broker.broker_id
            for p in range(current, total_count):
                topic.partitions[p] = PartitionState(me, 0, [me], [me])
            self._save()
        self._notify()
        return topic

    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> None:
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicError(f"The topic '{name}' does not exist.")
            for k, v in configs.items():
                if v is None:
                    topic.configs.pop(k, None)
                else:
                    topic.configs[k] = v
            self._save()
        self._notify()

    def alter_isr(
        self, topic: str, partition: int, isr: list[int], expected: PartitionState | None = None
    ) -> PartitionState | None:
        """Every partition here has one replica, always its whole ISR: no change is ever made (None)."""
        return None

    def controlled_shutdown(self) -> list[tuple[str, int]]:
        """There is no other broker to hand leadership to; nothing to move."""
        return []

    def broker_configs(self) -> dict[str, dict[str, str]]:
        with self._lock:
            entities = ("<default>", str(self._broker.broker_id))
            return {e: dict(self._broker_configs.get(e, {})) for e in entities}

    def alter_broker_configs(self, entity: str, changes: dict[str, str | None]) -> None:
        with self._lock:
            merged = dict(self._broker_configs.get(entity, {}))
            for key, value in changes.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            self._broker_configs[entity] = merged
            self._save()
        self._notify()

    def alter_reassignments(
        self, requests: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        """One broker: a partition can only ever be on it."""
        topics = self.topics()
        me = self._broker.broker_id
        out: dict[tuple[str, int], str | None] = {}
        for (name, p), target in requests.items():
            if name not in topics or p not in topics[name].partitions:
                out[(name, p)] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif target is None:
                out[(name, p)] = "NO_REASSIGNMENT_IN_PROGRESS"
            else:
                out[(name, p)] = None if list(target) == [me] else "INVALID_REPLICA_ASSIGNMENT"
        return out

    def list_reassignments(self, partitions: set[tuple[str, int]] | None) -> dict[tuple[str, int], PartitionAssignment]:
        return {}

    def elect_leaders(self, kind: str, partitions: set[tuple[str, int]] | None) -> dict[tuple[str, int], str | None]:
        """One broker, one replica per partition: its leader is always the preferred one and always alive."""
        topics = self.topics()
        existing = {(t.name, p) for t in topics.values() for p in t.partitions}
        wanted = existing if partitions is None else partitions
        return {tp: "ELECTION_NOT_NEEDED" if tp in existing else "UNKNOWN_TOPIC_OR_PARTITION" for tp in wanted}

    def allocate_producer_id(self) -> int:
        with self._lock:
            if self._next_producer_id >= self._producer_id_limit:
                self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
                self._save()
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    # ---- ACLs ----
    def acls(self) -> list[AclBinding]:
        with self._lock:
            return sorted(self._acls)

    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None:
        with self._lock:
            self._acls = (self._acls | set(add)) - set(remove)
            self._save()
        for cb in self._acl_watchers:
            cb()

    def watch_acls(self, on_change: Callable[[], None]) -> None:
        self._acl_watchers.append(on_change)

    # ---- users' SCRAM credentials ----
    def user_credentials(self, user: str) -> dict[str, str]:
        with self._lock:
            return dict(self._users.get(user, {}))

    def users_credentials(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {u: dict(c) for u, c in self._users.items()}

    def alter_user_credential(self, user: str, mechanism: str, credential: str | None) -> None:
        with self._lock:
            configs = self._users.setdefault(user, {})
            if credential is None:
                configs.pop(mechanism, None)
            else:
                configs[mechanism] = credential
            if not configs:
                del self._users[user]
            self._save()

    # ---- client quotas ----
    def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        with self._lock:
            out = {}
            for path, configs in self._quotas.items():
                entity = QuotaEntity.from_path(path)
                if entity is not None:
                    out[entity] = dict(configs)
            return out

    def group_config(self, group: str) -> dict[str, str]:
        with self._lock:
            return dict(self._group_configs.get(group, {}))

    def alter_group_config(self, group: str, changes: dict[str, str | None]) -> None:
        with self._lock:
            configs = self._group_configs.setdefault(group, {})
            for key, value in changes.items():
                if value is None:
                    configs.pop(key, None)
                else:
                    configs[key] = value
            if not configs:
                del self._group_configs[group]
            self._save()

    def quota_entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        with self._lock:
            return dict(self._quotas.get(entity.path, {}))

    def set_quota_entity_config(self, entity: QuotaEntity, configs: dict[str, str]) -> None:
        with self._lock:
            if configs:
                self._quotas[entity.path] = dict(configs)
            else:
                self._quotas.pop(entity.path, None)
            self._save()
        for cb in self._quota_watchers:
            cb(entity, dict(configs))

    def watch_quotas(self, on_change: Callable[[QuotaEntity, dict[str, str]], None]) -> None:
        self._quota_watchers.append(on_change)

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    # ---- internals ----
    def _notify(self) -> None:
        for cb in self._listeners:
            cb()

    def _save(self) -> None:
        doc = {
            "version": 1,
            "producer_id_block_end": self._producer_id_limit,
            "broker_configs": self._broker_configs,
            "topics": {
                t.name: {
                    "topic_id": str(t.topic_id),
                    "partitions": {str(p): {"leader_epoch": s.leader_epoch} for p, s in t.partitions.items()},
                    "configs": t.configs,
                }
                for t in self._topics.values()
            },
            "users": self._users,
            "client_quotas": self._quotas,
            "group_configs": self._group_configs,
            "acls": [
                [int(a.resource_type), a.name, int(a.pattern), a.principal, a.host, int(a.operation), int(a.permission)]
                for a in sorted(self._acls)
            ],
        }
        write_atomically(self._path, json.dumps(doc, indent=1, sort_keys=True))
