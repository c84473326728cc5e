"""Benchmark: the kbus Spark source at scale, beside Spark's own format("kafka") in the same run: a topic of 100
partitions read by a standalone cluster (a master and 2 workers x 1 core) in batch (all of it; with minPartitions;
from startingOffsetsByTimestamp) and streaming (Trigger.AvailableNow with maxOffsetsPerTrigger, to the noop sink).

    bench/run spark-source-scale [--records 2000000] [--partitions 100] [--runs 2]
        [--kafka-connector 4.2.0] [--cases batch,stream]

It starts its own kbus broker and the cluster and stops them. records/s per core = records / seconds / 2 (the
cluster's cores; the broker and the driver share the same machine). Results: a markdown table on stdout (see
bench/notes/spark_write.md, "The source at scale").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from spark_read import REPO, start_broker  # type: ignore[import-not-found]

sys.path.insert(0, str(REPO))
from kbus.spark.connector import connector_jars
from tests.e2e.spark.standalone import StandaloneCluster

CORES = 2
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants, with the children they have reaped."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        children.setdefault(int(fields[1]), []).append(int(entry))
        times[int(entry)] = sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_size: int, split_ms: int) -> None:
    """records over every partition (round robin); the first half timestamped an hour before split_ms, the second
    half at split_ms, so startingOffsetsByTimestamp=split_ms starts each partition half way."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
    value = b"x" * value_size
    for i in range(records):
        ts = split_ms - 3_600_000 if i < records // 2 else split_ms
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def batch_read(spark: SparkSession, fmt: str, bootstrap: str, topic: str, **options: str) -> tuple[int, float]:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    t0 = time.perf_counter()
    row = reader.load().agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).first()
    assert row is not None
    return int(row["n"]), time.perf_counter() - t0


# Spark's own breakdown of a micro-batch (StreamingQueryProgress.durationMs), summed over the query's batches.
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def stream_read(spark: SparkSession, fmt: str, bootstrap: str, topic: str, per_trigger: int,
                checkpoint: Path, phases: dict[str, int] | None = None) -> tuple[int, float, int]:
    df = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger)).load())
    t0 = time.perf_counter()
    query = (df.selectExpr("length(value) AS n").writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    batches = [p for p in query.recentProgress if p.numInputRows > 0]
    if phases is not None:
        for p in query.recentProgress:
            for name in PHASES:
                phases[name] = phases.get(name, 0) + int(p.durationMs.get(name, 0))
    return sum(p.numInputRows for p in batches), elapsed, len(batches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--kafka-connector", metavar="VERSION", default="4.2.0")
    parser.add_argument("--cases", default="batch,stream", help="batch, stream or both (comma separated)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="kbus-bench-spark-scale-"))
    broker, bootstrap = start_broker(workdir)
    cluster = StandaloneCluster(workdir / "cluster")
    spark = None
    try:
        topic = f"bench-scale-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            f.result(60)
        split_ms = int(time.time() * 1000) - 60_000
        fill(bootstrap, topic, args.partitions, args.records, args.value_size, split_ms)
        cluster.start(workers=2)
        jars = connector_jars(args.kafka_connector, REPO / ".cache")
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        spark = (SparkSession.builder.master(cluster.url).appName("bench-spark-source-scale")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.executor.memory", "512m").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                 .config("spark.pyspark.python", sys.executable)
                 .config("spark.jars", ",".join(str(j) for j in jars)).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        import kbus.spark

        kbus.spark.register(spark)
        by_ts = json.dumps({topic: {str(p): split_ms for p in range(args.partitions)}})
        cases: dict[str, dict[str, str]] = {
            f"batch, {args.partitions} input partitions": {},
            f"batch, minPartitions={2 * args.partitions}": {"minPartitions": str(2 * args.partitions)},
            "batch, startingOffsetsByTimestamp (second half)": {"startingOffsetsByTimestamp": by_ts},
        }
        if "batch" not in args.cases.split(","):
            cases = {}
        stream = "stream" in args.cases.split(",")
        results: dict[tuple[str, str], list[tuple[int, float, int]]] = {}
        phases: dict[str, dict[str, int]] = {}
        cpu: dict[tuple[str, str], list[tuple[float, float, float]]] = {}

        def cpu_now() -> tuple[float, float, float]:
            """(broker, executors, driver) CPU seconds so far; the driver is this process's tree without the
            broker and the cluster's daemons."""
            brk = tree_cpu(broker.pid)
            execs = sum(tree_cpu(w.proc.pid) for w in cluster.workers)
            master = tree_cpu(cluster.master.proc.pid) if cluster.master else 0.0
            return brk, execs, tree_cpu(os.getpid()) - brk - execs - master

        def add_cpu(key: tuple[str, str], before: tuple[float, float, float]) -> None:
            after = cpu_now()
            cpu.setdefault(key, []).append((after[0] - before[0], after[1] - before[1], after[2] - before[2]))

        for fmt in ("kbus", "kafka"):  # warm-up, not timed: executors' Python workers, the connector's classes
            few = json.dumps({topic: {str(p): 10 for p in range(args.partitions)}})
            batch_read(spark, fmt, bootstrap, topic, endingOffsets=few)
        for run in range(args.runs):
            for name, options in cases.items():
                for fmt in ("kbus", "kafka"):  # interleaved: both see the same load
                    before = cpu_now()
                    n, secs = batch_read(spark, fmt, bootstrap, topic, **options)
                    by_timestamp = "startingOffsetsByTimestamp" in options
                    assert n == (args.records - args.records // 2 if by_timestamp else args.records), (name, fmt, n)
                    results.setdefault((name, fmt), []).append((n, secs, 1))
                    add_cpu((name, fmt), before)
            for fmt in ("kbus", "kafka") if stream else ():
                name = f"stream, AvailableNow, maxOffsetsPerTrigger={args.records // 5}"
                before = cpu_now()
                got = stream_read(spark, fmt, bootstrap, topic, args.records // 5, workdir / f"ck-{fmt}-{run}",
                                  phases.setdefault(fmt, {}))
                assert got[0] == args.records and got[2] >= 5, (name, fmt, got)
                results.setdefault((name, fmt), []).append(got)
                add_cpu((name, fmt), before)
        load = os.getloadavg()
        print(f"\n{args.records:,} records of {args.value_size} B in {args.partitions} partitions; standalone "
              f"cluster 2 workers x 1 core; load average {load[0]:.1f}, {os.cpu_count()} CPUs\n")
        print("| read | format | records | micro-batches | records/s (each run) | records/s per core (best) | "
              "kbus / kafka |")
        print("|---|---|---|---|---|---|---|")
        for (name, fmt), runs in results.items():
            rates = [n / secs for n, secs, _ in runs]
            other = results[(name, "kafka")]
            ratio = max(rates) / max(n / s for n, s, _ in other) if fmt == "kbus" else None
            print(f"| {name} | {fmt} | {runs[-1][0]:,} | {runs[-1][2]} | {' / '.join(f'{r:,.0f}' for r in rates)} "
                  f"| {max(rates) / CORES:,.0f} | {f'{ratio:.2f}x' if ratio else ''} |")
        print("\nCPU seconds per 1,000,000 records read (each run: broker / executors (JVMs and Python workers) / "
              "driver):\n")
        print("| read | format | broker | executors | driver | total | kbus / kafka (total) |")
        print("|---|---|---|---|---|---|---|")
        for (name, fmt), runs in cpu.items():
            n = results[(name, fmt)][-1][0] / 1e6
            per = [tuple(c / n for c in r) for r in runs]
            best = min(sum(r) for r in per)
            other = min(sum(c) for c in cpu[(name, "kafka")]) / (results[(name, "kafka")][-1][0] / 1e6)
            cells = [" / ".join(f"{r[i]:.1f}" for r in per) for i in range(3)]
            print(f"| {name} | {fmt} | {' | '.join(cells)} | {' / '.join(f'{sum(r):.1f}' for r in per)} | "
                  f"{f'{best / other:.2f}x' if fmt == 'kbus' else ''} |")
        if phases:
            print("\nstream micro-batches, Spark's durationMs summed over every run's batches (ms):\n")
            print("| format | " + " | ".join(PHASES) + " |")
            print("|---" * (len(PHASES) + 1) + "|")
            for fmt, sums in phases.items():
                print(f"| {fmt} | " + " | ".join(f"{sums.get(n, 0):,}" for n in PHASES) + " |")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        broker.terminate()
        broker.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)  # the broker's log and Spark's work dirs: GBs a run


if __name__ == "__main__":
    sys.exit(main())
