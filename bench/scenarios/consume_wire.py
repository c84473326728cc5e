"""What a librdkafka consumer of many partitions sees on the wire, Kafka beside kbus (issue 23, the partitions
axis's consume cell): the log's shape (batches, records per batch), then scale.py's consume() of the topic with
librdkafka's statistics on (Fetch requests, responses, bytes received), the client's own CPU split by thread
(the Python thread that drains the queue; librdkafka's broker threads that parse the responses) beside the
broker's CPU, and one raw Fetch of every partition from offset 0 (bytes and partitions in the answer).

    consume_wire.py -b HOST:PORT --broker-pid PID --label kafka --topic scale-p1000 --partitions 1000 \
        --log-dir DIR [--messages 1000000] [--produce] [--rounds 3] [--out FILE]
    consume_wire.py -b ... --size 10   messages of 10 B (the message-size axis's point), not 100 B
    consume_wire.py -b ... --rounds 0   the log's shape and the raw Fetch only (one line): with --produce, the
        log is made first; then `--rounds 1 --round N` without --produce, once per system in turn, interleaves
        the systems' rounds (consume_wire.sh does)
    consume_wire.py -b ... --procs 2   also: the same messages read by 2 consumer processes at once, each assigned
        half the partitions (is one Python client the limit?)
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import multiprocessing as mp
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import cpuwin
from benchlib import cpu_seconds as broker_cpu

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """This process's CPU seconds per thread name (librdkafka names its threads rdk:broker<N>, rdk:main)."""
    out: dict[str, float] = {}
    for task in glob.glob(f"/proc/{os.getpid()}/task/*"):
        try:
            with open(f"{task}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        fields = s.rsplit(")", 1)[1].split()
        key = "python" if not name.startswith("rdk:") else ("rdk:broker" if name.startswith("rdk:broker") else name)
        out[key] = out.get(key, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def brk(s: dict[str, Any]) -> dict[str, float]:
    """librdkafka's statistics: Fetch requests, responses and bytes received, summed over the brokers."""
    tot = {"fetch_req": 0.0, "rx": 0.0, "rxbytes": 0.0}
    for b in s.get("brokers", {}).values():
        if b.get("nodeid", -1) < 0:
            continue
        tot["fetch_req"] += b.get("req", {}).get("Fetch", 0)
        tot["rx"] += b.get("rx", 0)
        tot["rxbytes"] += b.get("rxbytes", 0)
    return tot


def consume_stats(bootstrap: str, broker_pid: int, topic: str, parts: list[int], count: int,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """scale.py's consume() (same configuration, same timing window), with statistics and thread CPU."""
    from confluent_kafka import Consumer, TopicPartition
    from scale import CONSUMER_FETCH_QUEUE_BACKOFF_MS

    stats: list[dict[str, float]] = []  # only the brokers' totals of each report (10,000 partitions: megabytes)

    def on_stats(s: str) -> None:
        stats.append(brk(json.loads(s)))

    conf = {"bootstrap.servers": bootstrap, "group.id": f"wire-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False, "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576,
            "fetch.queue.backoff.ms": CONSUMER_FETCH_QUEUE_BACKOFF_MS,
            "statistics.interval.ms": 100 if len(parts) <= 1000 else 1000, "stats_cb": on_stats}
    conf.update(extra or {})
    c = Consumer(conf)
    try:
        start = time.monotonic()
        c.assign([TopicPartition(topic, i, 0) for i in parts])
        got = 0
        while got == 0 and time.monotonic() < start + 300:
            got = sum(m.error() is None for m in c.consume(1, 1.0))
        n0 = len(stats)
        th0 = thread_cpu()
        snap0 = cpuwin.snapshot(broker_pid)
        cpu0 = broker_cpu(broker_pid)
        r0 = os.times()
        t0 = time.monotonic()
        while got < count and time.monotonic() < start + 300:
            for m in c.consume(min(10000, count - got), 1.0):
                if m.error() is None:
                    got += 1
        dt = time.monotonic() - t0
        cpu = broker_cpu(broker_pid) - cpu0
        detail = cpuwin.window(snap0, cpuwin.snapshot(broker_pid))
        r1 = os.times()
        th1 = thread_cpu()
        c.poll(0.3)  # one more statistics callback after the window
    finally:
        c.close()
    timed = count - 1

    first = stats[n0 - 1] if n0 else {"fetch_req": 0.0, "rx": 0.0, "rxbytes": 0.0}
    last = stats[-1] if stats else first
    fetches = last["fetch_req"] - first["fetch_req"]
    rxb = last["rxbytes"] - first["rxbytes"]
    out = {"msgs": got, "consume_msg_s": timed / dt, "seconds": dt,
           "broker_cpu_us_per_msg": cpu / timed * 1e6,
           "client_cpu_s": (r1.user + r1.system) - (r0.user + r0.system),
           "client_cpu_of_wall": ((r1.user + r1.system) - (r0.user + r0.system)) / dt,
           "fetch_requests_total": last["fetch_req"], "fetch_requests_in_window": fetches,
           "rxbytes_total": last["rxbytes"], "rxbytes_in_window": rxb,
           "consume_first_msg_s": t0 - start, "broker_detail": detail}
    for k in th1:
        out[f"thread_{k}_cpu_of_wall"] = (th1[k] - th0.get(k, 0.0)) / dt
    return out


def _proc(q: Any, bootstrap: str, topic: str, parts: list[int], count: int, barrier: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from scale import CONSUMER_FETCH_QUEUE_BACKOFF_MS

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wire-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576,
                  "fetch.queue.backoff.ms": CONSUMER_FETCH_QUEUE_BACKOFF_MS})
    c.assign([TopicPartition(topic, i, 0) for i in parts])
    got = 0
    while got == 0:
        got = sum(m.error() is None for m in c.consume(1, 1.0))
    barrier.wait()
    t0 = time.monotonic()
    while got < count:
        for m in c.consume(min(10000, count - got), 1.0):
            if m.error() is None:
                got += 1
    q.put((t0, time.monotonic(), got))
    c.close()


def consume_procs(bootstrap: str, broker_pid: int, topic: str, partitions: int, count: int, procs: int) -> dict:
    """`procs` consumer processes, each assigned every procs-th partition and reading count // procs messages;
    the window runs from when all have their first message to when the last is done."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    barrier = ctx.Barrier(procs + 1)
    each = count // procs
    ps = [ctx.Process(target=_proc, args=(q, bootstrap, topic, list(range(i, partitions, procs)), each, barrier))
          for i in range(procs)]
    for p in ps:
        p.start()
    barrier.wait()
    cpu0 = broker_cpu(broker_pid)
    t0 = time.monotonic()
    ends = [q.get(timeout=300) for _ in ps]
    dt = time.monotonic() - t0
    cpu = broker_cpu(broker_pid) - cpu0
    for p in ps:
        p.join()
    got = sum(e[2] for e in ends)
    return {"procs": procs, "msgs": got, "consume_msg_s": (got - procs) / dt,
            "broker_cpu_us_per_msg": cpu / (got - procs) * 1e6}


async def raw_fetch(bootstrap: str, broker_pid: int, topic: str, partitions: int) -> dict[str, float]:
    """One Fetch v12 of every partition from offset 0, librdkafka's limits (50 MB, 1 MB a partition), max_wait
    500 ms, min_bytes 1: what the broker puts in one answer."""
    from fetch_sessions import FetchReq, FetchResp

    from kbus.protocol.client import KafkaConnection
    from kbus.protocol.codec import build, nested

    parts = [build(nested(FetchReq, "FetchPartition"), partition=p, current_leader_epoch=-1, fetch_offset=0,
                   last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1048576)
             for p in range(partitions)]
    req = build(FetchReq, replica_id=-1, max_wait=500, min_bytes=1, max_bytes=52428800, isolation_level=0,
                session_id=0, session_epoch=-1,
                topics=[build(nested(FetchReq, "FetchTopic"), topic=topic, partitions=parts)],
                forgotten_topics_data=[], rack_id="")
    host, port = bootstrap.rsplit(":", 1)
    conn = KafkaConnection(host, int(port), "consume-wire")
    await conn.connect()
    try:
        cpu0 = broker_cpu(broker_pid)
        t0 = time.monotonic()
        resp = await conn.request(req, FetchResp, timeout=120)
        dt = time.monotonic() - t0
        cpu = broker_cpu(broker_pid) - cpu0
    finally:
        await conn.close()
    sizes = [len(p.records or b"") for t in resp.responses for p in t.partitions]
    return {"fetch0_bytes": sum(sizes), "fetch0_partitions_with_data": sum(1 for s in sizes if s),
            "fetch0_partitions": len(sizes), "fetch0_seconds": dt, "fetch0_broker_cpu_s": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--produce", action="store_true", help="create the topic and produce as scale.py does")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round", type=int, default=1, help="the first round's number in the lines")
    ap.add_argument("--size", type=int, default=100, help="message size, bytes")
    ap.add_argument("--procs", type=int, default=0)
    ap.add_argument("--batch-records", type=int, default=0,
                    help="produce the same log to every broker: batches of exactly N records (not librdkafka's)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import scale

    base: dict[str, Any] = {"label": args.label, "partitions": args.partitions, "loadavg": os.getloadavg()[0]}
    if args.produce:
        sargs = argparse.Namespace(bootstrap=args.bootstrap, broker_pid=args.broker_pid, timeout=120)
        asyncio.run(scale.create_topic_timed(sargs, args.topic, args.partitions))
        if args.batch_records:
            fixed = asyncio.run(scale.produce_fixed(args.bootstrap, args.topic, args.partitions, args.messages,
                                                    args.size, args.batch_records))
            base.update(fixed_batch_records=args.batch_records, produce_msgs=fixed["same_log_msgs"])
        else:
            base.update(scale.produce(sargs, args.topic, args.partitions, args.messages, args.size))
    base["size"] = args.size
    if args.log_dir:
        base.update(scale.log_shape(args.log_dir, args.topic, args.partitions))
    base.update(asyncio.run(raw_fetch(args.bootstrap, args.broker_pid, args.topic, args.partitions)))
    rows = [] if args.rounds else [dict(base, round=0)]
    for r in range(args.round, args.round + args.rounds):
        row = dict(base, round=r, loadavg=os.getloadavg()[0])
        row.update(consume_stats(args.bootstrap, args.broker_pid, args.topic, list(range(args.partitions)),
                                 args.messages))
        rows.append(row)
        if args.procs:
            rows.append(dict(base, round=r, **consume_procs(args.bootstrap, args.broker_pid, args.topic,
                                                                   args.partitions, args.messages, args.procs)))
    for row in rows:
        line = json.dumps(row)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
