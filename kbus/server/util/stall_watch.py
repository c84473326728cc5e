"""Logs where a broker is stuck when one of its single-owner phases runs far too long.

Two pieces of the broker are one-at-a-time by design: the ZooKeeper metadata thread's pass over a batch of events
(zk_view.py: every watch reaction and, on the controller, every election) and the replica manager's metadata apply
pass (replica_manager.py: preparing logs on a worker thread, then hosting replicas). If either waits forever, the
broker keeps answering requests but stops following the cluster: new partitions get no leader, failover stops.
Nothing else would say so, and only the stacks of the threads tell where it waits; so a phase still running after
`limit_s` gets one WARNING with every thread's stack (Python's, via sys._current_frames), and an INFO when it ends.
A daemon thread polls every `poll_s`; watching a phase costs two dict operations, nothing per request.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger("kbus.server")

LIMIT_S = 60.0  # far beyond any healthy pass (a 10,000-partition topic's apply pass takes seconds)
POLL_S = 5.0


@dataclass
class _Phase:
    name: str
    started: float
    reported: bool = False


class StallWatch:
    def __init__(self, limit_s: float = LIMIT_S, poll_s: float = POLL_S) -> None:
        self.limit_s = limit_s
        self.poll_s = poll_s
        self._phases: dict[int, _Phase] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Watch the body; usable around an `await` too (it only notes the start and the end)."""
        key = next(self._ids)
        entry = _Phase(name, time.monotonic())
        with self._lock:
            self._phases[key] = entry
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kbus-stall-watch", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                del self._phases[key]
            if entry.reported:
                log.info("%s finished after %.1f s", name, time.monotonic() - entry.started)

    def check(self) -> None:
        """Report each phase over its limit once (the poll thread calls this; tests may too)."""
        now = time.monotonic()
        with self._lock:
            late = [p for p in self._phases.values() if not p.reported and now - p.started >= self.limit_s]
            for p in late:
                p.reported = True
        for p in late:
            log.warning("%s has been running for %.0f s; the broker's threads are at:\n%s",
                        p.name, now - p.started, _thread_stacks())

    def _run(self) -> None:
        while True:
            time.sleep(self.poll_s)
            try:
                self.check()
            except Exception:  # a diagnostic must never take the broker down
                log.exception("stall watch failed")


def _thread_stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        parts.append(f'Thread "{names.get(ident, ident)}":\n{stack}')
    return "\n".join(parts)


STALL_WATCH = StallWatch()  # one per process: its thread starts with the first watched phase
