"""Broker metrics: counters, gauges and latency summaries with labels, cheap enough for per-request use.

Updated per request or per batch, never per message. Rendered in Prometheus' text format by render(); the HTTP
endpoint that serves it lives with the ops tooling. Gauges that are cheaper to compute on scrape than to keep
current (partitions, lag, ISR sizes) are registered as callbacks.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable

from kbus.server.util.histogram import BUCKETS, new_series, observe

Labels = tuple[tuple[str, str], ...]
GaugeFn = Callable[[], Iterable[tuple[dict[str, str], float]]]


class Metrics:
    def __init__(self) -> None:
        self.counters: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self.histograms: dict[str, dict[Labels, list[float]]] = defaultdict(dict)
        self.gauges: dict[str, GaugeFn] = {}
        self.help: dict[str, str] = {}

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        self.counters[name][tuple(sorted(labels.items()))] += value

    def inc_key(self, name: str, key: Labels, value: float = 1.0) -> None:
        """inc() with the labels already made a key (`labels_key`): for the per-request counters."""
        self.counters[name][key] += value

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        self.observe_key(name, tuple(sorted(labels.items())), seconds)

    def observe_key(self, name: str, key: Labels, seconds: float) -> None:
        """Histogram observation (kbus.server.util.histogram's layout)."""
        observe(self.histogram_series(name, key), seconds)

    def histogram_series(self, name: str, key: Labels) -> list[float]:
        """One histogram series' list, made if new: a per-request caller keeps it and observes into it
        (histogram.observe) instead of looking it up on every request."""
        h = self.histograms[name].get(key)
        if h is None:
            h = self.histograms[name][key] = new_series()
        return h

    def gauge(self, name: str, fn: GaugeFn, help_text: str = "") -> None:
        self.gauges[name] = fn
        if help_text:
            self.help[name] = help_text

    def remove_series(self, label: str, value: str) -> None:
        """Drop every counter and histogram series labelled `label=value`: a deleted topic's, as Kafka's
        BrokerTopicStats.removeMetrics does, so topics created and deleted (by clients, or by garbage names with
        auto.create.topics.enable) do not accumulate series for the life of the process."""
        pair = (label, value)
        for counters in self.counters.values():
            for key in [k for k in counters if pair in k]:
                del counters[key]
        for histograms in self.histograms.values():
            for key in [k for k in histograms if pair in k]:
                del histograms[key]

    def counter_value(self, name: str, **labels: str) -> float:
        return self.counters.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        out: list[str] = []
        for name, series in sorted(self.counters.items()):
            out.append(f"# TYPE {name} counter")
            out.extend(f"{name}{_fmt(labels)} {_num(v)}" for labels, v in sorted(series.items()))
        for name, hist_series in sorted(self.histograms.items()):
            out.append(f"# TYPE {name} histogram")
            for labels, h in sorted(hist_series.items()):
                cumulative = 0.0
                for bound, count in zip(BUCKETS, h, strict=False):
                    cumulative += count
                    le = "+Inf" if bound == math.inf else repr(bound)
                    out.append(f"{name}_bucket{_fmt((*labels, ('le', le)))} {_num(cumulative)}")
                out.append(f"{name}_sum{_fmt(labels)} {h[-2]!r}")
                out.append(f"{name}_count{_fmt(labels)} {_num(h[-1])}")
        for name, fn in sorted(self.gauges.items()):
            if name in self.help:
                out.append(f"# HELP {name} {self.help[name]}")
            out.append(f"# TYPE {name} gauge")
            for gauge_labels, v in fn():
                out.append(f"{name}{_fmt(tuple(sorted(gauge_labels.items())))} {_num(v)}")
        return "\n".join(out) + "\n"


def _fmt(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


@functools.lru_cache(maxsize=4096)  # keyed by topic names too: bounded, however many topics come and go
def labels_key(**labels: str) -> Labels:
    """The key of a label set, built once (per API, per topic) instead of sorted on every request."""
    return tuple(sorted(labels.items()))


# One registry per broker process.
METRICS = Metrics()
