"""The fetch-sessions table (bench/scenarios/fetch_sessions.sh's JSON lines): broker CPU per Fetch, full vs
incremental, medians per label with ratios to Kafka.
    usage: .venv/bin/python bench/scenarios/summarize_fetch_sessions.py FILE"""

import json
import statistics
import sys
from pathlib import Path

rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
labels = sorted({r["label"] for r in rows}, key=lambda lbl: (lbl != "kafka", lbl))
med = {(lbl, k): statistics.median(r[k] for r in rows if r["label"] == lbl) for lbl in labels
       for k in ("full_us_per_fetch", "incremental_us_per_fetch")}
print("| broker CPU µs per Fetch, 1,000 partitions, nothing new (median) | " + " | ".join(labels) + " |")
print("|---|" + "---|" * len(labels))
for k, name in (("full_us_per_fetch", "full fetch (no session)"), ("incremental_us_per_fetch", "incremental fetch")):
    cells = [f"{med[(lbl, k)]:,.0f}" + ("" if lbl == "kafka" or ("kafka", k) not in med else
             f" ({med[(lbl, k)] / med[('kafka', k)]:.2f}x)") for lbl in labels]
    print(f"| {name} | " + " | ".join(cells) + " |")
