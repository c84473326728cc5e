"""Benchmark: records/s read by a Spark batch job through the `kbus` data source, beside the raw confluent-kafka
consume rate of the same topic on the same broker.

    .venv/bin/python bench/scenarios/spark_read.py [--bootstrap-server HOST:PORT] [--records 1000000] [--partitions 3]
        [--kafka-connector 4.2.0]     # Spark's own format("kafka") beside format("kbus"), same session and topic

Without --bootstrap-server it starts its own kbus broker (python -m kbus.server) in a temporary directory on a free
loopback port and stops it at the end. Results are printed as a markdown table (see bench/notes/spark_read.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kbus.spark.connector import CONNECTOR, connector_jars

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(workdir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = workdir / "server.properties"
    config.write_text(
        f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={workdir / 'data'}\n"
        "num.partitions=1\noffsets.topic.replication.factor=1\n"
    )
    log = open(workdir / "server.log", "ab")  # noqa: SIM115 - lives as long as the broker
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbus.server", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"kbus broker did not start; see {workdir / 'server.log'}")


def produce(bootstrap: str, topic: str, records: int, value_size: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "partitioner": "murmur2_random"}
    )
    errors: list[KafkaError] = []
    value = b"x" * value_size
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, b"key-%d" % (i % 1000), on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0 and not errors, errors[:3]
    rate = records / (time.perf_counter() - t0)
    del producer  # disconnect now, not when the broker is already gone
    return rate


def raw_consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """One librdkafka consumer, assign() to all partitions from 0, consume() in batches: the client's own rate."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "fetch.wait.max.ms": 100,
        }
    )
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    nbytes = 0
    while seen < records:
        for m in consumer.consume(10000, timeout=1.0):
            if m.error() is None:
                seen += 1
                nbytes += len(m.value())  # touch the payload, as any reader does
    rate = seen / (time.perf_counter() - t0)
    consumer.close()
    return rate


def spark_session(jars: list[Path]) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import kbus.spark

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    if jars:  # Spark's own Kafka connector, for format("kafka") side by side
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kbus.spark.register(spark)
    return spark


def spark_read(
    spark: SparkSession, fmt: str, bootstrap: str, topic: str, records: int, min_partitions: int | None
) -> float:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    t0 = time.perf_counter()
    # Every row crosses into the JVM and its value is looked at: a full scan, not a metadata count.
    row = reader.load().agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).first()
    elapsed = time.perf_counter() - t0
    assert row is not None and row["n"] == records, row
    return records / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--kafka-connector",
        metavar="VERSION",
        help=f"also read with Spark's own format('kafka') ({CONNECTOR}:VERSION, fetched into .cache/), "
        "interleaved with format('kbus') in the same session",
    )
    args = parser.parse_args()

    broker = None
    workdir = Path(tempfile.mkdtemp(prefix="kbus-bench-spark-"))
    try:
        if args.bootstrap_server:
            bootstrap = args.bootstrap_server
        else:
            broker, bootstrap = start_broker(workdir)
        topic = f"bench-spark-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            f.result(30)
        del admin
        time.sleep(1)
        produce_rate = produce(bootstrap, topic, args.records, args.value_size)
        raw = [raw_consume(bootstrap, topic, args.partitions, args.records) for _ in range(args.runs)]
        jars = connector_jars(args.kafka_connector, REPO / ".cache") if args.kafka_connector else []
        spark = spark_session(jars)
        formats = ["kbus", "kafka"] if jars else ["kbus"]
        results: dict[str, list[float]] = {}
        for min_partitions in (None, 2 * args.partitions):
            for _ in range(args.runs):  # interleaved, so both readers see the same machine load
                for fmt in formats:
                    rate = spark_read(spark, fmt, bootstrap, topic, args.records, min_partitions)
                    results.setdefault(f"{fmt}/{min_partitions}", []).append(rate)
        load = os.getloadavg()
        print(
            f"\n{args.records:,} records of {args.value_size} B in {args.partitions} partitions; "
            f"load average {load[0]:.1f}, {os.cpu_count()} CPUs\n"
        )
        print("| reader | records/s (each run) | best |")
        print("|---|---|---|")
        print(f"| confluent-kafka produce (setup) | {produce_rate:,.0f} | |")
        rows = [("confluent-kafka consume, 1 consumer, assign() all partitions", raw)]
        for fmt in formats:
            rows.append(
                (f'Spark format("{fmt}"), local[2], {args.partitions} input partitions', results[f"{fmt}/None"])
            )
            rows.append(
                (
                    f'Spark format("{fmt}"), local[2], minPartitions={2 * args.partitions}',
                    results[f"{fmt}/{2 * args.partitions}"],
                )
            )
        for name, rates in rows:
            print(f"| {name} | {' / '.join(f'{r:,.0f}' for r in rates)} | {max(rates):,.0f} |")
        return 0
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(broker.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
