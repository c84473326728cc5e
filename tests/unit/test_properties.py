"""The one .properties parser (kbus.common.properties) against java.util.Properties.load's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbus.common.properties import PropertiesError, load_properties, parse_properties


def test_separators_comments_and_blank_lines() -> None:
    text = "# comment\n! also a comment\n\n   \na=1\n  b : 2\nc 3\nd\te\nf=\ng\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "e", "f": "", "g": ""}


def test_only_the_first_separator_counts() -> None:
    assert parse_properties("a==b\nc=:d\ne : = f\n") == {"a": "=b", "c": ":d", "e": "= f"}


def test_continuation_lines_drop_their_leading_whitespace() -> None:
    text = "list=a,\\\n    b,\\\n\tc\nnext=1\n"
    assert parse_properties(text) == {"list": "a,b,c", "next": "1"}


def test_an_even_number_of_backslashes_does_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


def test_a_continuation_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("a=x\\\n# y\n") == {"a": "x# y"}


def test_escapes_in_keys_and_values() -> None:
    text = "key\\ with\\ spaces=v\nsep\\=in\\:key=v2\ntab=\\t\nnl=a\\nb\nuni=\\u00e9\\u20ac\nother=\\q\\\\\n"
    assert parse_properties(text) == {
        "key with spaces": "v",
        "sep=in:key": "v2",
        "tab": "\t",
        "nl": "a\nb",
        "uni": "é€",
        "other": "q\\",
    }


def test_surrogate_pairs_make_one_character() -> None:
    assert parse_properties("smile=\\uD83D\\uDE00\n") == {"smile": "\U0001f600"}


def test_malformed_unicode_escape_is_refused_like_java() -> None:
    with pytest.raises(PropertiesError, match="Malformed"):
        parse_properties("a=\\u12g4\n")


def test_trailing_value_whitespace_is_kept_and_later_keys_win() -> None:
    assert parse_properties("a=1  \na=2 \n") == {"a": "2 "}


def test_line_endings_cr_lf_and_crlf() -> None:
    assert parse_properties("a=1\rb=2\r\nc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_a_backslash_at_the_end_of_the_file() -> None:
    assert parse_properties("a=1\\") == {"a": "1"}


def test_load_properties_reads_utf8(tmp_path: Path) -> None:
    f = tmp_path / "x.properties"
    f.write_text("name=Zürich\n", encoding="utf-8")
    assert load_properties(f) == {"name": "Zürich"}


def test_shipped_configs_parse() -> None:
    repo = Path(__file__).resolve().parents[2]
    server = load_properties(repo / "config" / "server.properties")
    assert server["broker.id"] == "0" and server["log.retention.hours"] == "168"
    zk = load_properties(repo / "config" / "zookeeper.properties")
    assert zk["clientPort"] == "2181"
