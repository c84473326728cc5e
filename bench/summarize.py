"""Median of each metric per (label, partitions) from kbench JSON lines, with ratios against Tansu.

    .venv/bin/python bench/summarize.py bench/results.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def main(path: str) -> None:
    runs: dict[tuple[str, int], list[dict]] = defaultdict(list)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("ok") and r.get("mode") == "all":
                runs[(r["label"], r["config"]["partitions"])].append(r)

    def med(rows: list[dict], phase: str, key: str) -> float:
        vals = [r[phase][key] for r in rows if r.get(phase) and r[phase].get(key) is not None]
        return statistics.median(vals) if vals else float("nan")

    metrics = [
        ("produce msg/s", "produce", "msgs_per_s", "{:,.0f}"),
        ("consume msg/s", "consume", "msgs_per_s", "{:,.0f}"),
        ("broker CPU µs/msg produced", "produce", "broker_cpu_us_per_msg", "{:.2f}"),
        ("broker CPU µs/msg consumed", "consume", "broker_cpu_us_per_msg", "{:.2f}"),
        ("e2e p50 ms @10k msg/s", "latency", "p50_ms", "{:.1f}"),
        ("e2e p99 ms @10k msg/s", "latency", "p99_ms", "{:.1f}"),
        ("e2e p99.9 ms @10k msg/s", "latency", "p999_ms", "{:.1f}"),
        ("broker CPU s in the 10 s latency phase", "latency", "broker_cpu_s", "{:.2f}"),
        ("broker RSS MB at the end", "latency", "broker_rss_mb", "{:.0f}"),
    ]
    keys = sorted(runs, key=lambda k: (k[1], k[0] != "tansu", k[0]))
    print("| metric (median of runs) | " + " | ".join(f"{lbl}, {p} partition(s) (n={len(runs[(lbl, p)])})"
                                                    for lbl, p in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, phase, key, fmt in metrics:
        cells = []
        for lbl, p in keys:
            v = med(runs[(lbl, p)], phase, key)
            base = runs.get(("tansu", p))
            ratio = ""
            if lbl != "tansu" and base:
                b = med(base, phase, key)
                if b and b == b:
                    ratio = f" ({v / b:.2f}x)"
            cells.append(fmt.format(v) + ratio)
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results.jsonl")
