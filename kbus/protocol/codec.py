"""Kafka request/response framing and codec, sans-I/O.

Frames are `int32 size` + payload. A request payload is a request header (v1, or v2 when the API version is
flexible) followed by the body; kio's generated dataclasses decode and encode the bodies, so no message struct is
hand-written here. Record batches inside Produce/Fetch stay opaque `bytes`.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from functools import cache, lru_cache
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

from kbus.protocol.bounds import check_bounds
from kbus.protocol.errors import ProtocolError
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.record_batch import CorruptRecordError, decode_unsigned_varint
from kbus.protocol.upgrade import to_version, zero_value

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_SIZE_AND_ID: Final = struct.Struct(">ii")  # a response frame's size and correlation id
_HEADER: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id
API_VERSIONS_KEY = 18


# What a handler answers: kio's response message (of the newest version the handler serves, or the request's own;
# encode_response writes it in the request's version), or a body it encoded itself (the hot APIs).
Response = Entity | EncodedBody


class UnsupportedVersionError(ProtocolError):
    """A known API at a version kbus does not implement."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(f"unsupported version {header.api_version} of API {header.api_key}")
        self.header = header


class RequestHeader:
    """A request's header (v1, or v2 with its tagged fields skipped). A plain class rather than a frozen dataclass:
    one is made per request, and mypyc compiles a plain class's __init__ (a dataclass's generated one stays
    interpreted, ~0.5 µs). Compared and hashed by value, as the dataclass was; not to be changed once made."""

    __slots__ = ("api_key", "api_version", "client_id", "correlation_id", "flexible")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                 flexible: bool) -> None:  # fmt: skip
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.flexible = flexible

    def _key(self) -> tuple[int, int, int, str | None, bool]:
        return self.api_key, self.api_version, self.correlation_id, self.client_id, self.flexible

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RequestHeader) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, flexible={self.flexible})")


def frame_size(prefix: bytes, max_frame_bytes: int) -> int:
    """The payload size a frame's 4-byte prefix announces; ProtocolError when it is negative or larger than
    socket.request.max.bytes (the connection is then closed before anything is buffered)."""
    size: int = _I32.unpack(prefix)[0]
    return checked_frame_size(size, max_frame_bytes)


def checked_frame_size(size: int, max_frame_bytes: int) -> int:
    """frame_size for a prefix already unpacked (the connection reads it in place from its buffer)."""
    if size < 0 or size > max_frame_bytes:
        raise ProtocolError(f"frame of {size} bytes outside [0, socket.request.max.bytes={max_frame_bytes}]")
    return size


def read_uvarint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """An unsigned varint (tagged-field counts and sizes); truncation is a ProtocolError here."""
    try:
        return decode_unsigned_varint(buf, pos)
    except CorruptRecordError as exc:
        raise ProtocolError(str(exc)) from None


def skip_tagged_fields(buf: bytes | bytearray, pos: int, what: str = "header") -> int:
    """Past a flexible version's tagged fields (headers', and the hand-written request decoders' entities'): kbus
    reads none of them, and Kafka skips the ones it does not know. Returns the offset after them; ProtocolError
    ("truncated <what> tagged fields") when they run past the frame."""
    if pos < len(buf) and buf[pos] == 0:  # none: the common case, one byte
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError(f"truncated {what} tagged fields")
    return pos


# (api_key << 16 | api_version) -> its request header is flexible, for the pairs kbus implements (parse_request_header)
_FLEXIBLE_HEADER: Final[dict[int, bool]] = {}


@lru_cache(maxsize=512)  # keyed by wire values: bounded, garbage (key, version) pairs must not grow it
def request_type(api_key: int, api_version: int) -> type | None:
    try:
        return load_request_schema(api_key, api_version)
    except Exception:
        return None


@lru_cache(maxsize=512)
def response_type(api_key: int, api_version: int) -> type[Entity]:
    return load_response_schema(api_key, api_version)


def parse_request_header(frame: bytes | bytearray, *,
                         supported: Callable[[int, int], bool]) -> tuple[RequestHeader, int]:
    """Returns the header and the body's offset. Raises UnsupportedVersionError for a known API at an
    unimplemented version (the caller answers UNSUPPORTED_VERSION where Kafka does), ProtocolError otherwise."""
    if len(frame) < 10:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    (n,) = _I16.unpack_from(frame, 8)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise ProtocolError("truncated client_id")
        client_id = frame[pos : pos + n].decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise ProtocolError(f"bad client_id length {n}")
    # Only implemented (key, version) pairs reach the schema lookup, so its cache stays bounded by kbus's own
    # table whatever pairs a client makes up. Whether a pair's header is flexible is then kept under a plain int
    # (the lru_cache'd lookup and the class attribute read cost ~0.2 us a request).
    flexible: bool | None = None  # None: not a version kbus implements
    if supported(api_key, api_version):
        pair = (api_key << 16) | (api_version & 0xFFFF)
        flexible = _FLEXIBLE_HEADER.get(pair)
        if flexible is None:
            rtype = request_type(api_key, api_version)
            if rtype is not None:
                flexible = _FLEXIBLE_HEADER[pair] = bool(rtype.__flexible__)  # type: ignore[attr-defined]  # kio's
    header = RequestHeader(api_key, api_version, correlation_id, client_id, bool(flexible))
    if flexible is None:
        raise UnsupportedVersionError(header)
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return header, pos


class RequestHeaderReader:
    """parse_request_header for one connection, which nearly always sends the same API and version under the same
    client id (a producer: Produce after Produce). What parse_request_header found for the last request is kept:
    while the next one's (key, version) pair and client id bytes are the same, its header is that answer with the
    new correlation id, with no `supported` call, no flexible-header lookup and no client id slice and decode.
    Anything else (another pair, another client id, a short frame) goes through parse_request_header, whose rules
    (lengths, UNSUPPORTED_VERSION, tagged fields) are the only ones, and becomes the kept answer if it parses."""

    def __init__(self, supported: Callable[[int, int], bool]) -> None:
        self._supported = supported
        # (api_key << 16 | api_version) of the kept answer; two int16s make no pair this large: none kept yet
        self._pair = 1 << 40
        self._flexible = False
        self._client_id_size = -1  # the kept client id's int16 length (-1: null)
        self._client_id_bytes = b""
        self._client_id: str | None = None

    def read(self, frame: bytes | bytearray) -> tuple[RequestHeader, int]:
        """The header and the body's offset, as parse_request_header(frame, supported=...) gives them."""
        n: int
        if len(frame) >= 10:
            api_key: int  # declared: native int operations below, not generic ones on struct's objects
            api_version: int
            correlation_id: int
            api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
            n = _I16.unpack_from(frame, 8)[0]
            # startswith reads the client id in place: no slice; it is False for a frame too short to hold it
            if ((api_key << 16) | (api_version & 0xFFFF)) == self._pair and n == self._client_id_size \
                    and (n <= 0 or frame.startswith(self._client_id_bytes, 10)):
                flexible = self._flexible
                header = RequestHeader(api_key, api_version, correlation_id, self._client_id, flexible)
                pos = 10 + n if n > 0 else 10
                return header, skip_tagged_fields(frame, pos) if flexible else pos
        header, pos = parse_request_header(frame, supported=self._supported)
        n = _I16.unpack_from(frame, 8)[0]
        self._pair = (header.api_key << 16) | (header.api_version & 0xFFFF)
        self._flexible = header.flexible
        self._client_id_size = n
        self._client_id_bytes = bytes(frame[10 : 10 + n]) if n > 0 else b""
        self._client_id = header.client_id
        return header, pos


OFFSET_COMMIT_KEY = 8
_I64: Final = struct.Struct(">q")
# kio decodes a timedelta_i64 through int64 microseconds: a longer one (+-292,000 years) failed the whole request
# where Kafka reads any long.
_TIMEDELTA_MAX_MS = (2**63 - 1) // 1000


def _clamp_retention_time(frame: bytes, pos: int) -> bytes:
    """OffsetCommit v2-v4's retentionTimeMs (after groupId, generationId, memberId) clamped to what a timedelta
    holds. Kafka expires the offsets at now + retentionTimeMs; past +-292,000 years both sides mean the same
    (never, or at once), except that Kafka's long sum wraps into the past beyond Long.MAX_VALUE - now."""
    try:
        for _ in range(2):  # groupId, then generationId + memberId
            (n,) = _I16.unpack_from(frame, pos)
            pos += 2 + max(n, 0) + (4 if _ == 0 else 0)
        (value,) = _I64.unpack_from(frame, pos)
    except struct.error:
        return frame  # truncated: kio's decoding says so
    if -_TIMEDELTA_MAX_MS <= value <= _TIMEDELTA_MAX_MS:
        return frame
    out = bytearray(frame)
    _I64.pack_into(out, pos, clamp_retention_ms(value))
    return bytes(out)


def clamp_retention_ms(value: int) -> int:
    """OffsetCommit v2-v4's retentionTimeMs as kbus reads it (see _clamp_retention_time)."""
    return max(-_TIMEDELTA_MAX_MS, min(value, _TIMEDELTA_MAX_MS))


def decode_request(frame: bytes, header: RequestHeader, body_offset: int) -> Any:
    rtype = request_type(header.api_key, header.api_version)
    if rtype is None:
        raise UnsupportedVersionError(header)
    check_bounds(rtype, frame, body_offset)  # before kio: it would allocate whatever a count claims
    if header.api_key == OFFSET_COMMIT_KEY and 2 <= header.api_version <= 4:
        frame = _clamp_retention_time(frame, body_offset)
    try:
        value: Any
        value, _size = entity_reader(rtype)(frame, body_offset)
    except Exception as exc:  # kio raises several types for malformed input; all mean the same to us
        raise ProtocolError(f"malformed {rtype.__name__} v{header.api_version}: {exc}") from exc
    return value


def encode_request(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Size-prefixed request frame for a kio request message (the header version follows the body's)."""
    req_type = type(body)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_HEADER.pack(int(req_type.__api_key__), int(req_type.__version__), correlation_id))
    if client_id is None:
        out.write(_I16.pack(-1))
    else:
        cid = client_id.encode()
        out.write(_I16.pack(len(cid)) + cid)
    if req_type.__flexible__:
        out.write(b"\0")
    entity_writer(req_type)(out, body)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def encode_entity(value: Any) -> bytes:
    """A kio message's body bytes, without any header."""
    out = io.BytesIO()
    entity_writer(type(value))(out, value)
    return out.getvalue()


def encode_response(header: RequestHeader, response: Response) -> bytes:
    """Size-prefixed response frame: a kio response of another version than the request's (a handler's newest)
    is written in the request's version (kbus.protocol.upgrade.to_version). ApiVersions responses never carry
    header tagged fields (KIP-511), even at v3: librdkafka misparses the body otherwise."""
    tagged = header.flexible and header.api_key != API_VERSIONS_KEY
    if isinstance(response, EncodedBody):  # a handler that encodes its own body (Produce, Fetch, Metadata, ...)
        # size and correlation id packed at once and joined to the body: one copy of it, no BytesIO
        body = response.data
        if tagged:
            return b"".join((_SIZE_AND_ID.pack(len(body) + 5, header.correlation_id), b"\0", body))
        return _SIZE_AND_ID.pack(len(body) + 4, header.correlation_id) + body
    cls = type(response)
    target = response_type(header.api_key, header.api_version)
    if cls is not target:  # a handler's newest-version response, written in the request's version
        response = to_version(cls, target)(response)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_I32.pack(header.correlation_id))
    if tagged:
        out.write(b"\0")
    entity_writer(target)(out, response)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    return bytes(data)


# ---- building responses without caring which fields a given version has ----

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    kafka_type: str | None
    required: bool
    default: Any


@cache
def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = []
    for f in fields(cls):
        required = f.default is MISSING and f.default_factory is MISSING
        default = f.default if f.default is not MISSING else None
        specs.append(_FieldSpec(f.name, f.metadata.get("kafka_type"), required, default))
    return tuple(specs)


def _convert(kt: str | None, value: Any) -> Any:
    if kt == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kt in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kt == "datetime_i64" and isinstance(value, int):
        return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    if kt == "uuid" and isinstance(value, str):
        return uuid.UUID(value)
    if kt is None and isinstance(value, list):
        return tuple(value)
    return value


def build(cls: type, /, **values: Any) -> Any:
    """Instantiate a kio message of any version from the union of fields handlers know about: fields the version
    lacks are dropped, missing ones get Kafka's zero value, and ints are converted to kio's error-code and
    timedelta types."""
    kwargs = {}
    for spec in _specs(cls):
        if spec.name in values:
            kwargs[spec.name] = _convert(spec.kafka_type, values[spec.name])
        elif spec.required:
            kwargs[spec.name] = zero_value(spec.kafka_type)
    return cls(**kwargs)


def nested(message_type: type, name: str, /) -> type:
    """The nested entity class `name` that lives beside a versioned kio message class."""
    import sys

    cls: type = getattr(sys.modules[message_type.__module__], name)
    return cls


_ONE_MS = datetime.timedelta(milliseconds=1)


def ms(value: Any) -> int:
    """A kio timedelta/datetime field as integer milliseconds (ints pass through)."""
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS  # exact: total_seconds() * 1000 made 64,451 ms into 64,450
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)
