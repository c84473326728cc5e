"""Test job: a kbus topic -> Parquet streaming query, run by `kbus spark-submit` (no register call: auto-registered).

usage: stream_to_parquet.py BOOTSTRAP TOPIC WORK_DIR run|now

`start` is the query itself, so a test can resume it from the checkpoint in its own SparkSession.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def start(spark: SparkSession, bootstrap: str, topic: str, work: str, mode: str) -> StreamingQuery:
    writer = (
        spark.readStream.format("kbus")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "500")
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", f"{work}/out")
        .option("checkpointLocation", f"{work}/checkpoint")
    )
    trigger = {"availableNow": True} if mode == "now" else {"processingTime": "1 second"}
    return writer.trigger(**trigger).start()


if __name__ == "__main__":
    bootstrap, topic, work, mode = sys.argv[1:5]
    query = start(SparkSession.builder.appName("stream-to-parquet").getOrCreate(), bootstrap, topic, work, mode)
    query.awaitTermination()
    print("rows", sum(p.numInputRows for p in query.recentProgress), flush=True)
