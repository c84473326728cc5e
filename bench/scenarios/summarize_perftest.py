"""Medians of bench/scenarios/perftest.py JSON lines per workload and system, with ratios to Apache Kafka.

    .venv/bin/python bench/scenarios/summarize_perftest.py bench/results/2026-11-24-vm/perftest.jsonl [--baseline kafka] [--since ISO-PREFIX]
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

METRICS = [
    ("produce msg/s", "produce", "msgs_per_s", "{:,.0f}"),
    ("produce MB/s", "produce", "mb_per_s", "{:.1f}"),
    ("produce p99 ms (send to ack, at full speed)", "produce", "p99_ms", "{:.0f}"),
    ("consume msg/s (incl. group join)", "consume", "msgs_per_s", "{:,.0f}"),
    ("consume msg/s (fetch time only)", "consume", "fetch_msgs_per_s", "{:,.0f}"),
    ("consume MB/s", "consume", "mb_per_s", "{:.1f}"),
    ("first group assignment ms (rebalance.time.ms)", "consume", "rebalance_ms", "{:.0f}"),
    ("broker CPU µs/msg produced", "produce", "broker_cpu_us_per_msg", "{:.2f}"),
    ("broker CPU µs/msg consumed", "consume", "broker_cpu_us_per_msg", "{:.2f}"),
    ("producer requests (its request-total)", "produce", "requests", "{:,.0f}"),
    ("broker CPU µs per producer request", "produce", "broker_cpu_us_per_request", "{:,.0f}"),
    ("Fetch requests served while consuming (kbus only)", "consume", "fetch_requests", "{:,.0f}"),
    ("broker CPU µs per Fetch request (kbus only)", "consume", "broker_cpu_us_per_fetch", "{:,.0f}"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=results_file("perftest.jsonl"))
    ap.add_argument("--baseline", default="kafka")
    ap.add_argument("--since", default=None)
    args = ap.parse_args()
    runs: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    with open(args.file) as f:
        for line in f:
            r = json.loads(line)
            if r.get("ok") and (not args.since or r["time"] >= args.since):
                c = r["config"]
                runs[(c["partitions"], c["size"], c["acks"], c["num_messages"], c.get("live_rate", 0))][
                    r["label"]].append(r)
    for (parts, size, acks, n, live), by_label in sorted(runs.items()):
        labels = sorted(by_label, key=lambda lbl: (lbl != args.baseline, lbl))
        how = f", consumed while produced at {live:,} msg/s" if live else ""
        print(f"\n**Kafka's perf tools: {n:,} x {size} B, {parts} partition(s), acks={acks}{how}**\n")
        print("| metric (median) | " + " | ".join(f"{lbl} (n={len(by_label[lbl])})" for lbl in labels) + " |")
        print("|---|" + "---|" * len(labels))
        for name, phase, key, fmt in METRICS:
            if any(phase not in r for rows in by_label.values() for r in rows):
                continue  # live runs have no separate produce phase
            meds = {lbl: statistics.median(vals) for lbl, rows in by_label.items()
                    if (vals := [r[phase][key] for r in rows if key in r[phase]])}
            if not meds:
                continue
            base = meds.get(args.baseline)
            cells = ["-" if lbl not in meds else
                     fmt.format(meds[lbl]) + (f" ({meds[lbl] / base:.2f}x)" if base and lbl != args.baseline else "")
                     for lbl in labels]
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
