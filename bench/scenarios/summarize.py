"""Medians of kbench JSON lines per system and workload, with ratios to Apache Kafka from the same file.

    .venv/bin/python bench/scenarios/summarize.py bench/results/2026-11-24-vm/results.jsonl [--baseline kafka] [--since 2026-11-24]

One table per workload (partitions, message size, acks, latency-phase linger); one column per label. Only valid
"all" runs count. A ratio is the median of that system over the median of the baseline in the same workload.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import results_file  # noqa: E402

Workload = tuple[int, int, str, str]
METRICS = [
    ("produce msg/s", "produce", "msgs_per_s", "{:,.0f}"),
    ("produce MB/s", "produce", "mb_per_s", "{:.1f}"),
    ("consume msg/s", "consume", "msgs_per_s", "{:,.0f}"),
    ("consume MB/s", "consume", "mb_per_s", "{:.1f}"),
    ("broker CPU µs/msg produced", "produce", "broker_cpu_us_per_msg", "{:.2f}"),
    ("broker CPU µs/msg consumed", "consume", "broker_cpu_us_per_msg", "{:.2f}"),
    ("all brokers' CPU µs/msg produced", "produce", "cluster_cpu_us_per_msg", "{:.2f}"),
    ("e2e p50 ms @10k msg/s", "latency", "p50_ms", "{:.1f}"),
    ("e2e p99 ms @10k msg/s", "latency", "p99_ms", "{:.1f}"),
    ("e2e p99.9 ms @10k msg/s", "latency", "p999_ms", "{:.1f}"),
    ("broker CPU s in the latency phase", "latency", "broker_cpu_s", "{:.2f}"),
    ("all brokers' CPU s in the latency phase", "latency", "cluster_cpu_s", "{:.2f}"),
    ("broker RSS MB at the end", "latency", "broker_rss_mb", "{:.0f}"),
]


def load(path: str, since: str | None) -> dict[Workload, dict[str, list[dict]]]:
    runs: dict[Workload, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if not (r.get("ok") and r.get("mode") == "all"):
                continue
            if since and str(r.get("time", "")) < since:
                continue
            c = r["config"]
            lat_linger = c.get("lat_linger_ms")
            key = (c["partitions"], c["size"], str(c["acks"]),
                   "client default (5)" if lat_linger is None else f"{lat_linger:g}")
            runs[key][r["label"]].append(r)
    return runs


def med(rows: list[dict], phase: str, key: str) -> float | None:
    vals = [r[phase][key] for r in rows if r.get(phase) and r[phase].get(key) is not None]
    return statistics.median(vals) if vals else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=results_file("results.jsonl"))
    ap.add_argument("--baseline", default="kafka")
    ap.add_argument("--since", default=None, help="only runs whose 'time' field is >= this (ISO prefix)")
    args = ap.parse_args()
    runs = load(args.file, args.since)
    for (parts, size, acks, linger), by_label in sorted(runs.items()):
        labels = sorted(by_label, key=lambda lbl: (not lbl.startswith(args.baseline), lbl))
        print(f"\n**{parts} partition(s), {size} B messages, acks={acks}, latency-phase linger.ms {linger}**\n")
        print("| metric (median) | " + " | ".join(f"{lbl} (n={len(by_label[lbl])})" for lbl in labels) + " |")
        print("|---|" + "---|" * len(labels))
        for name, phase, key, fmt in METRICS:
            cells = []
            for lbl in labels:
                v = med(by_label[lbl], phase, key)
                s = "-" if v is None else fmt.format(v)
                # kbus-3x-rf3 is compared with kafka-3x-rf3: the same suffix on the baseline
                # (kbus-base-3x-rf3 too: the longest suffix the baseline has a label for)
                words = lbl.split("-")
                base_label = next((c for c in (args.baseline + "-" + "-".join(words[i:]) for i in
                                               range(1, len(words))) if c in by_label), args.baseline)
                base = by_label.get(base_label)
                if v is not None and base and lbl != base_label:
                    b = med(base, phase, key)
                    if b:
                        s += f" ({v / b:.2f}x)"
                cells.append(s)
            if any(c != "-" for c in cells):  # phases a workload skipped leave no row
                print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
