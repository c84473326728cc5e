"""The per-request metrics KafkaProtocol records (kbus_requests_total, kbus_request_latency_seconds per API): kept
through series looked up once per API (processor._ApiMetrics, kbus.server.util.histogram) and still the series
Metrics renders, observed in the same buckets as Metrics.observe_key."""

from __future__ import annotations

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.server.network.processor import _api_metrics
from kbus.server.util import histogram
from kbus.server.util.metrics import METRICS, Metrics, labels_key


def line(text: str, prefix: str) -> float:
    [value] = [float(x.rsplit(" ", 1)[1]) for x in text.splitlines() if x.startswith(prefix + " ")]
    return value


def test_a_requests_metrics_reach_the_rendered_series() -> None:
    metrics = _api_metrics(18)  # ApiVersions
    assert _api_metrics(18) is metrics  # looked up once
    before = METRICS.render()
    count = 'kbus_requests_total{api="ApiVersions"}'
    hist = 'kbus_request_latency_seconds_{}{{api="ApiVersions"{}}}'
    seen = line(before, count) if count + " " in before else 0.0
    seen_hist = line(before, hist.format("count", "")) if hist.format("count", "") + " " in before else 0.0
    metrics.record(0.0001)
    metrics.record(0.003)
    METRICS.observe_key("kbus_request_latency_seconds", labels_key(api="ApiVersions"), 0.02)  # the same series
    after = METRICS.render()
    assert line(after, count) == seen + 2
    assert line(after, hist.format("count", "")) == seen_hist + 3
    assert line(after, hist.format("bucket", ',le="0.0005"')) >= 1
    assert line(after, hist.format("bucket", ',le="0.005"')) - line(after, hist.format("bucket", ',le="0.0025"')) >= 1
    assert line(after, hist.format("bucket", ',le="0.025"')) == line(after, hist.format("count", ""))


def test_observe_puts_each_value_in_its_bucket() -> None:
    m = Metrics()
    key = labels_key(api="X")
    series = m.histogram_series("h", key)
    assert m.histogram_series("h", key) is series
    for seconds in (0.0005, 0.0006, 20.0):  # on a bound: that bucket (le); past the last finite one: +Inf
        histogram.observe(series, seconds)
    assert series[0] == 1 and series[1] == 1 and series[len(histogram.BUCKETS) - 1] == 1
    assert series[-2] == 0.0005 + 0.0006 + 20.0 and series[-1] == 3
    assert 'h_bucket{api="X",le="+Inf"} 3' in m.render()
