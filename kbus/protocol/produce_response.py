"""The Produce response body (versions 3-12) encoded by hand, sans I/O.

Every produce request gets one, so its cost is paid per request: with Kafka's Java producer (16 KB batches,
linger.ms=0) that is one response per ~150 records. Building kio objects for it and walking them with kio's
generic writer was the largest single cost of a produce request (about a third of the broker's CPU for it,
measured with cProfile in bench/notes/RESULTS.md); here a few struct.packs write the same bytes
(tests/unit/test_produce_response.py checks them against kio's encoding for every version).
The layout is Kafka's ProduceResponse.json; v10-v12 have v9's layout (v10's tagged current_leader and
node_endpoints, KIP-951's hints after NOT_LEADER_OR_FOLLOWER, are not sent: the client refreshes its metadata
instead, as it does with a broker that leaves them out).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.record_batch import encode_unsigned_varint

MIN_VERSION = 3
FLEXIBLE_VERSION = 9  # compact arrays and strings, tagged fields
MAX_VERSION = 12
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class PartitionProduceResult:
    """One partition of a Produce response."""

    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()  # (batch_index, batch_index_error_message), v8+
    error_message: str | None = None  # v8+


def _string(s: str | None, out: bytearray, flexible: bool) -> None:
    """A (nullable) string: compact (length + 1 as a varint, 0 for null) or classic (int16 length, -1)."""
    if s is None:
        if flexible:
            out.append(0)
        else:
            out += _I16.pack(-1)
        return
    data = s.encode()
    if flexible:
        encode_unsigned_varint(len(data) + 1, out)
    else:
        out += _I16.pack(len(data))
    out += data


def _count(n: int, out: bytearray, flexible: bool) -> None:
    if flexible:
        encode_unsigned_varint(n + 1, out)
    else:
        out += _I32.pack(n)


def encode_produce_response(
    version: int,
    topics: Sequence[tuple[str, Sequence[PartitionProduceResult]]],
    *,
    throttle_time_ms: int = 0,
) -> EncodedBody:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce response v{version} is not encoded here")
    flexible = version >= FLEXIBLE_VERSION
    with_log_start = version >= 5
    with_errors = version >= 8
    out = bytearray()
    _count(len(topics), out, flexible)
    for name, partitions in topics:
        _string(name, out, flexible)
        _count(len(partitions), out, flexible)
        for p in partitions:
            out += _HEAD.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if with_log_start:
                out += _I64.pack(p.log_start_offset)
            if with_errors:
                _count(len(p.record_errors), out, flexible)
                for batch_index, message in p.record_errors:
                    out += _I32.pack(batch_index)
                    _string(message, out, flexible)
                    if flexible:
                        out.append(0)  # the entry's tagged fields
                _string(p.error_message, out, flexible)
            if flexible:
                out.append(0)  # the partition's tagged fields
        if flexible:
            out.append(0)  # the topic's tagged fields
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out.append(0)  # the response's tagged fields
    return EncodedBody(bytes(out))
