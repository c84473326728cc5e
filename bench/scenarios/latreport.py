"""Read bench/lib/latprobe.py's files: event-loop lag and GC pauses per broker, and where a produced batch spends its
time on the way to a consumer (leader append -> follower append -> follower's next fetch at the leader -> high
watermark -> consumer read), as percentiles over every batch of the topic.

    python bench/scenarios/latreport.py DIR [--topic-prefix rf3-]
"""

from __future__ import annotations

import argparse
import bisect
import glob
import json
import os

TICK_NS = 1_000_000


def pct(vals: list[float], q: float) -> float:
    if not vals:
        return float("nan")
    s = sorted(vals)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def row(name: str, vals_ns: list[int]) -> str:
    ms = [v / 1e6 for v in vals_ns]
    return (f"  {name:<34} n={len(ms):>6}  p50 {pct(ms, 50):7.3f}  p90 {pct(ms, 90):7.3f}  p99 {pct(ms, 99):7.3f}"
            f"  p99.9 {pct(ms, 99.9):7.3f}  max {max(ms) if ms else float('nan'):7.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--topic-prefix", default="")
    ap.add_argument("--skip-s", type=float, default=1.0, help="leading seconds of the topic's appends to ignore")
    args = ap.parse_args()
    probes = []
    for path in sorted(glob.glob(os.path.join(args.dir, "probe-*.json"))):
        with open(path) as f:
            probes.append(json.load(f))
    groups: dict[str, list[dict]] = {}
    for pr in probes:  # by system: the log.dirs name the bench scripts give each broker (kbus1, kbus-base2, ...)
        logdir = next((a.split("=", 1)[1] for a in pr["argv"] if a.startswith("log.dirs=")), "?")
        groups.setdefault(os.path.basename(logdir).rstrip("0123456789"), []).append(pr)
    for label, members in sorted(groups.items()):
        print(f"===== {label}")
        report(members, args)


def report(probes: list[dict], args: argparse.Namespace) -> None:
    # the leader of the measured topic: the broker with the most appends to it
    def topic_appends(pr: dict) -> list[list]:
        return [e for e in pr["events"] if e[1] == "append" and e[2].startswith(args.topic_prefix)
                and not e[2].startswith("__")]

    leader = max(probes, key=lambda pr: len(topic_appends(pr)))
    appends = topic_appends(leader)
    if not appends:
        print("no leader appends found")
        return
    topic = max({e[2] for e in appends}, key=lambda t: sum(e[2] == t for e in appends))
    appends = [e for e in appends if e[2] == topic]
    t_first, t_last = appends[0][0], appends[-1][0]
    appends = [e for e in appends if e[0] - t_first >= args.skip_s * 1e9]
    lo, hi = t_first + args.skip_s * 1e9, t_last  # the measured window (kbench's warm-up second left out)
    print(f"window: {(hi - lo) / 1e9:.1f} s of appends to {topic}")
    for pr in probes:
        ticks = [x for x in pr["lags"] if lo <= x[0] <= hi]
        lags = [x[1] for x in ticks]
        gcs = [g for g in pr["gcs"] if lo <= g[0] <= hi]
        role = "leader" if pr is leader else "follower"
        print(f"broker pid {pr['pid']} ({role}): {len(lags)} loop ticks in the window; whole run: cpu "
              f"{pr.get('cpu_s', 0):.2f} s, involuntary context switches {pr.get('nivcsw')}")
        print(row("loop lag (1 ms timer lateness)", lags))
        print("    ticks late > 2/5/10/50 ms: " + " / ".join(
            str(sum(1 for v in lags if v > thr * 1e6)) for thr in (2, 5, 10, 50)))
        late = [x for x in ticks if x[1] > 5e6 and len(x) > 3]
        if late:
            gap = [x[1] + TICK_NS for x in late]
            busy = sum(1 for x, g in zip(late, gap, strict=True) if x[2] >= g / 2)
            gil = sum(1 for x, g in zip(late, gap, strict=True) if x[2] < g / 2 and x[3] >= g / 2)
            print(f"    late > 5 ms: loop thread busy {busy}, other threads busy (GIL) {gil}, "
                  f"neither (not scheduled) {len(late) - busy - gil}; loop-thread CPU in them "
                  f"{sum(x[2] for x in late) / 1e6:.1f} ms of {sum(gap) / 1e6:.1f} ms")
        for g in (0, 1, 2):
            d = [x[2] for x in gcs if x[1] == g]
            if d:
                print(row(f"gc gen{g} pause", d))
    print(f"leader pid {leader['pid']}: {len(appends)} appended batches "
          f"(mean {sum(e[5] - e[4] + 1 for e in appends) / max(len(appends), 1):.1f} records)")

    def first_after(evs: list[tuple[int, int]], t: int, offset: int) -> int | None:
        """evs: (t, offset reached) sorted by t; the first at or after t whose offset > `offset`."""
        i = bisect.bisect_left(evs, (t, -1))
        for tt, off in evs[i:i + 2000]:
            if off > offset:
                return tt
        return None

    hw = [(e[0], e[4]) for e in leader["events"] if e[1] == "hw" and e[2] == topic]
    cons = [(e[0], e[5]) for e in leader["events"] if e[1] == "read" and e[2] == topic and e[4] < 0 and e[6] > 0]
    replicas = sorted({e[4] for e in leader["events"] if e[1] == "read" and e[2] == topic and e[4] >= 0})
    served = {r: [(e[0], e[5]) for e in leader["events"] if e[1] == "read" and e[2] == topic and e[4] == r
                  and e[6] > 0] for r in replicas}
    fetched = {r: [(e[0], e[5]) for e in leader["events"] if e[1] == "read" and e[2] == topic and e[4] == r]
               for r in replicas}
    followers = [pr for pr in probes if pr is not leader]
    fapp = {pr["pid"]: [(e[0], e[4]) for e in pr["events"] if e[1] == "f_append" and e[2] == topic]
            for pr in followers}
    fsend = {pr["pid"]: [e[0] for e in pr["events"] if e[1] == "c_send" and "Fetch" in e[2]] for pr in followers}
    frecv = {pr["pid"]: [e[0] for e in pr["events"] if e[1] == "c_recv" and "Fetch" in e[2]] for pr in followers}
    wakes = [e[0] for e in leader["events"] if e[1] == "wake_f" and e[2] == topic]
    resumes = [e[0] for e in leader["events"] if e[1] == "resume"]
    stages: dict[str, list[int]] = {}
    for e in appends:
        t0, first, last = e[0], e[4], e[5]
        i = bisect.bisect_left(wakes, t0)
        if i < len(wakes):
            stages.setdefault("leader wakes parked follower Fetches", []).append(wakes[i] - t0)
            j = bisect.bisect_left(resumes, wakes[i])
            if j < len(resumes):
                stages.setdefault("a woken Fetch resumes", []).append(resumes[j] - t0)
        for r, evs in served.items():  # the leader read the batch for the follower's fetch response
            i = bisect.bisect_left(evs, (t0, -1))
            for tt, off in evs[i:i + 2000]:
                if off <= first:
                    stages.setdefault(f"replica {r} served it", []).append(tt - t0)
                    break
        for pid, evs in fapp.items():
            if evs:
                t = first_after(evs, t0 - 10**9, last)
                if t is not None:
                    stages.setdefault(f"follower {pid} append", []).append(t - t0)
                    sends, recvs = fsend[pid], frecv[pid]
                    i = bisect.bisect_left(recvs, t)  # the response it came in
                    if i > 0:
                        stages.setdefault(f"follower {pid} got the response", []).append(recvs[i - 1] - t0)
                    i = bisect.bisect_left(sends, t)  # its next fetch leaves
                    if i < len(sends):
                        stages.setdefault(f"follower {pid} sends next fetch", []).append(sends[i] - t0)
        for r, evs in fetched.items():
            t = first_after(evs, t0, last)
            if t is not None:
                stages.setdefault(f"replica {r} next fetch at leader", []).append(t - t0)
        t_hw = first_after(hw, t0, last) if hw else t0
        if t_hw is not None:
            stages.setdefault("high watermark past it", []).append(t_hw - t0)
            # the consumer read that returns it: from an offset at or below the batch, after the HW moved
            i = bisect.bisect_left(cons, (t_hw, -1))
            for tt, off in cons[i:i + 2000]:
                if off <= first:
                    stages.setdefault("consumer read", []).append(tt - t0)
                    break
    sends = [e[0] - e[6] for e in appends if len(e) > 6 and e[6] > 0]
    if sends:
        print("before the leader's append:")
        print(row("client send of 1st record -> append", sends))
    print("time after the leader's append:")
    for name, vals in stages.items():
        print(row(name, vals))


if __name__ == "__main__":
    main()
