"""LineMessageReader: kafka-console-producer's parse.key / parse.headers / null.marker / ignore.error rules."""

import pytest

from kbus.cli.line_reader import LineMessageReader, LineReaderError, ProducerLine


def reader(**props: str) -> LineMessageReader:
    return LineMessageReader.from_properties({k.replace("_", "."): v for k, v in props.items()})


def test_plain_line_is_the_value() -> None:
    assert LineMessageReader().read("Hello World") == ProducerLine(None, b"Hello World", [])


def test_empty_line_is_an_empty_value() -> None:
    assert LineMessageReader().read("") == ProducerLine(None, b"", [])


def test_parse_key_with_custom_separator_splits_on_first() -> None:
    r = reader(parse_key="true", key_separator=":")
    assert r.read("k1:v1:more") == ProducerLine(b"k1", b"v1:more", [])
    assert r.read("k2:") == ProducerLine(b"k2", b"", [])


def test_default_key_separator_is_tab() -> None:
    assert reader(parse_key="true").read("a\tb") == ProducerLine(b"a", b"b", [])


def test_missing_key_separator_is_an_error_with_line_number() -> None:
    r = reader(parse_key="true", key_separator=":")
    r.read("a:b")
    with pytest.raises(LineReaderError, match="No key separator found on line number 2: 'nokey'"):
        r.read("nokey")


def test_ignore_error_keeps_the_whole_line_as_value() -> None:
    r = reader(parse_key="true", key_separator=":", ignore_error="true")
    assert r.read("nokey") == ProducerLine(None, b"nokey", [])


def test_headers_key_and_value() -> None:
    r = reader(parse_key="true", parse_headers="true")
    assert r.read("h1:v1,h2:v2\tkey\tvalue") == ProducerLine(b"key", b"value", [("h1", b"v1"), ("h2", b"v2")])


def test_null_marker_for_key_value_and_header_value() -> None:
    r = reader(parse_key="true", parse_headers="true", null_marker="<NULL>")
    assert r.read("h1:<NULL>\t<NULL>\t<NULL>") == ProducerLine(None, None, [("h1", None)])


def test_null_marker_for_all_headers() -> None:
    r = reader(parse_headers="true", null_marker="N")
    assert r.read("N\tvalue") == ProducerLine(None, b"value", [])


def test_header_key_equal_to_null_marker_is_rejected() -> None:
    r = reader(parse_headers="true", null_marker="N")
    with pytest.raises(LineReaderError, match="Header keys should not be equal to the null marker"):
        r.read("N:x\tvalue")


def test_header_without_key_separator() -> None:
    with pytest.raises(LineReaderError, match="No header key separator found in pair 'h1'"):
        reader(parse_headers="true").read("h1\tvalue")
    assert reader(parse_headers="true", ignore_error="true").read("h1\tv") == ProducerLine(None, b"v", [("h1", None)])


@pytest.mark.parametrize(
    "props",
    [
        {"null.marker": "\t"},
        {"headers.separator": ":"},
        {"headers.delimiter": ","},
        {"key.separator": ""},
    ],
)
def test_ambiguous_separators_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(LineReaderError):
        LineMessageReader.from_properties(props)


def test_undecodable_bytes_round_trip() -> None:
    line = b"caf\xe9".decode("utf-8", errors="surrogateescape")
    assert LineMessageReader().read(line).value == b"caf\xe9"
