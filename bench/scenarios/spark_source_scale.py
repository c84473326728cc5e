"""Benchmark: the kbus Spark source at scale, beside Spark's own format("kafka") in the same run: a topic of 100
partitions read by a standalone cluster (a master and 2 workers x 1 core) in batch (all of it; with minPartitions;
from startingOffsetsByTimestamp) and streaming (Trigger.AvailableNow with maxOffsetsPerTrigger, to the noop sink).

    bench/run spark-source-scale [--records 2000000] [--partitions 100] [--runs 2]
        [--kafka-connector 4.2.0]

It starts its own kbus broker and the cluster and stops them. records/s per core = records / seconds / 2 (the
cluster's cores; the broker and the driver share the same machine). Results: a markdown table on stdout (see
bench/notes/spark_write.md, "The source at scale").
"""

from __future__ import annotations

import argparse
import json
import os
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


def stream_read(spark: SparkSession, fmt: str, bootstrap: str, topic: str, per_trigger: int,
                checkpoint: Path) -> tuple[int, float, int]:
    df = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger)).load())
    t0 = time.perf_counter()
    query = (df.selectExpr("length(value) AS n").writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    batches = [p for p in query.recentProgress if p.numInputRows > 0]
    return sum(p.numInputRows for p in batches), elapsed, len(batches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--kafka-connector", metavar="VERSION", default="4.2.0")
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
        results: dict[tuple[str, str], list[tuple[int, float, int]]] = {}
        for fmt in ("kbus", "kafka"):  # warm-up, not timed: executors' Python workers, the connector's classes
            few = json.dumps({topic: {str(p): 10 for p in range(args.partitions)}})
            batch_read(spark, fmt, bootstrap, topic, endingOffsets=few)
        for run in range(args.runs):
            for name, options in cases.items():
                for fmt in ("kbus", "kafka"):  # interleaved: both see the same load
                    n, secs = batch_read(spark, fmt, bootstrap, topic, **options)
                    by_timestamp = "startingOffsetsByTimestamp" in options
                    assert n == (args.records - args.records // 2 if by_timestamp else args.records), (name, fmt, n)
                    results.setdefault((name, fmt), []).append((n, secs, 1))
            for fmt in ("kbus", "kafka"):
                name = f"stream, AvailableNow, maxOffsetsPerTrigger={args.records // 5}"
                got = stream_read(spark, fmt, bootstrap, topic, args.records // 5, workdir / f"ck-{fmt}-{run}")
                assert got[0] == args.records and got[2] >= 5, (name, fmt, got)
                results.setdefault((name, fmt), []).append(got)
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
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        broker.terminate()
        broker.wait(30)


if __name__ == "__main__":
    sys.exit(main())
