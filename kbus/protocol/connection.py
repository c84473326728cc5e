"""One Kafka client connection as a state machine, sans I/O (h11's `Connection` is the model).

The I/O layer feeds it bytes (`receive_data`) and asks for events (`next_event`): a decoded `Request` to dispatch,
a raw `SaslToken` (after a SaslHandshake v0), `NEED_DATA`, `PAUSED` (the next request must wait for those in
flight) or `Closed`. Handlers' answers go back with `send_response(seq, ...)` in any order; `data_to_send()` hands
them out in request order, which is the ordering guarantee Kafka clients rely on.

Rules kept here, in one place:
- Pipelining: a request whose API may be pipelined (Produce) is dispatched while earlier pipelined ones still wait
  (for replicas), up to `max_pipelined`; any other request waits until nothing is in flight and nothing is read
  behind it until it is answered (Kafka mutes the channel the same way).
- A request is decoded completely before it is dispatched, so a malformed frame is found before anything after it
  runs: the requests before it are answered in order, nothing after it is read, then the connection closes.
- The authentication gate: on a SASL listener only the APIs flagged `before_auth` (ApiVersions, SaslHandshake,
  SaslAuthenticate) are served until `authenticate()` is called; anything else closes the connection, as Kafka's
  SaslServerAuthenticator does. Frames before authentication are limited to `sasl.server.max.receive.size`.
"""

from __future__ import annotations

import enum
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kbus.common.security import ANONYMOUS, KafkaPrincipal, SecurityProtocol
from kbus.protocol.codec import (
    API_VERSIONS_KEY,
    ProtocolError,
    RequestHeader,
    RequestHeaderReader,
    UnsupportedVersionError,
    checked_frame_size,
)
from kbus.protocol.produce_request_decode import PRODUCE_KEY
from kbus.protocol.request_body import decode_body
from kbus.protocol.splice import OutFrame

_API_KEY: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
SASL_MAX_RECEIVE_SIZE: Final = 524288  # Kafka's sasl.server.max.receive.size default

# Large frames are read straight into a buffer of their own (see `get_buffer`): from this size (a Produce of a few
# large messages, or of many small ones batched) up to LARGE_FRAME_MAX; outside that range a frame is gathered as
# the reads bring it. The cap keeps a frame's claimed size from allocating memory its bytes have not earned (Kafka
# allocates the claimed size at once; kbus only below the cap).
LARGE_FRAME_MIN: Final = 32 * 1024
LARGE_FRAME_MAX: Final = 16 * 1024 * 1024
# Reads that are not into a large frame's buffer land in one scratch buffer shared by every connection of the
# process (as uvloop's own read buffer is): its bytes are copied out before the read callback returns.
# Final, as the sizes above: compiled code reads them as C statics, not from the module's dict on every read
READ_CHUNK: Final = 256 * 1024
# After a large frame, the next read is this small, so that little of the next (large) frame lands in the scratch
# buffer and has to be copied into its own: one more read per large frame instead of a copy of up to READ_CHUNK.
HEADER_READ: Final = 4096
_SCRATCH: Final = bytearray(READ_CHUNK)
_SCRATCH_VIEW: Final = memoryview(_SCRATCH)  # handed out for every such read (one object, not one per read)
_HEADER_VIEW: Final = _SCRATCH_VIEW[:HEADER_READ]


@dataclass(frozen=True, slots=True)
class ListenerName:
    """A listener as the client reached it: its name (e.g. "INTERNAL") and security protocol."""

    name: str
    security_protocol: SecurityProtocol


class SaslExchange(Protocol):
    """The server side of one SASL mechanism's exchange (kept on the connection between SASL requests)."""

    mechanism: str
    complete: bool
    principal: KafkaPrincipal | None

    def evaluate(self, token: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ApiFlags:
    """What the connection needs to know about an API (declared by each entry of the server's registry)."""

    pipelined: bool = False  # may be dispatched while earlier requests are still in flight
    before_auth: bool = False  # served before the client has authenticated (ApiVersions and the SASL APIs)


class ApiCatalog(Protocol):
    """The server's API registry as the connection sees it."""

    def flags(self, api_key: int) -> ApiFlags | None:
        """None for an API kbus does not implement."""
        ...

    def supports(self, api_key: int, api_version: int) -> bool: ...


class ApiTable:
    """An ApiCatalog as a table (API key -> its version range and flags) in compiled code: the connection asks it
    twice per request, and an interpreted catalog cost a Python call each time (the server's registry fills one,
    kbus.server.apis.registry.CATALOG)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[int, int, ApiFlags]] = {}

    def add(self, api_key: int, min_version: int, max_version: int, flags: ApiFlags) -> None:
        self._entries[api_key] = (min_version, max_version, flags)

    def flags(self, api_key: int) -> ApiFlags | None:
        entry = self._entries.get(api_key)
        return None if entry is None else entry[2]

    def supports(self, api_key: int, api_version: int) -> bool:
        entry = self._entries.get(api_key)
        return entry is not None and entry[0] <= api_version <= entry[1]


class Request:
    """A decoded request to dispatch. A plain class, as the other per-request objects here: mypyc compiles its
    __init__ (a dataclass's generated one stays interpreted)."""

    __slots__ = ("body", "header", "seq", "size", "unsupported_version")

    def __init__(self, seq: int, header: RequestHeader, body: Any, unsupported_version: bool = False,
                 size: int = 0) -> None:  # fmt: skip
        self.seq = seq  # this request's place in the response order
        self.header = header
        self.body = body  # the decoded request; None when `unsupported_version` (KIP-511 ApiVersions fallback)
        self.unsupported_version = unsupported_version
        self.size = size  # the request's bytes after the size field (Kafka's request.sizeInBytes, produce quotas)

    def __repr__(self) -> str:
        return f"Request(seq={self.seq}, header={self.header!r}, size={self.size})"


@dataclass(frozen=True, slots=True)
class SaslToken:
    """A raw SASL token: after SaslHandshake v0 the client sends tokens framed but without a Kafka header."""

    seq: int
    token: bytes


@dataclass(frozen=True, slots=True)
class Closed:
    """The connection is done: everything answered is in data_to_send(). `reason` is None for an orderly EOF;
    `violation` tells a peer that broke the protocol (malformed frame) from a close the broker chose (failed login)."""

    reason: str | None
    violation: bool = False


class _Marker(enum.Enum):
    NEED_DATA = "NEED_DATA"
    PAUSED = "PAUSED"


# Final: C statics for the compiled callers that compare every event with them (processor._pump_once)
NEED_DATA: Final = _Marker.NEED_DATA
PAUSED: Final = _Marker.PAUSED
Event = Request | SaslToken | Closed | _Marker


class _Slot:
    __slots__ = ("data", "done", "pipelined", "seq")

    def __init__(self, seq: int, pipelined: bool) -> None:
        self.seq = seq
        self.pipelined = pipelined
        self.done = False
        self.data: OutFrame | None = None


_NO_FLAGS: Final = ApiFlags()  # an API the catalog does not know (its request is refused once decoded)


class Connection:
    def __init__(
        self,
        listener: ListenerName,
        apis: ApiCatalog,
        *,
        max_frame_bytes: int,
        principal: KafkaPrincipal = ANONYMOUS,
        max_pipelined: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.listener = listener
        self.principal = principal
        self.authenticated = not listener.security_protocol.uses_sasl
        self._apis = apis
        # the connection's request headers (parse_request_header, with the last answer kept: a producer sends the
        # same API, version and client id every time); the catalog's supports bound once
        self._headers = RequestHeaderReader(apis.supports)
        self._max_frame = max_frame_bytes
        self._max_pipelined = max_pipelined
        # The unread input is self._buf[self._pos:]. A read that starts on a frame boundary is kept as the bytes
        # object it came in (no copy); only a frame split across reads is gathered in a bytearray.
        self._buf: bytes | bytearray = b""
        self._pos = 0
        # A large frame read into its own buffer (its bytes after the size field): `_large_filled` of them are in.
        # While it is set, every unread byte is in it (it is the frame at the front of the input).
        self._large: bytearray | None = None
        self._large_filled = 0
        self._after_large = False  # the last frame was large: read the next header alone (HEADER_READ)
        self._eof = False
        self._closing: str | None = None  # why no further request is read (set once)
        self._violation_seen = False
        self._closed = False
        self._inflight: deque[_Slot] = deque()
        self._slots: dict[int, _Slot] = {}
        self._ready: list[OutFrame] = []  # answered frames, in request order, not yet taken by data_to_send()
        self._next_seq = 0
        self._expect_raw_token = False
        self.sasl: SaslExchange | None = None  # a SASL exchange under way (between SaslHandshake and its end)
        self.session_expires_at: float | None = None  # KIP-368: when a SASL session must re-authenticate
        self._clock = clock

    # ---- input
    def get_buffer(self) -> memoryview:
        """Where the next read from the socket goes (asyncio.BufferedProtocol.get_buffer); `buffer_updated(n)`
        then says how much of it was filled. A large frame whose size is known is read into its own buffer, which
        becomes the request's: its records reach the log as slices of it, with no copy in between. Anything else
        goes to the shared scratch buffer and is copied out by `buffer_updated`, before the next read."""
        large = self._large
        if large is not None and self._large_filled < len(large):
            return memoryview(large)[self._large_filled :]
        if self._after_large and self._pos == len(self._buf):
            return _HEADER_VIEW
        return _SCRATCH_VIEW

    def buffer_updated(self, nbytes: int) -> None:
        """`nbytes` of the buffer `get_buffer` gave were filled by a read."""
        large = self._large
        if large is not None and self._large_filled < len(large):
            self._large_filled += nbytes
            return
        if not nbytes or self._eof or self._closing is not None:
            return
        view = _SCRATCH_VIEW
        start = 0
        if nbytes >= LARGE_FRAME_MIN and self._pos == len(self._buf) and large is None and self.authenticated \
                and not self._expect_raw_token:
            # a read that starts with a large frame (the first of a connection, or one read whole): copied once,
            # into its own buffer, rather than into bytes and then out of them (a shorter read that starts one
            # is taken up by next_event)
            (size,) = _I32.unpack_from(_SCRATCH, 0)
            if LARGE_FRAME_MIN <= size <= LARGE_FRAME_MAX and size <= self._max_frame:
                large = bytearray(size)
                start = min(4 + size, nbytes)
                large[: start - 4] = view[4:start]
                self._large, self._large_filled = large, start - 4
        if start < nbytes:
            self.receive_data(bytes(view[start:nbytes]))

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes from the peer; b"" means end of stream. Not kept: a bytes object may be kept without a copy."""
        if not data:
            self._eof = True
            return
        if self._eof or self._closing is not None:
            return
        large = self._large
        if large is not None:  # the rest of a large frame first, then what follows it
            filled = self._large_filled
            take = min(len(large) - filled, len(data))
            if take:
                with memoryview(data) as view:
                    large[filled : filled + take] = view[:take]
                self._large_filled = filled + take
                if take == len(data):
                    return
                data = data[take:]
        if type(data) is not bytes:
            data = bytes(data)
        buf, pos = self._buf, self._pos
        if pos == len(buf):  # everything before was consumed: the common case of whole requests per read
            self._buf, self._pos = data, 0  # bytes: immutable, kept without a copy
        elif type(buf) is bytearray:
            if pos:
                del buf[:pos]  # from the front: CPython moves the bytearray's start, not its bytes
                self._pos = 0
            buf += data
        else:  # the rest of a frame arrives: gather it with the unread tail of the last read
            gathered = bytearray(memoryview(buf)[pos:])
            gathered += data
            self._buf, self._pos = gathered, 0

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos + self._large_filled

    def starts_large_frame(self) -> bool:
        """The unread input starts with a large frame that is not all here: next_event would give it a buffer of
        its own, into which the rest is then read whole (get_buffer)."""
        if self._large is not None:
            return False
        available = len(self._buf) - self._pos
        if available < 4:
            return False
        size: int = _I32.unpack_from(self._buf, self._pos)[0]
        return LARGE_FRAME_MIN <= size <= LARGE_FRAME_MAX and available < 4 + size

    def _consume(self, start: int, end: int) -> bytes:
        """The unread input's bytes [start, end) (offsets into it), as bytes; everything before `end` is read."""
        buf, pos = self._buf, self._pos
        if type(buf) is bytes:
            out = buf[pos + start : pos + end]
        else:
            with memoryview(buf) as view:  # one copy (a bytearray slice would make two)
                out = bytes(view[pos + start : pos + end])
        pos += end
        if pos == len(buf):
            self._buf, self._pos = b"", 0  # the chunk is released at once
        else:
            self._pos = pos
        return out

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # ---- authentication (called by the SASL handlers)
    def authenticate(self, principal: KafkaPrincipal, session_lifetime_ms: int = 0) -> None:
        self.principal = principal
        self.authenticated = True
        self.sasl = None
        self.session_expires_at = self._clock() + session_lifetime_ms / 1000 if session_lifetime_ms > 0 else None

    def expect_raw_sasl_token(self) -> None:
        """After a SaslHandshake v0 the next frame is a bare SASL token."""
        self._expect_raw_token = True

    def close(self, reason: str) -> None:
        """Stop reading requests (e.g. a failed authentication); what is in flight is still answered."""
        if self._closing is None:
            self._closing = reason

    # ---- events
    def next_event(self) -> Event:
        if self._closed:
            return Closed(self._closing, self._violation_seen)
        if self._closing is not None or (self._eof and not self._has_frame_bytes()):
            return self._finish()
        if self._large is not None:
            return self._next_large(self._large)
        available = len(self._buf) - self._pos
        if available < 4:
            return NEED_DATA
        try:
            size = checked_frame_size(_I32.unpack_from(self._buf, self._pos)[0], self._max_frame)
            if not self.authenticated and size > SASL_MAX_RECEIVE_SIZE:
                raise ProtocolError(
                    f"frame of {size} bytes before authentication (sasl.server.max.receive.size="
                    f"{SASL_MAX_RECEIVE_SIZE})"
                )
        except ProtocolError as exc:
            return self._violation(str(exc))
        if self._expect_raw_token:
            if self._inflight:
                return PAUSED
            if available < 4 + size:
                return NEED_DATA
            token = self._consume(4, 4 + size)
            self._expect_raw_token = False
            return SaslToken(self._open_slot(pipelined=False), token)
        if self._inflight and not self._inflight[-1].pipelined:
            return PAUSED  # a request that runs alone is in flight: read nothing behind it yet
        if available < 6:
            return NEED_DATA
        (key,) = _API_KEY.unpack_from(self._buf, self._pos + 4)
        # the server's ApiTable (a compiled class: narrowed by isinstance, the same call is a direct one), or a test's
        # catalog through the ApiCatalog Protocol (a Python-level call)
        apis = self._apis
        flags = (apis.flags(key) if isinstance(apis, ApiTable) else apis.flags(key)) or _NO_FLAGS  # noqa: RUF034
        if self._inflight and (not flags.pipelined or len(self._inflight) >= self._max_pipelined):
            return PAUSED
        if available < 4 + size:
            if LARGE_FRAME_MIN <= size <= LARGE_FRAME_MAX:
                self._start_large(size, available)
            return NEED_DATA
        self._after_large = False
        return self._decode(self._consume(4, 4 + size), flags)

    def _start_large(self, size: int, available: int) -> None:
        """The frame at the front is large and not all here: the rest is read into a buffer of its own. What came
        already (all of the unread input: this frame is incomplete) is its start."""
        large = bytearray(size)
        buf, pos = self._buf, self._pos
        with memoryview(buf) as view:
            large[: available - 4] = view[pos + 4 : pos + available]
        self._large, self._large_filled = large, available - 4
        self._buf, self._pos = b"", 0

    def _next_large(self, large: bytearray) -> Event:
        """The large frame at the front of the input: NEED_DATA until it is complete, then its request (or PAUSED
        while what is in flight holds it back). The frame stays the request's (its records are slices of it): it is
        never reused."""
        if self._large_filled < len(large):
            return NEED_DATA
        (key,) = _API_KEY.unpack_from(large, 0)
        flags = self._apis.flags(key) or _NO_FLAGS
        inflight = self._inflight
        if inflight and (not inflight[-1].pipelined or not flags.pipelined or len(inflight) >= self._max_pipelined):
            return PAUSED  # the same rule as next_event's for a frame in the shared input
        self._large, self._large_filled = None, 0
        self._after_large = True
        # only the Produce decoder keeps slices of its frame; the others are given bytes (a large Fetch or
        # Metadata request is rare and small beside its response)
        return self._decode(large if key == PRODUCE_KEY else bytes(large), flags)

    def _has_frame_bytes(self) -> bool:
        # at EOF a complete frame still buffered is served (a client may half-close after its last request)
        large = self._large
        if large is not None:
            if self._large_filled == len(large):
                return True
            self.close(f"truncated frame ({self._large_filled} of {len(large)} bytes)")
            return False
        available = len(self._buf) - self._pos
        if available < 4:
            if available:
                self.close("truncated frame size")
            return False
        (size,) = _I32.unpack_from(self._buf, self._pos)
        if 0 <= size <= available - 4:
            return True
        self.close(f"truncated frame ({available - 4} of {size} bytes)")
        return False

    def _decode(self, frame: bytes | bytearray, flags: ApiFlags) -> Event:
        try:
            header, body_at = self._headers.read(frame)
        except UnsupportedVersionError as unsupported:  # its own name: compiled code types a name once
            if unsupported.header.api_key == API_VERSIONS_KEY:  # KIP-511: answered with the versions we do speak
                return Request(self._open_slot(False), unsupported.header, None, unsupported_version=True)
            return self._violation(str(unsupported))
        except ProtocolError as exc:
            return self._violation(str(exc))
        if not self._gate_allows(flags):
            return self._violation(
                f"unexpected request (API key {header.api_key}) before authentication or after the session expired"
            )
        try:
            body = decode_body(frame, header, body_at)  # by hand for the hot APIs (kbus.protocol.request_body)
        except ProtocolError as exc:
            return self._violation(str(exc))
        return Request(self._open_slot(flags.pipelined), header, body, size=len(frame))

    def _gate_allows(self, flags: ApiFlags) -> bool:
        if flags.before_auth:
            return True
        if self.session_expires_at is not None and self._clock() >= self.session_expires_at:
            return False  # KIP-368: an expired session must re-authenticate before anything else
        return self.authenticated

    def _violation(self, reason: str) -> Event:
        if self._closing is None:
            self._violation_seen = True
        self.close(reason)
        self._buf, self._pos = b"", 0
        self._large, self._large_filled = None, 0
        return self._finish()

    def _finish(self) -> Event:
        """Nothing more is read: wait for what is in flight, then report Closed."""
        if self._inflight:
            return PAUSED
        self._closed = True
        return Closed(self._closing, self._violation_seen)

    def _open_slot(self, pipelined: bool) -> int:
        seq = self._next_seq
        self._next_seq += 1
        slot = _Slot(seq, pipelined)
        self._inflight.append(slot)
        self._slots[seq] = slot
        return seq

    # ---- output
    def send_response(self, seq: int, data: OutFrame | None) -> None:
        """A handler's encoded response frame (None: the request gets no response, e.g. acks=0)."""
        slot = self._slots.pop(seq)
        slot.done, slot.data = True, data
        while self._inflight and self._inflight[0].done:  # the answered head leaves the queue at once
            data = self._inflight.popleft().data
            if data is not None:
                self._ready.append(data)

    def fail(self, seq: int, reason: str) -> None:
        """A handler failed: that request goes unanswered and the connection closes once the requests before and
        after it that are already running are answered (they may have been applied, so they must be answered)."""
        self.send_response(seq, None)
        self.close(reason)

    def data_to_send(self) -> list[OutFrame]:
        """Response frames ready to go, in request order. The caller owns a non-empty list; an empty one is the
        connection's own (asked several times per request, mostly with nothing ready: no new list each time), so
        it must not be kept or added to."""
        out = self._ready
        if out:
            self._ready = []
        return out

    def abort(self) -> list[int]:
        """The peer is gone: the sequence numbers still in flight (their answers are dropped)."""
        self._closed = True
        self._closing = self._closing or "connection lost"
        pending = [s.seq for s in self._inflight]
        self._inflight.clear()
        self._slots.clear()
        self._ready.clear()
        self._buf, self._pos = b"", 0
        self._large, self._large_filled = None, 0
        return pending
