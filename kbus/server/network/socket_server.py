"""asyncio adapter: one server per listener, one `kbus.protocol.connection.Connection` per client socket.

All protocol decisions (framing, pipelining, response order, the authentication gate, when to close) live in the
sans-I/O Connection; this module moves bytes between it and the transport, runs handlers (at once, a task only when
they wait: kbus.server.util.eager) and logs.
A client that resets its connection is an ordinary disconnect (DEBUG), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import errno
import functools
import ipaddress
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from kbus.common.clock import now_ms
from kbus.common.connection_limits import (
    ConnectionLimitError,
    ConnectionLimits,
    is_connection_limit_key,
    normalize_ip,
)
from kbus.common.quotas import DEFAULT as DEFAULT_ENTITY
from kbus.protocol.codec import (
    API_VERSIONS_KEY,
    ProtocolError,
    RequestHeader,
    build,
    encode_response,
    nested,
    response_type,
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
from kbus.protocol.splice import OutFrame, RecordSplicer
from kbus.server.apis.registry import API_TABLE, CATALOG, AppendOrder, RequestContext
from kbus.server.apis.sasl import raw_token
from kbus.server.apis.throttling import request_quota_throttle
from kbus.server.network.connection_quotas import Admission, ConnectionQuotas, IdleExpiry
from kbus.server.network.sendfile import SendfileWriter
from kbus.server.quotas.rate import RateConfig
from kbus.server.security.manager import SSL_HANDSHAKE_TIMEOUT_S, ListenerSecurity, SecurityManager
from kbus.server.security.principal import certificate_principal
from kbus.server.util import eager
from kbus.server.util.metrics import METRICS, Metrics, labels_key
from kbus.server.util.repeated_warning import RepeatedWarning

if TYPE_CHECKING:
    from kbus.common.broker_config import KafkaConfig
    from kbus.server.apis.managers import Managers

log = logging.getLogger("kbus.network")
_conn_ids = itertools.count(1)
ACCEPT_BATCH = 64  # connections accepted in a row before the acceptor yields to the event loop
LISTEN_BACKLOG = 512  # connections the kernel completes while the acceptor waits (Kafka: socket.listen.backlog.size)
# accept(2) errors that say the broker itself is out of something: back off before the next accept
_ACCEPT_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
MAX_PIPELINED = 64  # produce requests one connection may have waiting on replicas at once
READ_PAUSE_BYTES = 1 << 20  # stop reading a connection that has this much unread behind a waiting request
# Plaintext fetches send record bytes with sendfile(2) (network.sendfile). KBUS_SENDFILE=0 copies them through
# Python instead: a switch for measuring the difference, not a Kafka property.
SENDFILE = os.environ.get("KBUS_SENDFILE", "1") != "0"


def unsupported_version_response(header: RequestHeader) -> bytes:
    """KIP-511: an ApiVersions request at a version we do not know is answered in the v0 layout with
    UNSUPPORTED_VERSION and our ranges, so the client can retry at a version both sides speak."""
    if header.api_key != API_VERSIONS_KEY:
        raise ProtocolError(f"unsupported version {header.api_version} of API key {header.api_key}")
    v0 = response_type(API_VERSIONS_KEY, 0)
    keys = [
        build(nested(v0, "ApiVersion"), api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(API_TABLE.values(), key=lambda s: s.key)
    ]
    body = build(v0, error_code=ErrorCode.unsupported_version, api_keys=keys)
    return encode_response(RequestHeader(API_VERSIONS_KEY, 0, header.correlation_id, header.client_id, False), body)


_THROTTLED_TYPES: dict[type, bool] = {}


def _with_throttle_time(response: object, throttle_ms: int) -> object:
    """The response with its throttle_time_ms set, when its version has the field."""
    cls = type(response)
    has = _THROTTLED_TYPES.get(cls)
    if has is None and not dataclasses.is_dataclass(cls):
        has = _THROTTLED_TYPES[cls] = False  # a body encoded by its handler, which set its own throttle time
    if has is None:
        has = _THROTTLED_TYPES[cls] = any(f.name == "throttle_time" for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if not has:
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))  # type: ignore[type-var]


class KafkaServer:
    """Every listener's acceptor (Kafka's SocketServer): its own accept loop per listening socket, so that a
    listener at its connection limit stops accepting (the kernel's backlog holds what arrives meanwhile), as
    Kafka's Acceptor does; the limits themselves are kbus.server.network.connection_quotas'."""

    def __init__(self, config: KafkaConfig, managers: Managers) -> None:
        self.managers = managers
        self.config = config
        self._sockets: list[tuple[str, socket.socket]] = []  # (listener name, listening socket)
        self._acceptors: list[asyncio.Task[None]] = []
        self._handovers: set[asyncio.Task[None]] = set()
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # over an IP's rate: closed when it ends
        self.connections: set[KafkaProtocol] = set()
        self._by_id: dict[str, KafkaProtocol] = {}
        # each listener's TLS context and SASL settings (the broker's; built here for a bare test server)
        self.security = managers.security or SecurityManager(config, lambda _user: {})
        names = [listener.name for listener in config.listeners]
        self.quotas = ConnectionQuotas(
            names, config.inter_broker_listener, ConnectionLimits.from_layers([config.raw], resolve_host),
            RateConfig(config.quota_window_num, config.quota_window_size_seconds * 1000),
        )
        self.idle = IdleExpiry(config.connections_max_idle_ms)
        self._slot_freed = asyncio.Event()  # a connection closed or a limit changed: waiting acceptors re-check
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set once accepting
        self._owner_loop = asyncio.get_running_loop()
        self._rejections = {name: RepeatedWarning(log) for name in names}
        self._stopping = False
        self._refused_limits = ""
        self._applied_limit_entries: tuple[tuple[str, str], ...] | None = None
        register_connection_metrics(self)

    async def bind(self) -> None:
        """Bind every listener without accepting yet: a port that is taken fails here, before the broker
        registers itself anywhere (Kafka binds its SocketServer before registering in ZooKeeper)."""
        for listener in self.config.listeners:
            for sock in await _listening_sockets(listener.host or None, listener.port):
                self._sockets.append((listener.name, sock))

    def listen(self) -> None:
        """Take connections on every bound listener (listen(2)) while requests still wait: the kernel completes
        connections into the backlog and start() reads them once the broker serves. Kafka's SocketServer is
        listening before the broker registers in ZooKeeper, so a broker made leader the moment it registers is
        never one its followers and clients are refused by (they wait for its answers instead)."""
        for _, sock in self._sockets:
            sock.listen(LISTEN_BACKLOG)

    async def start(self) -> None:
        if not self._sockets:
            await self.bind()
        self._loop = asyncio.get_running_loop()
        seen: set[str] = set()
        for name, sock in self._sockets:
            sock.listen(LISTEN_BACKLOG)  # listening already when the broker called listen() during start-up
            security = self.security.listener(name)
            self._acceptors.append(asyncio.create_task(self._accept_loop(name, sock, security)))
            if name in seen:
                continue
            seen.add(name)
            bound = sock.getsockname()
            log.info(
                "Awaiting socket connections on %s:%d (%s, %s)",
                bound[0], bound[1], name, self.config.security_protocol(name),
            )
        self._schedule_sweep()

    async def stop(self) -> None:
        self._stopping = True
        for task in self._acceptors:
            task.cancel()
        await asyncio.gather(*self._acceptors, return_exceptions=True)
        for _, sock in self._sockets:
            sock.close()
        for sock, timer in list(self._throttled.items()):
            timer.cancel()
            sock.close()
        self._throttled.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for task in list(self._handovers):
            task.cancel()
        await asyncio.gather(*self._handovers, return_exceptions=True)
        await asyncio.gather(*(c.abort() for c in list(self.connections)))

    # ---- limits changed at run time (dynamic broker configs, /config/ips)
    def reconfigure(self, limits: ConnectionLimits) -> None:
        """New connection limits (event loop)."""
        if limits != self.quotas.limits:
            log.info("Connection limits now in effect: %s", limits)
            self.quotas.configure(limits)
            self._slot_freed.set()

    def apply_connection_configs(self, layers: list[Mapping[str, str]]) -> None:
        """The connection limits from config layers (server.properties, then the dynamic ones); a stored value
        Kafka would refuse (written by another tool) is logged and the limits in effect stay."""
        # Called on every metadata change (ISR, leaders): only a change of the connection keys themselves is
        # parsed again, so a host name among the overrides is not looked up (blocking the loop) each time.
        entries = tuple((k, v) for layer in layers for k, v in layer.items() if is_connection_limit_key(k))
        if entries == self._applied_limit_entries:
            return
        self._applied_limit_entries = entries
        try:
            limits = ConnectionLimits.from_layers(layers, resolve_host)
        except ConnectionLimitError as exc:
            if str(exc) != self._refused_limits:
                log.warning("Ignoring dynamic connection limits: %s", exc)
            self._refused_limits = str(exc)
            return
        self._refused_limits = ""
        self.reconfigure(limits)

    def ip_quotas_changed(self, rates: dict[str, int]) -> None:
        """The /config/ips connection_creation_rate quotas ("<default>" for the default), from any thread."""
        default = rates.pop(DEFAULT_ENTITY, None)
        self._owner_loop.call_soon_threadsafe(self.quotas.set_ip_connection_rates, default, rates)

    # ---- the acceptor
    async def _accept_loop(self, listener: str, lsock: socket.socket, security: ListenerSecurity) -> None:
        loop = asyncio.get_running_loop()
        blocked_key = labels_key(listener=listener)
        batch = 0
        while True:
            try:
                # what the backlog already holds is taken without a trip through the event loop (a flood of
                # connections is drained several times faster, so the backlog does not overflow and drop others'
                # SYNs); every ACCEPT_BATCH connections other work gets its turn
                if batch < ACCEPT_BATCH:
                    try:
                        sock, addr = lsock.accept()
                        sock.setblocking(False)  # as sock_accept's are
                        batch += 1
                    except BlockingIOError:
                        batch = 0
                        sock, addr = await loop.sock_accept(lsock)
                else:
                    batch = 0
                    await asyncio.sleep(0)
                    continue
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if exc.errno in _ACCEPT_EXHAUSTED:  # out of descriptors or memory: Kafka logs, backs off, goes on
                    log.warning("Error while accepting a connection on %s: %s", listener, exc)
                    await asyncio.sleep(0.1)
                else:  # a client that hung up or failed before accept returned (ECONNABORTED, EPROTO): its own loss
                    log.debug("Error while accepting a connection on %s: %s", listener, exc)
                continue
            try:
                started = time.monotonic()
                if await self._wait_for_slot(listener):
                    METRICS.inc_key("kbus_acceptor_blocked_seconds_total", blocked_key, time.monotonic() - started)
                self._admit(listener, sock, normalize_ip(str(addr[0])), security)
            except asyncio.CancelledError:
                sock.close()
                raise
            except Exception:  # that connection is lost; the listener keeps accepting
                log.exception("Error while accepting a connection on %s", listener)
                sock.close()

    async def _wait_for_slot(self, listener: str) -> bool:
        """ConnectionQuotas.waitForConnectionSlot: wait out the creation-rate throttle, then until the
        listener and the broker are under max.connections. True when the acceptor had to wait."""
        quotas = self.quotas
        loop = asyncio.get_running_loop()
        end = loop.time() + quotas.record_connection(listener, now_ms()) / 1000
        waited = False
        while True:
            remaining = end - loop.time()
            if remaining <= 0 and quotas.slot_available(listener):
                return waited
            waited = True
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), remaining if remaining > 0 else None)

    def _admit(self, listener: str, sock: socket.socket, ip: str, security: ListenerSecurity) -> None:
        now = now_ms()
        result = self.quotas.admit(listener, ip, now)
        if result.admission is Admission.TOO_MANY:
            self._rejections[listener].failed(
                f"Rejected connection from /{ip}, address already has the configured maximum of {result.limit} "
                "connections."
            )
            sock.close()
            return
        if result.admission is Admission.THROTTLED:
            # Kafka holds the socket, unread, until the throttle time has passed, then closes it
            loop = asyncio.get_running_loop()
            delay = max(0.0, (result.close_at_ms - now) / 1000)
            self._throttled[sock] = loop.call_later(delay, self._close_throttled, sock)
            return
        METRICS.inc_key("kbus_connection_creation_total", labels_key(listener=listener))
        task = asyncio.get_running_loop().create_task(self._hand_over(listener, sock, ip, security))
        self._handovers.add(task)
        task.add_done_callback(self._handovers.discard)

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        sock.close()

    async def _hand_over(self, listener: str, sock: socket.socket, ip: str, security: ListenerSecurity) -> None:
        """The counted connection to its protocol (after the TLS handshake on an SSL listener); a connection
        that never gets one (handshake failed or timed out) is uncounted here, any other when it is lost."""
        loop = asyncio.get_running_loop()
        protocols: list[KafkaProtocol] = []

        def factory() -> KafkaProtocol:
            protocols.append(KafkaProtocol(self, security, ip))
            return protocols[0]

        def release() -> None:
            # asyncio tells a protocol nothing when the TLS handshake fails: uncount the connection here
            if protocols:
                protocols[0].release()
            else:
                self.connection_closed(listener, ip)

        try:
            await loop.connect_accepted_socket(
                factory, sock, ssl=security.ssl_context,
                # a stalled or garbage handshake costs that connection only
                ssl_handshake_timeout=SSL_HANDSHAKE_TIMEOUT_S if security.ssl_context is not None else None,
            )  # fmt: skip
        except asyncio.CancelledError:
            sock.close()
            release()
            raise
        except Exception as exc:
            log.debug("Connection from %s on %s failed before it was served: %s", ip, listener, exc)
            sock.close()
            release()

    def connection_closed(self, listener: str, ip: str) -> None:
        """A counted connection is gone (ConnectionQuotas.dec): a waiting acceptor may take the next one."""
        self.quotas.dec(listener, ip)
        METRICS.inc_key("kbus_connection_close_total", labels_key(listener=listener))
        self._slot_freed.set()

    # ---- idle and excess connections (Selector.maybeCloseOldestConnection, Processor.closeExcessConnections)
    def _schedule_sweep(self) -> None:
        loop = self._loop
        if loop is None or self._stopping:
            return
        max_idle = self.config.connections_max_idle_ms
        # often enough that a connection is closed within a fraction of its idle time, never busier than 50 ms
        interval = 0.3 if max_idle < 0 else min(0.3, max(0.05, max_idle / 10000))
        self._sweeper = loop.call_later(interval, self._sweep)

    def _sweep(self) -> None:
        try:
            now = now_ms()
            for conn_id in self.idle.expired(now):
                self.idle.remove(conn_id)
                protocol = self._by_id.get(conn_id)
                if protocol is not None:
                    log.debug("Closing connection %s: idle for more than %d ms", conn_id,
                              self.config.connections_max_idle_ms)  # fmt: skip
                    protocol.close_now()
            for listener in self.quotas.listeners:
                excess = self.quotas.total - self.quotas.limits.max_connections
                while excess > 0 and self.quotas.max_connections_exceeded(listener):
                    victim = self.idle.least_recent(functools.partial(self._on_listener, listener=listener))
                    if victim is None:
                        break
                    self.idle.remove(victim)
                    log.info("Closing connection %s: the broker is over max.connections=%d", victim,
                             self.quotas.limits.max_connections)  # fmt: skip
                    self._by_id[victim].close_now()
                    excess -= 1
        finally:
            self._schedule_sweep()

    def _on_listener(self, conn_id: str, listener: str) -> bool:
        protocol = self._by_id.get(conn_id)
        return protocol is not None and protocol.listener.name == listener and not protocol.closed

    def track(self, protocol: KafkaProtocol) -> None:
        self.connections.add(protocol)
        self._by_id[protocol.conn_id] = protocol
        self.idle.update(protocol.conn_id, now_ms())

    def untrack(self, protocol: KafkaProtocol) -> None:
        self.connections.discard(protocol)
        self._by_id.pop(protocol.conn_id, None)
        self.idle.remove(protocol.conn_id)


def resolve_host(host: str) -> str:
    """An override's host as the address a peer would come from (Kafka: InetAddress.getByName)."""
    return normalize_ip(socket.gethostbyname(host)) if not _is_ip(host) else normalize_ip(host)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


async def _listening_sockets(host: str | None, port: int) -> list[socket.socket]:
    """What asyncio's create_server binds for (host, port): every address getaddrinfo gives (both families for an
    empty host), SO_REUSEADDR, IPv6 sockets v6-only; non-blocking, not listening yet (start() listens)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    out: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            try:
                sock = socket.socket(family, kind, proto)
            except OSError:  # a family this host lacks (IPv6 disabled at boot): asyncio's create_server skips it too
                log.debug("Skipping %s for %s:%s: the host cannot make such a socket", family.name, host, port)
                continue
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.setblocking(False)
    except OSError:
        for sock in out:
            sock.close()
        raise
    if not out:
        raise OSError(errno.EAFNOSUPPORT, f"no address family of {host or '*'}:{port} is supported on this host")
    return out


def register_connection_metrics(server: KafkaServer, metrics: Metrics = METRICS) -> None:
    """Kafka's socket-server-metrics per listener (connection-count, connection-accept-rate,
    connection-accept-throttle-time, ip-connection-accept-throttle-time) and broker-connection-accept-rate;
    connection-creation-total / connection-close-total are counters (kbus_connection_*_total), Kafka's
    AcceptorBlockedPercent is kbus_acceptor_blocked_seconds_total."""

    def listener_series(name: str) -> Callable[[], list[tuple[dict[str, str], float]]]:
        def series() -> list[tuple[dict[str, str], float]]:
            t = now_ms()
            quotas = server.quotas
            return [({"listener": lst}, quotas.listener_metrics(lst, t)[name]) for lst in quotas.listeners]

        return series

    for kafka_name, help_text in (
        ("connection-count", "Open connections per listener (Kafka's connection-count)"),
        ("connection-accept-rate", "Connections accepted per second per listener (Kafka's connection-accept-rate)"),
        ("connection-accept-throttle-time",
         "Average accept delay in ms from max.connection.creation.rate (Kafka's connection-accept-throttle-time)"),
        ("ip-connection-accept-throttle-time",
         "Average throttle in ms of connections over an IP's connection_creation_rate "
         "(Kafka's ip-connection-accept-throttle-time)"),
    ):  # fmt: skip
        metrics.gauge("kbus_" + kafka_name.replace("-", "_"), listener_series(kafka_name), help_text)
    metrics.gauge(
        "kbus_broker_connection_accept_rate", lambda: [({}, server.quotas.broker_accept_rate_value(now_ms()))],
        "Connections accepted per second by the broker (Kafka's broker-connection-accept-rate)",
    )  # fmt: skip


class KafkaProtocol(asyncio.Protocol):
    """One client connection on one listener."""

    def __init__(self, server: KafkaServer, security: ListenerSecurity, ip: str) -> None:
        self.server = server
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

    def data_received(self, data: bytes) -> None:
        if self.conn is None:
            return
        self.server.idle.update(self.conn_id, now_ms())
        self.conn.receive_data(data)
        self._pump()

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
        if self.conn is not None:
            self.conn.abort()
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
        on the spot (kbus.server.util.eager) calls this again from inside the loop below: that call only asks for
        another round, so a buffer of pipelined requests is one loop and one write, not a recursion."""
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
                self._resume_reading()
                return
            elif event is PAUSED:
                if conn.buffered > READ_PAUSE_BYTES:
                    self._pause_reading()
                return
            elif isinstance(event, Closed):
                self._write(conn.data_to_send())
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
        self._pause_reading()

    def _write(self, frames: list[OutFrame]) -> None:
        transport = self.transport
        if not frames or transport is None or transport.is_closing():
            return
        self.server.idle.update(self.conn_id, now_ms())
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

    def _start(self, coro: Coroutine[None, None, None]) -> None:
        # on this stack: a handler that does not wait (most do not) costs no Task and no extra loop turn
        task = eager.start(coro)
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # ---- running one request
    async def _run(self, request: Request) -> None:
        conn = self.conn
        assert conn is not None
        throttle_ms = 0
        try:
            data, throttle_ms = await self._execute(request, conn)
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
        self._pump()
        if throttle_ms > 0:
            self._throttle(throttle_ms)

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
        self._pump()

    async def _execute(self, request: Request, conn: Connection) -> tuple[OutFrame | None, int]:
        """The encoded response (None: no response) and the time to mute the connection for after it."""
        header = request.header
        if request.unsupported_version:
            return unsupported_version_response(header), 0
        spec = API_TABLE[header.api_key]
        ctx = RequestContext(
            header,
            self.peer[0],
            self.peer[1],
            self.conn_id,
            listener=self.listener,
            connection=conn,
            append_order=self._append_order,
            authorizer=self.server.security.authorizer,
            size=request.size,
        )
        if self._writer is not None:
            ctx.splicer = RecordSplicer(header.flexible)
        started = time.perf_counter()
        response = await spec.handler(self.managers, ctx, request.body)
        throttle_ms = ctx.throttle_time_ms
        if self.managers.quotas.request.enabled:  # all a request pays when no request_percentage is set
            request_throttle = request_quota_throttle(self.managers, ctx)
            if request_throttle > throttle_ms:
                throttle_ms = request_throttle
                if response is not None:
                    response = _with_throttle_time(response, throttle_ms)
        data: OutFrame | None = None
        if response is not None:
            data = encode_response(header, response)
            if ctx.splicer is not None:
                data = ctx.splicer.splice(data)
        key = labels_key(api=spec.name)
        METRICS.observe_key("kbus_request_latency_seconds", key, time.perf_counter() - started)
        METRICS.inc_key("kbus_requests_total", key)
        return data, throttle_ms

    async def abort(self) -> None:
        """Broker shutdown: drop the connection and wait for its handlers to end."""
        if self._writer is not None:
            self._writer.close()
        if self.transport is not None:
            self.transport.abort()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
