"""One client connection (Kafka's Processor and KafkaChannel): `KafkaProtocol` moves bytes between the transport
and its sans-I/O `kbus.protocol.connection.Connection`, runs the handlers (at once, a task only when they wait:
kbus.server.util.eager), sends responses (plaintext fetches through sendfile) and logs. The listeners that accept
connections and count them are kbus.server.network.socket_server's; a connection sees its server only through
`ConnectionOwner`. A client that resets its connection is an ordinary disconnect (DEBUG), never a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import itertools
import logging
import os
import socket
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Final, Protocol, cast

from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from kbus.common.clock import now_ms
from kbus.protocol.codec import (
    API_VERSIONS_KEY,
    ProtocolError,
    RequestHeader,
    Response,
    encode_response,
)
from kbus.protocol.connection import (
    ANONYMOUS,
    NEED_DATA,
    PAUSED,
    Closed,
    Connection,
    KafkaPrincipal,
    Request,
    SaslToken,
)
from kbus.protocol.fetch_request_decode import FETCH_KEY
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.kio_types import NO_TIME
from kbus.protocol.splice import OutFrame, RecordSplicer
from kbus.protocol.throttle_field import with_throttle_time
from kbus.server.apis.api_versions import api_version_entries
from kbus.server.apis.registry import API_TABLE, CATALOG, AppendOrder, RequestContext
from kbus.server.apis.sasl import raw_token
from kbus.server.apis.throttling import request_quota_throttle
from kbus.server.network.connection_quotas import IdleExpiry
from kbus.server.network.sendfile import SendfileWriter
from kbus.server.quotas.manager import ClientQuotaManager
from kbus.server.security.manager import ListenerSecurity, SecurityManager
from kbus.server.security.principal import certificate_principal
from kbus.server.util import eager, histogram
from kbus.server.util.metrics import METRICS, Labels, labels_key

if TYPE_CHECKING:
    from kbus.common.broker_config import KafkaConfig
    from kbus.server.apis.managers import Managers

log = logging.getLogger("kbus.network")  # the acceptor's logger too (socket_server)

_conn_ids = itertools.count(1)
# Final: C statics, not a module-dict lookup per request (the dispatch table is filled in place at import)
_API_TABLE: Final = API_TABLE
_perf_counter: Final = time.perf_counter
_DONE: Final = object()  # _start: the handler returned without waiting
MAX_PIPELINED = 64  # produce requests one connection may have waiting on replicas at once
READ_PAUSE_BYTES: Final = 1 << 20  # stop reading a connection that has this much unread behind a waiting request
# Plaintext fetches send record bytes with sendfile(2) (network.sendfile). KBUS_SENDFILE=0 copies them through
# Python instead: a switch for measuring the difference, not a Kafka property.
SENDFILE = os.environ.get("KBUS_SENDFILE", "1") != "0"
# Responses made while reading are held to the end of the loop's turn (ResponseBatch). KBUS_BATCH_WRITES=0 writes
# each at once instead: a switch for measuring the difference, not a Kafka property.
BATCH_WRITES: Final = os.environ.get("KBUS_BATCH_WRITES", "1") != "0"


def unsupported_version_response(header: RequestHeader) -> bytes:
    """KIP-511: an ApiVersions request at a version we do not know is answered in the v0 layout with
    UNSUPPORTED_VERSION and our ranges, so the client can retry at a version both sides speak."""
    if header.api_key != API_VERSIONS_KEY:
        raise ProtocolError(f"unsupported version {header.api_version} of API key {header.api_key}")
    body = ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=api_version_entries(),
                               throttle_time=NO_TIME)  # written in v0's layout by encode_response
    return encode_response(RequestHeader(API_VERSIONS_KEY, 0, header.correlation_id, header.client_id, False), body)


_THROTTLED_TYPES: dict[type, bool] = {}
class _ApiMetrics:
    """An API's per-request metric series, looked up once: the request latency histogram's list and the request
    counter's dict. Per request two compiled updates instead of two interpreted Metrics calls (~1.5 µs)."""

    __slots__ = ("key", "latency", "requests")

    def __init__(self, api_key: int) -> None:
        self.key: Labels = labels_key(api=API_TABLE[api_key].name)
        self.latency = METRICS.histogram_series("kbus_request_latency_seconds", self.key)
        self.requests: dict[Labels, float] = METRICS.counters["kbus_requests_total"]

    def record(self, seconds: float) -> None:
        histogram.observe(self.latency, seconds)
        requests, key = self.requests, self.key
        requests[key] = requests.get(key, 0.0) + 1.0


_API_METRICS: Final[dict[int, _ApiMetrics]] = {}  # Final: a C static, not a module-dict lookup per request


def _api_metrics(api_key: int) -> _ApiMetrics:
    """The request metrics of an API, made once (the label set was sorted into a tuple on every request)."""
    metrics = _API_METRICS.get(api_key)
    if metrics is None:
        metrics = _API_METRICS[api_key] = _ApiMetrics(api_key)
    return metrics


def _with_throttle_time(header: RequestHeader, response: Response, throttle_ms: int) -> Response:
    """The response with its throttle_time_ms set, when its version has the field."""
    if isinstance(response, EncodedBody):  # encoded by its handler (Metadata, Fetch, Heartbeat, OffsetCommit)
        return with_throttle_time(header.api_key, header.api_version, response, throttle_ms)
    cls = type(response)
    has = _THROTTLED_TYPES.get(cls)
    if has is None and not dataclasses.is_dataclass(cls):
        has = _THROTTLED_TYPES[cls] = False
    if has is None:
        has = _THROTTLED_TYPES[cls] = any(f.name == "throttle_time" for f in dataclasses.fields(cls))
    if not has:
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))


class ResponseBatch:
    """One turn of the event loop, as Kafka's Selector does a poll: every connection ready in the turn is read
    first, then the requests those reads brought are served (handlers of many connections back to back), then the
    responses answered meanwhile are written (one per event loop).

    A response written at once (uvloop's write(2) as soon as the handler answers) runs the kernel's TCP send (on
    loopback the receiving side too) and wakes the client between two requests' Python: the interpreter's caches
    go cold, and a client on the same machine preempts the broker. With one request in flight per connection that
    cost a small Produce about half as much again in broker CPU (bench/notes/connections.md, 2026-11-26 onewake).
    Serving a connection's requests at its read likewise put a read(2) (and uvloop's read path) between every two
    handlers (session 11). The reads and writes are as many as before; they come before and after the turn's
    handlers, not between them. The end of the turn is a call_soon: it runs before the loop polls again, so a lone
    request waits for nothing but its own turn."""

    __slots__ = ("_held", "_loop", "_read", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._read: list[KafkaProtocol] = []
        self._held: list[KafkaProtocol] = []
        self._scheduled = False

    def read(self, protocol: KafkaProtocol) -> None:
        """`protocol` read in this turn: serve its requests at the end of the turn (once per turn, it asks once)."""
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._end_turn)
        self._read.append(protocol)

    def hold(self, protocol: KafkaProtocol) -> None:
        """`protocol` answered while reading: write its held responses at the end of the turn."""
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._end_turn)
        self._held.append(protocol)

    def _end_turn(self) -> None:
        while self._read:
            read, self._read = self._read, []
            for protocol in read:
                try:
                    protocol.serve_read()
                except Exception:  # one connection's failure must not keep the others' requests
                    log.exception("Unexpected error serving %s", protocol.conn_id)
        held, self._held = self._held, []
        self._scheduled = False
        for protocol in held:
            try:
                protocol.send_held()
            except Exception:  # one connection's failure must not keep the others' responses
                log.exception("Unexpected error writing to %s", protocol.conn_id)


class ConnectionOwner(Protocol):
    """What a connection uses of the server that accepted it (socket_server.KafkaServer): the broker's config and
    managers, its listeners' security, the idle-connection clock, the batch its responses are written in, and the
    bookkeeping of open connections."""

    config: KafkaConfig
    managers: Managers
    security: SecurityManager
    idle: IdleExpiry
    responses: ResponseBatch

    def track(self, protocol: KafkaProtocol) -> None: ...
    def untrack(self, protocol: KafkaProtocol) -> None: ...
    def connection_closed(self, listener: str, ip: str) -> None: ...


class KafkaProtocol(asyncio.BufferedProtocol):
    """One client connection on one listener. A BufferedProtocol: the transport reads into the buffer the
    Connection names (`get_buffer`), so a large Produce request's bytes go from the socket straight into the buffer
    its records are written to the log from."""

    def __init__(self, server: ConnectionOwner, security: ListenerSecurity, ip: str) -> None:
        self.server = server
        # the server's idle clock, response batch and authorizer, read on every request: kept here as their own
        # (compiled) classes, each a native field read instead of two generic lookups through ConnectionOwner
        self._idle: IdleExpiry = server.idle
        self._responses: ResponseBatch = server.responses
        self._authorizer = server.security.authorizer
        # the request quota, asked after every request: its manager kept here (made once with the broker's managers)
        # instead of three generic lookups through Managers and QuotaManagers per request
        self._request_quota: ClientQuotaManager = server.managers.quotas.request
        self.ip = ip  # the peer's address as the connection limits count it
        self._counted = True  # counted by the server's ConnectionQuotas until release()
        self.managers = server.managers
        self.security = security
        self.listener = security.listener
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None
        self.conn_id = ""
        self.peer: tuple[str, int] = ("?", 0)
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading_paused = False
        self._writing_paused = False
        self._lost = False
        self._writer: SendfileWriter | None = None
        # client quotas: the connection is muted (no request read or dispatched) until then (loop time)
        self._muted_until = 0.0
        self._unmute: asyncio.TimerHandle | None = None
        self._pumping = False  # inside _pump (see there)
        self._pump_again = False
        self._reading = False  # inside serve_read: its responses need no second idle-clock update
        self._read_pending = False  # waiting in the server's ResponseBatch to serve this turn's reads
        self._held: list[OutFrame] | None = None  # responses waiting in the server's ResponseBatch, in order
        self._append_order = AppendOrder()  # pipelined Produce requests append in the order they came

    # ---- transport callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = (str(peer[0]), int(peer[1]))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn_id = f"{self.peer[0]}:{self.peer[1]}-{next(_conn_ids)}"
        try:
            principal = self._transport_principal()
        except ValueError:
            self._lost = True
            self.transport.close()
            return
        self.conn = Connection(
            self.listener,
            CATALOG,
            max_frame_bytes=self.server.config.socket_request_max_bytes,
            principal=principal,
            max_pipelined=MAX_PIPELINED,
        )
        if SENDFILE and not self.listener.security_protocol.uses_tls:
            self._writer = SendfileWriter(
                asyncio.get_running_loop(), self.transport, self._pump, self._write_failed
            )
        self.server.track(self)

    def _transport_principal(self) -> KafkaPrincipal:
        """SSL listeners: the client certificate's subject through ssl.principal.mapping.rules (ANONYMOUS
        without one, as Kafka). Other listeners: ANONYMOUS until SASL says otherwise."""
        mapper = self.security.principal_mapper
        ssl_object = self.transport.get_extra_info("ssl_object") if self.transport is not None else None
        if mapper is None or ssl_object is None:
            return ANONYMOUS
        try:
            return certificate_principal(ssl_object.getpeercert(binary_form=True), mapper) or ANONYMOUS
        except ValueError as exc:  # no mapping rule matched: Kafka refuses the connection
            log.warning("Closing connection from %s: %s", self.peer[0], exc)
            raise

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.conn is None:  # refused in connection_made: nothing read is used
            return memoryview(bytearray(4096))
        return self.conn.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.conn is None:
            return
        self._idle.update(self.conn_id, now_ms())
        self.conn.buffer_updated(nbytes)
        self._pump_read(self.conn)

    def data_received(self, data: bytes) -> None:
        """Bytes handed over whole (the transport calls buffer_updated instead; benchmarks feed frames here)."""
        if self.conn is None:
            return
        self._idle.update(self.conn_id, now_ms())
        self.conn.receive_data(data)
        self._pump_read(self.conn)

    def _pump_read(self, conn: Connection) -> None:
        """What a read brought is served at the end of the loop's turn, after every other connection's read
        (ResponseBatch), unless it holds part of a large frame; KBUS_BATCH_WRITES=0 serves it now and writes its
        responses at once."""
        if not BATCH_WRITES or conn.starts_large_frame():
            # the start of a large frame is in: served now, so that Connection.next_event gives the frame a buffer
            # of its own and the turn's next reads of it go there whole; deferred, each went through the shared
            # scratch buffer and a copy (10 KB Produce ~5 % more broker CPU, session 11)
            self.serve_read()
        elif not self._read_pending:
            self._read_pending = True
            self._responses.read(self)

    def serve_read(self) -> None:
        """Serve what this turn's reads brought: responses answered meanwhile are held for the end of the turn."""
        self._read_pending = False
        self._reading = True
        try:
            self._pump()
        finally:
            self._reading = False

    def eof_received(self) -> bool:
        if self.conn is None:
            return False
        self.conn.receive_data(b"")
        self._pump()
        # keep the transport open to write what is still being answered (_pump closes it); TLS cannot half-close
        return self.security.ssl_context is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.server.untrack(self)
        self.release()
        # the share sessions opened on this connection end, releasing their records (Kafka's SharePartitionManager)
        self.managers.share.connection_closed(self.conn_id)
        if self.conn is not None:
            self.conn.abort()
        self._held = None
        if exc is not None:
            log.debug("Connection %s lost: %s", self.conn_id, exc)
        if self._writer is not None:
            self._writer.close()
        for task in self._tasks:
            task.cancel()  # nobody is left to answer; each task ends (cancelled) on its own
        if self._unmute is not None:
            self._unmute.cancel()

    def release(self) -> None:
        """Uncount this connection from the connection limits, once."""
        if self._counted:
            self._counted = False
            self.server.connection_closed(self.listener.name, self.ip)

    @property
    def closed(self) -> bool:
        return self._lost or self.transport is None or self.transport.is_closing()

    def close_now(self) -> None:
        """Idle for connections.max.idle.ms, or the least recently used over max.connections: dropped with
        whatever it was still sending (nothing moved on it for that long, or Kafka drops it the same way)."""
        if self._writer is not None:
            self._writer.close()
        if self.transport is not None:
            self.transport.abort()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pump()

    # ---- the loop between the Connection and the transport
    def _pump(self) -> None:
        """Write what the Connection has to send, dispatch the requests it has parsed. A handler that completes
        on the spot (kbus.server.util.eager) answers inside the loop below, which writes what was answered when it
        stops dispatching: a buffer of pipelined requests is one loop and one write, not a recursion. Anything
        else that calls this from inside the loop (a drained writer, the end of a throttle) asks for another
        round."""
        if self._pumping:
            self._pump_again = True
            return
        self._pumping = True
        try:
            while True:
                self._pump_again = False
                self._pump_once()
                if not self._pump_again:
                    return
        finally:
            self._pumping = False

    def _pump_once(self) -> None:
        conn, transport = self.conn, self.transport
        if self._lost or conn is None or transport is None:
            return
        self._write(conn.data_to_send())
        while (
            not self._writing_paused
            and not (self._writer is not None and self._writer.stalled)
            and self._unmute is None
        ):
            event = conn.next_event()
            if isinstance(event, Request):
                self._start(self._run(event))
            elif isinstance(event, SaslToken):
                self._start(self._run_token(event))
            elif event is NEED_DATA:
                self._write(conn.data_to_send())  # what this loop's handlers answered on the spot
                self._resume_reading()
                return
            elif event is PAUSED:
                self._write(conn.data_to_send())
                if conn.buffered > READ_PAUSE_BYTES:
                    self._pause_reading()
                return
            elif isinstance(event, Closed):
                self._write(conn.data_to_send())
                self.send_held()  # before the close: nothing may follow it
                if self._writer is not None:
                    if self._writer.stalled:
                        return  # called again once the last responses are sent; Closed is reported again
                    self._writer.close()  # its dup of the socket would keep the connection open
                if event.reason is not None and not transport.is_closing():
                    # a peer breaking the protocol is worth a warning; a close we chose (failed login) is not
                    level = logging.WARNING if event.violation else logging.INFO
                    log.log(level, "Closing connection %s (%s): %s", self.conn_id, self.listener.name, event.reason)
                transport.close()
                return
        self._write(conn.data_to_send())
        self._pause_reading()

    def _write(self, frames: list[OutFrame]) -> None:
        transport = self.transport
        if not frames or transport is None or transport.is_closing():
            return
        held = self._held
        if held is not None:  # behind responses still held: after them
            held.extend(frames)
            return
        if self._reading and BATCH_WRITES:  # answered while reading: written at the end of the loop's turn
            self._held = frames  # data_to_send() gave us this list
            self._responses.hold(self)
            return
        # a response answered later (acks=all, a long poll) is activity of its own
        self._send(frames, not self._reading)

    def send_held(self) -> None:
        """Write the responses held for the end of the loop's turn (ResponseBatch)."""
        held = self._held
        if held is None:
            return
        self._held = None
        transport = self.transport
        if self._lost or transport is None or transport.is_closing():
            return
        self._send(held, False)  # read in this turn: the read updated the idle clock

    def _send(self, frames: list[OutFrame], activity: bool) -> None:
        transport = self.transport
        assert transport is not None
        if activity:
            self._idle.update(self.conn_id, now_ms())
        try:
            if self._writer is not None:
                self._writer.write(frames)
            else:
                transport.writelines(frames)  # type: ignore[arg-type]  # no splicer without a writer: all bytes
        except (ConnectionError, RuntimeError) as exc:  # uvloop raises RuntimeError on a transport just reset
            log.debug("Connection %s lost while writing: %s", self.conn_id, exc)

    def _write_failed(self, exc: OSError) -> None:
        log.debug("Connection %s lost while sending: %s", self.conn_id, exc)
        if self.transport is not None:
            self.transport.abort()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self.transport.is_closing():
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self.transport.is_closing():
            self._reading_paused = False
            self.transport.resume_reading()

    def _throttle(self, throttle_ms: int) -> None:
        """Kafka's ThrottledChannel: after a throttled response is sent, read and dispatch nothing from this
        client until the throttle time has passed (requests already dispatched still complete)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if until <= self._muted_until or self._lost:
            return
        self._muted_until = until
        if self._unmute is not None:
            self._unmute.cancel()
        self._unmute = loop.call_at(until, self._end_throttle)
        self._pause_reading()

    def _end_throttle(self) -> None:
        self._unmute = None
        self._pump()

    def _start(self, coro: Coroutine[object, None, None]) -> None:
        # on this stack: a handler that does not wait (most do not) costs no Task and no extra loop turn
        # (kbus.server.util.eager's start(), here in compiled code: it runs once per request)
        # next() with a default, not send(None) in a try: a handler's return is a StopIteration, and catching it
        # in compiled code adds a traceback entry per request (CPy_AddTraceback + CPy_CatchError, ~3% of a small
        # Produce in process); the builtin next() clears it without one
        first = next(coro.__await__(), _DONE)  # what it waits on (a future), typed object: mypyc checks it
        if first is _DONE:
            return
        task = eager.resume(coro, first)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- running one request
    async def _run(self, request: Request) -> None:
        """One request, handler included, as one coroutine: the handler's coroutine is the only other one (a
        second coroutine around the handler cost ~0.3 us per request)."""
        conn = self.conn
        assert conn is not None
        throttle_ms = 0
        try:
            header = request.header
            if request.unsupported_version:
                data: OutFrame | None = unsupported_version_response(header)
            else:
                spec = _API_TABLE[header.api_key]
                ctx = self._context(request, conn)
                response = await spec.handler(self.managers, ctx, request.body)
                data, throttle_ms = self._encode(header.api_key, ctx, response)  # spec's key (an interpreted field)
        except asyncio.CancelledError:
            raise
        except ProtocolError as exc:
            if not self._lost:
                conn.fail(request.seq, str(exc))
        except Exception:
            log.exception("Unexpected error handling a request from %s", self.conn_id)
            if not self._lost:
                conn.fail(request.seq, "unexpected error in a handler")
        else:
            if not self._lost:
                conn.send_response(request.seq, data)
        self._answered()
        if throttle_ms > 0:
            self._throttle(throttle_ms)

    def _answered(self) -> None:
        """A request was answered: send it. On the spot (inside _pump_once's loop, which writes what its handlers
        answered when it stops) nothing is left to do; a handler that waited finishes in its Task, outside the
        loop, and pumps. Before, every request answered on the spot asked _pump for a second _pump_once round (a
        list, a next_event and a write check per request, nothing to do in them)."""
        if not self._pumping:
            self._pump()

    async def _run_token(self, event: SaslToken) -> None:
        conn = self.conn
        assert conn is not None
        try:
            data = await raw_token(self.server.security, self.listener.name, conn, event.token, self.peer)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Unexpected error in a SASL exchange with %s", self.conn_id)
            data = None
        if not self._lost:
            if data is None:
                conn.fail(event.seq, "SASL authentication failed")
            else:
                conn.send_response(event.seq, data)
        self._answered()

    def _context(self, request: Request, conn: Connection) -> RequestContext:
        header = request.header
        ctx = RequestContext(
            header,
            self.peer[0],
            self.peer[1],
            self.conn_id,
            listener=self.listener,
            connection=conn,
            append_order=self._append_order,
            authorizer=self._authorizer,
            size=request.size,
        )
        if self._writer is not None and header.api_key == FETCH_KEY:  # only Fetch leaves records in files
            ctx.splicer = RecordSplicer(header.flexible)
        return ctx

    def _encode(self, api_key: int, ctx: RequestContext, response: Response | None) -> tuple[OutFrame | None, int]:
        """The handler's response encoded (None: no response) and the time to mute the connection for after it."""
        header = ctx.header
        throttle_ms = ctx.throttle_time_ms
        if self._request_quota.enabled:  # all a request pays when no request_percentage is set
            request_throttle = request_quota_throttle(self.managers, ctx)
            if request_throttle > throttle_ms:
                throttle_ms = request_throttle
                if response is not None:
                    response = _with_throttle_time(header, response, throttle_ms)
        data: OutFrame | None = None
        if response is not None:
            data = encode_response(header, response)
            if ctx.splicer is not None:
                data = ctx.splicer.splice(data)
        _api_metrics(api_key).record(_perf_counter() - ctx.started)
        return data, throttle_ms

    async def abort(self) -> None:
        """Broker shutdown: drop the connection and wait for its handlers to end."""
        self._held = None
        if self._writer is not None:
            self._writer.close()
        if self.transport is not None:
            self.transport.abort()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
