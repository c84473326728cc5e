"""bench/lib/benchlib.cpu_seconds: a broker's CPU time to the nanosecond, its exited threads included (the bench's
per-message figures at small sizes were a handful of 10 ms ticks)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

BURN_IN_A_THREAD_THEN_SLEEP = """
import sys, threading, time
def burn():
    end = time.thread_time() + 0.2
    while time.thread_time() < end:
        pass
t = threading.Thread(target=burn)
t.start()
t.join()
print("burnt", flush=True)
time.sleep(30)
"""


def _benchlib() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchlib", ROOT / "bench/lib/benchlib.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_seconds_counts_an_exited_thread_below_the_tick() -> None:
    benchlib = _benchlib()
    child = subprocess.Popen([sys.executable, "-c", BURN_IN_A_THREAD_THEN_SLEEP], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        first = benchlib.cpu_seconds(child.pid)
        ticks = benchlib.proc_stat_cpu_seconds(child.pid)
        time.sleep(0.05)
        assert benchlib.cpu_seconds(child.pid) - first < 0.005  # asleep: its clock stands still
    finally:
        child.kill()
        child.wait()
    assert first >= 0.2  # the thread's 0.2 s, though the thread is gone
    assert abs(first - ticks) <= 0.02  # the same time as /proc's ticks say, within their resolution
    assert round(first * 100) != first * 100  # not a whole number of 10 ms ticks: the finer clock
