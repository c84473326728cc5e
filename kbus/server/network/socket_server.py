"""asyncio adapter: one server per listener (Kafka's SocketServer and Acceptor): binds and listens, accepts within
the connection limits (kbus.server.network.connection_quotas), expires idle connections, applies limit changes at
run time. Each accepted socket gets a `KafkaProtocol` (kbus.server.network.processor), which runs one client's
`kbus.protocol.connection.Connection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kbus.common.clock import now_ms
from kbus.common.connection_limits import (
    ConnectionLimitError,
    ConnectionLimits,
    is_connection_limit_key,
    normalize_ip,
)
from kbus.common.quotas import DEFAULT as DEFAULT_ENTITY
from kbus.server.network.connection_quotas import Admission, ConnectionQuotas, IdleExpiry
from kbus.server.network.processor import KafkaProtocol, ResponseBatch
from kbus.server.quotas.rate import RateConfig
from kbus.server.security.manager import SSL_HANDSHAKE_TIMEOUT_S, ListenerSecurity, SecurityManager
from kbus.server.util.metrics import METRICS, Metrics, labels_key
from kbus.server.util.repeated_warning import RepeatedWarning

if TYPE_CHECKING:
    from kbus.common.broker_config import KafkaConfig
    from kbus.server.apis.managers import Managers

log = logging.getLogger("kbus.network")
ACCEPT_BATCH = 64  # connections accepted in a row before the acceptor yields to the event loop
LISTEN_BACKLOG = 512  # connections the kernel completes while the acceptor waits (Kafka: socket.listen.backlog.size)
# accept(2) errors that say the broker itself is out of something: back off before the next accept
_ACCEPT_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
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
        self.responses = ResponseBatch(self._owner_loop)  # its connections' responses, written once per loop turn
        self._rejections = {name: RepeatedWarning(log) for name in names}
        self._stopping = False
        self._refused_limits = ""
        self._applied_limit_entries: tuple[tuple[str, str], ...] | None = None
        register_connection_metrics(self)

    async def bind(self) -> None:
        """Bind every listener without accepting yet: a port that is taken fails here, before the broker
        registers itself anywhere (Kafka binds its SocketServer before registering in ZooKeeper)."""
        for listener in self.config.listeners:
            for sock in await _listening_sockets(
                listener.host or None, listener.port, self.config.socket_receive_buffer_bytes
            ):
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
        send_buffer = self.config.socket_send_buffer_bytes
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
                        _set_send_buffer(sock, send_buffer)
                    except BlockingIOError:
                        batch = 0
                        sock, addr = await loop.sock_accept(lsock)
                        _set_send_buffer(sock, send_buffer)
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


def _set_send_buffer(sock: socket.socket, size: int) -> None:
    """socket.send.buffer.bytes on an accepted connection (Kafka's Acceptor: SO_SNDBUF unless -1, the OS default).

    A fixed SO_SNDBUF also turns off the kernel's send-buffer autotuning, which otherwise lets each connection's
    buffer grow to net.ipv4.tcp_wmem's maximum (4 MB here, against Kafka's default 100 KB, doubled by Linux).
    Values <= 0 keep the OS default (Kafka takes only -1 so; other values fail each of its connections)."""
    if size > 0:
        with contextlib.suppress(OSError):  # a client that hung up already: its loss is noticed when served
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


async def _listening_sockets(host: str | None, port: int, receive_buffer: int = -1) -> list[socket.socket]:
    """What asyncio's create_server binds for (host, port): every address getaddrinfo gives (both families for an
    empty host), SO_REUSEADDR, IPv6 sockets v6-only; non-blocking, not listening yet (start() listens).
    `receive_buffer` (socket.receive.buffer.bytes; <= 0: the OS default) is SO_RCVBUF, set on the listening socket
    before bind as Kafka's Acceptor does, so accepted connections inherit it and their TCP window scale fits it."""
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
            if receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
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


