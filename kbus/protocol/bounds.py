"""Bounded decoding: a pre-pass that walks a frame against a kio message schema before kio decodes it.

kio (pinned <0.7) decodes in Rust and reserves an array's capacity from the count read off the wire, before it reads
a single element: a 20-byte request whose compact array claims 2^32 entries makes it allocate 32 GB, and the
allocation failure aborts the process (no Python exception to catch). kio offers no hook to bound that, so kbus
walks the same schema first, in Python, the way Kafka's generated readers check every size
(``ByteBufferAccessor``/"Tried to allocate a collection of size N, but there are only M bytes remaining"):

- every array count, string, bytes/records length and tagged-field size must fit in the bytes that remain (an array
  element takes at least one byte, so a count can never exceed them);
- null (-1 / compact 0) only where the schema makes the field nullable: Kafka's readers refuse "non-nullable field
  was serialized as null", so handlers never see None where Kafka promises a value;
- known tagged fields are walked inside their declared size.

A frame that fails raises ProtocolError, which closes the connection (Kafka's behaviour for an unparseable request)
before kio or any handler sees it. The walk costs per field, not per record (records stay opaque bytes), and one
compiled walker per message class is kept: classes come only from the finite set of supported API versions.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Union, get_args, get_origin

from kbus.protocol.errors import ProtocolError
from kbus.protocol.record_batch import CorruptRecordError, decode_unsigned_varint

Buffer = bytes | bytearray | memoryview
# A step checks one field starting at ``pos`` and returns the position after it; ``end`` bounds the walk.
Step = Callable[[Buffer, int, int], int]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

_FIXED_WIDTH = {
    "bool": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8,
    "uuid": 16,
}


def _uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    if pos < end and buf[pos] < 0x80:  # one byte: nearly every length and tag count (called ~8x per request)
        return buf[pos], pos + 1
    try:
        return decode_unsigned_varint(buf, pos, end)
    except CorruptRecordError as exc:
        raise ProtocolError(f"{exc} (frame)") from None


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n > end - pos:
        raise ProtocolError(f"{what} of {n} bytes but only {end - pos} remain in the frame")
    return pos + n


def _fixed(width: int, name: str) -> Step:
    def step(buf: Buffer, pos: int, end: int) -> int:
        return _need(pos, width, end, name)

    return step


def _compact_length(buf: Buffer, pos: int, end: int, nullable: bool, name: str) -> tuple[int, int]:
    """Compact strings/bytes/arrays: uvarint N, N=0 is null, else N-1 items. Returns (-1 for null, pos)."""
    n, pos = _uvarint(buf, pos, end)
    if n == 0:
        if not nullable:
            raise ProtocolError(f"non-nullable field {name} was serialized as null")
        return -1, pos
    n -= 1
    if n > end - pos:
        raise ProtocolError(f"{name} claims {n} but only {end - pos} bytes remain in the frame")
    return n, pos


def _legacy_length(buf: Buffer, pos: int, end: int, width: int, nullable: bool, name: str) -> tuple[int, int]:
    _need(pos, width, end, name)
    n = (_I16 if width == 2 else _I32).unpack_from(buf, pos)[0]
    pos += width
    if n < 0:
        if n != -1 or not nullable:
            raise ProtocolError(f"field {name} has length {n}" + ("" if n != -1 else " but is not nullable"))
        return -1, pos
    if n > end - pos:
        raise ProtocolError(f"{name} claims {n} but only {end - pos} bytes remain in the frame")
    return n, pos


def _sized(kafka_type: str, flexible: bool, nullable: bool, name: str) -> Step:
    """string / bytes / records: a length, then that many bytes."""
    if flexible:
        def compact(buf: Buffer, pos: int, end: int) -> int:
            n, pos = _compact_length(buf, pos, end, nullable, name)
            return pos if n < 0 else pos + n

        return compact
    width = 2 if kafka_type == "string" else 4

    def legacy(buf: Buffer, pos: int, end: int) -> int:
        n, pos = _legacy_length(buf, pos, end, width, nullable, name)
        return pos if n < 0 else pos + n

    return legacy


def _primitive(kafka_type: str, flexible: bool, nullable: bool, name: str) -> Step:
    width = _FIXED_WIDTH.get(kafka_type)
    if width is not None:
        return _fixed(width, name)
    if kafka_type in ("string", "bytes", "records"):
        return _sized(kafka_type, flexible, nullable, name)
    raise TypeError(f"no bounds rule for kafka_type {kafka_type!r} ({name})")


def _array(item: Step, flexible: bool, nullable: bool, name: str) -> Step:
    def step(buf: Buffer, pos: int, end: int) -> int:
        if flexible:
            n, pos = _compact_length(buf, pos, end, nullable, name)
        else:
            n, pos = _legacy_length(buf, pos, end, 4, nullable, name)
        for _ in range(n):  # n <= remaining bytes, and every element consumes at least one
            pos = item(buf, pos, end)
        return pos

    return step


def _nullable_entity(inner: Step, name: str) -> Step:
    """KIP-893 nullable structs: an int8 marker (-1 null) before the struct."""
    def step(buf: Buffer, pos: int, end: int) -> int:
        _need(pos, 1, end, name)
        if buf[pos] == 0xFF:
            return pos + 1
        return inner(buf, pos + 1, end)

    return step


def _unwrap(tp: object) -> tuple[object, bool]:
    """(inner type, whether None is allowed) for ``X | None``."""
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], len(args) != len(get_args(tp))
    return tp, False


def _field_step(tp: object, kafka_type: str | None, flexible: bool, is_tag: bool, name: str) -> Step:
    inner, nullable = _unwrap(tp)
    nullable = nullable and not is_tag  # tagged fields are optional by their absence, not by a null
    if get_origin(inner) is tuple:
        (elem, _ellipsis) = get_args(inner)
        if isinstance(elem, type) and is_dataclass(elem):
            item = entity_step(elem)
        else:
            assert kafka_type is not None, name
            item = _primitive(kafka_type, flexible, False, name)
        return _array(item, flexible, nullable, name)
    if isinstance(inner, type) and is_dataclass(inner):
        walk = entity_step(inner)
        return _nullable_entity(walk, name) if nullable else walk
    assert kafka_type is not None, name
    return _primitive(kafka_type, flexible, nullable, name)


@cache
def entity_step(entity_type: type) -> Step:
    """The walker for one kio message/struct class (cached: the classes are the finite generated schema)."""
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for f in fields(entity_type):
        tag = f.metadata.get("tag")
        step = _field_step(f.type, f.metadata.get("kafka_type"), flexible, tag is not None,
                           f"{entity_type.__name__}.{f.name}")
        if tag is None:
            steps.append(step)
        else:
            tagged[int(tag)] = step
    name = entity_type.__name__

    def walk(buf: Buffer, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        if flexible:
            count, pos = _uvarint(buf, pos, end)
            if count > end - pos:
                raise ProtocolError(f"{name} claims {count} tagged fields but only {end - pos} bytes remain")
            for _ in range(count):
                tag, pos = _uvarint(buf, pos, end)
                size, pos = _uvarint(buf, pos, end)
                stop = _need(pos, size, end, f"{name} tagged field {tag}")
                known = tagged.get(tag)
                if known is not None and known(buf, pos, stop) != stop:
                    raise ProtocolError(f"{name} tagged field {tag} does not fill its {size} bytes")
                pos = stop
        return pos

    return walk


def check_bounds(entity_type: type, buf: Buffer, pos: int) -> None:
    """ProtocolError unless the message at ``pos`` can be read within ``buf`` with every size honest."""
    entity_step(entity_type)(buf, pos, len(buf))
