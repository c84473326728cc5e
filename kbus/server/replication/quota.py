"""Replication throttles (Kafka's ReplicationQuotaManager): one manager for what this broker sends as a leader,
one for what it fetches as a follower.

A manager holds the bound (`leader.replication.throttled.rate` / `follower.replication.throttled.rate`, bytes/s,
from /config/brokers/<id>, else /config/brokers/<default>, else unlimited), the throttled partitions per topic
(the topic configs `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`, filtered
to the entries naming this broker) and a SimpleRate of the bytes of throttled partitions sent or fetched.

Kafka's rule for both sides: a replica is held back only while it is out of sync, its partition is throttled here
and the measured rate is over the bound. The check is one dict lookup per partition when nothing is throttled,
and the rate is only measured for throttled partitions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Final

from kbus.server.quotas.rate import RateConfig, WindowedRate
from kbus.server.util.metrics import METRICS, Metrics

ALL_REPLICAS: Final = "*"
ThrottledPartitions = frozenset[int] | str  # a set of partition ids, or ALL_REPLICAS
LEADER, FOLLOWER = "LeaderReplication", "FollowerReplication"  # Kafka's QuotaType names (the JMX type)
BYTE_RATE_GAUGE = "kbus_replication_byte_rate"
THROTTLED_COUNTER = "kbus_replication_throttled_partitions_total"


def parse_throttled_replicas(value: str, broker_id: int) -> ThrottledPartitions:
    """The partitions a `*.replication.throttled.replicas` value throttles on `broker_id` (ConfigHandler's
    parseThrottledPartitions): "*" for all, else the partitions of the `partition:broker` entries naming this
    broker. Malformed entries are skipped (Kafka's validator refuses them before they are stored)."""
    value = value.strip()
    if value == ALL_REPLICAS:
        return ALL_REPLICAS
    out = set()
    for entry in value.split(","):
        partition, sep, broker = entry.strip().partition(":")
        if sep and partition.strip().isdigit() and broker.strip().isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuotaManager:
    def __init__(
        self, quota_type: str, config: RateConfig = RateConfig(), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.quota_type = quota_type
        self._clock = clock
        self._rate = WindowedRate(config, simple=True)
        self._bound = math.inf
        self._throttled: dict[str, ThrottledPartitions] = {}
        # any partition throttled here at all: a plain attribute, the one check per request/partition on the fetch
        # paths when none is (the usual case)
        self.throttling = False

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # ---- configuration
    @property
    def upper_bound(self) -> float:
        return self._bound

    def update_quota(self, bytes_per_second: float | None) -> None:
        """The configured rate; None (or Kafka's Long.MaxValue default) is unlimited."""
        self._bound = math.inf if bytes_per_second is None or bytes_per_second >= 2**63 - 1 else bytes_per_second

    def set_throttled(self, throttled: Mapping[str, ThrottledPartitions]) -> None:
        """Replace every topic's throttled partitions (Kafka marks them topic by topic as configs change; kbus
        rebuilds the map from the topic configs on each metadata change)."""
        self._throttled = {t: p for t, p in throttled.items() if p}
        self.throttling = bool(self._throttled)

    # ---- the checks
    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self._throttled.get(topic)
        return partitions is not None and (partitions == ALL_REPLICAS or partition in partitions)

    def is_quota_exceeded(self) -> bool:
        return self._bound != math.inf and self._rate.measure(self._now_ms()) > self._bound

    def should_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: out of sync, throttled, over the bound."""
        if not self.throttling or in_sync or not self.is_throttled(topic, partition):
            return False
        if self.is_quota_exceeded():
            METRICS.inc(THROTTLED_COUNTER, type=self.quota_type)
            return True
        return False

    def record(self, nbytes: int) -> None:
        """Bytes of throttled partitions sent or fetched, counted even over the bound (Kafka's record)."""
        self._rate.record(nbytes, self._now_ms())

    def byte_rate(self) -> float:
        """Kafka's `byte-rate` metric of this quota type."""
        return self._rate.measure(self._now_ms())


def register_metrics(quotas: tuple[ReplicationQuotaManager, ...], metrics: Metrics = METRICS) -> None:
    """Kafka's `kafka.server:type=LeaderReplication|FollowerReplication,name=byte-rate` as one gauge labelled by
    type, and a counter of partitions held back by each (Kafka has no throttle-time metric for replication: a
    throttled replica is left out of a fetch or answered empty, never delayed)."""
    for q in quotas:
        metrics.inc(THROTTLED_COUNTER, 0, type=q.quota_type)
    metrics.gauge(
        BYTE_RATE_GAUGE,
        lambda: [({"type": q.quota_type}, q.byte_rate()) for q in quotas],
        "Bytes/s of throttled replication traffic (Kafka's LeaderReplication/FollowerReplication byte-rate)",
    )
