"""get-offsets / delete-records parsing, consumer-groups layouts, dump-log output, server-stop detection."""

import io
import struct
from pathlib import Path

import pytest

from kbus.admin.models import BrokerNode, GroupDescription, GroupMember
from kbus.cli.common import UsageError
from kbus.cli.consumer_groups import (
    OffsetRow,
    format_members,
    format_offset_rows,
    format_reset_plan,
    format_state,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_scope,
)
from kbus.cli.dump_log import dump_offset_index, dump_segment, dump_time_index
from kbus.cli.offsets import parse_offset_json, parse_partitions, parse_time, parse_topic_partitions
from kbus.cli.server import _is_server
from kbus.protocol.record_batch import build_batch


def test_parse_time() -> None:
    assert parse_time("latest") == parse_time("-1") == -1
    assert parse_time("earliest") == parse_time("-2") == -2
    assert parse_time("max-timestamp") == -3
    assert parse_time("1700000000000") == 1700000000000
    with pytest.raises(UsageError, match="Malformed time argument"):
        parse_time("yesterday")


def test_parse_partitions_and_topic_partitions() -> None:
    assert parse_partitions("0,2,5-7,9-") == [(0, 1), (2, 3), (5, 8), (9, None)]
    assert parse_partitions("-3") == [(0, 4)]
    with pytest.raises(UsageError):
        parse_partitions("a")
    assert parse_topic_partitions("t1:1,t3,t4:5-") == [("t1", [(1, 2)]), ("t3", None), ("t4", [(5, None)])]


def test_parse_offset_json() -> None:
    doc = '{"partitions":[{"topic":"foo","partition":1,"offset":1}],"version":1}'
    assert parse_offset_json(doc) == [("foo", 1, 1)]
    with pytest.raises(UsageError, match="duplicate topic partitions: foo-1"):
        parse_offset_json('{"partitions":[{"topic":"foo","partition":1,"offset":1},'
                          '{"topic":"foo","partition":1,"offset":2}]}')
    with pytest.raises(UsageError, match="not valid JSON"):
        parse_offset_json("{")
    with pytest.raises(UsageError):
        parse_offset_json('{"partitions":[{"topic":"foo"}]}')


def test_offsets_layout_like_kafka() -> None:
    rows = [
        OffsetRow("g", "topic", 0, 3, 5, "consumer-1-abc", "/127.0.0.1", "cid"),
        OffsetRow("g", "topic", 1, None, 7, None, None, None),
    ]
    lines = format_offset_rows(rows)
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    # Kafka's widths: 15 at least for group/topic/consumer/host, 10 for partition, 15 for the numbers.
    assert lines[1] == f"{'g':<15} {'topic':<15} {'0':<10} {'3':<15} {'5':<15} {'2':<15} {'consumer-1-abc':<15} " \
                       f"{'/127.0.0.1':<15} cid"
    assert lines[2].split() == ["g", "topic", "1", "-", "7", "-", "-", "-", "-"]


def test_members_and_state_layouts() -> None:
    desc = GroupDescription(
        group_id="abc-dashboard",
        state="Stable",
        partition_assignor="range",
        coordinator=BrokerNode(0, "127.0.0.1", 9092),
        members=[GroupMember("m-1", "c1", "/127.0.0.1", [("t", 0), ("t", 2), ("u", 1)])],
    )
    members = format_members(desc, verbose=True)
    assert members[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert members[1].split() == ["abc-dashboard", "m-1", "/127.0.0.1", "c1", "3", "t(0,2),u(1)"]
    state = format_state(desc)
    assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    # Kafka's quirk: the GROUP column is as wide as the coordinator's (at least 25)
    assert state[1] == f"{'abc-dashboard':<25} {'127.0.0.1:9092 (0)':<25} {'range':<20} {'Stable':<15} 1"
    plain = format_members(desc, verbose=False)
    assert plain[1].endswith(f" {'3':<15} ")  # the padded #PARTITIONS and an empty ASSIGNMENT, as Kafka prints
    plan = format_reset_plan([("g", "t", 0, 42)])
    assert plan == [f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}",
                    f"{'g':<30} {'t':<30} {'0':<10} {'42':<15}"]


def test_reset_option_parsing() -> None:
    assert parse_datetime_ms("2024-01-01T00:00:00.000Z") == 1704067200000
    assert parse_datetime_ms("2024-01-01T01:00:00+01:00") == 1704067200000
    assert parse_duration_ms("PT1H30M") == 5400000
    assert parse_duration_ms("P1D") == 86400000
    assert parse_topic_scope("t:0,2") == ("t", [0, 2])
    assert parse_topic_scope("t") == ("t", None)
    for bad in ("soon", "P"):
        with pytest.raises(UsageError):
            parse_duration_ms(bad)
    with pytest.raises(UsageError):
        parse_datetime_ms("yesterday")


def test_dump_segment(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000005.log"
    first = build_batch([(b"k", b"Hello World", 1000, [("h", b"v")])], base_offset=5, timestamp_ms=1000)
    second = build_batch([(None, b"Hello Kafka", 2000)], base_offset=6, timestamp_ms=2000)
    seg.write_bytes(first + second + b"\x00\x01torn")
    out = io.StringIO()
    dump_segment(seg, out, print_data=True, deep=False)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Log starting offset: 5"
    assert lines[1].startswith("baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 ")
    assert f" position: 0 CreateTime: 1000 size: {len(first)} magic: 2 compresscodec: none crc: " in lines[1]
    assert lines[1].endswith(" isvalid: true")
    assert lines[2] == "| offset: 5 CreateTime: 1000 keySize: 1 valueSize: 11 sequence: -1 headerKeys: [h] " \
                       "key: k payload: Hello World"
    assert f" position: {len(first)} CreateTime: 2000 " in lines[3]
    assert lines[4] == "| offset: 6 CreateTime: 2000 keySize: -1 valueSize: 11 sequence: -1 headerKeys: [] " \
                       "payload: Hello Kafka"
    assert lines[5] == f"Found 6 invalid bytes at the end of {seg.name}"


def test_dump_segment_flags_a_bad_crc(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    batch = bytearray(build_batch([(None, b"x")], timestamp_ms=1))
    batch[-1] ^= 0xFF
    seg.write_bytes(bytes(batch))
    out = io.StringIO()
    dump_segment(seg, out, print_data=False, deep=False)
    assert out.getvalue().splitlines()[1].endswith(" isvalid: false")


def test_dump_indexes_stop_at_zero_fill(tmp_path: Path) -> None:
    idx = tmp_path / "00000000000000000100.index"
    idx.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 7, 4096) + b"\x00" * 80)
    tidx = tmp_path / "00000000000000000100.timeindex"
    tidx.write_bytes(struct.pack(">qi", 1700, 7) + b"\x00" * 120)
    out = io.StringIO()
    dump_offset_index(idx, out)
    dump_time_index(tidx, out)
    assert out.getvalue().splitlines() == [
        "offset: 100 position: 0", "offset: 107 position: 4096", "timestamp: 1700 offset: 107"
    ]


def test_server_process_detection() -> None:
    assert _is_server(["/venv/bin/python3", "/venv/bin/kbus", "server-start", "c.properties"]) == 3
    assert _is_server(["python", "-m", "kbus.server", "c.properties"]) == 3
    assert _is_server(["python", "-m", "kbus.cli.main", "server-start"]) == 4
    assert _is_server(["/venv/bin/kbus", "server-stop"]) is None
    assert _is_server(["bash", "-c", "kbus server-start x"]) is None


def test_reset_csv_round_trip() -> None:
    from kbus.cli.consumer_groups import format_reset_csv, parse_reset_csv

    plan = [("g", "t", 0, 5), ("g", "t", 1, 7)]
    one = "\n".join(format_reset_csv(plan, several_groups=False))
    assert one == "t,0,5\nt,1,7"
    assert parse_reset_csv(one, ["g"]) == {"g": [("t", 0, 5), ("t", 1, 7)]}
    many = "\n".join(format_reset_csv([*plan, ("h", "u", 0, 1)], several_groups=True))
    assert parse_reset_csv(many, ["g", "h"]) == {"g": [("t", 0, 5), ("t", 1, 7)], "h": [("u", 0, 1)]}
    with pytest.raises(UsageError, match="Line 1"):
        parse_reset_csv("t,0,x", ["g"])


def test_configs_add_config_and_entry_layout() -> None:
    from kbus.admin.models import ConfigEntry, ConfigSynonym
    from kbus.cli.configs import format_entry, parse_add_config

    assert parse_add_config("k1=v1,k2=[v1,v2],k3=v3") == {"k1": "v1", "k2": "v1,v2", "k3": "v3"}
    with pytest.raises(UsageError, match='"key=val"'):
        parse_add_config("novalue")
    entry = ConfigEntry(
        "retention.ms", "1000", source="DYNAMIC_TOPIC_CONFIG",
        synonyms=[ConfigSynonym("DYNAMIC_TOPIC_CONFIG", "retention.ms", "1000"),
                  ConfigSynonym("DEFAULT_CONFIG", "log.retention.hours", "168")],
    )
    assert format_entry(entry) == (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    )
    assert format_entry(ConfigEntry("password", "x", is_sensitive=True)) == "  password=null sensitive=true synonyms={}"
