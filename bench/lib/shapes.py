"""Issue 23's shape table: one row per shape of bench/scenarios/scale.sh and small_requests.sh (partitions
1 -> 10,000; connections 10 -> 5,000; message size 10 B -> 100 KB; one-record Produce, Fetch, Metadata,
OffsetCommit, Heartbeat) with kbus, Apache Kafka and kbus-base (KBUS_BASE: the previous main) side by side.

Every cell is the median over the run's rounds; Kafka's warmest round (its lowest cost, its highest rate) is a
column of its own because the JVM's JIT may still be warming in the first rounds. A row whose kbus cost is above
Kafka's (median or warmest) or whose rate is below Kafka's is marked in the "> 1.0x" column. A system that failed a
point (scale.py writes the point's line with "failed": why) has "failed" in its cell (or "+N failed" beside the
rounds it did measure), and a failure of kbus or Kafka is marked in the "> 1.0x" column too.

    shapes.py table --scale scale.jsonl --small small_requests.jsonl [--since T] [--command C] > shapes.md
    shapes.py readme RESULTS_DIR [--readme README.md]   the README's shape table from RESULTS_DIR/shapes.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- shape-table:begin -->", "<!-- shape-table:end -->"


@dataclass(frozen=True)
class Measure:
    """What one row of an axis reports: a cost (lower is better) and optionally a rate (higher is better)."""

    what: str
    cost: str  # the JSON key
    unit: str
    rate: str | None = None
    batch: str | None = None  # the JSON key of the records per batch of the log the cell read (consume cells)
    phase: str | None = None  # the partitions axis: the phase ("create", "load") whose line has it


# The consume cells read each broker's own log, written by librdkafka's producer, whose batches grow while a slower
# broker keeps it waiting: a broker that acknowledges sooner is consumed from smaller batches. This row reads one log,
# the same for every broker (scale.py's --same-log-batch: batches of exactly N records, written once). Every consume
# cell says the records per batch it read ("rec/batch").
SAME_LOG = "consume the same log (fixed batches, every broker)"

SCALE: dict[str, tuple[str, tuple[Measure, ...]]] = {
    "partitions": ("partitions", (
        Measure("produce 100 B spread over every partition", "produce_cpu_us_per_msg", "µs/msg", "produce_msg_s",
                phase="load"),
        Measure("consume them", "consume_cpu_us_per_msg", "µs/msg", "consume_msg_s", "consume_records_per_batch",
                phase="load"),
        Measure(SAME_LOG, "same_log_consume_cpu_us_per_msg", "µs/msg", "same_log_consume_msg_s",
                "same_log_records_per_batch", phase="load"),
        Measure("full Fetch of every partition, nothing new", "fetch_cpu_us_per_request", "µs/req", phase="load"),
        Measure("Metadata of the topic", "metadata_cpu_us_per_request", "µs/req", phase="load"),
        Measure("create the topic (wall time)", "create_s", "s", phase="create"),
    )),
    "connections": ("connections", (
        Measure("one Produce (10 x 100 B) per connection", "produce_cpu_us_per_request", "µs/req", "produce_req_s"),
    )),
    "msgsize": ("message size B", (
        Measure("produce", "produce_cpu_us_per_msg", "µs/msg", "produce_msg_s"),
        Measure("consume", "consume_cpu_us_per_msg", "µs/msg", "consume_msg_s", "consume_records_per_batch"),
        Measure(SAME_LOG, "same_log_consume_cpu_us_per_msg", "µs/msg", "same_log_consume_msg_s",
                "same_log_records_per_batch"),
    )),
}
SMALL = Measure("", "broker_cpu_us_per_request", "µs/req", "requests_per_s")
SMALL_ORDER = ("produce", "fetch", "metadata", "offsetcommit", "heartbeat", "apiversions")
BASE = "kbus-base"
FLOORS = ("floor-log", "floor")  # scale.sh's floor systems shown beside the connections rows, the first one run


@dataclass
class Row:
    shape: str
    what: str
    unit: str
    has_rate: bool
    cost: dict[str, list[float]] = field(default_factory=dict)  # label -> one value per round
    rate: dict[str, list[float]] = field(default_factory=dict)
    batch: dict[str, list[float]] = field(default_factory=dict)  # label -> records per batch of the log read
    load: list[float] = field(default_factory=list)
    failed: dict[str, list[str]] = field(default_factory=dict)  # label -> why, one per failed round

    def med(self, label: str, rate: bool = False) -> float | None:
        values = (self.rate if rate else self.cost).get(label)
        return statistics.median(values) if values else None

    def records_per_batch(self, label: str) -> float | None:
        values = self.batch.get(label)
        return statistics.median(values) if values else None

    def warmest(self, rate: bool = False) -> float | None:
        values = (self.rate if rate else self.cost).get("kafka")
        return (max(values) if rate else min(values)) if values else None

    def ratios(self) -> dict[str, float]:
        """kbus / Kafka (cost at the median and at Kafka's warmest round, rate at the median), kbus / kbus-base."""
        out: dict[str, float] = {}
        k, kafka, warm, base = self.med("kbus"), self.med("kafka"), self.warmest(), self.med(BASE)
        if k is not None and kafka:
            out["cost"] = k / kafka
        if k is not None and warm:
            out["cost_warm"] = k / warm
        if k is not None and base:
            out["cost_base"] = k / base
        kr, kafka_r = self.med("kbus", True), self.med("kafka", True)
        if kr is not None and kafka_r:
            out["rate"] = kr / kafka_r
        return out

    def over(self) -> list[str]:
        """What misses the bar: the cost above 1.0x Kafka's (median or warmest round), the rate below; kbus or
        Kafka failing the point (then there may be nothing to compare)."""
        r = self.ratios()
        marks = [f"{name} failed" for label, name in (("kbus", "kbus"), ("kafka", "Kafka")) if self.failed.get(label)]
        if r.get("cost", 0) > 1.0:
            marks.append("cost")
        elif r.get("cost_warm", 0) > 1.0:
            marks.append("cost (warmest)")
        if "rate" in r and r["rate"] < 1.0:
            marks.append("rate")
        return marks


def _label_key(label: str) -> tuple[bool, bool, str]:
    return (label != "kbus", label != "kafka", label)


def build(scale_rows: list[dict[str, Any]], small_rows: list[dict[str, Any]]) -> list[Row]:
    """The shape rows, in the issue's order: partitions, connections, message size, then the small requests."""
    rows: dict[tuple[int, Any, int], Row] = {}  # (axis, x, measure): the order of the table
    for a, (axis, (name, measures)) in enumerate(SCALE.items()):
        for r in (r for r in scale_rows if r.get("axis") == axis):
            for i, m in enumerate(measures):
                if m.cost not in r:
                    if "failed" in r and (m.phase is None or r.get("phase") in (None, m.phase)):
                        row = rows.setdefault((a, r["x"], i), Row(
                            f"{name} {r['x']:,}", m.what, m.unit, m.rate is not None))
                        row.failed.setdefault(r["label"], []).append(str(r["failed"]))
                        if "loadavg_start" in r:
                            row.load.append(float(r["loadavg_start"]))
                    continue
                row = rows.setdefault((a, r["x"], i), Row(
                    f"{name} {r['x']:,}", m.what, m.unit, m.rate is not None))
                row.cost.setdefault(r["label"], []).append(float(r[m.cost]))
                if m.rate is not None and m.rate in r:
                    row.rate.setdefault(r["label"], []).append(float(r[m.rate]))
                if m.batch is not None and m.batch in r:
                    row.batch.setdefault(r["label"], []).append(float(r[m.batch]))
                if "loadavg_start" in r:
                    row.load.append(float(r["loadavg_start"]))
    apis = sorted({r["api"] for r in small_rows},
                  key=lambda a: (SMALL_ORDER.index(a) if a in SMALL_ORDER else len(SMALL_ORDER), a))
    for api in apis:
        row = Row(f"one-record {api}", "16 connections, 4 in flight each", SMALL.unit, True)
        for r in small_rows:
            if r["api"] == api:
                row.cost.setdefault(r["label"], []).append(float(r[SMALL.cost]))
                row.rate.setdefault(r["label"], []).append(float(r[str(SMALL.rate)]))
                if "loadavg" in r:
                    row.load.append(float(r["loadavg"]))
        rows[(len(SCALE), 0, len(rows))] = row
    return [rows[k] for k in sorted(rows)]


def _num(v: float | None) -> str:
    if v is None:
        return ""
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _cell(row: Row, label: str) -> str:
    """cost (rate/s, records per batch of the log read); "failed" for a system that failed every round of it,
    "+N failed" beside the rounds it measured"""
    failed = len(row.failed.get(label, ()))
    cost = row.med(label)
    if cost is None:
        return "**failed**" if failed else ""
    inner = [f"{_num(rate)}/s"] if (rate := row.med(label, True)) is not None else []
    if (batch := row.records_per_batch(label)) is not None:
        inner.append(f"{_num(batch)} rec/batch")
    return _num(cost) + (f" ({', '.join(inner)})" if inner else "") + (f" **+{failed} failed**" if failed else "")


def _ratio(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}x"


def markdown(rows: list[Row]) -> str:
    """The shape table: cost (and rate) medians, Kafka's warmest round, the ratios, the misses, the load."""
    # the measured floor (bench/lib/floor_server.py: a Python + uvloop server that reads, appends and answers with
    # no broker), where the run had one: a column only then, so the tables of runs without it keep their shape
    floor = next((f for f in FLOORS if any(f in row.cost for row in rows)), None)
    head = f" {floor} (no broker) |" if floor else ""
    lines = ["| shape | measure (unit) | kbus | Kafka | Kafka warmest | kbus-base |" + head + " cost kbus/Kafka "
             "| vs warmest | rate kbus/Kafka | kbus/kbus-base cost | > 1.0x | load | rounds |",
             "|---|---|---|---|---|---|" + ("---|" if floor else "") + "---|---|---|---|---|---|---|"]
    for row in rows:
        r = row.ratios()
        warm = row.warmest()
        warm_rate = row.warmest(True)
        load = f"{min(row.load):.1f}-{max(row.load):.1f}" if row.load else ""
        rounds = len(row.cost.get("kbus", ()))
        miss = "**" + ", ".join(row.over()) + "**" if row.over() else ""
        lines.append(
            f"| {row.shape} | {row.what} ({row.unit}) | {_cell(row, 'kbus')} | {_cell(row, 'kafka')} | "
            + (_num(warm) + (f" ({_num(warm_rate)}/s)" if warm_rate is not None else "") if warm is not None else "")
            + f" | {_cell(row, BASE)} |" + (f" {_cell(row, floor)} |" if floor else "")
            + f" {_ratio(r.get('cost'))} | {_ratio(r.get('cost_warm'))} | "
            f"{_ratio(r.get('rate'))} | {_ratio(r.get('cost_base'))} | {miss} | {load} | {rounds} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    missed = [r for r in rows if any(not m.endswith(" failed") for m in r.over())]
    failed = sorted({label for r in rows for label in r.failed})
    loads = [v for r in rows for v in r.load]
    load = f"load average {min(loads):.1f}-{max(loads):.1f} (1-minute, at each point's start)" if loads else ""
    return (f"{len(rows)} rows, {len(missed)} above 1.0x Kafka's cost or below its rate"
            + "".join(f"; {label} failed {sum(1 for r in rows if label in r.failed)} rows" for label in failed)
            + (f"; {load}" if load else ""))


def read_jsonl(path: Path, since: str = "") -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("time", "") >= since]


def document(meta: dict[str, Any], rows: list[Row], charts: list[str]) -> str:
    """shapes.md's head: when, the command, the load, the raw files, the charts; then the table."""
    head = [f"# Shapes, {meta['since']}", "",
            f"Command: `{meta['command']}`" if meta.get("command") else "",
            f"Raw data: {', '.join(f'`{f}`' for f in meta['files'])} (rows since {meta['since']}). "
            "Medians over the rounds; Kafka warmest = its lowest cost (highest rate) of any round. Cells: cost "
            "(rate/s, and for a consume the records per batch of the log it read: each broker's own log, "
            "written by librdkafka's producer, except the rows of the same log for every broker).",
            summary(rows) + ".", ""]
    if charts:
        head += ["Charts: " + ", ".join(f"[{Path(c).stem}]({c})" for c in charts), ""]
    return "\n".join(h for h in head if h is not None) + "\n" + markdown(rows) + "\n"


def readme_block(results: Path, repo: Path = REPO) -> str:
    """The README's shape table, from RESULTS/shapes.json (written by `bench/run shapes`) and the raw files."""
    if not (results / "shapes.json").is_file():
        raise SystemExit(f"{results}: no shapes.json (written by `bench/run shapes`)")
    if not results.resolve().is_relative_to(repo.resolve()):
        raise SystemExit(f"{results}: not under {repo} (the README links the charts by their path in the repository)")
    meta = json.loads((results / "shapes.json").read_text())
    rows = build(read_jsonl(results / meta["scale"], meta["since"]) if meta.get("scale") else [],
                 read_jsonl(results / meta["small"], meta["since"]) if meta.get("small") else [])
    rel = results.resolve().relative_to(repo.resolve()).as_posix()
    charts = sorted(results.glob("scale_*.png"))
    chart_links = ", ".join(f"[{c.stem.removeprefix('scale_')}]({rel}/{c.name})" for c in charts)
    lines = [BEGIN, f"Shape table (issue 23), measured {meta['since']} with `{meta['command']}`; "
             f"{summary(rows)}. Raw data and the full tables: [`{rel}/shapes.md`]({rel}/shapes.md)"
             + (f"; charts: {chart_links}" if chart_links else "") + ".", "", markdown(rows), END]
    return "\n".join(lines)


def splice(readme: str, block: str) -> str:
    """README text with the block between the markers replaced (the markers must be there once)."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start or readme.count(BEGIN) != 1:
        raise SystemExit(f"the README needs exactly one {BEGIN} ... {END} pair")
    return readme[:start] + block + readme[end + len(END):]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("--scale", type=Path)
    t.add_argument("--small", type=Path)
    t.add_argument("--since", default="")
    r = sub.add_parser("readme")
    r.add_argument("results", type=Path)
    r.add_argument("--readme", type=Path, default=REPO / "README.md")
    r.add_argument("--print", action="store_true", help="print the block instead of writing the README")
    args = ap.parse_args(argv)
    if args.cmd == "table":
        rows = build(read_jsonl(args.scale, args.since) if args.scale else [],
                     read_jsonl(args.small, args.since) if args.small else [])
        print(markdown(rows))
        return 0
    block = readme_block(args.results)
    if args.print:
        print(block)
        return 0
    args.readme.write_text(splice(args.readme.read_text(), block))
    print(f"wrote the shape table of {args.results} into {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
