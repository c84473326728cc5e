"""Property-based tests of the request codec (hypothesis): every supported request, encoded from random field
values, passes the bounds pre-pass exactly to its end and decodes; mutated frames are either refused with a
ProtocolError or decode to something (never a process abort inside kio)."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct
import uuid
from dataclasses import fields, is_dataclass
from types import NoneType, UnionType
from typing import Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

import kbus.server.apis  # noqa: F401  (registers the handlers: the API table is what kbus accepts)
from kbus.protocol.bounds import check_bounds, entity_step
from kbus.protocol.codec import ProtocolError, decode_request, parse_request_header
from kbus.server.apis.registry import API_TABLE, supported

SUPPORTED = sorted(
    (key, version) for key, spec in API_TABLE.items() for version in range(spec.min_version, spec.max_version + 1)
)
_SMALL = {"max_size": 3}

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1),
}


def _unwrap(tp: object) -> tuple[object, bool]:
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], len(args) != len(get_args(tp))
    return tp, False


def _primitive(kafka_type: str) -> st.SearchStrategy[object]:
    if kafka_type in _INTS:
        lo, hi = _INTS[kafka_type]
        return st.integers(lo, hi)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "string":
        return st.text(max_size=8)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=16)
    if kafka_type == "uuid":
        return st.uuids().map(lambda u: u if u != uuid.UUID(int=0) else None)
    if kafka_type == "timedelta_i32":
        return st.integers(0, 2**31 - 1).map(lambda v: datetime.timedelta(milliseconds=v))
    if kafka_type == "timedelta_i64":
        return st.integers(0, 2**40).map(lambda v: datetime.timedelta(milliseconds=v))
    if kafka_type == "datetime_i64":
        return st.integers(0, 2**41).map(
            lambda v: datetime.datetime.fromtimestamp(v / 1000, datetime.UTC).replace(microsecond=(v % 1000) * 1000)
        )
    raise AssertionError(kafka_type)


def entities(cls: type) -> st.SearchStrategy[object]:
    """Random instances of a kio message class, nested structs and arrays included."""
    kwargs: dict[str, st.SearchStrategy[object]] = {}
    for f in fields(cls):
        inner, nullable = _unwrap(f.type)
        kafka_type = f.metadata.get("kafka_type")
        if get_origin(inner) is tuple:
            elem = get_args(inner)[0]
            item = entities(elem) if is_dataclass(elem) else _primitive(kafka_type)
            strat: st.SearchStrategy[object] = st.lists(item, **_SMALL).map(tuple)
        elif is_dataclass(inner):
            strat = entities(inner)  # type: ignore[arg-type]
        else:
            strat = _primitive(kafka_type)
            if kafka_type == "uuid" or (kafka_type == "datetime_i64" and nullable):
                nullable = True
        if nullable and "tag" not in f.metadata:
            strat = st.none() | strat
        kwargs[f.name] = strat
    return st.builds(cls, **kwargs)


@st.composite
def encoded_requests(draw: st.DrawFn) -> tuple[int, int, bytes]:
    key, version = draw(st.sampled_from(SUPPORTED))
    cls = load_request_schema(key, version)
    out = io.BytesIO()
    entity_writer(cls)(out, draw(entities(cls)))
    return key, version, out.getvalue()


def _frame(key: int, version: int, body: bytes) -> bytes:
    flexible = load_request_schema(key, version).__flexible__
    return struct.pack(">hhih", key, version, 7, 1) + b"c" + (b"\x00" if flexible else b"") + body


_SETTINGS = settings(max_examples=400, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_SETTINGS
@given(encoded_requests())
def test_valid_requests_pass_the_bounds_walk_to_their_end(req: tuple[int, int, bytes]) -> None:
    key, version, body = req
    cls = load_request_schema(key, version)
    assert entity_step(cls)(body, 0, len(body)) == len(body)
    frame = _frame(key, version, body)
    header, pos = parse_request_header(frame, supported=supported)
    decoded = decode_request(frame, header, pos)
    assert type(decoded) is cls


@st.composite
def mutated(draw: st.DrawFn) -> tuple[int, int, bytes]:
    key, version, body = draw(encoded_requests())
    buf = bytearray(body)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "huge", "truncate", "insert", "minus1"]))
        at = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "huge":  # a count/length claiming far more than the frame holds
            buf[at:at] = draw(st.sampled_from([b"\x7f\xff\xff\xff", b"\x81\x80\x80\x80\x10", b"\xff\xff\xff\xff\x0f"]))
        elif kind == "minus1":
            buf[at:at] = draw(st.sampled_from([b"\xff\xff", b"\xff\xff\xff\xff", b"\x00"]))
        elif kind == "truncate":
            del buf[at:]
        else:
            buf[at:at] = draw(st.binary(min_size=1, max_size=4))
    return key, version, bytes(buf)


@_SETTINGS
@given(mutated())
def test_mutated_requests_are_refused_or_decoded_never_abort(req: tuple[int, int, bytes]) -> None:
    key, version, body = req
    frame = _frame(key, version, body)
    header, pos = parse_request_header(frame, supported=supported)
    with contextlib.suppress(ProtocolError):
        decode_request(frame, header, pos)  # the bounds walk runs first; kio only sees honest sizes


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        (3, 9, b"\x81\x80\x80\x80\x10\x01\x00\x00\x00"),  # Metadata v9: compact array of 2^32 topics
        (3, 4, b"\x7f\xff\xff\xff\x01"),  # Metadata v4: legacy array of 2^31-1 topics
        (11, 6, b"\x04grp\x00\x00\x10\x00\x00\x00\x10\x00\x01\x00\x06range\xff\xff\xff\xff\x0f"),  # JoinGroup v6
        (2, 6, b"\xff\xff\xff\xff\x00\x81\x80\x80\x80\x10"),  # ListOffsets v6: 2^32 topics
        (0, 9, b"\x00\x00\xff\xff\x00\x00\x75\x30\x02\x02t\xff\xff\xff\xff\x0f"),  # Produce v9: 2^32 partitions
    ],
)
def test_claimed_counts_beyond_the_frame_are_refused(key: int, version: int, body: bytes) -> None:
    frame = _frame(key, version, body)
    header, pos = parse_request_header(frame, supported=supported)
    with pytest.raises(ProtocolError, match="remain"):
        decode_request(frame, header, pos)


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        (1, 4, b"\xff\xff\xff\xff" + b"\x00" * 13 + b"\xff\xff\xff\xff"),  # Fetch v4: topics array null
        (0, 3, b"\xff\xff\x00\x01\x00\x00\x75\x30\xff\xff\xff\xff"),  # Produce v3: topic_data null
        (19, 5, b"\x00"),  # CreateTopics v5: compact topics array null
    ],
)
def test_null_where_kafka_forbids_it_is_refused(key: int, version: int, body: bytes) -> None:
    frame = _frame(key, version, body)
    header, pos = parse_request_header(frame, supported=supported)
    with pytest.raises(ProtocolError, match=r"non-nullable|not nullable"):
        decode_request(frame, header, pos)


def test_nullable_array_may_be_null() -> None:
    cls = load_request_schema(3, 9)
    body = b"\x00\x01\x00\x00\x00"  # Metadata v9: topics null (= all topics)
    check_bounds(cls, body, 0)
    value, _ = entity_reader(cls)(body, 0)
    assert value.topics is None


@st.composite
def encoded_responses(draw: st.DrawFn) -> tuple[type, bytes]:
    from kio.index import load_response_schema

    key, version = draw(st.sampled_from(SUPPORTED))
    cls = load_response_schema(key, version)
    out = io.BytesIO()
    entity_writer(cls)(out, draw(entities(cls)))
    return cls, out.getvalue()


@_SETTINGS
@given(encoded_responses())
def test_valid_responses_pass_the_bounds_walk_too(resp: tuple[type, bytes]) -> None:
    """The replication client walks responses from other brokers the same way before kio decodes them."""
    cls, body = resp
    assert entity_step(cls)(body, 0, len(body)) == len(body)
