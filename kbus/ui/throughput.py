"""Produce and consume throughput per broker and messages/s per topic, from the brokers' own /metrics endpoints
(`metrics.port` in server.properties, found through DescribeConfigs): scraped by the UI's sampler thread and kept
for an hour, like the lag history."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin

_SERIES = re.compile(r'^(kbus_(?:bytes_in|bytes_out|messages_in)_total)\{topic="((?:[^"\\]|\\.)*)"\}\s+(\S+)$')
SCRAPE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Scrape:
    at: float
    bytes_in: float
    bytes_out: float  # to consumers, not followers
    messages_in: dict[str, float]  # per topic, the counter's value


def parse_metrics(text: str, at: float) -> Scrape:
    bytes_in = bytes_out = 0.0
    messages: dict[str, float] = {}
    for line in text.splitlines():
        m = _SERIES.match(line)
        if m is None:
            continue
        name, topic, value = m.group(1), m.group(2), float(m.group(3))
        if name == "kbus_bytes_in_total":
            bytes_in += value
        elif name == "kbus_bytes_out_total":
            bytes_out += value
        else:
            messages[topic] = messages.get(topic, 0.0) + value
    return Scrape(at, bytes_in, bytes_out, messages)


def _rate(new: float, old: float, seconds: float) -> float:
    # a counter that went down is a restarted broker: count from zero
    return max(0.0, (new - old if new >= old else new) / seconds) if seconds > 0 else 0.0


class Throughput:
    def __init__(self, admin: KafkaAdmin, keep: int = 720) -> None:
        self.admin = admin
        self.keep = keep
        self._endpoints: dict[int, str | None] = {}  # broker id -> metrics URL (None: it serves none)
        self._scrapes: dict[int, deque[Scrape]] = {}
        self._lock = threading.Lock()  # the sampler thread writes, page requests read

    def _endpoint(self, broker_id: int, host: str) -> str | None:
        if broker_id not in self._endpoints:
            try:
                entries = {e.name: e.value for e in self.admin.describe_configs("broker", str(broker_id))}
            except AdminError:
                return None  # asked again next time
            port = int(entries.get("metrics.port") or -1)
            mhost = entries.get("metrics.host") or host
            if mhost in ("0.0.0.0", "::", ""):
                mhost = host
            self._endpoints[broker_id] = f"http://{mhost}:{port}/metrics" if port > 0 else None
        return self._endpoints[broker_id]

    def sample_once(self) -> None:
        for b in self.admin.describe_cluster().brokers:
            url = self._endpoint(b.id, b.host)
            if url is None:
                continue
            try:
                with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as resp:
                    text = resp.read().decode("utf-8", errors="replace")
            except OSError:
                continue
            scrape = parse_metrics(text, time.time())
            with self._lock:
                self._scrapes.setdefault(b.id, deque(maxlen=self.keep)).append(scrape)

    def _copy(self) -> dict[int, list[Scrape]]:
        with self._lock:
            return {b: list(s) for b, s in self._scrapes.items()}

    def broker_rates(self) -> dict[int, tuple[list[tuple[float, float]], list[tuple[float, float]]]]:
        """broker id -> (produce bytes/s, consume bytes/s) as (time, rate) points."""
        out: dict[int, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {}
        for broker, s in sorted(self._copy().items()):
            produce = [(b.at, _rate(b.bytes_in, a.bytes_in, b.at - a.at)) for a, b in pairwise(s)]
            consume = [(b.at, _rate(b.bytes_out, a.bytes_out, b.at - a.at)) for a, b in pairwise(s)]
            out[broker] = (produce, consume)
        return out

    def topic_rates(self) -> dict[str, float]:
        """Messages/s per topic over the last sampling interval, summed over the brokers that lead it."""
        out: dict[str, float] = {}
        for scrapes in self._copy().values():
            if len(scrapes) < 2:
                continue
            a, b = scrapes[-2], scrapes[-1]
            for topic, value in b.messages_in.items():
                out[topic] = out.get(topic, 0.0) + _rate(value, a.messages_in.get(topic, 0.0), b.at - a.at)
        return out
