"""A consumer's or follower's Fetch request (v4-v12) decoded by hand, sans I/O.

kio's generic reader (and the bounds pre-pass before it) spends about 1 µs per listed partition: 8-10 ms for a
full fetch of 10,000 partitions, on the event loop, every fetch; this takes 3.4-3.8 ms (v11, v12). A partition
here is a fixed-size record (16-33 bytes), so one `struct.iter_unpack` over all of a topic's partitions decodes
them in C, into named tuples the Fetch handler reads like kio's objects. Flexible v12 partitions end in tagged
fields: the fast path takes the common case (none, a single 0 byte) and checks it; any tagged field sends that
topic through a per-partition path that skips them (kio refused unknown tags; Kafka skips them, as here).
`tests/unit/test_fetch_request_decode.py` checks the result against kio's for every version.

Malformed input raises ProtocolError, as kio's decode does through the codec: the connection closes, the broker
serves the rest. A count is checked against the bytes left before anything is allocated for it.
"""

from __future__ import annotations

import functools
import struct
from typing import NamedTuple

from kbus.protocol.codec import ProtocolError
from kbus.protocol.request_reader import RequestReader

FETCH_KEY = 1
MIN_VERSION, MAX_VERSION = 4, 12


class PartitionV4(NamedTuple):
    partition: int
    fetch_offset: int
    partition_max_bytes: int

    @property
    def current_leader_epoch(self) -> int:
        return -1  # v4-v8 do not say which epoch the client knows: unset, as kio's default


class PartitionV5(NamedTuple):
    partition: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int

    @property
    def current_leader_epoch(self) -> int:
        return -1  # v4-v8 do not say which epoch the client knows: unset, as kio's default


class PartitionV9(NamedTuple):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class PartitionV12(NamedTuple):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    tagged_fields: int = 0  # the fast path's count of them (always 0 once decoded)


FetchPartition = PartitionV4 | PartitionV5 | PartitionV9 | PartitionV12  # each has current_leader_epoch (-1 before v9)
PartitionType = type[PartitionV4] | type[PartitionV5] | type[PartitionV9] | type[PartitionV12]

_PARTITION_LAYOUT: dict[int, tuple[struct.Struct, PartitionType]] = {
    4: (struct.Struct(">iqi"), PartitionV4),
    5: (struct.Struct(">iqqi"), PartitionV5),
    9: (struct.Struct(">iiqqi"), PartitionV9),
    12: (struct.Struct(">iiqiqiB"), PartitionV12),  # the trailing byte: the partition's tagged-field count
}


def _layout(version: int) -> tuple[struct.Struct, PartitionType]:
    return _PARTITION_LAYOUT[12 if version >= 12 else 9 if version >= 9 else 5 if version >= 5 else 4]


# Plain classes, not dataclasses: mypyc compiles a plain class's __init__ (a dataclass's is generated Python, ~0.4 µs
# a call, and a one-partition Fetch makes three of these)
class FetchTopic:
    __slots__ = ("partitions", "topic")

    def __init__(self, topic: str, partitions: list[FetchPartition]) -> None:
        self.topic = topic
        self.partitions = partitions


class ForgottenTopic:
    __slots__ = ("partitions", "topic")

    def __init__(self, topic: str, partitions: list[int]) -> None:
        self.topic = topic
        self.partitions = partitions


class FetchRequest:
    """The fields the Fetch handler reads, named as kio names them (max_wait in milliseconds)."""

    __slots__ = (
        "forgotten_topics_data",
        "isolation_level",
        "max_bytes",
        "max_wait",
        "min_bytes",
        "rack_id",
        "replica_id",
        "session_epoch",
        "session_id",
        "topics",
    )  # fmt: skip

    def __init__(
        self, replica_id: int, max_wait: int, min_bytes: int, max_bytes: int, isolation_level: int, session_id: int,
        session_epoch: int, topics: list[FetchTopic], forgotten_topics_data: list[ForgottenTopic], rack_id: str,
    ) -> None:
        self.replica_id = replica_id
        self.max_wait = max_wait
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.isolation_level = isolation_level
        self.session_id = session_id
        self.session_epoch = session_epoch
        self.topics = topics
        self.forgotten_topics_data = forgotten_topics_data
        self.rack_id = rack_id


def decode_fetch_request(frame: bytes, version: int, body_offset: int) -> FetchRequest:
    """The Fetch request body at `body_offset` of `frame`; ProtocolError when it is malformed."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ProtocolError(f"Fetch v{version} has no hand-written decoder")
    try:
        return _decode(RequestReader(frame, body_offset, version >= 12, f"FetchRequest v{version}"), version)
    except (struct.error, UnicodeDecodeError, IndexError) as exc:
        raise ProtocolError(f"malformed FetchRequest v{version}: {exc}") from None


def _decode(r: RequestReader, version: int) -> FetchRequest:
    replica_id, max_wait, min_bytes, max_bytes = r.i32(), r.i32(), r.i32(), r.i32()
    isolation_level = r.i8()
    session_id, session_epoch = (r.i32(), r.i32()) if version >= 7 else (0, -1)
    part_struct, part_type = _layout(version)
    topics: list[FetchTopic] = []
    for _ in range(r.count(2 if r.flexible else 6)):
        name = r.string()
        n = r.count(part_struct.size - (1 if r.flexible else 0))
        topics.append(FetchTopic(name, _partitions(r, n, part_struct, part_type)))
        r.skip_tagged()
    forgotten: list[ForgottenTopic] = []
    if version >= 7:
        for _ in range(r.count(2 if r.flexible else 6)):
            name = r.string()
            n = r.count(4)
            forgotten.append(ForgottenTopic(name, list(struct.unpack_from(f">{n}i", r.buf, r.pos))))
            r.pos += 4 * n
            r.skip_tagged()
    rack_id = r.string() if version >= 11 else ""
    r.skip_tagged()  # v12: ClusterId (tag 0) and any others: the broker reads none of them
    return FetchRequest(replica_id, max_wait, min_bytes, max_bytes, isolation_level, session_id, session_epoch,
                        topics, forgotten, rack_id)  # fmt: skip


def _partitions(r: RequestReader, n: int, part_struct: struct.Struct, part_type: PartitionType) -> list[FetchPartition]:
    size = part_struct.size
    end = r.pos + n * size
    if n == 1 and end <= len(r.buf) and (not r.flexible or r.buf[end - 1] == 0):
        # one partition (a consumer of one partition, the latency path): one unpack, without the memoryview, the
        # partial and the iterator the many-partition path below sets up
        row = tuple.__new__(part_type, part_struct.unpack_from(r.buf, r.pos))
        r.pos = end
        return [row]
    # flexible: the fast path holds when every partition's last byte (its tagged-field count) is 0
    if end <= len(r.buf) and (not r.flexible or r.buf[r.pos + size - 1 : end : size].count(0) == n):
        # tuple.__new__(cls, row) in C: NamedTuple._make is a Python function, ~0.25 µs a partition
        unpacked = part_struct.iter_unpack(memoryview(r.buf)[r.pos : end])
        rows = list(map(functools.partial(tuple.__new__, part_type), unpacked))
        r.pos = end
        return rows
    if not r.flexible:
        raise ProtocolError("malformed FetchRequest: truncated partitions")
    out: list[FetchPartition] = []  # some partition carries tagged fields: one at a time, skipping them
    body = struct.Struct(part_struct.format[:-1])
    for _ in range(n):
        out.append(part_type._make((*body.unpack_from(r.buf, r.pos), 0)))
        r.pos += body.size
        r.skip_tagged()
    return out
