"""The tables of bench/notes/consume-2026-11-27-s13.md from consume_wire.py's lines: every round, then medians.

    .venv/bin/python bench/results/2026-11-27-s13-consume/summarize_wire.py FILE.jsonl ...
    .venv/bin/python bench/results/2026-11-27-s13-consume/summarize_wire.py --scale scale.jsonl
        scale.py's consume cells (each broker's own log, then the same log): medians of the broker's and the
        client's CPU per message, the client's CPU share, msg/s and records per batch
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def client_us(r: dict[str, Any]) -> float:
    return float(r["client_cpu_s"]) / r["msgs"] * 1e6


def main(paths: list[str]) -> None:
    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("round", 0) and "consume_msg_s" in r]
    print("| system | round | load | rec/batch | msg/s | broker µs/msg | broker ms (loop thread) | Fetches | MB/Fetch "
          "| client CPU of wall | python thread | rdk:broker | client µs/msg |")
    print("|---" * 13 + "|")
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        d = r.get("broker_detail", {})
        main_ms = d.get("threads_ms", {}).get("main", 0.0)
        f = r["fetch_requests_in_window"]
        mb = r["rxbytes_in_window"] / f / 1e6 if f else 0.0
        print(f"| {r['label']} | {r['round']} | {r['loadavg']:.1f} | {r['records_per_batch']:,.0f} | "
              f"{r['consume_msg_s']:,.0f} | {r['broker_cpu_us_per_msg']:.4f} | {d.get('cpu_ms', 0):.1f} "
              f"({main_ms:.1f}) | {f:.0f} | {mb:.2f} | {r['client_cpu_of_wall']:.2f} | "
              f"{r.get('thread_python_cpu_of_wall', 0):.2f} | {r.get('thread_rdk:broker_cpu_of_wall', 0):.2f} | "
              f"{client_us(r):.2f} |")
        by.setdefault(r["label"], []).append(r)
    print("\n| system | rounds | median msg/s | median broker µs/msg | median client µs/msg | median client CPU of wall"
          " | rec/batch |")
    print("|---" * 7 + "|")
    for label, rs in by.items():
        print(f"| {label} | {len(rs)} | {statistics.median(x['consume_msg_s'] for x in rs):,.0f} | "
              f"{statistics.median(x['broker_cpu_us_per_msg'] for x in rs):.4f} | "
              f"{statistics.median(client_us(x) for x in rs):.2f} | "
              f"{statistics.median(x['client_cpu_of_wall'] for x in rs):.2f} | {rs[0]['records_per_batch']:,.0f} |")


def scale_cells(path: str) -> None:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "consume_msg_s" in r]
    print("| point | log | system | rounds | msg/s | broker µs/msg | client µs/msg | client CPU share | rec/batch |")
    print("|---" * 9 + "|")
    points = sorted({(r["axis"], r["x"]) for r in rows}, key=lambda p: (p[0] != "partitions", p[1]))
    for axis, x in points:
        for log, prefix in (("own", ""), ("same", "same_log_")):
            for label in ("kafka", "kbus", "kbus-base"):
                rs = [r for r in rows if (r["axis"], r["x"], r["label"]) == (axis, x, label)
                      and f"{prefix}consume_msg_s" in r]
                if not rs:
                    continue

                def med(key: str, rs: list[dict[str, Any]] = rs, prefix: str = prefix) -> float:
                    return statistics.median(float(r[prefix + key]) for r in rs if prefix + key in r)

                batch = "same_log_records_per_batch" if prefix else "consume_records_per_batch"
                print(f"| {axis} {x:,} | {log} | {label} | {len(rs)} | {med('consume_msg_s'):,.0f} | "
                      f"{med('consume_cpu_us_per_msg'):.4f} | {med('consume_client_cpu_us_per_msg'):.2f} | "
                      f"{med('consume_client_cpu_of_wall'):.2f} | "
                      f"{statistics.median(float(r[batch]) for r in rs if batch in r):,.0f} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--scale"]:
        scale_cells(sys.argv[2])
    else:
        main(sys.argv[1:])
