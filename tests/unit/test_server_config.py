from __future__ import annotations

import pytest

from kbus.server.config import ConfigError, KafkaConfig, parse_properties


def test_properties_parsing_comments_continuations_and_separators():
    props = parse_properties("# c\n! c2\na=1\nb : 2\nc=x\\\n  y\n\nd=\n")
    assert props == {"a": "1", "b": "2", "c": "xy", "d": ""}


def test_defaults_are_kafkas():
    c = KafkaConfig.load(None)
    assert c.num_partitions == 1 and c.default_replication_factor == 1
    assert c.log_segment_bytes == 1073741824 and c.message_max_bytes == 1048588
    assert c.socket_request_max_bytes == 104857600 and c.auto_create_topics_enable
    assert [str(x) for x in c.listeners] == ["PLAINTEXT://:9092"]
    assert str(c.log_dirs[0]) == "/tmp/kafka-logs"


def test_file_and_overrides(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("broker.id=3\nlisteners=PLAINTEXT://127.0.0.1:9999\nlog.dirs=/a,/b\nnum.partitions=2\n")
    c = KafkaConfig.load(f, ["num.partitions=5", "auto.create.topics.enable=false"])
    assert c.broker_id == 3 and c.num_partitions == 5 and not c.auto_create_topics_enable
    assert [str(p) for p in c.log_dirs] == ["/a", "/b"]
    assert c.advertised_listeners[0].host == "127.0.0.1"


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("num.partitions=abc", "num.partitions"),
        ("num.partitions=0", "num.partitions"),
        ("listeners=nonsense", "listeners"),
        ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
        ("log.message.timestamp.type=Other", "log.message.timestamp.type"),
        ("novalue", "--override"),
    ],
)
def test_bad_values_name_the_key(override, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        KafkaConfig.load(None, [override])


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        KafkaConfig.load(tmp_path / "nope.properties")
