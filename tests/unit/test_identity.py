"""meta.properties and partition.metadata: the files that pin data to one broker, one cluster and one topic."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kbus.server.metadata.identity import (
    InconsistentIdentityError,
    read_meta_properties,
    read_partition_topic_id,
    settle_broker_id,
    settle_cluster_id,
    write_meta_properties,
    write_partition_topic_id,
)


def test_meta_properties_round_trip_and_broker_id_pinning(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) == {}
    write_meta_properties([tmp_path], {}, 3, "abc")
    meta = read_meta_properties(tmp_path)
    assert (meta["broker.id"], meta["cluster.id"], meta["version"]) == ("3", "abc", "0")
    assert settle_broker_id(-1, meta, tmp_path) == 3  # broker.id=-1 takes the stored one
    assert settle_broker_id(3, meta, tmp_path) == 3
    with pytest.raises(InconsistentIdentityError, match=r"doesn't match stored broker\.id 3"):
        settle_broker_id(4, meta, tmp_path)


def test_cluster_id_comes_from_zookeeper_then_the_file_then_a_new_one() -> None:
    assert settle_cluster_id("", "zk-id", {"cluster.id": "zk-id"}) == "zk-id"
    with pytest.raises(InconsistentIdentityError, match="wrong cluster"):
        settle_cluster_id("", "zk-id", {"cluster.id": "other"})
    assert settle_cluster_id("", "", {"cluster.id": "stored"}) == "stored"
    fresh = settle_cluster_id("", "", {})
    assert len(fresh) == 22 and fresh != settle_cluster_id("", "", {})  # base64 of a random UUID, no padding


def test_partition_metadata_topic_id(tmp_path: Path) -> None:
    assert read_partition_topic_id(tmp_path) is None
    topic_id = uuid.uuid4()
    write_partition_topic_id(tmp_path, topic_id)
    assert read_partition_topic_id(tmp_path) == topic_id
    assert (tmp_path / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
