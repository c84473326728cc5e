"""The consumer's embedded protocol (Kafka's clients ConsumerProtocol): the Subscription a classic member sends in
JoinGroup's protocol metadata and the Assignment SyncGroup hands back. The coordinator reads and writes them only
for classic members inside a consumer group (Kafka 4's online migration); a classic group's leader assigns itself.

Subscription v0-v3: version int16, topics [string], user data (nullable bytes), v1+ owned partitions [topic
string, partitions [int32]], v2+ generation id int32, v3+ rack id (nullable string). Assignment v0-v3: version
int16, assigned partitions [topic string, partitions [int32]], user data (nullable bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from kbus.server.coordinator.assignors import Assignment

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MAX_VERSION = 3


class ConsumerProtocolError(ValueError):
    """Bytes that are not a ConsumerProtocol Subscription or Assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: Assignment
    rack_id: str | None


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConsumerProtocolError("truncated consumer protocol bytes")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        value: int = _I16.unpack(self.take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self.take(4))[0]
        return value

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError("a topic name is not UTF-8") from exc

    def count(self) -> int:
        n = self.i32()
        if n > len(self.buf):  # each element takes at least a byte: a bogus count fails fast
            raise ConsumerProtocolError("array length past the end")
        return max(n, 0)

    def partitions(self) -> Assignment:
        out: dict[str, frozenset[int]] = {}
        for _ in range(self.count()):
            topic = self.string() or ""
            ps = frozenset(self.i32() for _ in range(self.count()))
            out[topic] = out.get(topic, frozenset()) | ps
        return out


def version_of(metadata: bytes) -> int:
    """ConsumerProtocol.deserializeVersion: the first int16."""
    if len(metadata) < 2:
        raise ConsumerProtocolError("no consumer protocol version")
    version: int = _I16.unpack(metadata[:2])[0]
    if version < 0:
        raise ConsumerProtocolError(f"consumer protocol version {version}")
    return version


def parse_subscription(metadata: bytes) -> Subscription:
    r = _Reader(metadata)
    version = version_of(metadata)
    r.take(2)
    topics = tuple(r.string() or "" for _ in range(r.count()))
    n = r.i32()
    if n > 0:
        r.take(n)  # user data: the client assignor's, meaningless to a server-side assignor
    owned: Assignment = {}
    rack: str | None = None
    if version >= 1:
        owned = r.partitions()
    if version >= 2:
        r.i32()  # the generation the member last had
    if version >= 3:
        rack = r.string()
    return Subscription(version, topics, owned, rack)


def parse_assignment(data: bytes) -> Assignment:
    """The partitions of an Assignment (empty bytes: nothing assigned, as a classic group stores a member without
    an assignment yet)."""
    if not data:
        return {}
    r = _Reader(data)
    version_of(data)
    r.take(2)
    return r.partitions()


def serialize_assignment(assigned: Mapping[str, frozenset[int]], version: int) -> bytes:
    """ConsumerProtocol.serializeAssignment at the member's subscription version (capped at the newest)."""
    out = bytearray(_I16.pack(min(version, MAX_VERSION)))
    topics = sorted((t, sorted(ps)) for t, ps in assigned.items() if ps)
    out += _I32.pack(len(topics))
    for topic, ps in topics:
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    out += _I32.pack(-1)  # no user data
    return bytes(out)
