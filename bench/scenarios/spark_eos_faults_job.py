"""The Spark job of bench/scenarios/spark_eos_faults.py: a streaming query writing RECORDS records to a kbus topic
exactly once (kafka.transactional.id, one transaction per task), in micro-batches of BATCH records from TASKS tasks.

usage (through `kbus spark-submit`): spark_eos_faults_job.py BOOTSTRAP TOPIC SINK_ID CHECKPOINT RECORDS BATCH TASKS
    VALUE_SIZE STALL

The source is Spark's `rate-micro-batch` (rowsPerBatch=BATCH, numPartitions=TASKS): micro-batch N is the ids
[N*BATCH, (N+1)*BATCH), split the same way into TASKS partitions every time it is planned, so a batch replayed after
a driver crash has the same rows per task, as the sink's conditions require. Row id i becomes key = str(i), value =
i zero-padded to 12 digits then 'x' up to VALUE_SIZE bytes. Ids >= RECORDS are filtered out; the job stops its query
once the checkpoint has committed the last batch that holds any (a query restarted from the checkpoint carries on
where it was).

STALL > 0: in micro-batch 0, the first attempt of partition 0 stops half way through its transaction for up to STALL
seconds, so Spark (spark.speculation=true) runs a speculative copy of it on the other worker, which fences it.
The driver prints each micro-batch's task results (partition, records, written) as `COMMIT <batch> [...]`: written
False means the task found its marker, i.e. an earlier attempt or an earlier driver had committed it.
"""

import sys
import time
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession

from kbus.spark.datasource import KbusDataSource, KbusStreamWriter

bootstrap, topic, sink_id, checkpoint = sys.argv[1:5]
records, batch, tasks, value_size, stall = (int(a) for a in sys.argv[5:10])
last_batch = (records + batch - 1) // batch - 1


def _stalled(iterator, seconds: float):  # type: ignore[no-untyped-def]
    first = True
    for b in iterator:
        yield b
        if first:
            time.sleep(seconds)  # ends when Spark kills this attempt (its twin succeeded) or after STALL s
        first = False


class Writer(KbusStreamWriter):
    def write(self, iterator):  # type: ignore[no-untyped-def]
        ctx = TaskContext.get()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        if stall and batch_id == 0 and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            iterator = _stalled(iterator, stall)
        return super().write(iterator)

    def commit(self, messages, batchId):  # type: ignore[no-untyped-def]
        super().commit(messages, batchId)
        print("COMMIT", batchId, sorted((m.partition, m.records, m.written) for m in messages if m is not None),
              flush=True)


class BenchKbus(KbusDataSource):
    @classmethod
    def name(cls) -> str:
        return "kbusbench"

    def streamWriter(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return Writer(super().streamWriter(schema, overwrite).options)


spark = SparkSession.builder.appName("bench-spark-eos-faults").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
spark.dataSource.register(BenchKbus)
pad = max(0, value_size - 12)
query = (
    spark.readStream.format("rate-micro-batch")
    .option("rowsPerBatch", str(batch))
    .option("numPartitions", str(tasks))
    .load()
    .where(f"value < {records}")
    .selectExpr("CAST(value AS STRING) AS key",
                f"concat(lpad(CAST(value AS STRING), 12, '0'), repeat('x', {pad})) AS value")
    .writeStream.format("kbusbench")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("kafka.transactional.id", sink_id)
    .option("topic", topic)
    .option("checkpointLocation", checkpoint)
    .start()
)
done = Path(checkpoint) / "commits" / str(last_batch)
print("STARTED", query.id, flush=True)
while query.isActive and not done.exists():
    query.awaitTermination(0.5)
if query.exception() is not None:
    raise SystemExit(f"query failed: {query.exception()}")
query.stop()
print("DONE", last_batch, flush=True)
