"""Benchmark: Spark writes to kbus from 8 tasks on a standalone cluster (a master and 2 workers): the kbus sink
exactly once (one transaction per task), the same job at least once, and Spark's own format("kafka") sink, in the
same run, interleaved; and the driver's peak memory (RSS) for an exactly-once write at two sizes.

    bench/run spark-write [--records 10000000] [--tasks 8] [--runs 2] [--value-size 100]
        [--kafka-connector 4.2.0] [--rss-records 1000000] [--eo-variant KEY=VALUE ...]

It starts its own kbus broker and the cluster (pyspark's spark-class, loopback, free ports) and stops them.
The write is a batch `df.write.save()` of `spark.range(records)` in `--tasks` partitions: the same per-task code
as a streaming micro-batch (kbus/spark/task_txn.py), with a save id in place of the query and batch ids.
Driver memory: the peak RSS (VmHWM, reset through /proc/PID/clear_refs before each write) of the driver's JVM and
every process under it (the Python workers Spark starts on the driver), for an exactly-once write of
--rss-records and of 4x as many; with --driver-scope also transactionScope=batch (everything through the driver).
Per write also the CPU per record of every process under this one (broker, cluster JVMs, executors' Python
workers, driver JVM): on this shared machine a steadier comparison than records/s. --eo-variant KEY=VALUE adds an
exactly-once sink with that option (e.g. kafka.linger.ms=50), interleaved with the others.
Results: a markdown table on stdout (see bench/notes/spark_write.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession
from spark_read import REPO, start_broker  # type: ignore[import-not-found]

sys.path.insert(0, str(REPO))
from kbus.spark.connector import CONNECTOR, connector_jars
from tests.e2e.spark.standalone import StandaloneCluster


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"bench-write-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    return topic


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-write-check"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
    finally:
        c.close()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peaks(pids: list[int]) -> None:
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")  # reset VmHWM to the current RSS
        except OSError:
            pass


def cpu_seconds(root: int) -> float:
    """CPU (user + system) so far of every process under `root` but itself: the broker, the cluster's JVMs, the
    executors' Python workers and the driver's JVM. Per write, a cost per record that the machine's other load
    disturbs far less than the write's wall time does."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for pid in descendants(root):
        if pid == root:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / tick


def driver_jvm(root: int) -> int:
    """The driver's JVM: the SparkSubmit process pyspark started under this one (the cluster's JVMs, also under
    this process, are Master/Worker/executor processes)."""
    return next(p for p in descendants(root) if "org.apache.spark.deploy.SparkSubmit" in _cmdline(p))


def driver_peak_mb(jvm: int) -> tuple[float, float]:
    """(the driver JVM's peak RSS, the sum over the JVM, the Python workers it started and this Python driver), MB."""
    pids = [*descendants(jvm), os.getpid()]
    return _hwm_kb(jvm) / 1024, sum(_hwm_kb(p) for p in pids) / 1024


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def data(spark: SparkSession, records: int, tasks: int, value_size: int) -> DataFrame:
    pad = max(0, value_size - 12)
    return spark.range(0, records, 1, tasks).selectExpr(
        "CAST(id AS STRING) AS key", f"concat(lpad(CAST(id AS STRING), 12, '0'), repeat('x', {pad})) AS value")


def write(df: DataFrame, fmt: str, bootstrap: str, topic: str, options: dict[str, str]) -> float:
    writer = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for k, v in options.items():
        writer = writer.option(k, v)
    t0 = time.perf_counter()
    writer.mode("append").save()
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--rss-records", type=int, default=1_000_000)
    parser.add_argument("--driver-scope", action="store_true", help="also measure transactionScope=batch's RSS")
    parser.add_argument("--eo-variant", action="append", default=[], metavar="KEY=VALUE",
                        help="also an exactly-once write with this sink option (e.g. kafka.linger.ms=50), interleaved")
    parser.add_argument("--kafka-connector", metavar="VERSION", default="4.2.0",
                        help=f"Spark's own sink ({CONNECTOR}:VERSION, fetched into .cache/); 'none' to skip")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="kbus-bench-spark-write-"))
    broker, bootstrap = start_broker(workdir)
    cluster = StandaloneCluster(workdir / "cluster")
    spark = None
    try:
        cluster.start(workers=2)
        jars = [] if args.kafka_connector == "none" else connector_jars(args.kafka_connector, REPO / ".cache")
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        builder = (SparkSession.builder.master(cluster.url).appName("bench-spark-write")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.executor.memory", "512m").config("spark.driver.memory", "1g")
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.pyspark.python", sys.executable))
        if jars:
            builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        import kbus.spark

        kbus.spark.register(spark)
        df = data(spark, args.records, args.tasks, args.value_size)
        sinks: dict[str, tuple[str, dict[str, str]]] = {
            "kbus, exactly once (transaction per task)": ("kbus", {"kafka.transactional.id": "@"}),
            "kbus, at least once": ("kbus", {}),
        }
        for variant in args.eo_variant:
            key, _, value = variant.partition("=")
            sinks[f"kbus, exactly once, {key}={value}"] = ("kbus", {"kafka.transactional.id": "@", key: value})
        if jars:
            sinks["Spark format(\"kafka\"), at least once"] = ("kafka", {})
        seconds: dict[str, list[float]] = {name: [] for name in sinks}
        cpu: dict[str, list[float]] = {name: [] for name in sinks}
        for fmt, options in sinks.values():  # warm-up, not timed: Python workers, internal topics, coordinators
            topic = create_topic(bootstrap, args.tasks)
            write(data(spark, 10_000, args.tasks, args.value_size), fmt, bootstrap, topic,
                  {k: (f"bench-{topic}" if v == "@" else v) for k, v in options.items()})
        for _ in range(args.runs):  # interleaved: every sink sees the same load
            for name, (fmt, options) in sinks.items():
                topic = create_topic(bootstrap, args.tasks)
                opts = {k: (f"bench-{topic}" if v == "@" else v) for k, v in options.items()}
                cpu_before = cpu_seconds(os.getpid())
                seconds[name].append(write(df, fmt, bootstrap, topic, opts))
                cpu[name].append(cpu_seconds(os.getpid()) - cpu_before)
                written = end_offsets(bootstrap, topic, args.tasks)
                # exactly once: each task's transaction ends with a marker on every partition it wrote (an offset
                # each); at least once with no retry: exactly the records
                assert args.records <= written <= args.records + args.tasks * args.tasks, (name, written)

        rss: list[tuple[str, int, float, float]] = []
        scopes = ["task", "batch"] if args.driver_scope else ["task"]
        for scope in scopes:
            for n in (args.rss_records, 4 * args.rss_records):
                topic = create_topic(bootstrap, args.tasks)
                jvm_pid = driver_jvm(os.getpid())
                reset_peaks([*descendants(jvm_pid), os.getpid()])
                write(data(spark, n, args.tasks, args.value_size), "kbus", bootstrap, topic,
                      {"kafka.transactional.id": f"bench-{topic}", "transactionScope": scope})
                jvm, total = driver_peak_mb(jvm_pid)
                rss.append((scope, n, jvm, total))

        load = os.getloadavg()
        print(f"\n{args.records:,} records of {args.value_size} B, {args.tasks} tasks, standalone cluster of 2 "
              f"workers x 1 core; load average {load[0]:.1f}, {os.cpu_count()} CPUs\n")
        print("| sink | records/s (each run) | best | vs at least once (best) | CPU us/record (each run) |")
        print("|---|---|---|---|---|")
        best_alo = args.records / min(seconds["kbus, at least once"])
        for name, secs in seconds.items():
            rates = [args.records / s for s in secs]
            print(f"| {name} | {' / '.join(f'{r:,.0f}' for r in rates)} | {max(rates):,.0f} | "
                  f"{max(rates) / best_alo:.2f}x | {' / '.join(f'{c / args.records * 1e6:.2f}' for c in cpu[name])} |")
        print("\n| driver, exactly once | records written | driver JVM peak RSS MB | JVM + its Python workers MB |")
        print("|---|---|---|---|")
        for scope, n, jvm, total in rss:
            print(f"| transactionScope={scope} | {n:,} | {jvm:,.0f} | {total:,.0f} |")
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
