"""Load for a profiler attached to one broker (prof.sh): the partitions axis's Fetch cells of scale.py, repeated
for --seconds. `full`: full sessionless Fetches of every partition of scale-p<N> at its high watermark (nothing
new); `consume`: librdkafka consumes of the same-log topic scale-same-p<N> (batches of 100 records), over and over.
Both topics are made (and written) first if missing, as scale.py makes them."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios"))
import scale
from fetch_sessions import FetchResp, fetch_request


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("setup", "full", "consume"))
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    args = SimpleNamespace(bootstrap=a.bootstrap, broker_pid=a.broker_pid, same_log_batch=100, log_dir=None)
    n = a.partitions
    topic, same = f"scale-p{n}", f"scale-same-p{n}"
    if a.mode == "setup":
        asyncio.run(scale.create_topic_timed(args, topic, n))
        scale.produce(args, topic, n, a.messages, 100)
        scale.same_log(args, same, n, a.messages, 100)  # made, written and consumed once
        return
    end = time.monotonic() + a.seconds
    done = 0
    if a.mode == "full":
        offsets = asyncio.run(scale.high_watermarks(args, topic, n))
        while time.monotonic() < end:
            us = asyncio.run(scale.cpu_per_request(args, lambda: fetch_request(topic, offsets, 0, -1), FetchResp, 100))
            done += 100
        print(f"full fetches: {done}, last 100 at {us:.0f} us of broker CPU each")
    else:
        while time.monotonic() < end:
            res = scale.consume(args, same, n, a.messages, 100)
            done += 1
        print(f"consumes: {done}, last at {res['consume_cpu_us_per_msg']:.4f} us/msg")


if __name__ == "__main__":
    main()
