"""The throttle_time_ms of a response body a handler encoded itself (EncodedBody), written in place.

Kafka puts a request quota's throttle time in every response (KIP-124, KafkaApis.sendResponseMaybeThrottle), and
the network layer does that for the kio objects handlers return. Metadata (and Heartbeat/OffsetCommit, Fetch) can
answer with bytes instead; in those the field is the body's first INT32 from the versions below on (the schemas'
"throttle_time_ms ... versions N+"), so it is overwritten there: one 4-byte copy, paid only by a throttled
response. Produce's field follows its responses array, so the Produce handler passes its throttle time to its
encoder instead (as Fetch's handler does for the fetch byte rate)."""

from __future__ import annotations

import struct

from kbus.protocol.fetch_response import EncodedBody

_I32 = struct.Struct(">i")
# api key -> first version whose response body starts with throttle_time_ms
FIRST_FIELD_SINCE: dict[int, int] = {
    1: 1,  # Fetch
    3: 3,  # Metadata
    8: 3,  # OffsetCommit
    12: 1,  # Heartbeat
}


def with_throttle_time(api_key: int, version: int, body: EncodedBody, throttle_ms: int) -> EncodedBody:
    """`body` with its throttle_time_ms set to `throttle_ms`, or `body` itself when its version has no such field
    at the start (Produce's, older versions)."""
    since = FIRST_FIELD_SINCE.get(api_key)
    if since is None or version < since or len(body.data) < 4:
        return body
    return EncodedBody(_I32.pack(throttle_ms) + body.data[4:])
