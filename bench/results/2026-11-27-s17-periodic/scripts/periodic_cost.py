"""CPU of one pass of the broker's periodic per-log jobs, in process, at 11,111 partitions (topics of 1, 10, 100,
1,000 and 10,000 partitions, one log dir), for the kbus of the checkout this runs from (session 16's
bench/results/2026-11-27-s16-spikes/scripts/periodic_cost.py, with the retention and cleaner cases split):

    cd CHECKOUT && .venv/bin/python path/to/periodic_cost.py WORKDIR [N]

Each job is timed N times with the thread's CPU clock (medians and max, ms), after one untimed pass:
- retention (log.retention.check.interval.ms, 300 s; LogManager.run_retention with the high watermarks, as the
  broker calls it): "idle" every log one segment; "rolled" after the 1,000 logs of topic p1000 were rolled once
  (two segments each, nothing due: retention.ms 7 days); "light" one record appended to each of 10 partitions
  before each pass.
- retention-python-walk: kbus-pre's interpreted loop over the logs calling the same Log methods (what the compiled
  walk saves, apart from the Log methods' own fast paths).
- cleaner-scan (log.cleaner.backoff.ms, 15 s; LogManager.run_cleaner: no log compacts, so the walk alone).
- high-watermark checkpoint (5 s; unchanged this session: a control for the two trees' machine minutes).
Prints one JSON line per job and case.

GC=broker (the default): after the topics are made, what kbus/server/main.py does once the broker started
(gc.collect(), gc.freeze(), a young collection every 20,000 allocations), so a pass pays the collections its own
allocations trigger, not full ones over 11,111 fresh logs' objects. GC=default: Python's settings (the first run)."""
import gc, asyncio, json, os, shutil, statistics, sys, time
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
if os.environ.get("GC", "broker") == "broker":
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, *gc.get_threshold()[1:])


def nothing() -> None:
    pass


def produce() -> None:
    for part in light:
        replicas.append_records(part, record, 1)


def roll_p1000() -> None:
    for i in range(1000):
        part = replicas.partitions[("p1000", i)]
        replicas.append_records(part, record, 1)
        part.log.roll()
        replicas.append_records(part, record, 1)  # the HW passes the first segment


def retention() -> None:
    logs.run_retention(None, replicas.high_watermarks())


def retention_python_walk() -> None:
    """kbus-pre's LogManager.run_retention loop (interpreted, one frame per log) over this tree's Log methods."""
    now, hws = int(time.time() * 1000), replicas.high_watermarks()
    for tp, lg in list(logs.logs().items()):
        lg.enforce_retention(now, max_offset=hws.get(tp))
        lg.remove_expired_producers(now, logs.producer_id_expiration_ms)


cases = [
    ("hw-checkpoint", "idle", replicas.checkpoint_high_watermarks, nothing, None),
    ("cleaner-scan", "idle", logs.run_cleaner, nothing, None),
    ("retention", "idle", retention, nothing, None),
    ("retention", "light", retention, produce, None),
    ("retention-python-walk", "idle", retention_python_walk, nothing, None),
    ("retention", "rolled", retention, nothing, roll_p1000),
    ("retention-python-walk", "rolled", retention_python_walk, nothing, None),
]
for name, case, job, change, setup in cases:
    if setup is not None:
        setup()
    job()  # the first pass does whatever there is
    ms = []
    for _ in range(n):
        change()
        t = time.thread_time_ns()
        job()
        ms.append((time.thread_time_ns() - t) / 1e6)
    print(json.dumps({"checkout": os.getcwd(), "gc": os.environ.get("GC", "broker"), "compiled": rm_module.__file__.endswith(".so"), "job": name,
                      "case": case, "n": n, "median_ms": round(statistics.median(ms), 3),
                      "max_ms": round(max(ms), 3)}), flush=True)
os._exit(0)  # (the logs' shutdown and removal took minutes on this shared disk: the caller removes WORKDIR)
