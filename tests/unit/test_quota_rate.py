"""Kafka's windowed rate (SampledStat/Rate/SimpleRate) and the replication quota managers built on it, on a fake
clock: the figures are Kafka's arithmetic worked by hand."""

from __future__ import annotations

import math

import pytest

from kbus.common.dynamic_broker_config import replication_throttled_rate
from kbus.server.quotas.rate import RateConfig, WindowedRate
from kbus.server.replication.quota import (
    ALL_REPLICAS,
    FOLLOWER,
    LEADER,
    ReplicationQuotaManager,
    parse_throttled_replicas,
    register_metrics,
)
from kbus.server.util.metrics import Metrics

WINDOWS = RateConfig(samples=11, window_ms=1000)


def test_simple_rate_counts_at_least_one_window_then_the_time_since_the_oldest_window() -> None:
    rate = WindowedRate(WINDOWS, simple=True)
    rate.record(1000, 0)
    assert rate.measure(0) == 1000.0  # within the first window: over one window, not over 0 ms
    assert rate.measure(500) == 1000.0
    assert rate.measure(2000) == 500.0
    rate.record(1000, 2000)  # a new window starts; the first one still counts
    assert rate.measure(2000) == 1000.0
    # 11 windows without an event expire the first sample: only the second one (since 2000) is left
    assert rate.measure(11000) == pytest.approx(1000 / 9)


def test_rate_counts_samples_minus_one_full_windows_at_least() -> None:
    rate = WindowedRate(WINDOWS)
    rate.record(1000, 0)
    assert rate.measure(0) == 100.0  # 1000 over 10 windows: a first burst is not a huge rate
    for t in range(1000, 20001, 1000):
        rate.record(1000, t)
    # the slots hold t=9000..20000, but 9000's last event is 11 windows old at 20000: purged. 11,000 bytes over
    # the 10 s since 10000
    assert rate.measure(20000) == 1100.0
    assert rate.measure(20999) == pytest.approx(11000 / 10.999)


def test_throttle_time_is_the_excess_over_the_bound_times_the_window() -> None:
    rate = WindowedRate(WINDOWS)
    rate.record(1000, 0)  # 100/s over a 10 s window
    assert rate.throttle_time_ms(50, 0) == 10000  # (100 - 50) / 50 * 10,000 ms
    assert rate.throttle_time_ms(100, 0) == 0


def test_a_rate_needs_a_window() -> None:
    with pytest.raises(ValueError):
        WindowedRate(RateConfig(samples=0))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_quota_exceeded_only_over_a_bound_and_unlimited_by_default() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(LEADER, WINDOWS, clock)
    quota.record(5_000_000)
    assert quota.upper_bound == math.inf and not quota.is_quota_exceeded()
    quota.update_quota(1000)
    quota.record(-5_000_000 + 2000)  # (net 2000 bytes recorded at t=0)
    assert quota.is_quota_exceeded()
    clock.now = 1.9
    assert quota.is_quota_exceeded()
    clock.now = 2.0  # 2000 bytes over 2 s: at the bound, not over it
    assert not quota.is_quota_exceeded()
    quota.update_quota(2**63 - 1)  # Kafka's default, Long.MaxValue
    clock.now = 0.0
    assert not quota.is_quota_exceeded()


def test_only_out_of_sync_replicas_of_throttled_partitions_are_held_back_over_the_quota() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(LEADER, WINDOWS, clock)
    quota.update_quota(100)
    quota.record(1000)
    assert not quota.throttling and not quota.should_throttle("t", 0, False)
    quota.set_throttled({"t": frozenset({0}), "all": ALL_REPLICAS, "none": frozenset()})
    assert quota.throttling
    assert quota.should_throttle("t", 0, in_sync=False)
    assert not quota.should_throttle("t", 0, in_sync=True)  # Kafka: in-sync replicas are never throttled
    assert not quota.should_throttle("t", 1, in_sync=False)
    assert quota.should_throttle("all", 7, in_sync=False)
    assert not quota.is_throttled("none", 0) and not quota.is_throttled("other", 0)
    clock.now = 10.0  # 1000 bytes over 10 s = 100/s: back within the bound
    assert not quota.should_throttle("t", 0, in_sync=False)


def test_a_throttled_catch_up_takes_about_size_over_rate() -> None:
    """A follower fetching 1 MB at a time whenever the quota allows, at 500 kB/s: 4 MB take (4 - 1) / 0.5 s,
    the first fetch being free (Kafka measures after the fact)."""
    clock = Clock()
    quota = ReplicationQuotaManager(LEADER, WINDOWS, clock)
    quota.update_quota(500_000)
    quota.set_throttled({"t": ALL_REPLICAS})
    fetched = 0
    while fetched < 4_000_000:
        if not quota.should_throttle("t", 0, in_sync=False):
            quota.record(1_000_000)
            fetched += 1_000_000
        else:
            clock.now += 0.1
    assert clock.now == pytest.approx(6.0, abs=0.15)


def test_throttled_replica_lists() -> None:
    assert parse_throttled_replicas("*", 1) == ALL_REPLICAS
    assert parse_throttled_replicas(" * ", 1) == ALL_REPLICAS
    assert parse_throttled_replicas("", 1) == frozenset()
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == frozenset({0, 2})
    assert parse_throttled_replicas("0:1, 1:1", 2) == frozenset()
    assert parse_throttled_replicas("x:1,3:1,4", 1) == frozenset({3})  # malformed entries skipped


def test_the_rate_in_effect_is_the_brokers_then_the_default_then_unlimited() -> None:
    key = "leader.replication.throttled.rate"
    assert replication_throttled_rate(key, {}, {}) is None
    assert replication_throttled_rate(key, {key: "100"}, {}) == 100
    assert replication_throttled_rate(key, {key: "100"}, {key: "200"}) == 200
    assert replication_throttled_rate(key, {key: "100"}, {key: "-1"}) == 100  # invalid: skipped


def test_the_byte_rates_are_rendered_per_quota_type() -> None:
    clock = Clock()
    leader = ReplicationQuotaManager(LEADER, WINDOWS, clock)
    follower = ReplicationQuotaManager(FOLLOWER, WINDOWS, clock)
    metrics = Metrics()
    register_metrics((leader, follower), metrics)
    leader.record(3000)
    clock.now = 2.0
    text = metrics.render()
    assert 'kbus_replication_byte_rate{type="LeaderReplication"} 1500' in text
    assert 'kbus_replication_byte_rate{type="FollowerReplication"} 0' in text
    assert 'kbus_replication_throttled_partitions_total{type="FollowerReplication"} 0' in text
