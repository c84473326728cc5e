"""A request's body, decoded the way the broker serves it (sans I/O): by hand for the hot APIs, by kio otherwise.

Produce, Fetch, Heartbeat and OffsetCommit have hand-written decoders (kio's generic reader and its bounds pre-pass
cost more than the rest of a small request's handling); every other API, and a version outside a hand decoder's
range, goes through kio (`codec.decode_request`). The connection and the handler tests call this one function, so
a handler is always given what the wire gives it. Malformed input raises ProtocolError.
"""

from __future__ import annotations

from kbus.protocol.codec import RequestHeader, decode_request
from kbus.protocol.fetch_request_decode import FETCH_KEY, FetchRequest, decode_fetch_request
from kbus.protocol.fetch_request_decode import MAX_VERSION as FETCH_MAX_VERSION
from kbus.protocol.fetch_request_decode import MIN_VERSION as FETCH_MIN_VERSION
from kbus.protocol.group_requests import (
    HEARTBEAT_KEY,
    HEARTBEAT_VERSIONS,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VERSIONS,
    HeartbeatRequest,
    OffsetCommitRequest,
    decode_heartbeat_request,
    decode_offset_commit_request,
)
from kbus.protocol.produce_request_decode import MAX_VERSION as PRODUCE_MAX_VERSION
from kbus.protocol.produce_request_decode import MIN_VERSION as PRODUCE_MIN_VERSION
from kbus.protocol.produce_request_decode import PRODUCE_KEY, ProduceRequest, decode_produce_request

# what a handler is given: a hand-decoded request, or kio's dataclass for the version (object: kio's classes are
# per API and version; kbus.protocol.upgrade turns one into the class its handler declares)
RequestBody = ProduceRequest | FetchRequest | HeartbeatRequest | OffsetCommitRequest | object


def decode_body(frame: bytes | bytearray, header: RequestHeader, body_at: int) -> RequestBody:
    """The body of `frame` (a whole request frame whose header `parse_request_header` read, ending at `body_at`)."""
    key, version = header.api_key, header.api_version
    if key == PRODUCE_KEY and PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        return decode_produce_request(frame, version, body_at)  # a large frame's records stay slices of it
    data = frame if isinstance(frame, bytes) else bytes(frame)
    if key == FETCH_KEY and FETCH_MIN_VERSION <= version <= FETCH_MAX_VERSION:
        return decode_fetch_request(data, version, body_at)  # kio's reader costs ~1 µs per partition listed
    if key == HEARTBEAT_KEY and HEARTBEAT_VERSIONS[0] <= version <= HEARTBEAT_VERSIONS[1]:
        return decode_heartbeat_request(data, version, body_at)  # a consumer's periodic requests
    if key == OFFSET_COMMIT_KEY and OFFSET_COMMIT_VERSIONS[0] <= version <= OFFSET_COMMIT_VERSIONS[1]:
        return decode_offset_commit_request(data, version, body_at)
    body: object = decode_request(data, header, body_at)  # kio's class for the API and version
    return body
