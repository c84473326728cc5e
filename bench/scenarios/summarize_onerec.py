"""The table of bench/scenarios/onerec_consume.sh: per system, the median consumer msg/s and broker CPU µs per
consumed message over its valid rounds, with ratios to Kafka's, and the median time the consumer's threads waited
for a CPU as a share of the read's elapsed time (near 1 or above: the machine's load set the rate, not the broker).

    python bench/scenarios/summarize_onerec.py onerec_consume.jsonl [--topic T]   (T: one run's topic; default all)
"""

from __future__ import annotations

import argparse
import json
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--topic")
    args = ap.parse_args()
    by: dict[str, list[dict]] = {}
    with open(args.file) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            c = r.get("consume") or {}
            if c.get("ok") and (args.topic is None or c.get("topic") == args.topic):
                by.setdefault(r.get("label") or "?", []).append(c)

    def med(cs: list[dict], key: str) -> float | None:
        v = [c[key] for c in cs if c.get(key) is not None]
        return statistics.median(v) if v else None

    kafka = by.get("kafka", [])
    k_rate, k_cpu = med(kafka, "msgs_per_s"), med(kafka, "broker_cpu_us_per_msg")
    print("| system | rounds | consumer msg/s (median) | vs Kafka | broker CPU µs/msg (median) | vs Kafka "
          "| client CPU wait / elapsed (median) |")
    print("|---|---|---|---|---|---|---|")
    for label, cs in by.items():
        rate, cpu = med(cs, "msgs_per_s"), med(cs, "broker_cpu_us_per_msg")
        rr = f"{rate / k_rate:.2f}x" if k_rate and rate else "-"
        cr = f"{cpu / k_cpu:.2f}x" if k_cpu and cpu else "-"
        waits = [c["client_runqueue_wait_s"] / c["elapsed_s"] for c in cs
                 if c.get("client_runqueue_wait_s") is not None and c.get("elapsed_s")]
        wait = f"{statistics.median(waits):.2f}" if waits else "-"
        print(f"| {label} | {len(cs)} | {rate or 0:,.0f} | {rr} | {cpu} | {cr} | {wait} |")


if __name__ == "__main__":
    main()
