"""Medians of bench/scenarios/validation.sh runs: produce msg/s and broker CPU per message per label (before, novalidation,
now) and codec, with ratios against "before" or, without it, "novalidation".
usage: python bench/scenarios/summarize_validation.py [bench/results/2026-11-24-vm/validation.jsonl] [--since=2026-11-24T09:00]"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import results_file  # noqa: E402


def main(path: str, since: str = "") -> None:
    runs: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            p = r.get("produce") or {}
            if r.get("mode") != "produce" or not p.get("ok") or r.get("time", "") < since:
                continue
            runs[(p["compression"], r["label"])].append(p)
    print("| codec | label | runs | produce msg/s (median) | ratio | broker CPU µs/msg (median) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for codec in sorted({c for c, _ in runs}):
        base = runs.get((codec, "before")) or runs.get((codec, "novalidation"), [])
        base_rate = statistics.median(p["msgs_per_s"] for p in base) if base else None
        base_cpu = statistics.median(p["broker_cpu_us_per_msg"] for p in base) if base else None
        for label in ("before", "novalidation", "now"):
            ps = runs.get((codec, label), [])
            if not ps:
                continue
            rate = statistics.median(p["msgs_per_s"] for p in ps)
            cpu = statistics.median(p["broker_cpu_us_per_msg"] for p in ps)
            r_rate = f"{rate / base_rate:.2f}x" if base_rate else "-"
            r_cpu = f"{cpu / base_cpu:.2f}x" if base_cpu else "-"
            print(f"| {codec} | {label} | {len(ps)} | {rate:,.0f} | {r_rate} | {cpu:.2f} | {r_cpu} |")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--since")]
    since = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--since=")), "")
    main(args[0] if args else results_file("validation.jsonl"), since)
