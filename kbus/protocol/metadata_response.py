"""The topics of a Metadata response (versions 0-12) encoded by hand, sans I/O.

A client's Metadata request for a topic of 1,000 partitions gets 1,000 partition entries back (librdkafka asks
again every topic.metadata.refresh.interval.ms, and on every leader change). Building a kio object per partition
and walking it with kio's generic writer cost several times Kafka's CPU for the request; here each entry is one
struct.pack plus its three replica lists. The rest of the response (brokers, cluster id, controller) stays kio's:
`splice_topics` puts the encoded topics array in place of the empty one of a response kio encoded without topics.
tests/unit/test_metadata_response.py checks the bytes against kio's for every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.record_batch import encode_unsigned_varint

FLEXIBLE_VERSION = 9
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART = struct.Struct(">hii")  # error_code, partition_index, leader_id
_PART_V7 = struct.Struct(">hiii")  # ..., leader_epoch
_ZERO_UUID = bytes(16)


def _array_len(n: int, flexible: bool, out: bytearray) -> None:
    if flexible:
        encode_unsigned_varint(n + 1, out)
    else:
        out += _I32.pack(n)


def _int32s(values: Sequence[int], flexible: bool) -> bytes:
    out = bytearray()
    _array_len(len(values), flexible, out)
    out += struct.pack(f">{len(values)}i", *values)
    return bytes(out)


def encode_partitions(
    version: int,
    partitions: Sequence[tuple[int, int, int, int, Sequence[int], Sequence[int], Sequence[int]]],
) -> bytes:
    """The partitions array of one topic: (error_code, partition_index, leader_id, leader_epoch, replica_nodes,
    isr_nodes, offline_replicas) each."""
    flexible = version >= FLEXIBLE_VERSION
    with_epoch, with_offline = version >= 7, version >= 5
    # replica lists repeat across partitions (a few brokers, a few orders): each distinct one is encoded once
    lists: dict[tuple[int, ...], bytes] = {}
    out = bytearray()
    _array_len(len(partitions), flexible, out)
    for error_code, index, leader, epoch, replicas, isr, offline in partitions:
        if with_epoch:
            out += _PART_V7.pack(error_code, index, leader, epoch)
        else:
            out += _PART.pack(error_code, index, leader)
        for values in (replicas, isr, offline) if with_offline else (replicas, isr):
            key = tuple(values)
            encoded = lists.get(key)
            if encoded is None:
                encoded = lists[key] = _int32s(key, flexible)
            out += encoded
        if flexible:
            out.append(0)  # tagged fields
    return bytes(out)


def encode_topic(
    version: int,
    *,
    error_code: int,
    name: str | None,
    topic_id: uuid.UUID | None = None,
    is_internal: bool = False,
    partitions: bytes | None = None,
    authorized_operations: int = -2147483648,
) -> bytes:
    """One MetadataResponseTopic; `partitions` is encode_partitions()' output (None: no partitions)."""
    flexible = version >= FLEXIBLE_VERSION
    out = bytearray(_I16.pack(error_code))
    raw = None if name is None else name.encode()
    if flexible:
        # null only where v12 allows it (a topic named by id)
        encode_unsigned_varint(0 if raw is None else len(raw) + 1, out)
    else:
        out += _I16.pack(-1 if raw is None else len(raw))
    if raw is not None:
        out += raw
    if version >= 10:
        out += _ZERO_UUID if topic_id is None else topic_id.bytes
    if version >= 1:
        out.append(1 if is_internal else 0)
    if partitions is None:
        _array_len(0, flexible, out)
    else:
        out += partitions
    if version >= 8:
        out += _I32.pack(authorized_operations)
    if flexible:
        out.append(0)
    return bytes(out)


def splice_topics(version: int, without_topics: bytes, topics: Sequence[bytes]) -> EncodedBody:
    """A Metadata response body: `without_topics` (kio's encoding of the response with an empty topics array)
    with that array replaced by `topics` (encode_topic() outputs)."""
    flexible = version >= FLEXIBLE_VERSION
    # what follows the topics array: cluster_authorized_operations (v8-v10), the tagged fields (v9+)
    after = (4 if 8 <= version <= 10 else 0) + (1 if flexible else 0)
    empty = 1 if flexible else 4
    at = len(without_topics) - after - empty
    head = bytearray(without_topics[:at])
    _array_len(len(topics), flexible, head)
    return EncodedBody(bytes(head) + b"".join(topics) + without_topics[at + empty :])
