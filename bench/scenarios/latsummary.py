"""Medians of bench/scenarios/latency.sh's runs: one table per topology and linger.ms, one row per system, ratios to Apache
Kafka (and, with kbus-base in the run, kbus over kbus-base) from the same runs, with the 1-minute load average.

    .venv/bin/python bench/scenarios/latsummary.py bench/results/2026-11-24-vm/latency.jsonl [--since 2026-11-24T22:00]
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


def med(vals: list[float]) -> float | None:
    return statistics.median(vals) if vals else None


def fmt(v: float | None, spec: str = "{:.1f}") -> str:
    return "-" if v is None else spec.format(v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=results_file("latency.jsonl"))
    ap.add_argument("--since", default=None, help="only runs whose 'time' is >= this (ISO prefix)")
    ap.add_argument("--until", default=None, help="only runs whose 'time' is < this")
    args = ap.parse_args()
    runs: dict[tuple[str, float], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    invalid: dict[str, int] = defaultdict(int)
    with open(args.file) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            t = str(r.get("time", ""))
            if (args.since and t < args.since) or (args.until and t >= args.until) or not r.get("latency"):
                continue
            label = r["label"]
            if not r["latency"].get("ok"):
                invalid[label] += 1
                continue
            topo = "3 brokers, RF=3, acks=all" if label.endswith("-3x-rf3") else "1 broker, acks=all"
            runs[(topo, r["latency"]["linger_ms"])][label].append(r)
    for (topo, linger), by_label in sorted(runs.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        print(f"\n**{topo}, 10,000 msg/s x 100 B, linger.ms={linger:g}**\n")
        kafka = next((v for k, v in by_label.items() if k.startswith("kafka")), [])
        before = next((v for k, v in by_label.items() if k.startswith("kbus-base")), [])

        print("| system | n | load avg (1 min) | e2e p50 ms | e2e p99 ms | e2e p99.9 ms | p99 range ms "
              "| leader CPU s |" + (" p99 / kbus-base |" if before else ""))
        print("|---|---|---|---|---|---|---|---|" + ("---|" if before else ""))

        def stat(rows: list[dict], key: str) -> float | None:
            return med([r["latency"][key] for r in rows if r["latency"].get(key) is not None])

        for label in sorted(by_label, key=lambda s: (not s.startswith("kafka"), s)):
            rows = by_label[label]
            cells = []
            for key in ("p50_ms", "p99_ms", "p999_ms"):
                v, k = stat(rows, key), stat(kafka, key)
                ratio = f" ({v / k:.2f}x)" if v is not None and k and rows is not kafka else ""
                cells.append(fmt(v) + ratio)
            p99s = sorted(r["latency"]["p99_ms"] for r in rows)
            load = med([r["client"]["loadavg_start"][0] for r in rows])
            cpu = stat(rows, "broker_cpu_s")
            vs_base = ""
            if before:
                v, k = stat(rows, "p99_ms"), stat(before, "p99_ms")
                vs_base = f" {v / k:.2f}x |" if label.startswith("kbus") and v is not None and k else " |"
            print(f"| {label} | {len(rows)} | {fmt(load)} | {' | '.join(cells)} | {p99s[0]:.1f}-{p99s[-1]:.1f} "
                  f"| {fmt(cpu, '{:.2f}')} |{vs_base}")
    if invalid:
        print("\ninvalid runs (left out): " + ", ".join(f"{k} {v}" for k, v in sorted(invalid.items())))


if __name__ == "__main__":
    main()
