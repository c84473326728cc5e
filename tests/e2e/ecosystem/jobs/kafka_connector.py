"""A PySpark job on Spark's own Kafka connector (format "kafka", spark-sql-kafka-0-10) against kbus: batch write,
batch read with headers, a stream from one topic to another run twice on one checkpoint, and the same topic
read by format "kbus" for comparison. Prints one `RESULT {json}` line.

    kbus spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION kafka_connector.py \\
        BOOTSTRAP SRC_TOPIC DST_TOPIC CHECKPOINT_DIR
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def rows(spark: SparkSession, first: int, last: int) -> DataFrame:
    ids = spark.range(first, last)
    return ids.select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.array(F.struct(F.lit("n").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))).alias(
            "headers"
        ),
    )


def stream_once(spark: SparkSession, bootstrap: str, src: str, dst: str, checkpoint: str) -> int:
    """One availableNow run of src -> upper(value) -> dst; returns the rows it read."""
    q = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    return sum(p["numInputRows"] for p in q.recentProgress)


def main() -> None:
    bootstrap, src, dst, checkpoint = sys.argv[1:5]
    spark = SparkSession.builder.appName("kbus-kafka-connector").getOrCreate()
    result: dict[str, object] = {}
    kafka = {"kafka.bootstrap.servers": bootstrap}

    rows(spark, 0, 300).write.format("kafka").options(**kafka).option("topic", src).save()
    read = spark.read.format("kafka").options(**kafka).option("subscribe", src).option("includeHeaders", "true").load()
    got = read.selectExpr(
        "CAST(key AS STRING) k", "CAST(value AS STRING) v", "topic", "partition", "offset", "timestampType",
        "CAST(headers[0].value AS STRING) n",
    ).collect()  # fmt: skip
    result["batch_rows"] = len(got)
    result["batch_keys_match"] = all(r.v == "v" + r.k[1:] == "v" + r.n for r in got)
    result["batch_partitions"] = sorted({r.partition for r in got})
    result["batch_topic"] = sorted({r.topic for r in got})
    by_partition: dict[int, list[int]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.offset)
    result["batch_offsets_dense"] = all(sorted(o) == list(range(len(o))) for o in by_partition.values())
    ranged = (
        spark.read.format("kafka").options(**kafka).option("subscribe", src)
        .option("startingOffsets", json.dumps({src: {"0": 10, "1": -2, "2": -2}}))  # -2: earliest
        .option("endingOffsets", json.dumps({src: {"0": 20, "1": -1, "2": -1}}))  # -1: latest
        .load().where("partition = 0").count()
    )  # fmt: skip
    result["ranged_rows_partition_0"] = ranged

    result["stream_first_run"] = stream_once(spark, bootstrap, src, dst, checkpoint)
    rows(spark, 300, 350).write.format("kafka").options(**kafka).option("topic", src).save()
    result["stream_second_run"] = stream_once(spark, bootstrap, src, dst, checkpoint)

    out = spark.read.format("kafka").options(**kafka).option("subscribe", dst).load()
    values = [r.v for r in out.selectExpr("CAST(value AS STRING) v").collect()]
    result["dst_rows"] = len(values)
    result["dst_distinct"] = len(set(values))
    result["dst_upper"] = all(v == v.upper() and v.startswith("V") for v in values)
    # the kbus data source (no jar) reads the same topic to the same rows
    kbus_values = spark.read.format("kbus").options(**kafka).option("subscribe", dst).load()
    result["kbus_same_rows"] = sorted(values) == sorted(
        r.v for r in kbus_values.selectExpr("CAST(value AS STRING) v").collect()
    )
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
