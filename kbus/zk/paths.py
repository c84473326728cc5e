"""Kafka 2.x's znode layout (kafka.zk.ZkData), so tools and habits from Kafka's ZooKeeper era carry over."""

from __future__ import annotations

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
BROKER_DEFAULT_ENTITY = "<default>"  # /config/brokers/<default>: the cluster-wide dynamic broker configs
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")

# created by every broker at startup (ZkData.PersistentZkPaths)
PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{entity}" for entity in CONFIG_ENTITY_TYPES),
)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def topic_partition(name: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition}"


def partition_state(name: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition}/state"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def entity_config(entity_type: str, name: str) -> str:
    """/config/<type>/<name>: users' SCRAM credentials and quotas, clients' quotas, brokers' dynamic configs."""
    return f"{CONFIG}/{entity_type}/{name}"


def broker_config(entity: str) -> str:
    """/config/brokers/<id> or /config/brokers/<default>."""
    return entity_config("brokers", entity)


def delete_topic_marker(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def parse(path: str) -> tuple[str, ...]:
    """Classify a znode path from a watch event: ("brokers",), ("topics",), ("topic", t), ("state", t, p),
    ("config", t), ("broker_config", id or <default>), ("controller",), ("delete_topics",), ("log_dir_events",),
    or ("other", path)."""
    if path == BROKER_IDS:
        return ("brokers",)
    if path == BROKER_TOPICS:
        return ("topics",)
    if path in (CONTROLLER, CONTROLLER_EPOCH):
        return ("controller",)
    if path == DELETE_TOPICS:
        return ("delete_topics",)
    if path == REASSIGN_PARTITIONS:
        return ("reassign",)
    if path == PREFERRED_REPLICA_ELECTION:
        return ("preferred_election",)
    if path == LOG_DIR_EVENT_NOTIFICATION:
        return ("log_dir_events",)
    parts = path.strip("/").split("/")
    if parts[:2] == ["brokers", "topics"]:
        if len(parts) == 3:
            return ("topic", parts[2])
        if len(parts) == 6 and parts[3] == "partitions" and parts[5] == "state" and parts[4].isdigit():
            return ("state", parts[2], parts[4])
    if parts[:2] == ["config", "topics"] and len(parts) == 3:
        return ("config", parts[2])
    if parts[:2] == ["config", "brokers"] and len(parts) == 3:
        return ("broker_config", parts[2])
    return ("other", path)
