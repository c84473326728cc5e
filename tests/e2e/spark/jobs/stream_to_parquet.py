"""Test job: a kbus topic -> Parquet streaming query, run by `kbus spark-submit` (no register call: auto-registered).

usage: stream_to_parquet.py BOOTSTRAP TOPIC WORK_DIR run|now
"""

import sys

from pyspark.sql import SparkSession

bootstrap, topic, work, mode = sys.argv[1:5]
spark = SparkSession.builder.appName("stream-to-parquet").getOrCreate()
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
query = writer.trigger(**trigger).start()
query.awaitTermination()
print("rows", sum(p.numInputRows for p in query.recentProgress), flush=True)
