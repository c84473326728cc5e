"""Kafka's ClientQuotaManager and ClientRequestQuotaManager (QuotaFactory's produce, fetch and request managers).

Each request's (user, client-id) records into a sensor: a rate over `quota.window.num` samples of
`quota.window.size.seconds` (Kafka's SampledStat/Rate, kbus.server.quotas.rate). When the rate goes over the quota
that applies to the sensor (the precedence in kbus.common.quotas), the throttle time is what brings the rate back
to the quota: (rate - quota) / quota * window, as Kafka's QuotaUtils.throttleTime computes it. The network layer
mutes the connection for that time after sending the response (kbus.server.network), and Produce/Fetch put it in
their `throttle_time_ms` (KIP-219 clients back off on their own as well).

Hot path: a manager with no quota configured for its type is `enabled = False`, and callers check that attribute
first; nothing is recorded, no sensor exists. Quota changes arrive on another thread (ZooKeeper's change
notifications): they swap in a new quota map and bump `_version`; a sensor re-resolves its tags and bound the
next time it is used after a change.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kbus.common import quotas as q
from kbus.common.clock import now_ms
from kbus.common.errors import ThrottlingQuotaExceededError
from kbus.server.quotas.rate import RateConfig, WindowedRate
from kbus.server.util.metrics import METRICS, Metrics

NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9  # ClientRequestQuotaManager: request time as percent of a second
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds
# principals and client ids as they appear in znode names and sensor tags (Kafka caches the session's too)
sanitized = functools.lru_cache(maxsize=8192)(q.sanitize)


@dataclass(slots=True)
class ClientSensors:
    """One sensor: the quota rate, the throttle times it caused (Kafka's throttle-time Avg), and what it last
    resolved to."""

    user: str  # tags, sanitized ("" when the level applying has no user / no client id)
    client_id: str
    bound: float | None
    rate: WindowedRate
    throttle: WindowedRate  # throttle-time: sum of throttle ms and count, per window
    throttle_count: WindowedRate
    version: int
    last_used_ms: int = 0


@dataclass(slots=True)
class _Resolved:
    """A (user, client-id) of a request, bound to the sensor its tags name."""

    sensors: ClientSensors
    version: int


class ClientQuotaManager:
    """The quota of one type (Produce, Fetch or Request) for every client."""

    def __init__(self, quota_type: str, key: str, window: RateConfig, *, max_throttle_ms: int | None = None) -> None:
        self.quota_type = quota_type  # Kafka's QuotaType name: Produce, Fetch, Request
        self.key = key  # the config key holding this type's quota (producer_byte_rate, ...)
        self.window = window
        self.max_throttle_ms = max_throttle_ms  # the request quota bounds its throttle to one window
        self.enabled = False
        self._quotas: dict[q.QuotaEntity, float] = {}
        self._version = 0
        self._by_client: dict[tuple[str, str], _Resolved] = {}  # (sanitized user, sanitized client id)
        self._sensors: dict[tuple[str, str], ClientSensors] = {}  # by tags

    # ---- configuration (any thread) ----

    def update(self, quotas: Mapping[q.QuotaEntity, float]) -> None:
        """The new quotas of this type, every entity that has one."""
        self._quotas = dict(quotas)
        self._version += 1
        self.enabled = bool(self._quotas)

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota applying to a sanitized (user, client id), None when unlimited."""
        quotas = self._quotas
        return q.quota_limit(*q.quota_metric_tags(user, client_id, quotas), quotas)

    # ---- recording (event loop) ----

    def sensors(self, user: str, client_id: str, now_ms: int) -> ClientSensors:
        key = (user, client_id)
        resolved = self._by_client.get(key)
        if resolved is None or resolved.version != self._version:
            resolved = _Resolved(self._sensor_for(user, client_id, now_ms), self._version)
            self._by_client[key] = resolved
        sensors = resolved.sensors
        sensors.last_used_ms = now_ms
        return sensors

    def _sensor_for(self, user: str, client_id: str, now_ms: int) -> ClientSensors:
        quotas = self._quotas
        tags = q.quota_metric_tags(user, client_id, quotas)
        bound = q.quota_limit(tags[0], tags[1], quotas)
        sensors = self._sensors.get(tags)
        if sensors is None:
            window = self.window
            sensors = ClientSensors(
                tags[0], tags[1], bound, WindowedRate(window), WindowedRate(window), WindowedRate(window),
                self._version, now_ms,
            )
            self._sensors[tags] = sensors
            self._expire(now_ms)
        else:
            sensors.bound = bound  # Kafka updates the existing metric's quota config in place
            sensors.version = self._version
        return sensors

    def record_and_throttle(self, principal: str, client_id: str, value: float) -> int:
        """Kafka's maybeRecordAndGetThrottleTimeMs for a request's principal name and client id; the throttle
        time is also recorded in the throttle-time sensor. Callers check `enabled` first."""
        user, client, t = sanitized(principal), sanitized(client_id), now_ms()
        throttle = self.record(user, client, value, t)
        if throttle > 0:
            self.record_throttle(user, client, throttle, t)
        return throttle

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` and return the throttle time in ms (0 while within the quota)."""
        sensors = self.sensors(user, client_id, now_ms)
        sensors.rate.record(value, now_ms)
        bound = sensors.bound
        if bound is None:
            return 0
        if bound <= 0:
            return 2**31 - 1  # a zero quota: Kafka's throttle time is unbounded (infinite) there
        if sensors.rate.measure(now_ms) <= bound:
            return 0  # the common case: one measure, no window arithmetic
        throttle = sensors.rate.throttle_time_ms(bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return int(min(throttle, 2**31 - 1))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """A throttled fetch returns no data: take back what was recorded for it (Kafka's unrecordQuotaSensor)."""
        self.sensors(user, client_id, now_ms).rate.record(-value, now_ms)

    def record_throttle(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """The throttle time sensor (Kafka records it when it mutes the channel)."""
        sensors = self.sensors(user, client_id, now_ms)
        sensors.throttle.record(throttle_ms, now_ms)
        sensors.throttle_count.record(1, now_ms)

    def max_value_in_window(self, user: str, client_id: str, now_ms: int) -> float:
        """The most that can be recorded without certainly being throttled (bounds a fetch's max bytes)."""
        bound = self.sensors(user, client_id, now_ms).bound
        if bound is None:
            return float("inf")
        return bound * (self.window.samples - 1) * self.window.window_ms / 1000

    def _expire(self, now_ms: int) -> None:
        """Sensors idle for an hour go (Kafka expires inactive quota sensors after 3600 s)."""
        stale = [t for t, s in self._sensors.items() if now_ms - s.last_used_ms > INACTIVE_SENSOR_EXPIRATION_MS]
        if not stale:
            return
        for tags in stale:
            del self._sensors[tags]
        gone = set(stale)
        self._by_client = {
            k: r for k, r in self._by_client.items() if (r.sensors.user, r.sensors.client_id) not in gone
        }

    # ---- metrics ----

    def samples(self, now_ms: int) -> Iterable[tuple[str, str, float, float]]:
        """(user, client id, rate, average throttle ms) of every live sensor, names desanitized."""
        for s in list(self._sensors.values()):
            count = s.throttle_count.measure(now_ms)
            avg = s.throttle.measure(now_ms) / count if count else 0.0
            yield q.desanitize(s.user), q.desanitize(s.client_id), s.rate.measure(now_ms), avg


class TokenBucket:
    """Kafka's TokenBucket (KIP-599, controller mutation quotas): refilled at the quota per second up to a burst
    of quota * samples * window; a mutation takes its permits and may drive the tokens below zero."""

    __slots__ = ("last_ms", "samples", "tokens", "window_s")

    def __init__(self, samples: int, window_s: int) -> None:
        self.samples = samples
        self.window_s = window_s
        self.tokens = 0.0
        self.last_ms = 0

    def _refill(self, quota: float, now_ms: int) -> float:
        burst = self.samples * self.window_s * quota
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return burst

    def measure(self, quota: float, now_ms: int) -> float:
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, quota: float, permits: float, now_ms: int) -> None:
        burst = self._refill(quota, now_ms)
        self.tokens = min(burst, self.tokens - permits)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """controller_mutation_rate: partitions created or deleted per second (CreateTopics, CreatePartitions,
    DeleteTopics), per (user, client-id), over a token bucket instead of a rate."""

    def __init__(self, window: RateConfig) -> None:
        super().__init__("ControllerMutation", q.CONTROLLER_MUTATION_RATE, window)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def bucket(self, sensors: ClientSensors) -> TokenBucket:
        tags = (sensors.user, sensors.client_id)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(self.window.samples, self.window.window_ms // 1000)
        return bucket

    def quota_for(self, principal: str, client_id: str, strict: bool) -> ControllerMutationQuota | None:
        """The quota one request's mutations are recorded against (Kafka's newQuotaFor); None: unbounded."""
        if not self.enabled:
            return None
        sensors = self.sensors(sanitized(principal), sanitized(client_id), now_ms())
        if sensors.bound is None:
            return None
        return ControllerMutationQuota(self.bucket(sensors), sensors.bound, strict)


class ControllerMutationQuota:
    """Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a mutation while the tokens are below
    zero is refused with THROTTLING_QUOTA_EXCEEDED. Permissive (older versions): always recorded. Either way the
    response carries the time until the tokens are back at zero."""

    def __init__(self, bucket: TokenBucket, bound: float, strict: bool) -> None:
        self._bucket = bucket
        self._bound = bound
        self._strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, permits: float) -> None:
        t = now_ms()
        if self._strict:
            tokens = self._bucket.measure(self._bound, t)
            if tokens < 0:
                self._set_throttle(tokens, t)
                raise ThrottlingQuotaExceededError("The throttling quota has been exceeded.")
            self._bucket.record(self._bound, permits, t)
            return
        self._bucket.record(self._bound, permits, t)
        tokens = self._bucket.measure(self._bound, t)
        if tokens < 0:
            self._set_throttle(tokens, t)

    def _set_throttle(self, tokens: float, t: int) -> None:
        self._throttle_ms = round(-tokens / self._bound * 1000) if self._bound > 0 else 2**31 - 1
        self._recorded_ms = t

    @property
    def throttle_time_ms(self) -> int:
        """What is left of the throttle time since it was decided (the request may have waited since)."""
        return int(max(0, self._throttle_ms - (now_ms() - self._recorded_ms)))


@dataclass
class QuotaManagers:
    """QuotaFactory.QuotaManagers: one manager per quota type, fed by the quota configs of every entity."""

    window: RateConfig = field(default_factory=RateConfig)  # quota.window.num / quota.window.size.seconds
    controller_window: RateConfig = field(default_factory=RateConfig)  # controller.quota.window.*
    produce: ClientQuotaManager = field(init=False)
    fetch: ClientQuotaManager = field(init=False)
    request: ClientQuotaManager = field(init=False)
    controller_mutation: ControllerMutationQuotaManager = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _configs: dict[q.QuotaEntity, dict[str, float]] = field(init=False, default_factory=dict)
    # the IP entities' connection_creation_rate go to the network layer's ConnectionQuotas: called (on the
    # thread that saw the change) with {address or "<default>": rate} after every change
    ip_listeners: list[Callable[[dict[str, int]], None]] = field(init=False, default_factory=list)
    _ip_rates: dict[str, int] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.produce = ClientQuotaManager("Produce", q.PRODUCER_BYTE_RATE, self.window)
        self.fetch = ClientQuotaManager("Fetch", q.CONSUMER_BYTE_RATE, self.window)
        self.request = ClientQuotaManager(
            "Request", q.REQUEST_PERCENTAGE, self.window, max_throttle_ms=self.window.window_ms
        )
        self.controller_mutation = ControllerMutationQuotaManager(self.controller_window)

    @property
    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def entity_changed(self, entity: q.QuotaEntity, configs: Mapping[str, str]) -> None:
        """An entity's config was (re)read: Kafka's QuotaConfigHandler.processConfigChanges."""
        values = q.quota_values(configs, q.entity_quota_keys(entity))
        with self._lock:
            if values:
                self._configs[entity] = values
            else:
                self._configs.pop(entity, None)
            self._publish()

    def replace_all(self, configs: Mapping[q.QuotaEntity, Mapping[str, str]]) -> None:
        """Every entity's config at once (start-up, a new ZooKeeper session)."""
        with self._lock:
            self._configs = {e: v for e, c in configs.items() if (v := q.quota_values(c, q.entity_quota_keys(e)))}
            self._publish()

    def add_ip_listener(self, listener: Callable[[dict[str, int]], None]) -> None:
        with self._lock:
            self.ip_listeners.append(listener)
            if self._ip_rates is not None:
                listener(dict(self._ip_rates))

    def _publish(self) -> None:
        for manager in self.managers:
            manager.update({e: v[manager.key] for e, v in self._configs.items() if manager.key in v})
        rates = {
            q.desanitize(e.ip) if e.ip != q.DEFAULT else q.DEFAULT: int(v[q.CONNECTION_CREATION_RATE])
            for e, v in self._configs.items()
            if e.ip is not None and q.CONNECTION_CREATION_RATE in v
        }
        if rates != self._ip_rates:
            self._ip_rates = rates
            for listener in self.ip_listeners:
                listener(dict(rates))


def register_metrics(quotas: QuotaManagers, metrics: Metrics = METRICS) -> None:
    """Kafka's per-entity quota metrics (kafka.server:type=Produce|Fetch|Request,user=,client-id=): byte-rate
    (request-time for Request) and throttle-time, one series per live sensor, labelled as the sensor is tagged
    (an empty user or client-id is a level the quota does not name)."""

    def series(managers: tuple[ClientQuotaManager, ...], rate: bool) -> list[tuple[dict[str, str], float]]:
        out = []
        t = now_ms()
        for manager in managers:
            for user, client_id, value, throttle in manager.samples(t):
                labels = {"type": manager.quota_type, "user": user, "client_id": client_id}
                out.append((labels, value if rate else throttle))
        return out

    metrics.gauge(
        "kbus_client_quota_byte_rate", lambda: series((quotas.produce, quotas.fetch), True),
        "Bytes per second per quota sensor (Kafka's byte-rate, type=Produce|Fetch)",
    )  # fmt: skip
    metrics.gauge(
        "kbus_client_quota_request_time", lambda: series((quotas.request,), True),
        "Request handling time per quota sensor, percent of one second (Kafka's request-time, type=Request)",
    )  # fmt: skip
    metrics.gauge(
        "kbus_client_quota_throttle_time_ms", lambda: series(quotas.managers, False),
        "Average throttle time per quota sensor over the quota window (Kafka's throttle-time)",
    )  # fmt: skip
