"""DefaultMessageFormatter: field order, separators and null literal as kafka-console-consumer prints them."""

from kbus.cli.formatter import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    ConsumedRecord,
    DefaultMessageFormatter,
)

REC = ConsumedRecord(
    partition=2,
    offset=42,
    timestamp_type=TIMESTAMP_CREATE_TIME,
    timestamp=1700000000000,
    key=b"mykey",
    value=b"myvalue",
    headers=[("h1", b"v1"), ("h2", None)],
)


def fmt(**props: str) -> DefaultMessageFormatter:
    return DefaultMessageFormatter.from_properties({k.replace("_", "."): v for k, v in props.items()})


def test_value_only_by_default() -> None:
    assert DefaultMessageFormatter().format(REC) == b"myvalue\n"


def test_all_fields_in_kafkas_order() -> None:
    f = fmt(print_timestamp="true", print_key="true", print_offset="true", print_partition="true")
    assert f.format(REC) == b"CreateTime:1700000000000\tPartition:2\tOffset:42\tmykey\tmyvalue\n"


def test_headers_between_offset_and_key_with_null_literal() -> None:
    f = fmt(print_headers="true", print_key="true")
    assert f.format(REC) == b"h1:v1,h2:null\tmykey\tmyvalue\n"


def test_no_headers_and_custom_separators() -> None:
    rec = ConsumedRecord(0, 1, TIMESTAMP_LOG_APPEND_TIME, 5, None, None, None)
    f = DefaultMessageFormatter.from_properties(
        {
            "print.timestamp": "true",
            "print.headers": "true",
            "print.key": "TRUE",
            "key.separator": " | ",
            "line.separator": ";",
            "null.literal": "<nil>",
        }
    )
    assert f.format(rec) == b"LogAppendTime:5 | NO_HEADERS | <nil> | <nil>;"


def test_no_timestamp() -> None:
    rec = ConsumedRecord(0, 1, TIMESTAMP_NOT_AVAILABLE, -1, None, b"v")
    assert fmt(print_timestamp="true").format(rec) == b"NO_TIMESTAMP\tv\n"


def test_key_without_value_ends_the_line() -> None:
    assert fmt(print_key="true", print_value="false").format(REC) == b"mykey\n"


def test_nothing_printed() -> None:
    assert fmt(print_value="false").format(REC) == b""


def test_non_true_values_are_false() -> None:
    assert fmt(print_key="yes").format(REC) == b"myvalue\n"
