"""The Fetch response body (versions 4-12) encoded by hand, sans I/O.

A full fetch of 1,000 partitions (librdkafka never uses fetch sessions, so every one of its fetches is full) puts
1,000 partition entries in the response. Building a kio object per entry and walking them with kio's generic
writer cost about 10 µs each, most of the broker's CPU for such a request; here one struct.pack per entry writes
the same bytes (tests/unit/test_fetch_response.py checks them against kio's encoding for every version).
The layout is Kafka's FetchResponse.json; kbus sends none of v12's tagged fields (diverging epoch, current
leader, snapshot id), as Kafka does when they hold their defaults.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from kbus.protocol.record_batch import encode_unsigned_varint

FLEXIBLE_VERSION = 12  # compact arrays, strings and bytes, tagged fields
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_PAIR: Final = struct.Struct(">qq")
_TOP_V7: Final = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
# partition_index, error_code, high_watermark, last_stable_offset[, log_start_offset]
_HEAD_V4: Final = struct.Struct(">ihqq")
_HEAD_V5: Final = struct.Struct(">ihqqq")
# A partition with no records and no aborted transactions (every partition of a caught-up consumer's full fetch),
# whole in one pack: the head, a null aborted_transactions, [preferred_read_replica,] empty records[, no tags]
_EMPTY_V4: Final = struct.Struct(">ihqqii")  # ..., -1, 0
_EMPTY_V5: Final = struct.Struct(">ihqqqii")  # ..., log_start_offset, -1, 0
_EMPTY_V11: Final = struct.Struct(">ihqqqiii")  # ..., -1, preferred_read_replica, 0
_EMPTY_V12: Final = struct.Struct(">ihqqqBiBB")  # ..., 0 (null), preferred_read_replica, 1 (empty), 0 (no tags)


class PartitionEntry:
    """One partition of a Fetch response; `records` is a record set, or a splice placeholder standing for one.
    A plain class, not a dataclass: one is made per partition of every Fetch, and mypyc compiles a plain class's
    __init__ (a dataclass's is generated Python, ~0.4 us a call)."""

    __slots__ = (
        "aborted_transactions",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "partition_index",
        "preferred_read_replica",
        "records",
    )  # fmt: skip

    def __init__(
        self,
        partition_index: int,
        error_code: int,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        aborted_transactions: Sequence[tuple[int, int]] | None = None,  # (producer_id, first_offset)
        records: bytes = b"",
        preferred_read_replica: int = -1,
    ) -> None:
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.aborted_transactions = aborted_transactions
        self.records = records
        self.preferred_read_replica = preferred_read_replica

    def _key(self) -> tuple[int, int, int, int, int, Sequence[tuple[int, int]] | None, bytes, int]:
        return (self.partition_index, self.error_code, self.high_watermark, self.last_stable_offset,
                self.log_start_offset, self.aborted_transactions, self.records, self.preferred_read_replica)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PartitionEntry) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.partition_index, self.error_code, self.high_watermark, self.records))

    def __repr__(self) -> str:
        return f"PartitionEntry{self._key()!r}"


class EncodedBody:
    """A response body already encoded for its request's version: encode_response() writes it as it is. A plain
    class: one is made per response, and mypyc compiles a plain class's __init__ (not a dataclass's)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EncodedBody) and self.data == other.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"EncodedBody(data={self.data!r})"


def encode_fetch_response(
    version: int,
    topics: Sequence[tuple[str, Sequence[PartitionEntry]]],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> EncodedBody:
    if not 4 <= version <= FLEXIBLE_VERSION:
        raise ValueError(f"Fetch response v{version} is not encoded here")
    flexible = version >= FLEXIBLE_VERSION
    head = _HEAD_V5 if version >= 5 else _HEAD_V4
    with_log_start = version >= 5
    with_replica = version >= 11
    out = bytearray(_TOP_V7.pack(throttle_time_ms, error_code, session_id) if version >= 7 else
                    _I32.pack(throttle_time_ms))  # fmt: skip
    if flexible:
        encode_unsigned_varint(len(topics) + 1, out)
    else:
        out += _I32.pack(len(topics))
    for topic, partitions in topics:
        name = topic.encode()
        if flexible:
            encode_unsigned_varint(len(name) + 1, out)
            out += name
            encode_unsigned_varint(len(partitions) + 1, out)
        else:
            out += _I16.pack(len(name))
            out += name
            out += _I32.pack(len(partitions))
        for p in partitions:
            if p.aborted_transactions is None and not p.records:
                if flexible:
                    out += _EMPTY_V12.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                           p.log_start_offset, 0, p.preferred_read_replica, 1, 0)  # fmt: skip
                elif with_replica:
                    out += _EMPTY_V11.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                           p.log_start_offset, -1, p.preferred_read_replica, 0)  # fmt: skip
                elif with_log_start:
                    out += _EMPTY_V5.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                          p.log_start_offset, -1, 0)  # fmt: skip
                else:
                    out += _EMPTY_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                          -1, 0)  # fmt: skip
                continue
            if with_log_start:
                out += head.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                 p.log_start_offset)  # fmt: skip
            else:
                out += head.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                if flexible:
                    encode_unsigned_varint(len(aborted) + 1, out)
                else:
                    out += _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    out += _PAIR.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            if with_replica:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if flexible:
                encode_unsigned_varint(len(records) + 1, out)
            else:
                out += _I32.pack(len(records))
            out += records
            if flexible:  # the partition's tagged fields: none (diverging_epoch, current_leader, snapshot_id unset)
                out.append(0)
        if flexible:
            out.append(0)  # the topic's tagged fields
    if flexible:
        out.append(0)  # the response's tagged fields
    return EncodedBody(bytes(out))
