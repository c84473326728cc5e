"""Garbage-collection probe for a kbus broker process (a measuring tool for bench/, not part of the broker).

    python bench/lib/gcprobe.py server.properties [--override k=v ...]

runs the broker exactly as `python -m kbus.server` does, and appends to $GCPROBE_DIR/gc-<pid>.jsonl:
- one line per collection of generation 1 or 2: its CLOCK_MONOTONIC start (the clock bench/lib/cpuwin.py's windows
  start from, so a window's collections can be picked out), generation, wall and thread-CPU ms, objects collected,
  the thread it ran on, gc.get_count() and gc.get_freeze_count() after it, with GCPROBE_COUNT=1 the objects left in
  generation 2 (O(objects): off by default), and the young collections (generation 0) since the previous line,
  counted and timed in total (young_n, young_ms);
- every 2 s, when the broker's threads changed, {"t", "threads": {native id: Python name}}: which thread cpuwin's
  "python-<tid>" is (CPython 3.11 gives the OS no thread names).
Unlike latprobe.py it patches nothing on the request path: one gc.callbacks entry and one sleeping thread.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.getcwd())  # the kbus of the checkout this runs from (the bench scripts cd into it)

from kbus.server.main import run

_OUT: Any = None
_COUNT = os.environ.get("GCPROBE_COUNT") == "1"
_start = [0.0, 0]  # monotonic start, thread CPU ns at start
_young = [0, 0.0]  # collections of generation 0 since the last line, their ms


def _cb(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _start[0] = time.monotonic()
        _start[1] = time.thread_time_ns()
        return
    wall_ms = (time.monotonic() - _start[0]) * 1000
    gen = info["generation"]
    if gen == 0:
        _young[0] += 1
        _young[1] += wall_ms
        return
    line = {"t": round(_start[0], 4), "gen": gen, "ms": round(wall_ms, 3),
            "cpu_ms": round((time.thread_time_ns() - _start[1]) / 1e6, 3),
            "collected": info["collected"], "thread": threading.current_thread().name,
            "count": gc.get_count(), "frozen": gc.get_freeze_count(),
            "young_n": _young[0], "young_ms": round(_young[1], 3)}
    if gen == 2 and _COUNT:  # O(objects): only when asked (GCPROBE_COUNT=1)
        line["gen2_objects"] = len(gc.get_objects(2))
    _young[0], _young[1] = 0, 0.0
    _OUT.write(json.dumps(line) + "\n")
    _OUT.flush()


def _names() -> None:
    last: dict[str, str] = {}
    while True:
        now = {str(t.native_id): t.name for t in threading.enumerate()}
        if now != last:
            _OUT.write(json.dumps({"t": round(time.monotonic(), 4), "threads": now}) + "\n")
            _OUT.flush()
            last = now
        time.sleep(2)


def main() -> int:
    global _OUT
    args = sys.argv[1:]
    config = args[0] if args and not args[0].startswith("--") else None
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "--override"]
    _OUT = open(os.path.join(os.environ.get("GCPROBE_DIR", "/tmp"), f"gc-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
    gc.callbacks.append(_cb)
    threading.Thread(target=_names, name="gcprobe-names", daemon=True).start()
    return run(config, overrides)


if __name__ == "__main__":
    sys.exit(main())
