"""CLI helpers: key=value options, bootstrap validation, client config precedence."""

import socket

import pytest

from kbus.cli.client_config import translate
from kbus.cli.common import (
    UsageError,
    check_reachable,
    parse_key_values,
    validate_bootstrap,
)
from kbus.cli.console_consumer import build_consumer_config, parse_offset
from kbus.cli.console_producer import build_producer_config
from kbus.cli.topic_names import match_topics
from kbus.common.topics import topic_name_error


def test_parse_key_values() -> None:
    assert parse_key_values(["a=1", "b=x=y", "c="], "--config") == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(UsageError, match="Invalid --config 'novalue'"):
        parse_key_values(["novalue"], "--config")


def test_validate_bootstrap() -> None:
    assert validate_bootstrap("127.0.0.1:9092,host-b:19092") == [("127.0.0.1", 9092), ("host-b", 19092)]
    assert validate_bootstrap("[::1]:9092") == [("::1", 9092)]
    for bad in ("localhost", "localhost:", "h:99999", "h:abc", ""):
        with pytest.raises(UsageError):
            validate_bootstrap(bad)


def test_check_reachable_reports_refused_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nobody listens on a port we bound and released.
    with pytest.raises(ConnectionError, match="Could not connect to any broker"):
        check_reachable(f"127.0.0.1:{port}")


def test_check_reachable_accepts_listener() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_reachable(f"127.0.0.1:{s.getsockname()[1]}")


def test_translate_drops_java_only_keys_and_renames() -> None:
    out = translate(
        {"key.serializer": "x", "buffer.memory": "33554432", "max.request.size": "100", "linger.ms": "5"}
    )
    assert out == {"queue.buffering.max.kbytes": "32768", "message.max.bytes": "100", "linger.ms": "5"}


def test_producer_config_precedence() -> None:
    conf = build_producer_config(
        "h:1",
        file_props={"acks": "1", "linger.ms": "7", "bootstrap.servers": "other:2"},
        cli_props={"linger.ms": "9"},
        explicit={"compression.type": "lz4"},
        defaults={"acks": "-1", "linger.ms": 1000, "retries": 3},
    )
    # Defaults only fill gaps; explicit flags win; the bootstrap flag always wins.
    assert conf["acks"] == "1"
    assert conf["linger.ms"] == "9"
    assert conf["retries"] == "3"
    assert conf["compression.type"] == "lz4"
    assert conf["bootstrap.servers"] == "h:1"
    assert conf["client.id"] == "console-producer"


def test_consumer_config_without_group() -> None:
    conf, user_group = build_consumer_config("h:1", {}, {}, None, True, None)
    assert not user_group
    assert conf["group.id"].startswith("console-consumer-")
    assert conf["enable.auto.commit"] == "false"
    assert conf["auto.offset.reset"] == "earliest"


def test_consumer_config_with_group() -> None:
    conf, user_group = build_consumer_config("h:1", {"group.id": "g"}, {}, None, False, "read_committed")
    assert user_group
    assert conf["group.id"] == "g"
    assert "enable.auto.commit" not in conf
    assert conf["auto.offset.reset"] == "latest"
    assert conf["isolation.level"] == "read_committed"


def test_consumer_config_conflicts() -> None:
    with pytest.raises(UsageError, match="from-beginning"):
        build_consumer_config("h:1", {"auto.offset.reset": "latest"}, {}, None, True, None)
    with pytest.raises(UsageError, match="two places"):
        build_consumer_config("h:1", {"group.id": "a"}, {}, "b", False, None)


def test_parse_offset() -> None:
    assert parse_offset("earliest") == -2
    assert parse_offset("LATEST") == -1
    assert parse_offset("17") == 17
    for bad in ("-3", "x"):
        with pytest.raises(UsageError, match="non-negative long"):
            parse_offset(bad)


def test_topic_names() -> None:
    assert topic_name_error("abc-bus_location.1") is None
    assert "empty" in (topic_name_error("") or "")
    assert topic_name_error("..") is not None
    assert topic_name_error("a" * 250) is not None
    assert topic_name_error("bad/name") is not None


def test_match_topics_is_a_full_regex_with_commas() -> None:
    names = ["t1", "t10", "other", "test.topic", "test_topic"]
    assert match_topics("t1", names) == ["t1"]
    assert match_topics("t1.*", names) == ["t1", "t10"]
    assert match_topics("t1,other", names) == ["t1", "other"]
    assert match_topics("test.topic", names) == ["test.topic", "test_topic"]
    assert match_topics("[", names) == []


def test_kafka_style_command_optional_values() -> None:
    from typer.testing import CliRunner

    from kbus.cli.commands import app

    # The bare --state of --list takes no value, so parsing gets as far as the missing bootstrap server.
    res = CliRunner().invoke(app, ["consumer-groups", "--list", "--state"])
    assert 'Missing required argument "[bootstrap-server]"' in res.stderr
    assert res.exit_code == 1
