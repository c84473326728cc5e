"""Consumer lag over time, kept in the UI process while it runs: a background thread samples every group's lag
every `interval_s` and keeps the last `keep` samples per group (a few KiB per group)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin
from kbus.ui.cluster import group_lag

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LagSample:
    at: float  # time.time()
    total: int
    partitions: dict[tuple[str, int], int]


class LagHistory:
    def __init__(
        self, admin: KafkaAdmin, interval_s: float = 5.0, keep: int = 720, also: list[Callable[[], None]] | None = None
    ) -> None:
        self.admin = admin
        self.also = also or []  # other samplers run on the same beat (the brokers' throughput)
        self.interval_s = interval_s
        self.keep = keep
        self._samples: dict[str, deque[LagSample]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kbus-ui-lag", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.admin.timeout_s + 2)

    def samples(self, group_id: str) -> list[LagSample]:
        with self._lock:
            return list(self._samples.get(group_id, ()))

    def sample_once(self) -> None:
        for g in self.admin.list_groups():
            try:
                rows = group_lag(self.admin, g.group_id)
            except AdminError as exc:
                log.debug("lag of %s: %s", g.group_id, exc)
                continue
            parts = {(r.topic, r.partition): r.lag for r in rows if r.lag is not None}
            self.record(g.group_id, LagSample(time.time(), sum(parts.values()), parts))

    def record(self, group_id: str, sample: LagSample) -> None:
        with self._lock:
            self._samples.setdefault(group_id, deque(maxlen=self.keep)).append(sample)

    def _run(self) -> None:
        while not self._stop.is_set():
            for sample in (self.sample_once, *self.also):
                try:
                    sample()
                except AdminError as exc:
                    log.warning("sampling: %s", exc)
            self._stop.wait(self.interval_s)
