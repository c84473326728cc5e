"""The Produce response body (versions 3-12) encoded by hand, sans I/O.

Every produce request gets one, so its cost is paid per request: with Kafka's Java producer (16 KB batches,
linger.ms=0) that is one response per ~150 records. Building kio objects for it and walking them with kio's
generic writer was the largest single cost of a produce request (about a third of the broker's CPU for it,
measured with cProfile in bench/notes/RESULTS.md); here a few struct.packs write the same bytes
(tests/unit/test_produce_response.py checks them against kio's encoding for every version).
The layout is Kafka's ProduceResponse.json; v10-v12 add KIP-951's tagged fields: a partition's CurrentLeader (tag
0, written when it is not the default -1/-1) and the response's NodeEndpoints (tag 0, when not empty), the hints
after NOT_LEADER_OR_FOLLOWER that spare the client a metadata refresh.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.record_batch import encode_unsigned_varint

MIN_VERSION: Final = 3
FLEXIBLE_VERSION: Final = 9  # compact arrays and strings, tagged fields
LEADER_HINTS_VERSION: Final = 10  # KIP-951: CurrentLeader and NodeEndpoints
MAX_VERSION: Final = 12
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_HEAD: Final = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_I64: Final = struct.Struct(">q")
_CURRENT_LEADER: Final = struct.Struct(">BBBiiB")  # tagged-field count, tag, size, leader id, leader epoch, its tags
# v9+, one topic: the topic count (1, as a compact count) and the name's compact length (one byte below 128)
_ONE_TOPIC: Final = struct.Struct(">BB")
# v9+, the rest of a one-partition response with nothing optional: the partition count (1), index, error code,
# base offset, log append time, log start offset, no record errors (compact count 0), a null error message, the
# partition's and the topic's empty tagged fields, the throttle time and the response's empty tagged fields
_ONE_PARTITION: Final = struct.Struct(">BihqqqBBBBiB")
# v3-v8 (classic arrays and strings), one topic: the topic count (1) and the name's int16 length
_CLASSIC_ONE_TOPIC: Final = struct.Struct(">ih")
# v3-v8, the rest of a one-partition response: the partition count (1), index, error code, base offset, log append
# time, then the log start offset (v5+), no record errors (count 0) and a null error message (v8+), and the throttle
_CLASSIC_ONE_PARTITION_V3: Final = struct.Struct(">iihqqi")
_CLASSIC_ONE_PARTITION_V5: Final = struct.Struct(">iihqqqi")
_CLASSIC_ONE_PARTITION_V8: Final = struct.Struct(">iihqqqihi")


class PartitionProduceResult:
    """One partition of a Produce response. The Produce handler fills it in as the request proceeds and encodes
    it as it is: a plain class, not a frozen dataclass, as mypyc compiles its __init__ (a dataclass's generated
    one stays interpreted) and one object per partition is all a response needs."""

    __slots__ = ("base_offset", "current_leader", "error_code", "error_message", "index", "log_append_time_ms",
                 "log_start_offset", "record_errors")  # fmt: skip

    def __init__(
        self, index: int, error_code: int = 0, base_offset: int = -1, log_append_time_ms: int = -1,
        log_start_offset: int = -1, record_errors: Sequence[tuple[int, str | None]] = (),
        error_message: str | None = None, current_leader: tuple[int, int] = (-1, -1),
    ) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors  # (batch_index, batch_index_error_message), v8+
        self.error_message = error_message  # v8+
        self.current_leader = current_leader  # v10+: (leader id, leader epoch) after NOT_LEADER_OR_FOLLOWER


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """v10+: where a leader named in a CurrentLeader is reached on the client's listener."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

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
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> EncodedBody:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce response v{version} is not encoded here")
    flexible = version >= FLEXIBLE_VERSION
    with_log_start = version >= 5
    with_errors = version >= 8
    hints = version >= LEADER_HINTS_VERSION
    if len(topics) == 1 and len(topics[0][1]) == 1:
        # nearly every response (a producer's request per broker with one batch ready): one pack for the partition
        name, partitions = topics[0]
        p = partitions[0]
        if flexible:
            if not (hints and node_endpoints):
                data = name.encode()
                if (len(data) < 127 and not p.record_errors and p.error_message is None
                        and (not hints or p.current_leader == (-1, -1))):
                    return EncodedBody(_ONE_TOPIC.pack(2, len(data) + 1) + data + _ONE_PARTITION.pack(
                        2, p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset, 1, 0, 0,
                        0, throttle_time_ms, 0))
        elif not with_errors or (not p.record_errors and p.error_message is None):
            # v3-v8 (the scale bench's and older clients' Produce v8): below v8 the record errors and the message are
            # not in the response at all, so only v8 needs them absent
            data = name.encode()
            head = _CLASSIC_ONE_TOPIC.pack(1, len(data)) + data
            if with_errors:
                return EncodedBody(head + _CLASSIC_ONE_PARTITION_V8.pack(
                    1, p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset, 0, -1,
                    throttle_time_ms))
            if with_log_start:
                return EncodedBody(head + _CLASSIC_ONE_PARTITION_V5.pack(
                    1, p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset,
                    throttle_time_ms))
            return EncodedBody(head + _CLASSIC_ONE_PARTITION_V3.pack(
                1, p.index, p.error_code, p.base_offset, p.log_append_time_ms, throttle_time_ms))
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
            if hints and p.current_leader != (-1, -1):
                out += _CURRENT_LEADER.pack(1, 0, 9, *p.current_leader, 0)  # one tagged field: tag 0, 9 bytes
            elif flexible:
                out.append(0)  # the partition's tagged fields
        if flexible:
            out.append(0)  # the topic's tagged fields
    out += _I32.pack(throttle_time_ms)
    if hints and node_endpoints:
        field = bytearray()
        _count(len(node_endpoints), field, True)
        for n in node_endpoints:
            field += _I32.pack(n.node_id)
            _string(n.host, field, True)
            field += _I32.pack(n.port)
            _string(n.rack, field, True)
            field.append(0)  # the endpoint's tagged fields
        out.append(1)  # one tagged field: NodeEndpoints, tag 0
        out.append(0)
        encode_unsigned_varint(len(field), out)
        out += field
    elif flexible:
        out.append(0)  # the response's tagged fields
    return EncodedBody(bytes(out))
