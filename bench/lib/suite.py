"""bench/run: the benchmark suite's one entry point (bench/run --list says what each scenario measures).

    bench/run SCENARIO [ARGS ...]   run one scenario; its raw results go to $RESULTS
                                    (default bench/results/<UTC date>-<short host name>/)
    bench/run report [--out FILE] [DIR ...]   bench/REPORT.md (and missing charts) from the results folders
    bench/run readme DIR [--print]  the README's shape table from DIR/shapes.md's run (after `bench/run shapes`)
    bench/run --list                the scenarios, their arguments and their output files

Each run is appended to $RESULTS/commands.jsonl (the command line with the environment that shaped it, and the
files it wrote), so the report names the command behind every figure. The scenarios are today's scripts in
bench/scenarios/, run unchanged; their environment variables (SYSTEMS, KBUS_BASE, AXES, ...) pass through.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shapes
from benchlib import REPO, results_dir

PY = os.environ.get("PY", ".venv/bin/python")
S = "bench/scenarios/"
# the environment variables the scenario scripts read: recorded with each run
ENV_KEYS = ("SYSTEMS", "KBUS_BASE", "KBUS_NOLAT", "AXES", "PARTITIONS", "CONNECTIONS", "SIZES", "APIS", "OUT", "TAG",
            "WARMUP", "BEFORE_LABEL", "BASE_LABEL", "KAFKA_VERSION", "KBUS_PROBE", "TOPOLOGIES", "LINGERS", "PHASES",
            "GENERATOR", "KAFKA_HEAP_OPTS", "MSGSIZE_BYTES", "PARTITION_MESSAGES", "MESSAGES", "PROCS",
            "BATCH_RECORDS", "SIZE", "SAME_LOG_BATCH", "SAME_LOG_MAX_PARTITIONS")


@dataclass(frozen=True)
class Scenario:
    name: str
    argv: tuple[str, ...]  # repo-relative; the user's arguments follow
    outputs: tuple[str, ...]  # what it writes in $RESULTS (globs)
    args: str
    what: str


SCENARIOS = (
    Scenario("throughput", (S + "run.sh",), ("results.jsonl",), "[ROUNDS] [kbench args: -n -s -p --acks --skip]",
             "librdkafka produce, consume and 10k msg/s latency; 1 broker each of SYSTEMS (kafka kbus tansu)"),
    Scenario("cluster", (S + "cluster.sh",), ("results.jsonl",), "[ROUNDS] [kbench args]",
             "the same on 3 Kafka and 3 kbus brokers, RF=3, acks=all (labels *-3x-rf3)"),
    Scenario("latency", (S + "latency.sh",), ("latency.jsonl",), "[ROUNDS] [kbench args]",
             "end-to-end latency at 10,000 msg/s, 1 broker and 3 brokers RF=3, linger 5 and 0"),
    Scenario("perftest", (S + "perftest.sh",), ("perftest.jsonl",), "[ROUNDS] [perftest.py args: -p -s --acks]",
             "Kafka's own kafka-producer/consumer-perf-test (Java client) against Kafka and kbus"),
    Scenario("fetch-sessions", (S + "fetch_sessions.sh",), ("fetch_sessions.jsonl",), "[ROUNDS] [--requests N]",
             "broker CPU per Fetch with 1,000 partitions, full vs incremental (KIP-227)"),
    Scenario("consume-wire", (S + "consume_wire.sh",), ("consume_wire*.jsonl", "wire_*.jsonl"),
             "[ROUNDS]  env PARTITIONS MESSAGES SIZE PROCS BATCH_RECORDS",
             "many-partition consume on the wire: log shape, one full Fetch, librdkafka's Fetches and client CPU"),
    Scenario("perf-shape", (S + "perf_shape.sh",), ("perf-*-self.txt", "perf-*-dso.txt", "perf-*-run.jsonl"),
             "LABEL [small_requests.py args]",
             "perf profile of one kbus broker under one small-requests shape (flat and per-DSO reports)"),
    Scenario("conn-profile", (S + "conn_profile.sh",), ("pyspy-*.raw.gz", "perf-*-self.txt", "perf-*-dso.txt",
                                                     "conn_profile.jsonl"),
             "CONNECTIONS [LABEL]  env SYSTEMS REQUESTS PERF=1",
             "py-spy (and perf) profile of one broker during scale.py's connections point"),
    Scenario("ops", (S + "ops.sh",), ("ops.jsonl",), "[ROUNDS] [startup recovery failover --recovery-mb N]",
             "start-up with 1,000 partitions, recovery after kill -9 with 1.1 GB, leader failover"),
    Scenario("scale", (S + "scale.sh",), ("scale.jsonl", "scale_*.png"),
             "[ROUNDS]  env AXES PARTITIONS CONNECTIONS SIZES",
             "scale curves: partitions 1-10,000, connections 10-5,000, message size 10 B-100 KB; charts"),
    Scenario("small-requests", (S + "small_requests.sh",), ("small_requests.jsonl",),
             "[ROUNDS] [--requests N]  env APIS",
             "broker CPU per one-record Produce / Fetch / Metadata / OffsetCommit / Heartbeat request, 16 connections"),
    Scenario("shapes", (), ("scale.jsonl", "scale_*.png", "small_requests.jsonl", "shapes.md",
                                 "shapes.json"),
             "[ROUNDS]  env SYSTEMS KBUS_BASE AXES ...",
             "scale + small-requests, then the shape table (kbus, Kafka, kbus-base = KBUS_BASE) and its charts"),
    Scenario("onerec-consume", (S + "onerec_consume.sh",), ("onerec_consume*.jsonl",), "[ROUNDS] [N] [SIZE]",
             "librdkafka consumer reading N (200,000) one-record batches (linger.ms=0's log): msg/s, broker CPU/msg"),
    Scenario("security", (S + "security.sh",), ("security.jsonl", "security-report.md"), "[ROUNDS] [kbench args]",
             "PLAINTEXT vs SSL vs SASL_SSL (SCRAM) on one kbus broker"),
    Scenario("transactions", (S + "txn.sh",), ("txn-results.jsonl",), "[ROUNDS] [txn.py args: -n --commit-ms]",
             "idempotent vs transactional produce, read_uncommitted vs read_committed; Kafka and kbus"),
    Scenario("txn-verification", (PY, S + "txn_verification.py"), ("txn-verification.jsonl",),
             "[--brokers 1|3] [--rounds N]", "transaction.partition.verification.enable on vs off, same brokers"),
    Scenario("replication", (S + "replication_cost.sh",), ("replication_cost.jsonl",),
             "TREE_A LABEL_A TREE_B LABEL_B [ROUNDS] [MESSAGES]", "broker CPU per replicated message, two kbus trees"),
    Scenario("fetch-path", (S + "fetch_path_cost.sh",), (), "TREE_A TREE_B [N]",
             "callgrind instructions per fetch partition, two kbus trees (printed)"),
    Scenario("fetch-handler", (S + "fetch_handler_cost.sh",), (), "TREE_A TREE_B [N]  env SHAPES",
             "callgrind instructions per consumer Fetch request (decode, handler, splice), two kbus trees (printed)"),
    Scenario("group-path", (S + "group_path_cost.sh",), (), "TREE_A TREE_B [N]",
             "callgrind instructions per one-record OffsetCommit and Heartbeat (in process), two kbus trees (printed)"),
    Scenario("produce-handler", (S + "produce_path_cost.sh",), (), "TREE_A TREE_B [N]",
             "callgrind instructions per small Produce (header, decode, handler, response), two kbus trees (printed)"),
    Scenario("compare", (S + "compare.sh",), ("results.jsonl",), "ROUNDS NAME=DIR [NAME=DIR ...] [-- kbench args]",
             "kbus against itself at other commits, interleaved"),
    Scenario("validation", (S + "validation.sh",), ("validation.jsonl",), "BEFORE_TREE [ROUNDS] [kbench args]",
             "produce validation cost: a kbus tree before vs this one"),
    Scenario("cores", (S + "cores.sh",), ("cores.jsonl",), "[ROUNDS] [cores.py run args]",
             "kbus on 1 and 2 cores (num.broker.processes), broker-bound small produce"),
    Scenario("quotas", (PY, S + "quota_overhead.py"), (), "[--rounds N] [--out FILE]",
             "client-quota bookkeeping cost per request (printed; --out to keep)"),
    Scenario("fuzz", (S + "fuzz.sh",), ("fuzz-result.json",), "[FRAMES] [SEED] [fuzz.py args: --all-apis]",
             "100,000+ fuzzed frames at a standalone broker, then every acknowledged record read back"),
    Scenario("spark-read", (PY, S + "spark_read.py"), (), "[--records N] [--runs N]",
             "records/s of a Spark batch job through the kbus data source vs a plain consumer (printed)"),
    Scenario("spark-write", (PY, S + "spark_write.py"), (),
             "[--records N] [--runs N] [--rss-records N] [--driver-scope]",
             "Spark writes on a standalone cluster: kbus exactly once (per task) vs at least once vs "
             "format(\"kafka\"), driver peak RSS at two sizes (printed)"),
    Scenario("spark-eos-faults", (PY, S + "spark_eos_faults.py"), ("spark_eos_faults.jsonl",),
             "[--records N] [--tasks N] [--batch-records N [N ...]] [--stall S]",
             "ONE exactly-once streaming write on a standalone cluster with a speculative twin, a worker and the "
             "driver killed -9 mid-batch: read_committed check of every record, driver RSS at two batch sizes; "
             "prints a verdict"),
    Scenario("spark-source-scale", (PY, S + "spark_source_scale.py"), (),
             "[--records N] [--partitions N] [--runs N] [--cases batch,stream]",
             "a 100-partition topic read by a standalone cluster, batch and streaming, kbus vs format(\"kafka\") "
             "(printed)"),
    Scenario("group-rebalance", (PY, S + "group_rebalance.py"), (),
             "[--members N] [--rounds N] [--systems kbus,kafka4]",
             "consumer-group rebalance time, classic vs KIP-848 protocol, kbus beside Kafka 4.x KRaft (printed)"),
    Scenario("request-path", (PY, S + "request_path.py"), (), "[N]",
             "CPU of one Produce + Fetch through the handlers in-process, no network (printed)"),
    Scenario("produce-path", (PY, S + "produce_path.py"), (), "[ROUNDS] [RECORDS_PER_REQUEST] [PARTITIONS] [ACKS]",
             "CPU per Produce request in-process: decode, handler, encode (printed)"),
    Scenario("acks-wait", (PY, S + "acks_wait.py"), (), "[BLOCKS]",
             "CPU of one leader append + its acks=all wait answered by a follower's fetch, in-process (printed)"),
    Scenario("all", (S + "all.sh",), ("*.jsonl", "*.png"), "[ROUNDS]",
             "everything in the headline tables (1-2 hours on 2 cores)"),
)
BY_NAME = {s.name: s for s in SCENARIOS}


def list_scenarios() -> None:
    print(__doc__.split("\n\n")[1])
    print()
    for s in SCENARIOS:
        print(f"  {s.name:<17} {s.what}")
        print(f"  {'':<17} args: {s.args}" + (f"   writes: {', '.join(s.outputs)}" if s.outputs else ""))
    print("  readme DIR        README.md's shape table (between its shape-table markers) from DIR/shapes.json")
    print("  report            bench/REPORT.md and charts from bench/results/*/ (the raw data of every figure)")


def run(name: str, args: list[str]) -> int:
    scenario = BY_NAME[name]
    env = dict(os.environ)
    env.setdefault("RESULTS", str(results_dir()))
    if scenario.argv[:1] == (PY,):  # a Python scenario imports tests.* (brokers, ZooKeeper) from this tree; not
        # for the shell ones, whose kbus-base brokers must import their own checkout's kbus
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    out = REPO / env["RESULTS"]
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    shaping = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in shaping.items()), "bench/run", name,
                        *map(shlex.quote, args)])
    if name == "shapes":
        rc = run_shapes(args, env, command)
    else:
        rc = subprocess.run([*scenario.argv, *args], cwd=REPO, env=env, check=False).returncode
    written = sorted({p.name for pattern in scenario.outputs for p in out.glob(pattern)
                      if p.stat().st_mtime >= started.timestamp() - 1})
    with open(out / "commands.jsonl", "a") as f:
        f.write(json.dumps({"time": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "command": command, "exit": rc,
                            "outputs": written}) + "\n")
    print(f"bench/run: {command} -> exit {rc}; results in {env['RESULTS']}/ ({', '.join(written) or 'none'})",
          file=sys.stderr)
    return rc


def run_shapes(args: list[str], env: dict[str, str], command: str) -> int:
    """Issue 23's shape table: the scale curves and the small-request costs of Kafka, kbus and (KBUS_BASE=DIR) the
    kbus of another checkout in one run, then $RESULTS/shapes.md (bench/lib/shapes.py: one row per shape, the
    ratios, the misses, the load, the command), shapes.json (what `bench/run readme` needs) and the charts."""
    env = {k: v for k, v in env.items() if k != "OUT"}  # both scripts read OUT: each keeps its own file
    rounds = args[:1] or ["1"]
    since = datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")  # the scripts stamp local time
    rc = subprocess.run([S + "scale.sh", *rounds], cwd=REPO, env=env, check=False).returncode
    if rc < 0 or rc >= 128:  # killed or interrupted: no second half
        return rc
    rc = subprocess.run([S + "small_requests.sh", *rounds, *args[1:]], cwd=REPO, env=env,
                        check=False).returncode or rc
    out = REPO / env["RESULTS"]
    meta = {"since": since, "command": command, "scale": "scale.jsonl", "small": "small_requests.jsonl",
            "files": ["scale.jsonl", "small_requests.jsonl"]}
    (out / "shapes.json").write_text(json.dumps(meta, indent=1) + "\n")
    rows = shapes.build(shapes.read_jsonl(out / "scale.jsonl", since),
                        shapes.read_jsonl(out / "small_requests.jsonl", since))
    charts = sorted(p.name for p in out.glob("scale_*.png"))
    scale = _capture([PY, S + "scale.py", "table", "--data", str(out / "scale.jsonl"), "--since", since])
    small = small_requests_table(out / "small_requests.jsonl", since)
    text = (shapes.document(meta, rows, charts) + f"\n## Scale curves in full (scale.jsonl)\n{scale}\n\n"
            f"## Small requests (small_requests.jsonl)\n\n{small}\n")
    (out / "shapes.md").write_text(text)
    print(text)
    return rc


def _capture(argv: list[str]) -> str:
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    return res.stdout.strip() if res.returncode == 0 else f"(`{' '.join(argv)}` failed: {res.stderr.strip()[-300:]})"


def small_requests_table(path: Path, since: str = "") -> str:
    """Broker CPU µs per request (median per label and API): (x) the ratio to Kafka, [x kbus-base] kbus's to the
    kbus of KBUS_BASE."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    rows = [r for r in rows if r.get("time", "") >= since]
    if not rows:
        return "(no small-request rows)"
    labels = sorted({r["label"] for r in rows}, key=lambda lbl: (lbl != "kafka", lbl != "kbus", lbl))
    apis = sorted({r["api"] for r in rows})
    med = {(lbl, api): statistics.median(r["broker_cpu_us_per_request"] for r in rows
                                         if r["label"] == lbl and r["api"] == api)
           for lbl in labels for api in apis if any(r["label"] == lbl and r["api"] == api for r in rows)}
    lines = ["| broker CPU µs per request (median) | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for api in apis:
        cells = []
        for lbl in labels:
            v = med.get((lbl, api))
            k = med.get(("kafka", api))
            base = med.get(("kbus-base", api)) if lbl == "kbus" else None
            cells.append("" if v is None else f"{v:,.1f}" + (f" ({v / k:.2f}x)" if k and lbl != "kafka" else "")
                         + (f" [{v / base:.2f}x kbus-base]" if base else ""))
        lines.append(f"| {api} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- the report ------------------------------------------------------------------------------------------------

def _table(path: Path) -> str:
    """The markdown table of one raw file, by the summariser of the scenario that writes it."""
    n, f = path.name, str(path)
    if n in ("results.jsonl", "zerocopy.jsonl", "throughput.jsonl"):
        return _capture([PY, S + "summarize.py", f])
    if n.startswith("perftest") or n == "sessions.jsonl":
        return _capture([PY, S + "summarize_perftest.py", f])
    if n == "ops.jsonl":
        return _capture([PY, S + "summarize_ops.py", f])
    if n.startswith("latency"):
        return _capture([PY, S + "latsummary.py", f])
    if n.startswith("scale"):
        return _capture([PY, S + "scale.py", "table", "--data", f])
    if n == "small_requests.jsonl":
        return small_requests_table(path)
    if n == "fetch_sessions.jsonl":
        return _capture([PY, S + "summarize_fetch_sessions.py", f])
    if n == "validation.jsonl":
        return _capture([PY, S + "summarize_validation.py", f])
    if n.startswith("onerec_consume"):
        return _capture([PY, S + "summarize_onerec.py", f])
    if n.startswith("cores"):
        return _capture([PY, S + "cores.py", "report", f])
    if n == "security.jsonl":
        return _capture([PY, "bench/lib/kbench.py", "report", f, "--baseline", "kbus-PLAINTEXT"])
    return ""


def _default_command(name: str) -> str:
    for prefix, scenario in (("results", "throughput"), ("zerocopy", "throughput"), ("throughput", "throughput"),
                             ("perftest", "perftest"), ("sessions", "perftest"), ("latency", "latency"),
                             ("scale", "scale"), ("small_requests", "small-requests"), ("ops", "ops"),
                             ("fetch_sessions", "fetch-sessions"), ("security", "security"), ("txn-results",
                             "transactions"), ("txn-verification", "txn-verification"), ("replication", "replication"),
                             ("validation", "validation"), ("cores", "cores"), ("onerec", "onerec-consume"),
                             ("quota", "quotas"), ("fuzz", "fuzz"),
                             ("arch-refactor", "compare"), ("logdirs", "compare")):
        if name.startswith(prefix):
            return f"bench/run {scenario}"
    return "bench/run"


def _citing_notes(folder: Path, name: str) -> list[Path]:
    rel = f"{folder.name}/{name}"
    return sorted(p for p in (REPO / "bench/notes").rglob("*.md") if rel in p.read_text())


def report(folders: list[Path], out: Path) -> int:
    def link(path: Path) -> str:
        return os.path.relpath(path, out.parent)

    lines = ["# kbus benchmark report", "",
             "Generated by `bench/run report` from the raw results in `bench/results/` (do not edit: edit the "
             "summarisers in bench/scenarios/ or bench/lib/suite.py). Each figure names its raw data and the "
             "command that produced it; notes with the analysis are in `bench/notes/`.", ""]
    for folder in folders:
        cmds = [json.loads(x) for x in (folder / "commands.jsonl").read_text().splitlines()
                if x.strip()] if (folder / "commands.jsonl").exists() else []
        lines += [f"## {folder.name}", ""]
        for data in sorted(folder.iterdir()):
            if data.suffix not in (".jsonl", ".json") or data.name == "commands.jsonl":
                continue
            rel = link(data)
            made = [c for c in cmds if data.name in c.get("outputs", ())]
            how = "; ".join(dict.fromkeys(f"`{c['command']}`" + (f" ({c['recorded']})" if c.get("recorded") else "")
                                          for c in made)) or (
                f"`{_default_command(data.name)}` (no command recorded: see the notes citing it)")
            lines += [f"### {data.name}", "", f"Raw data: [{rel}]({rel}). Command: {how}."]
            notes = _citing_notes(folder, data.name)
            if notes:
                lines.append("Notes: " + ", ".join(f"[{link(p)}]({link(p)})" for p in notes) + ".")
            table = _table(data)
            if table:
                lines += ["", table]
            if data.name.startswith("scale") and data.suffix == ".jsonl":
                charts = _charts(data)
                lines += ["", *(f"[![{c.name}]({link(c)})]({rel}) "
                                f"(from [{data.name}]({rel}))" for c in charts)]
            lines.append("")
    out.write_text("\n".join(lines))
    print(f"wrote {os.path.relpath(out)} ({len(folders)} results folder(s))")
    return 0


def _charts(data: Path) -> list[Path]:
    """scale.jsonl's charts (scale_*.png beside it), drawn when missing; other scale-*.jsonl files have none."""
    if data.name != "scale.jsonl":
        return []
    charts = sorted(data.parent.glob("scale_*.png"))
    if not charts:
        subprocess.run([PY, S + "scale.py", "plot", "--data", str(data), "--outdir", str(data.parent)],
                       cwd=REPO, check=False)
        charts = sorted(data.parent.glob("scale_*.png"))
    return charts


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "--list", "list"):
        list_scenarios()
        return 0
    name, args = argv[0], argv[1:]
    if name == "readme":
        return shapes.main(["readme", *args])
    if name == "report":
        out = REPO / "bench/REPORT.md"
        if args[:1] == ["--out"] and len(args) > 1:
            out, args = Path(args[1]).resolve(), args[2:]
        root = REPO / "bench/results"
        folders = [Path(a).resolve() for a in args] or sorted((p for p in root.iterdir() if p.is_dir()), reverse=True)
        return report(folders, out)
    if name not in BY_NAME:
        print(f"bench/run: no scenario {name!r}; bench/run --list names them", file=sys.stderr)
        return 2
    return run(name, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
