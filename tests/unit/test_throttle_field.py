"""kbus.protocol.throttle_field writes throttle_time_ms into a hand-encoded body at the place kio (Kafka's schema)
puts it: for every version of the APIs it patches, the patched body of a response made with throttle 0 is byte
for byte kio's encoding of the same response made with the throttle time; versions without the field, and
Produce, come back unchanged."""

from __future__ import annotations

import pytest

import kbus.server.apis  # noqa: F401  (importing the handlers fills API_TABLE)
from kbus.protocol.codec import build, encode_entity, response_type
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.throttle_field import FIRST_FIELD_SINCE, with_throttle_time
from kbus.server.apis.registry import API_TABLE


def _versions() -> list[tuple[int, int]]:
    """Every version the broker serves (and advertises in ApiVersions) of the APIs patched."""
    return [
        (key, v)
        for key in FIRST_FIELD_SINCE
        for v in range(API_TABLE[key].min_version, API_TABLE[key].max_version + 1)
    ]


@pytest.mark.parametrize(("api_key", "version"), _versions())
def test_patched_body_is_kio_encoding_with_the_throttle(api_key: int, version: int) -> None:
    cls = response_type(api_key, version)
    unthrottled = encode_entity(build(cls, throttle_time=0))
    patched = with_throttle_time(api_key, version, EncodedBody(unthrottled), 1234).data
    if version < FIRST_FIELD_SINCE[api_key]:
        assert patched == unthrottled
    else:
        assert patched == encode_entity(build(cls, throttle_time=1234))
        assert patched != unthrottled


def test_produce_and_unknown_bodies_are_left_alone() -> None:
    body = EncodedBody(b"\x00\x00\x00\x01" + b"\x00" * 8)
    assert with_throttle_time(0, 9, body, 500) is body  # Produce: its handler writes the field itself
    assert with_throttle_time(18, 3, body, 500) is body
