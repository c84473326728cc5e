"""CPU of one pass of each periodic per-partition job of the broker, in process, at 11,111 partitions (topics of 1,
10, 100, 1,000 and 10,000 partitions, one log dir), for the kbus of the checkout this runs from:

    cd CHECKOUT && .venv-python path/to/periodic_cost.py WORKDIR [N]

High-watermark checkpoint (every 5 s), recovery-point/log-start checkpoint (60 s), cleaner scan (15 s), ISR
shrink check (15 s), retention pass (300 s): each timed N times with the thread's CPU clock, (a) nothing changed
since the last pass, (b) one record appended to each of 10 partitions before each pass (the light load's
shape). Prints one JSON line per job and case: median and max ms."""
import asyncio, json, os, shutil, statistics, sys, time
sys.path.insert(0, os.getcwd())  # the kbus of the checkout this runs from
import kbus.server.replication.replica_manager as rm_module

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol import record_batch as rb
from kbus.server.log.manager import LogManager
from kbus.server.metadata.local import LocalMetadataStore
from kbus.server.replication.replica_manager import ReplicaManager

work, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
shutil.rmtree(work, ignore_errors=True)
config = KafkaConfig.from_properties({"broker.id": "0", "log.dirs": f"{work}/logs"})
store = LocalMetadataStore(config.log_dirs[0], BrokerInfo(0, "127.0.0.1", 9092))
store.start()
logs = LogManager(config.log_dirs, config.log_defaults)
logs.startup()
replicas = ReplicaManager(config, 0, store, logs)
for size in (1, 10, 100, 1000, 10000):
    store.create_topic(f"p{size}", size, 1, {})
asyncio.run(replicas.apply_metadata())
assert len(replicas.partitions) == 11111, len(replicas.partitions)
record = rb.build_batch([(None, b"x" * 100)], timestamp_ms=int(time.time() * 1000))
light = [replicas.partitions[("p10", i)] for i in range(10)]


def produce() -> None:
    for part in light:
        replicas.append_records(part, record, 1)


def flushed() -> None:
    for part in light:
        replicas.append_records(part, record, 1)
        part.log.flush()  # the recovery point moves


jobs = {
    "hw-checkpoint": (replicas.checkpoint_high_watermarks, produce),
    "recovery-point-checkpoint": (logs.checkpoint, flushed),
    "cleaner-scan": (logs.run_cleaner, produce),
    "isr-shrink-check": (replicas.shrink_isrs, produce),
    "retention": (lambda: logs.run_retention(None, replicas.high_watermarks()), produce),
}
for name, (job, change) in jobs.items():
    job()  # the first pass writes whatever there is
    for case in ("idle", "light"):
        ms = []
        for _ in range(n):
            if case == "light":
                change()
            t = time.thread_time_ns()
            job()
            ms.append((time.thread_time_ns() - t) / 1e6)
        print(json.dumps({"checkout": os.getcwd(), "compiled": rm_module.__file__.endswith(".so"), "job": name,
                          "case": case, "n": n,
                          "median_ms": round(statistics.median(ms), 3), "max_ms": round(max(ms), 3)}), flush=True)
asyncio.run(replicas.stop())
logs.shutdown()
shutil.rmtree(work, ignore_errors=True)
