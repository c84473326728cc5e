"""Kafka's connection limits as pure rules (SocketServer's ConnectionQuotas and Selector's IdleExpiryManager; the
keys and their validation are kbus.common.connection_limits'): no sockets, no clock of its own (every call takes
`now_ms`), so the network layer and the unit tests share it.

What Kafka does when a new connection arrives (`ConnectionQuotas.inc`), in this order:
1. `record_connection` + `slot_available`: the acceptor records the connection into the broker-wide and the
   listener's `connection-accept-rate` sensors; over `max.connection.creation.rate` (broker-wide or the
   listener's) the acceptor *waits* the throttle time, then waits until the listener is under its own
   `max.connections` and the broker under its `max.connections` (the inter-broker listener is exempt from the
   broker-wide limits when there is more than one listener). While it waits nothing else is accepted on that
   listener: new connections queue in the kernel's backlog.
2. `admit`: the IP's `connection_creation_rate` quota (/config/ips): over it the connection is not counted and is
   closed once the throttle time has passed (the client sees nothing until then); then the connection is counted,
   and over `max.connections.per.ip` (or its override) it is closed at once.
3. `dec` when the connection closes. When the broker is over `max.connections` (the exempt inter-broker listener
   went over, or the limit was lowered), every other listener closes its least recently used connection
   (`max_connections_exceeded`).
`IdleExpiry` is Selector's IdleExpiryManager: a connection with no bytes read or written for
`connections.max.idle.ms` is closed, authenticated or not (a negative value turns it off, as in Kafka).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kbus.common.connection_limits import INT_MAX, ConnectionLimits, normalize_ip
from kbus.server.network.idle_expiry import IdleExpiry as IdleExpiry  # its home; named here as before
from kbus.server.quotas.rate import RateConfig, WindowedRate


class Admission(enum.Enum):
    ACCEPTED = "accepted"
    TOO_MANY = "too many connections from the address"  # closed at once (TooManyConnectionsException)
    THROTTLED = "over the address's connection_creation_rate"  # closed when the throttle ends


@dataclass(frozen=True, slots=True)
class AdmitResult:
    admission: Admission
    limit: int = 0  # TOO_MANY: the address's maximum
    close_at_ms: int = 0  # THROTTLED: when to close the connection


class _ListenerQuota:
    """ListenerConnectionQuota: a listener's count, limits and sensors."""

    __slots__ = ("accept_rate", "count", "ip_throttle", "max_connections", "max_rate", "throttle")

    def __init__(self, window: RateConfig) -> None:
        self.count = 0
        self.max_connections = INT_MAX
        self.max_rate = INT_MAX
        self.accept_rate = WindowedRate(window)  # connection-accept-rate{listener}
        self.throttle = _Avg()  # connection-accept-throttle-time{listener}
        self.ip_throttle = _Avg()  # ip-connection-accept-throttle-time{listener}


class _Avg:
    """Kafka's Avg of the throttle times recorded (out of non-zero ones), kept as a running sum and count."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def record(self, value: float) -> None:
        self.total += value
        self.count += 1

    @property
    def value(self) -> float:
        return self.total / self.count if self.count else 0.0


class ConnectionQuotas:
    """Every listener's connection counts and limits (one per broker, used on its event loop only)."""

    def __init__(
        self,
        listeners: Iterable[str],
        inter_broker_listener: str,
        limits: ConnectionLimits,
        window: RateConfig,
    ) -> None:
        self.window = window
        # QuotaUtils.boundedThrottleTime caps a throttle at one quota window (quota.window.size.seconds)
        self.max_throttle_ms = window.window_ms
        self.inter_broker_listener = inter_broker_listener.upper()
        self.listeners: dict[str, _ListenerQuota] = {name.upper(): _ListenerQuota(window) for name in listeners}
        self.counts: dict[str, int] = {}  # by address
        self.total = 0
        self.broker_accept_rate = WindowedRate(window)  # broker-connection-accept-rate
        self.limits = ConnectionLimits()
        self.default_ip_rate = INT_MAX
        self.ip_rates: dict[str, int] = {}
        self._ip_sensors: dict[str, tuple[WindowedRate, int]] = {}  # address -> (rate, last used ms)
        self.configure(limits)

    # ---- configuration
    def configure(self, limits: ConnectionLimits) -> None:
        """New limits (start-up or a dynamic change); a waiting acceptor must re-check `slot_available`."""
        self.limits = limits
        for name, quota in self.listeners.items():
            quota.max_connections = limits.listener_max_connections.get(name, INT_MAX)
            quota.max_rate = limits.listener_max_connection_creation_rate.get(name, INT_MAX)

    def set_ip_connection_rates(self, default: int | None, per_ip: Mapping[str, int]) -> None:
        """The /config/ips quotas: `<default>` and per address (updateIpConnectionRateQuota)."""
        self.default_ip_rate = INT_MAX if default is None else default
        self.ip_rates = {normalize_ip(ip): rate for ip, rate in per_ip.items()}

    def connection_rate_for_ip(self, ip: str) -> int:
        return self.ip_rates.get(ip, self.default_ip_rate)

    # ---- the acceptor
    def protected(self, listener: str) -> bool:
        """The inter-broker listener is exempt from the broker-wide limits when the broker has other listeners."""
        return listener == self.inter_broker_listener and len(self.listeners) > 1

    def record_connection(self, listener: str, now_ms: int) -> int:
        """recordConnectionAndGetThrottleTimeMs: how long the acceptor waits before taking this connection
        (0: at once), the longer of the broker-wide and the listener's creation-rate throttle."""
        quota = self.listeners[listener]
        throttle = 0
        if not self.protected(listener):
            throttle = self._record(self.broker_accept_rate, self.limits.max_connection_creation_rate, now_ms)
        throttle = max(throttle, self._record(quota.accept_rate, quota.max_rate, now_ms))
        if throttle > 0:
            quota.throttle.record(throttle)
        return throttle

    def slot_available(self, listener: str) -> bool:
        """connectionSlotAvailable: under the listener's max.connections and (unless protected) the broker's."""
        quota = self.listeners[listener]
        if quota.count >= quota.max_connections:
            return False
        return self.protected(listener) or self.total < self.limits.max_connections

    def admit(self, listener: str, ip: str, now_ms: int) -> AdmitResult:
        """After the acceptor got a slot: the IP's creation-rate quota, then count the connection, then the
        per-IP maximum. Only ACCEPTED connections are counted (call `dec` when they close)."""
        rate_quota = self.connection_rate_for_ip(ip)
        if rate_quota != INT_MAX:
            sensor = self._ip_sensor(ip, now_ms)
            throttle = self._record(sensor, rate_quota, now_ms)
            if throttle > 0:
                # un-record it everywhere: a connection that is not accepted does not count against any rate
                sensor.record(-1.0, now_ms)
                quota = self.listeners[listener]
                if not self.protected(listener):
                    self.broker_accept_rate.record(-1.0, now_ms)
                quota.accept_rate.record(-1.0, now_ms)
                quota.ip_throttle.record(throttle)
                return AdmitResult(Admission.THROTTLED, close_at_ms=now_ms + throttle)
        limits = self.limits
        limit = limits.max_connections_per_ip_overrides.get(ip, limits.max_connections_per_ip)
        if self.counts.get(ip, 0) >= limit:
            return AdmitResult(Admission.TOO_MANY, limit=limit)
        self.counts[ip] = self.counts.get(ip, 0) + 1
        self.total += 1
        self.listeners[listener].count += 1
        return AdmitResult(Admission.ACCEPTED)

    def dec(self, listener: str, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total = max(0, self.total - 1)
        quota = self.listeners[listener]
        quota.count = max(0, quota.count - 1)

    def max_connections_exceeded(self, listener: str) -> bool:
        """The broker is over max.connections: a listener other than the protected one closes its least
        recently used connection (Processor.closeExcessConnections)."""
        return self.total > self.limits.max_connections and not self.protected(listener)

    def get(self, ip: str) -> int:
        return self.counts.get(ip, 0)

    # ---- metrics
    def listener_metrics(self, listener: str, now_ms: int) -> dict[str, float]:
        """Kafka's socket-server-metrics of one listener, by Kafka's metric name."""
        quota = self.listeners[listener]
        return {
            "connection-count": float(quota.count),
            "connection-accept-rate": quota.accept_rate.measure(now_ms),
            "connection-accept-throttle-time": quota.throttle.value,
            "ip-connection-accept-throttle-time": quota.ip_throttle.value,
        }

    def broker_accept_rate_value(self, now_ms: int) -> float:
        return self.broker_accept_rate.measure(now_ms)

    # ---- internals
    def _record(self, rate: WindowedRate, bound: int, now_ms: int) -> int:
        """Sensor.record with a quota: record, then the throttle time if over the bound, capped at one window."""
        rate.record(1.0, now_ms)
        if bound >= INT_MAX:
            return 0
        if bound <= 0:
            return self.max_throttle_ms  # a zero quota: every connection is over it
        return min(rate.throttle_time_ms(bound, now_ms), self.max_throttle_ms)

    def _ip_sensor(self, ip: str, now_ms: int) -> WindowedRate:
        entry = self._ip_sensors.get(ip)
        if entry is None:
            if len(self._ip_sensors) >= 1024:
                self._expire_ip_sensors(now_ms)
            rate = WindowedRate(self.window)
        else:
            rate = entry[0]
        self._ip_sensors[ip] = (rate, now_ms)
        return rate

    def _expire_ip_sensors(self, now_ms: int) -> None:
        # Kafka's IP sensors expire after an hour without use
        for ip in [ip for ip, (_, used) in self._ip_sensors.items() if now_ms - used > 3600 * 1000]:
            del self._ip_sensors[ip]
