"""Test job: a kbus topic -> another kbus topic, exactly once (kafka.transactional.id), run by `kbus spark-submit`.

usage: stream_exactly_once.py BOOTSTRAP SOURCE SINK WORK_DIR run|now
"""

import sys

from pyspark.sql import SparkSession

bootstrap, source, sink, work, mode = sys.argv[1:6]
spark = SparkSession.builder.appName("stream-exactly-once").getOrCreate()
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
query = writer.trigger(**trigger).start()
query.awaitTermination()
print("rows", sum(p.numInputRows for p in query.recentProgress), flush=True)
