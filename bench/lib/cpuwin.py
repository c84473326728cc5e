"""What a broker's CPU in a measurement window was spent on: per-thread CPU (the scheduler's nanosecond runtime from
/proc/PID/task/TID/schedstat, and the tick-counted user / system split from .../stat), the process's page faults and
context switches, and the machine's own counters for the same window (other processes' CPU, steal, page reclaim and
writeback from /proc/vmstat). Used by scale.py's `--cpu-detail`: the detail goes into the JSON line beside the figure
it explains, for every system alike.

    a = snapshot(pid); ...window...; detail = window(a, snapshot(pid))
"""

from __future__ import annotations

import os
import time
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
# /proc/vmstat counters that name work the kernel may have done in the broker's context (direct reclaim, faults,
# writeback throttling) or beside it (kswapd, background writeback)
VMSTAT = ("pgfault", "pgmajfault", "pgalloc_normal", "pgfree", "allocstall_normal", "allocstall_movable",
          "pgscan_direct", "pgsteal_direct", "pgscan_kswapd", "pgsteal_kswapd", "pgpgout", "nr_dirtied",
          "nr_written", "compact_stall", "thp_fault_alloc", "workingset_refault_file", "pgdemote_direct",
          "pgrefill", "nr_dirty", "nr_writeback", "nr_free_pages")
_GAUGES = {"nr_dirty", "nr_writeback", "nr_free_pages"}  # levels, not counters: the window's end value is kept


def _stat_fields(path: str) -> list[str]:
    with open(path) as f:
        text = f.read()
    head, tail = text.rsplit(")", 1)
    return [head.split("(", 1)[1], *tail.split()]  # [comm, state, ppid, ...]: fields 2.. of proc(5)


def _threads(pid: int) -> dict[int, tuple[str, int, int, int]]:
    """tid -> (comm, utime ticks, stime ticks, runtime ns)."""
    out: dict[int, tuple[str, int, int, int]] = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            f = _stat_fields(f"{base}/{tid}/stat")
            with open(f"{base}/{tid}/schedstat") as s:
                runtime = int(s.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended in between
        out[int(tid)] = (f[0], int(f[12]), int(f[13]), runtime)
    return out


def _vmstat() -> dict[str, int]:
    with open("/proc/vmstat") as f:
        kv = dict(line.split() for line in f)
    return {k: int(kv[k]) for k in VMSTAT if k in kv}


def _machine() -> list[int]:
    """/proc/stat's cpu line: user nice system idle iowait irq softirq steal (ticks, all CPUs)."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                out[k] = int(v)
    return out


REPORTED = "/sys/module/page_reporting/parameters/reported_kib"  # free page reporting to a VM's host, if any


def _reported_kib() -> int:
    try:
        with open(REPORTED) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def snapshot(pid: int) -> dict[str, Any]:
    f = _stat_fields(f"/proc/{pid}/stat")
    return {"pid": pid, "reported_kib": _reported_kib(), "wall": time.monotonic(),
            "clock": time.clock_gettime((~pid << 3) | 2), "threads": _threads(pid),
            "minflt": int(f[8]), "majflt": int(f[10]), "utime": int(f[12]), "stime": int(f[13]),
            "status": _status(pid), "vmstat": _vmstat(), "machine": _machine()}


def window(a: dict[str, Any], b: dict[str, Any], top: int = 8) -> dict[str, Any]:
    """The window between two snapshots: ms of CPU of the `top` busiest threads ("main", or the thread's name and
    id: CPython 3.11 leaves every thread named "python", and a JVM names its own; a thread started inside the
    window counts from 0, one that ended is in threads_ended_ms only as what it had before), user and system ms
    (10 ms ticks), faults, context switches, the machine's CPU split (ms over all CPUs), the vmstat deltas and the
    KiB of free memory reported to a VM's host meanwhile (free page reporting)."""
    ms = 1000 / TICK
    per_name: dict[str, float] = {}
    for tid, (comm, _u, _s, run1) in b["threads"].items():
        run0 = a["threads"].get(tid, (comm, 0, 0, 0))[3]
        if run1 - run0:  # the main thread by its role; others by name and id (CPython 3.11 names them all "python")
            name = "main" if tid == b["pid"] else f"{comm}-{tid}"
            per_name[name] = per_name.get(name, 0.0) + (run1 - run0) / 1e6
    gone = sum(t[3] for tid, t in a["threads"].items() if tid not in b["threads"])
    machine = [y - x for x, y in zip(a["machine"], b["machine"], strict=True)]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    vm = {k: (b["vmstat"][k] if k in _GAUGES else b["vmstat"][k] - a["vmstat"].get(k, 0)) for k in b["vmstat"]}
    return {
        "start_monotonic": a["wall"], "wall_ms": round((b["wall"] - a["wall"]) * 1000, 2),
        "cpu_ms": round((b["clock"] - a["clock"]) * 1000, 3),
        "user_ms": round((b["utime"] - a["utime"]) * ms, 1), "sys_ms": round((b["stime"] - a["stime"]) * ms, 1),
        "threads_ms": {k: round(v, 3) for k, v in sorted(per_name.items(), key=lambda kv: -kv[1])[:top]},
        "threads_ended": len([t for t in a["threads"] if t not in b["threads"]]), "threads_ended_ms": gone / 1e6,
        "threads_started": len([t for t in b["threads"] if t not in a["threads"]]),
        "minflt": b["minflt"] - a["minflt"], "majflt": b["majflt"] - a["majflt"],
        "vol_cs": b["status"].get("voluntary_ctxt_switches", 0) - a["status"].get("voluntary_ctxt_switches", 0),
        "invol_cs": b["status"].get("nonvoluntary_ctxt_switches", 0)
        - a["status"].get("nonvoluntary_ctxt_switches", 0),
        "machine_ms": {n: d * ms for n, d in zip(names, machine, strict=True) if d},
        "vmstat": {k: v for k, v in vm.items() if v},
        "reported_kib": b["reported_kib"] - a["reported_kib"],
    }
