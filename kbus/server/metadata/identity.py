"""The files that pin a log directory to one broker and one cluster, and a partition directory to one topic:
Kafka's meta.properties (broker.id, cluster.id) and partition.metadata (the topic id, since Kafka 2.8)."""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path

from kbus.common.properties import load_properties
from kbus.server.metadata.local import write_atomically

META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"


class InconsistentIdentityError(RuntimeError):
    """Data on disk belongs to another broker id or another cluster (Kafka's InconsistentBrokerIdException and
    InconsistentClusterIdException)."""


def new_cluster_id() -> str:
    """Kafka's cluster id format: a URL-safe base64 UUID without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    path = log_dir / META_PROPERTIES
    return load_properties(path) if path.exists() else {}


def settle_broker_id(configured: int, meta: dict[str, str], first_dir: Path) -> int:
    """meta.properties pins broker.id to the data it describes; broker.id=-1 takes the stored one (or 0)."""
    if configured < 0:
        return int(meta.get("broker.id", "0"))
    if "broker.id" in meta and int(meta["broker.id"]) != configured:
        raise InconsistentIdentityError(
            f"Configured broker.id {configured} doesn't match stored broker.id {meta['broker.id']} "
            f"in meta.properties under {first_dir}. If you moved your data, make sure your configured broker.id "
            "matches."
        )
    return configured


def settle_cluster_id(configured: str, from_metadata: str, meta: dict[str, str]) -> str:
    """The cluster id comes from ZooKeeper (/cluster/id) in a cluster, else from meta.properties or a new one.
    Data written for one cluster is never served in another."""
    stored = meta.get("cluster.id")
    if from_metadata:
        if stored and stored != from_metadata:
            raise InconsistentIdentityError(
                f"The Cluster ID {from_metadata} doesn't match stored clusterId {stored} in meta.properties. "
                "The broker is trying to join the wrong cluster. Configured zookeeper.connect may be wrong."
            )
        return from_metadata
    return configured or stored or new_cluster_id()


def write_meta_properties(log_dirs: list[Path], meta: dict[str, str], broker_id: int, cluster_id: str) -> None:
    """Write meta.properties into every log dir when what it says changed."""
    if meta.get("cluster.id") == cluster_id and meta.get("broker.id") == str(broker_id):
        return
    for d in log_dirs:
        write_atomically(
            d / META_PROPERTIES,
            f"#\n#{time.ctime()}\nversion=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n",
        )


def read_partition_topic_id(partition_dir: Path) -> uuid.UUID | None:
    """Kafka's partition.metadata ("version: 0" / "topic_id: <base64 uuid>")."""
    try:
        for line in (partition_dir / PARTITION_METADATA).read_text().splitlines():
            if line.startswith("topic_id:"):
                text = line.split(":", 1)[1].strip()
                return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (OSError, ValueError):
        return None
    return None


def write_partition_topic_id(partition_dir: Path, topic_id: uuid.UUID | None, *, sync: bool = True) -> None:
    """Kafka's PartitionMetadataFile; with sync=False the caller makes it durable (a syncfs after a batch)."""
    if topic_id is None or read_partition_topic_id(partition_dir) == topic_id:
        return
    text = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    write_atomically(partition_dir / PARTITION_METADATA, f"version: 0\ntopic_id: {text}\n", sync=sync)
