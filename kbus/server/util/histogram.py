"""A latency histogram series: its buckets, its layout ([count per bucket..., sum, count]) and one observation.
Compiled (setup.py COMPILED): kbus.server.util.metrics keeps the series and renders them (interpreted, for its
**labels signatures); a caller on the per-request path keeps a series' list (`Metrics.histogram_series`) and
observes into it here, with no interpreted call per request."""

from __future__ import annotations

import math

# Latency buckets in seconds (Prometheus histogram convention). Not Final: mypyc left a Final tuple holding
# math.inf unset ("value for final name was not set").
BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf)  # fmt: skip


def new_series() -> list[float]:
    return [0.0] * (len(BUCKETS) + 2)


def observe(series: list[float], seconds: float) -> None:
    """One observation: its bucket's count, the sum and the count."""
    for i, bound in enumerate(BUCKETS):
        if seconds <= bound:
            series[i] += 1.0
            break
    series[-2] += seconds
    series[-1] += 1.0
