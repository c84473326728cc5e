"""Kafka 2.x znode JSON, byte for byte where Kafka's format is fixed."""

import json
import uuid

from kbus.zk import codec, paths
from kbus.zk.codec import Endpoint, LeaderAndIsr, TopicAssignment


def test_broker_registration_has_kafka_v5_fields():
    data = codec.encode_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9092)], rack="r1")
    body = json.loads(data)
    assert body["version"] == 5
    assert body["host"] == "127.0.0.1" and body["port"] == 9092
    assert body["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert body["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert body["jmx_port"] == -1 and body["rack"] == "r1"
    # the supported feature levels, in Kafka's BrokerIdZNode format (KIP-584)
    # (from level 1: Kafka 2.8's --zookeeper tools refuse a level-0 range here)
    assert body["features"] == {"transaction.version": {"min_version": 1, "max_version": 2}}
    assert body["timestamp"].isdigit()
    info = codec.decode_broker(3, data)
    assert (info.broker_id, info.host, info.port, info.rack) == (3, "127.0.0.1", 9092, "r1")
    assert info.supported_features == (("transaction.version", 1, 2),)


def test_broker_without_plaintext_listener_decodes_from_endpoints():
    data = codec.encode_broker([Endpoint("SSL", "h", 9093, "SSL")])
    body = json.loads(data)
    assert body["host"] is None and body["port"] == -1 and "rack" not in body
    info = codec.decode_broker(1, data)
    assert (info.host, info.port) == ("h", 9093)


def test_kafka_written_broker_json_decodes():
    kafka = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://kafka1:9092"],"jmx_port":-1,"port":9092,"host":"kafka1",'
        b'"version":5,"timestamp":"1700000000000"}'
    )
    info = codec.decode_broker(1, kafka)
    assert (info.host, info.port, info.rack) == ("kafka1", 9092, None)
    assert info.supported_features == ()  # an older registration: no features


def test_topic_znode_round_trip_and_kafka_uuid_text():
    tid = uuid.UUID("4fb4c5ba-7aa5-4b0e-8a53-4f7ee7c0c7d1")
    data = codec.encode_topic(TopicAssignment({1: [2, 1], 0: [1, 2]}, tid))
    body = json.loads(data)
    assert body == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": codec.uuid_to_kafka(tid),
    }
    assert len(body["topic_id"]) == 22 and "=" not in body["topic_id"]
    back = codec.decode_topic(data)
    assert back.partitions == {0: [1, 2], 1: [2, 1]} and back.topic_id == tid


def test_topic_znode_without_id_from_old_kafka():
    back = codec.decode_topic(b'{"version":1,"partitions":{"0":[0]}}')
    assert back.partitions == {0: [0]} and back.topic_id is None


def test_uuid_text_forms():
    tid = uuid.uuid4()
    assert codec.uuid_from_kafka(codec.uuid_to_kafka(tid)) == tid
    assert codec.uuid_from_kafka(str(tid)) == tid


def test_partition_state_json():
    data = codec.encode_partition_state(LeaderAndIsr(1, 4, (1, 2), 7))
    assert json.loads(data) == {"controller_epoch": 7, "leader": 1, "version": 1, "leader_epoch": 4, "isr": [1, 2]}
    state = codec.decode_partition_state(data, zk_version=3)
    assert state == LeaderAndIsr(1, 4, (1, 2), 7, 3)


def test_partition_states_are_ordered_by_the_zxid_of_their_write():
    older = LeaderAndIsr(1, 4, (1,), 7, zk_version=5, zk_mzxid=100)
    newer = LeaderAndIsr(1, 4, (1, 2), 7, zk_version=0, zk_mzxid=200)  # a recreated topic's znode restarts at 0
    assert older.is_older_than(newer) and not newer.is_older_than(older)
    unknown = LeaderAndIsr(1, 4, (1,), 7, zk_version=0)  # just created: its write's zxid is not known
    assert not unknown.is_older_than(newer) and not older.is_older_than(unknown)
    # the zxid is not part of the state: two reads of one write are equal
    assert LeaderAndIsr(1, 4, (1,), 7, 5, 100) == LeaderAndIsr(1, 4, (1,), 7, 5, 101)


def test_config_controller_cluster_and_producer_block_json():
    assert json.loads(codec.encode_entity_config({"retention.ms": "1"})) == {
        "version": 1,
        "config": {"retention.ms": "1"},
    }
    assert codec.decode_entity_config(None) == {}
    assert json.loads(codec.encode_config_change("topics", "t")) == {"version": 2, "entity_path": "topics/t"}
    ctl = json.loads(codec.encode_controller(5))
    assert ctl["version"] == 1 and ctl["brokerid"] == 5 and ctl["timestamp"].isdigit()
    assert codec.decode_controller(codec.encode_controller(5)) == 5
    assert codec.decode_controller(None) == -1
    assert codec.encode_controller_epoch(3) == b"3" and codec.decode_controller_epoch(b"3") == 3
    assert json.loads(codec.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert codec.decode_producer_id_block_end(None) == -1
    block = codec.encode_producer_id_block(1, 1000, 1999)
    assert json.loads(block) == {"version": 1, "broker": 1, "block_start": "1000", "block_end": "1999"}
    assert codec.decode_producer_id_block_end(block) == 1999


def test_paths_follow_zkdata():
    assert paths.broker(1) == "/brokers/ids/1"
    assert paths.partition_state("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert paths.topic_config("t") == "/config/topics/t"
    assert paths.delete_topic_marker("t") == "/admin/delete_topics/t"
    assert "/config/topics" in paths.PERSISTENT_PATHS and "/brokers/ids" in paths.PERSISTENT_PATHS
    assert paths.parse("/brokers/topics/t/partitions/2/state") == ("state", "t", "2")
    assert paths.parse("/brokers/topics/t") == ("topic", "t")
    assert paths.parse("/brokers/ids") == ("brokers",)
    assert paths.parse("/config/topics/t") == ("config", "t")
    assert paths.parse("/controller") == ("controller",)
    assert paths.parse("/brokers/topics/t/partitions")[0] == "other"


def test_preferred_replica_election_json():
    data = codec.encode_partition_list([("t", 0), ("u", 3)])
    entries = [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 3}]
    assert json.loads(data) == {"version": 1, "partitions": entries}
    assert codec.decode_partition_list(data) == [("t", 0), ("u", 3)]
    assert paths.parse("/admin/preferred_replica_election") == ("preferred_election",)


def test_finalized_features_are_what_every_live_broker_supports() -> None:
    from kbus.common.cluster import BrokerInfo
    from kbus.server.apis.api_versions import finalized_features

    new = BrokerInfo(1, "h", 1, registration_zxid=100)
    old = BrokerInfo(2, "h", 2, supported_features=(), registration_zxid=300)
    assert finalized_features([new]) == ([("transaction.version", 2)], 100)
    newer = BrokerInfo(3, "h", 3, registration_zxid=200)
    assert finalized_features([new, newer]) == ([("transaction.version", 2)], 200)
    # a kbus from before transactions v2 joins (a rolling downgrade, an old node added): nothing finalized, with an
    # epoch ABOVE the last one, since a client ignores features of an epoch not above the highest it has seen
    # (Java's ApiVersions.update); the sum of the levels (0) left clients on transactions v2
    assert finalized_features([new, newer, old]) == ([], 300)
    one = BrokerInfo(4, "h", 4, supported_features=(("transaction.version", 0, 1),), registration_zxid=50)
    assert finalized_features([new, one]) == ([("transaction.version", 1)], 100)
    # the registration's zxid is the znode's czxid
    data = codec.encode_broker([codec.Endpoint("PLAINTEXT", "h", 1)])
    assert codec.decode_broker(1, data, 0x500000007).registration_zxid == 0x500000007
