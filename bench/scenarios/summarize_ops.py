"""Medians of bench/scenarios/ops.py JSON lines per test and system, with ratios to Apache Kafka.

    .venv/bin/python bench/scenarios/summarize_ops.py bench/results/2026-11-25-vm/ops.jsonl [--since ISO-PREFIX]
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=results_file("ops.jsonl"))
    ap.add_argument("--baseline", default="kafka")
    ap.add_argument("--since", default=None)
    args = ap.parse_args()
    runs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(args.file) as f:
        for line in f:
            r = json.loads(line)
            if r.get("seconds") is not None and (not args.since or r["time"] >= args.since):
                runs[r["test"]][r["label"]].append(r["seconds"])
    labels = sorted({lbl for by in runs.values() for lbl in by}, key=lambda lbl: (lbl != args.baseline, lbl))
    print("| seconds (median, all rounds listed) | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for test, by in sorted(runs.items()):
        base = statistics.median(by[args.baseline]) if by.get(args.baseline) else None
        cells = []
        for lbl in labels:
            vals = by.get(lbl)
            if not vals:
                cells.append("-")
                continue
            m = statistics.median(vals)
            ratio = f" ({m / base:.2f}x)" if base and lbl != args.baseline else ""
            cells.append(f"{m:.2f}{ratio} [{', '.join(f'{v:.2f}' for v in vals)}]")
        print(f"| {test} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
