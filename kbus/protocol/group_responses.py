"""Heartbeat and OffsetCommit responses encoded by hand, sans I/O.

A consumer heartbeats every heartbeat.interval.ms and commits after every poll (enable.auto.commit, or a commit
per record): both answers are a throttle time and error codes. Building kio objects for them and walking them with
kio's generic writer cost about a tenth of the broker's CPU for such a request; here each is a few struct.packs.
tests/unit/test_group_responses.py checks the bytes against kio's for every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final

from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.record_batch import encode_unsigned_varint

HEARTBEAT_FLEXIBLE_VERSION: Final = 4
OFFSET_COMMIT_FLEXIBLE_VERSION: Final = 8
OFFSET_COMMIT_TOPIC_ID_VERSION: Final = 10  # topics named by id (Kafka 4.1)
# Final: compiled code reads them from C statics, not from the module's dict on every use
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I32_I16: Final = struct.Struct(">ih")
_ZERO_UUID: Final = bytes(16)
# a consumer's commit of one partition (v8-v9): throttle time, 1 topic, its name's length (compact: one byte up to 126
# bytes) ... 1 partition, its index and error code, the partition's, topic's and response's empty tagged fields
_ONE_HEAD: Final = struct.Struct(">iBB")
_ONE_PARTITION: Final = struct.Struct(">BihBBB")
# A consumer commits the same partition again and again, and with no request quota (throttle time 0) its answer is
# the same bytes each time: kept per (version, topic, partition, error code), bounded (made-up names only empty it).
# An EncodedBody is never changed once made (a throttle time makes a new one), so one is shared.
_ONE_ANSWERS: Final[dict[tuple[int, str, int, int], EncodedBody]] = {}
_MAX_ONE_ANSWERS: Final = 4096


def encode_heartbeat_response(version: int, error_code: int, throttle_time_ms: int = 0) -> EncodedBody:
    """HeartbeatResponse v0-v4: v0 has only the error code, v1+ the throttle time first, v4+ tagged fields."""
    if version == 0:
        return EncodedBody(_I16.pack(error_code))
    data = _I32_I16.pack(throttle_time_ms, error_code)
    return EncodedBody(data + b"\0" if version >= HEARTBEAT_FLEXIBLE_VERSION else data)


def encode_offset_commit_response(
    version: int,
    topics: Sequence[tuple[str | None, uuid.UUID | None, Sequence[tuple[int, int]]]],
    throttle_time_ms: int = 0,
) -> EncodedBody:
    """OffsetCommitResponse v2-v10. `topics`: (name, topic id, [(partition index, error code), ...]) each; v10
    writes the id (the zero UUID for None), earlier versions the name."""
    flexible = version >= OFFSET_COMMIT_FLEXIBLE_VERSION
    by_id = version >= OFFSET_COMMIT_TOPIC_ID_VERSION
    if flexible and not by_id and len(topics) == 1:
        name, _, partitions = topics[0]
        if len(partitions) == 1:
            index, error_code = partitions[0]
            one = _one_partition(name or "", index, error_code, throttle_time_ms)
            if one is not None:
                return one
    out = bytearray()
    if version >= 3:
        out += _I32.pack(throttle_time_ms)
    _array_len(len(topics), flexible, out)
    for name, topic_id, partitions in topics:
        if by_id:
            out += _ZERO_UUID if topic_id is None else topic_id.bytes
        else:
            raw = (name or "").encode()
            if flexible:
                encode_unsigned_varint(len(raw) + 1, out)
            else:
                out += _I16.pack(len(raw))
            out += raw
        _array_len(len(partitions), flexible, out)
        for index, error_code in partitions:
            out += _I32_I16.pack(index, error_code)
            if flexible:
                out.append(0)  # the partition's tagged fields
        if flexible:
            out.append(0)  # the topic's
    if flexible:
        out.append(0)  # the response's
    return EncodedBody(bytes(out))


def encode_offset_commit_one(version: int, name: str, index: int, error_code: int) -> EncodedBody:
    """encode_offset_commit_response of one topic (by name) and one partition, throttle time 0: a consumer's commit.
    v8-v9 answers are kept (the same bytes for the same partition and error)."""
    if OFFSET_COMMIT_FLEXIBLE_VERSION <= version < OFFSET_COMMIT_TOPIC_ID_VERSION:
        key = (version, name, index, error_code)
        kept = _ONE_ANSWERS.get(key)
        if kept is not None:
            return kept
        one = _one_partition(name, index, error_code, 0)
        if one is not None:
            if len(_ONE_ANSWERS) >= _MAX_ONE_ANSWERS:
                _ONE_ANSWERS.clear()
            _ONE_ANSWERS[key] = one
            return one
    return encode_offset_commit_response(version, [(name, None, [(index, error_code)])])


def _one_partition(name: str, index: int, error_code: int, throttle_time_ms: int) -> EncodedBody | None:
    """v8-v9 of one topic and one partition in two packs (the general case: a dozen appends); None for a name of
    more than 126 bytes (its compact length takes two bytes)."""
    raw = name.encode()
    if len(raw) > 126:
        return None
    return EncodedBody(b"".join((_ONE_HEAD.pack(throttle_time_ms, 2, len(raw) + 1), raw,
                                 _ONE_PARTITION.pack(2, index, error_code, 0, 0, 0))))  # fmt: skip


def errors_by_topic(errors: dict[tuple[str, int], int]) -> dict[str, list[tuple[int, int]]]:
    """A commit's error code per (topic, partition), as the response lists them: per topic, in the order seen."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, error in errors.items():
        parts = by_topic.get(tp[0])
        if parts is None:
            by_topic[tp[0]] = parts = []
        parts.append((tp[1], error))
    return by_topic


def _array_len(n: int, flexible: bool, out: bytearray) -> None:
    if flexible:
        encode_unsigned_varint(n + 1, out)
    else:
        out += _I32.pack(n)
