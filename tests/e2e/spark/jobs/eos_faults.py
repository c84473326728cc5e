"""Test job: a kbus topic -> another, exactly once with one transaction per task, while tasks fail or run twice.

usage: eos_faults.py BOOTSTRAP SOURCE SINK WORK_DIR FAULT

FAULT:
  retry        attempt 0 of partition 1 fails after its transaction committed (the executor "died" before Spark
               heard of the success), attempt 0 of partition 2 fails half way through its rows (transaction open)
  cluster      (speculation on, a worker to be killed) batch 0: attempt 0 of partition 0 stalls half way through
               its rows until a speculative twin (which Spark starts on the other worker once the stall has lasted
               twice the median task, however slow a loaded machine makes tasks) has written the partition;
               batch 2 (the one the test kills a worker in): every task holds its open transaction 3 s, so the
               worker takes open transactions with it

The sink is `kbus` wrapped so the job can inject these faults; the driver's commit prints each task's result.
"""

import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession

from kbus.spark.datasource import KbusDataSource, KbusStreamWriter

bootstrap, source, sink, work, fault = sys.argv[1:6]
TWIN_WROTE = os.path.join(work, "twin-wrote-batch-0-partition-0")


def _faulty(iterator, partition: int, attempt: int, batch_id: int):  # type: ignore[no-untyped-def]
    first = True
    for batch in iterator:
        yield batch
        if first and fault == "retry" and partition == 2 and attempt == 0:
            raise RuntimeError("injected: task fails with its transaction open")
        if first and fault == "cluster" and batch_id == 0 and partition == 0 and attempt == 0:
            # the speculative twin fences this attempt and commits meanwhile; this attempt then goes on (fenced)
            # unless Spark killed it first, having heard of the twin's success
            deadline = time.monotonic() + 600
            while not os.path.exists(TWIN_WROTE) and time.monotonic() < deadline:
                time.sleep(0.2)
        elif first and fault == "cluster" and batch_id >= 2:
            time.sleep(3)
        first = False


class FaultyWriter(KbusStreamWriter):
    def write(self, iterator):  # type: ignore[no-untyped-def]
        ctx = TaskContext.get()
        partition, attempt = ctx.partitionId(), ctx.attemptNumber()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        result = super().write(_faulty(iterator, partition, attempt, batch_id))
        if fault == "cluster" and batch_id == 0 and partition == 0 and attempt > 0:
            open(TWIN_WROTE, "w").close()  # the stalled attempt 0 waits for this file
        print(f"TASK partition={partition} attempt={attempt} {result}", file=sys.stderr, flush=True)
        if fault == "retry" and partition == 1 and attempt == 0:
            raise RuntimeError("injected: task fails after its transaction committed")
        return result

    def commit(self, messages, batchId):  # type: ignore[no-untyped-def]
        super().commit(messages, batchId)
        print("COMMIT", batchId, sorted((m.partition, m.records, m.written) for m in messages), flush=True)


class FaultyKbus(KbusDataSource):
    @classmethod
    def name(cls) -> str:
        return "kbusfaulty"

    def streamWriter(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return FaultyWriter(super().streamWriter(schema, overwrite).options)


spark = SparkSession.builder.appName(f"eos-{fault}").getOrCreate()
spark.dataSource.register(FaultyKbus)
query = (
    spark.readStream.format("kbus")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", source)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "400" if fault == "cluster" else "3000")
    .option("kafka.max.partition.fetch.bytes", "4096")  # small fetches: a task's rows come in many batches
    .option("minRecordsPerTask", "0")  # one task per source partition: the faults need several tasks per batch
    .load()
    .selectExpr("key", "CONCAT(CAST(value AS STRING), '@', CAST(partition AS STRING), '/', CAST(offset AS STRING))"
                " AS value")
    .writeStream.format("kbusfaulty")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("kafka.transactional.id", f"eos-{sink}")
    .option("topic", sink)
    .option("checkpointLocation", f"{work}/checkpoint")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
print("rows", sum(p.numInputRows for p in query.recentProgress), flush=True)
