"""Kafka's windowed rate, the measure every broker quota compares with its bound (org.apache.kafka.common.metrics:
SampledStat with WindowedSum, Rate and SimpleRate; QuotaUtils.throttleTime).

A rate keeps `samples` windows of `window_ms` each (plus one overlapping placeholder, as SampledStat does). A
recorded value goes into the current window, which advances once `window_ms` has passed since it started; a window
without events for `samples * window_ms` is reset. The rate is the windows' sum over the time they cover:
- `Rate` (client quotas) counts at least `samples - 1` full windows, so a first burst does not read as a huge rate;
- `SimpleRate` (replication quotas) counts the time since the oldest window started, at least one window.

Pure arithmetic over a caller-given clock (ms), so the quota managers and their unit tests share it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateConfig:
    """Kafka's MetricConfig for a quota sensor: quota.window.num / quota.window.size.seconds (client quotas,
    defaults 11 and 1 s) or replication.quota.window.num / replication.quota.window.size.seconds."""

    samples: int = 11
    window_ms: int = 1000


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class WindowedRate:
    """A rate per second over Kafka's sampled windows. `simple=True` is SimpleRate's window rule."""

    def __init__(self, config: RateConfig, *, simple: bool = False) -> None:
        if config.samples < 1 or config.window_ms < 1:
            raise ValueError(f"a rate needs at least one window of at least 1 ms, got {config}")
        self.config = config
        self.simple = simple
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.config.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Units per second: the windows' sum over window_size_ms(). One pass over the windows: client quotas
        measure on every request of a client that has one."""
        expire_age = self.config.samples * self.config.window_ms
        total = 0.0
        oldest = now_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)
            total += sample.value
            if sample.start_ms < oldest:
                oldest = sample.start_ms
        return total / (self._window_size(now_ms - oldest) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the retained windows stand for (Rate.windowSize / SimpleRate.windowSize)."""
        self._purge(now_ms)
        return self._window_size(now_ms - self._oldest(now_ms).start_ms)

    def _window_size(self, elapsed: int) -> int:
        window = self.config.window_ms
        if self.simple:
            return max(elapsed, window)
        full_windows = elapsed // window
        min_full_windows = self.config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * window
        return max(elapsed, 1)

    def throttle_time_ms(self, bound: float, now_ms: int) -> int:
        """How long a client over `bound` waits for the rate to come back to it (QuotaUtils.throttleTime):
        the excess relative to the bound, times the window the rate is measured over. 0 within the bound."""
        value = self.measure(now_ms)
        if value <= bound or bound <= 0:
            return 0
        return round((value - bound) / bound * self.window_size_ms(now_ms))

    # ---- SampledStat's bookkeeping
    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # one extra slot: the window that overlaps the start of the measured span is kept (SampledStat)
        self._current = (self._current + 1) % (self.config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        expire_age = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)
