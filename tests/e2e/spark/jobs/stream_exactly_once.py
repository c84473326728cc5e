"""Test job: a kbus topic -> another kbus topic, exactly once (kafka.transactional.id), run by `kbus spark-submit`.

usage: stream_exactly_once.py BOOTSTRAP SOURCE SINK WORK_DIR run|now

`start` is the query itself, so a test can resume it from the checkpoint in its own SparkSession.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def start(spark: SparkSession, bootstrap: str, source: str, sink: str, work: str, mode: str) -> StreamingQuery:
    writer = (
        spark.readStream.format("kbus")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "500")
        .load()
        .selectExpr("key", "CONCAT(CAST(value AS STRING), '@', CAST(partition AS STRING), '/', CAST(offset AS STRING))"
                    " AS value")
        .writeStream.format("kbus")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.transactional.id", f"eos-{sink}")
        .option("topic", sink)
        .option("checkpointLocation", f"{work}/checkpoint")
    )
    trigger = {"availableNow": True} if mode == "now" else {"processingTime": "1 second"}
    return writer.trigger(**trigger).start()


if __name__ == "__main__":
    bootstrap, source, sink, work, mode = sys.argv[1:6]
    spark = SparkSession.builder.appName("stream-exactly-once").getOrCreate()
    query = start(spark, bootstrap, source, sink, work, mode)
    query.awaitTermination()
    print("rows", sum(p.numInputRows for p in query.recentProgress), flush=True)
