"""A Quix Streams app run by tests/e2e/ecosystem/test_python_apps.py in its own venv (scripts/python-apps.sh):
a 1-second tumbling-window sum per key, its state in RocksDB with a changelog topic, exactly-once.

    quix_windowed_sum.py BOOTSTRAP INPUT OUTPUT GROUP STATE_DIR SLEEP_S

Each output record is {"start": ms, "end": ms, "sum": n} keyed by the input key. SLEEP_S slows each message down so
the test can kill the app mid-stream; "PROCESSED <n>" lines on stdout say how far it got."""

import json
import sys
import time

from quixstreams import Application

bootstrap, input_name, output_name, group, state_dir, sleep_s = sys.argv[1:7]
app = Application(
    broker_address=bootstrap,
    consumer_group=group,
    auto_offset_reset="earliest",
    processing_guarantee="exactly-once",
    commit_interval=0.5,
    state_dir=state_dir,
    loglevel="INFO",
    # the restarted app's rebalance waits for the killed member's session to expire: 6 s, not librdkafka's 45 s
    consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
    # Quix makes a new transactional.id per run, so the killed run's open transaction is not fenced by the restart:
    # it holds the output's last stable offset until the coordinator aborts it, transaction.timeout.ms later (as on
    # Kafka): 5 s, not librdkafka's 60 s
    producer_extra_config={"transaction.timeout.ms": 5000},
)
source = app.topic(input_name, value_deserializer="json", key_deserializer="str")
sink = app.topic(output_name, value_serializer="json", key_serializer="str")
processed = 0


def slow(value: dict) -> dict:
    global processed
    processed += 1
    print(f"PROCESSED {processed}", flush=True)
    time.sleep(float(sleep_s))
    return value


sdf = app.dataframe(source).apply(slow).apply(lambda v: v["n"])
sdf = sdf.tumbling_window(duration_ms=1000).sum().final()
sdf = sdf.apply(lambda w: {"start": w["start"], "end": w["end"], "sum": w["value"]})
sdf.to_topic(sink)
print(json.dumps({"started": True}), flush=True)
app.run()
