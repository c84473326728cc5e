"""kbus ui's pieces that need no cluster: login file, basic auth, CSRF comparison, the browser's time and decoding,
the SVG chart's escaping, the form's key=value parsing, and its systemd unit. The pages themselves are tested in a
real browser against a real cluster (tests/e2e/test_ui_browser.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kbus.ui.app import _key_values
from kbus.ui.browse import decode, parse_time
from kbus.ui.charts import line_chart
from kbus.ui.security import UsersFileError, check_basic, csrf_ok, load_users
from kbus.ui.throughput import parse_metrics


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_users_file_and_basic_auth(tmp_path: Path) -> None:
    f = tmp_path / "users"
    f.write_text("# operators\nadmin:pa:ss\nviewer:look:read-only\n")
    users = load_users(str(f))
    assert users["admin"].password == "pa:ss" and not users["admin"].read_only  # a colon in a password is kept
    assert users["viewer"].read_only
    assert check_basic(_basic("viewer", "look"), users) == users["viewer"]
    assert check_basic(_basic("viewer", "nope"), users) is None
    assert check_basic(_basic("ghost", "look"), users) is None
    assert check_basic("Basic !!!", users) is None
    assert check_basic(None, users) is None


@pytest.mark.parametrize("content", ["", "nopassword\n", "a:read-only\n", ":x\n"])
def test_bad_users_file_is_one_clear_error(tmp_path: Path, content: str) -> None:
    f = tmp_path / "users"
    f.write_text(content)
    with pytest.raises(UsersFileError, match="users"):
        load_users(str(f))


def test_csrf_needs_the_cookie_and_the_same_field() -> None:
    assert csrf_ok("abc", "abc")
    assert not csrf_ok("abc", "abd")
    assert not csrf_ok(None, "abc")
    assert not csrf_ok("", "")


def test_parse_time_takes_ms_or_iso_utc() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(ValueError, match="milliseconds"):
        parse_time("yesterday")


def test_decode_text_json_hex() -> None:
    assert decode(None, "text") == "null"
    assert decode(b'{"a":1}', "json") == '{\n  "a": 1\n}'
    assert decode(b"not json", "json") == "not json"
    assert decode(b"\x00\xff", "hex") == "00 ff"
    assert decode(b"\xff", "text") == "\ufffd"


def test_chart_escapes_its_label_and_has_a_point_per_sample() -> None:
    svg = str(line_chart([(0.0, 1.0), (1.0, 5.0), (2.0, 3.0)], "<script>x</script>"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert 'data-points="3"' in svg and 'data-last="3"' in svg


def test_key_values_form_field() -> None:
    assert _key_values("retention.ms=1000\r\ncleanup.policy=compact") == {
        "retention.ms": "1000", "cleanup.policy": "compact"}
    assert _key_values("") == {}
    with pytest.raises(ValueError, match="key=value"):
        _key_values("retention.ms")


def test_metrics_parsed_into_broker_totals_and_topic_counters() -> None:
    text = (
        "# TYPE kbus_bytes_in_total counter\n"
        'kbus_bytes_in_total{topic="a"} 100\n'
        'kbus_bytes_in_total{topic="b\\"q"} 50\n'
        'kbus_bytes_out_total{topic="a"} 7\n'
        'kbus_messages_in_total{topic="a"} 3\n'
        'kbus_requests_total{api="Produce"} 9\n'
    )
    s = parse_metrics(text, 1.0)
    assert (s.bytes_in, s.bytes_out, s.messages_in) == (150.0, 7.0, {"a": 3.0})
