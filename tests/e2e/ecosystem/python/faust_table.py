"""A Faust app run by tests/e2e/ecosystem/test_python_apps.py in its own venv (scripts/python-apps.sh): an agent
that sums each key's values into a table (in memory, so after a restart its only source is the table's changelog
topic) and prints the table twice a second.

    faust_table.py APP_ID BOOTSTRAP INPUT DATADIR

stdout: "PROCESSED <key> <value>" per message, "TABLE <json>" (the whole table, keys sorted) every 0.5 s."""

import json
import sys

import faust

app_id, bootstrap, input_name, datadir = sys.argv[1:5]
sys.argv[1:] = ["worker", "--loglevel", "info", "--without-web"]  # no web server: no port to pick
app = faust.App(
    app_id,
    broker=[f"kafka://{hp}" for hp in bootstrap.split(",")],
    store="memory://",
    datadir=datadir,
    topic_partitions=3,
    broker_commit_interval=0.5,
    # a restart after kill -9 waits for the dead member's session to expire: 6 s, not Faust's 60 s
    broker_session_timeout=6,
    broker_heartbeat_interval=1,
    consumer_auto_offset_reset="earliest",
)
source = app.topic(input_name, key_type=str, value_type=str)
totals = app.Table("totals", default=int, partitions=3)


@app.agent(source)
async def add(stream):
    async for key, value in stream.items():
        totals[key] += int(value)
        print(f"PROCESSED {key} {value}", flush=True)


@app.timer(0.5)
async def show() -> None:
    print("TABLE " + json.dumps(dict(sorted(totals.items()))), flush=True)


if __name__ == "__main__":
    app.main()
