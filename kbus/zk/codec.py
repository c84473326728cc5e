"""JSON bodies of Kafka's znodes (kafka.zk.ZkData), encoded and decoded without touching ZooKeeper."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbus.common.cluster import REGISTERED_FEATURES, BrokerEndpoint, BrokerInfo

NO_LEADER = -1


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _load(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# ---- ids: Kafka prints Uuids as URL-safe base64 without padding (org.apache.kafka.common.Uuid.toString) ----


def uuid_to_kafka(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    if len(text) == 36:  # tolerate the canonical 8-4-4-4-12 form
        return uuid.UUID(text)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def new_cluster_id() -> str:
    return uuid_to_kafka(uuid.uuid4())


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_load(data)["id"])


# ---- /brokers/ids/<id> (BrokerIdZNode, version 5) ----


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def encode_broker(endpoints: Sequence[Endpoint], rack: str | None = None, jmx_port: int = -1) -> bytes:
    plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
    body: dict[str, Any] = {
        "features": {name: {"min_version": low, "max_version": high} for name, low, high in REGISTERED_FEATURES},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
        "endpoints": [str(e) for e in endpoints],
        "jmx_port": jmx_port,
        "port": plaintext.port if plaintext else -1,
        "host": plaintext.host if plaintext else None,
        "version": 5,
        "timestamp": _now_ms(),
    }
    if rack is not None:
        body["rack"] = rack
    return _dump(body)


def decode_broker(broker_id: int, data: bytes, czxid: int = 0) -> BrokerInfo:
    body = _load(data) or {}
    protocols = body.get("listener_security_protocol_map") or {}
    endpoints = []
    for ep in body.get("endpoints", []):
        listener, _, hostport = ep.partition("://")
        h, _, p = hostport.rpartition(":")
        endpoints.append(BrokerEndpoint(listener, h.strip("[]"), int(p), protocols.get(listener, listener)))
    host, port = body.get("host"), int(body.get("port", -1))
    if (not host or port < 0) and endpoints:
        # no PLAINTEXT listener: the first advertised endpoint is where clients go
        host, port = endpoints[0].host, endpoints[0].port
    features = tuple(
        (str(name), int(levels.get("min_version", 0)), int(levels.get("max_version", 0)))
        for name, levels in (body.get("features") or {}).items() if isinstance(levels, dict)
    )
    return BrokerInfo(broker_id, host or "", port, body.get("rack"), tuple(endpoints), features, czxid)


# ---- /brokers/topics/<t> (TopicZNode, version 3) ----


@dataclass(frozen=True)
class TopicAssignment:
    partitions: dict[int, list[int]]
    topic_id: uuid.UUID | None
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)


def encode_topic(assignment: TopicAssignment) -> bytes:
    body: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(assignment.adding_replicas.items())},
        "removing_replicas": {str(p): list(r) for p, r in sorted(assignment.removing_replicas.items())},
    }
    if assignment.topic_id is not None:
        body["topic_id"] = uuid_to_kafka(assignment.topic_id)
    return _dump(body)


def decode_topic(data: bytes) -> TopicAssignment:
    body = _load(data) or {}

    def replicas(m: Mapping[str, Any] | None) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (m or {}).items()}

    topic_id = body.get("topic_id")
    return TopicAssignment(
        replicas(body.get("partitions")),
        uuid_from_kafka(topic_id) if topic_id else None,
        replicas(body.get("adding_replicas")),
        replicas(body.get("removing_replicas")),
    )


# ---- /brokers/topics/<t>/partitions/<p>/state (TopicPartitionStateZNode, version 1) ----


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    # the znode version the state was read at: every update is a compare-and-set against it
    zk_version: int = -1
    # the zxid of the znode's last write (-1: not known, e.g. a state just created): ZooKeeper's zxids grow across
    # znodes, so it orders two reads even of a topic deleted and created again, whose new znode restarts at
    # version 0. Not part of equality: two reads of the same write are the same state.
    zk_mzxid: int = field(default=-1, compare=False)

    def with_leader(self, leader: int, isr: Sequence[int], controller_epoch: int) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), controller_epoch, self.zk_version)

    def is_older_than(self, other: LeaderAndIsr) -> bool:
        """Whether this state was written before `other` (False when either write's zxid is unknown)."""
        return 0 <= self.zk_mzxid < other.zk_mzxid


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    return _dump(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(data: bytes, zk_version: int = -1, zk_mzxid: int = -1) -> LeaderAndIsr:
    body = _load(data) or {}
    return LeaderAndIsr(
        int(body.get("leader", NO_LEADER)),
        int(body.get("leader_epoch", 0)),
        tuple(int(b) for b in body.get("isr", [])),
        int(body.get("controller_epoch", 0)),
        zk_version,
        zk_mzxid,
    )


# ---- configs: /config/topics/<t> and /config/changes/config_change_<seq> ----


def encode_entity_config(configs: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(configs.items()))})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    body = _load(data) or {}
    return {str(k): str(v) for k, v in (body.get("config") or {}).items()}


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    return _dump({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


# ---- controller ----


def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes | None) -> int:
    body = _load(data)
    return int(body["brokerid"]) if body else NO_LEADER


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    return int(data.decode("ascii")) if data else 0


# ---- /latest_producer_id_block (ProducerIdBlockZNode) ----

PRODUCER_ID_BLOCK_SIZE = 1000


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "block_start": str(block_start), "block_end": str(block_end)})


def decode_producer_id_block_end(data: bytes | None) -> int:
    """The last id of the latest handed-out block, -1 when none was ever handed out."""
    body = _load(data)
    return int(body["block_end"]) if body else -1


# ---- /log_dir_event_notification/log_dir_event_<seq> (LogDirEventNotificationSequenceZNode) ----

LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int | None:
    """The broker id of a log dir failure notification (None for anything else)."""
    body = _load(data)
    if not body or int(body.get("event", LOG_DIR_FAILURE_EVENT)) != LOG_DIR_FAILURE_EVENT:
        return None
    return int(body["broker"])


# ---- /admin/preferred_replica_election (PreferredReplicaElectionZNode) ----


def encode_partition_list(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_partition_list(data: bytes | None) -> list[tuple[str, int]]:
    body = _load(data) or {}
    return [(str(e["topic"]), int(e["partition"])) for e in body.get("partitions", [])]


def encode_reassignment(targets: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """/admin/reassign_partitions (kafka-reassign-partitions.sh --zookeeper, Kafka 2.x)."""
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]})


def decode_reassignment(data: bytes | None) -> dict[tuple[str, int], list[int]]:
    body = _load(data) or {}
    return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]] for e in body.get("partitions", [])}
