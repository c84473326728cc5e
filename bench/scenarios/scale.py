"""Scale curves: how a broker's cost grows with partitions, connections and message size, measured the same way
against Apache Kafka and kbus (bench/scenarios/scale.sh starts both and interleaves them). Every measurement appends one
JSON line; `plot` draws the PNG charts from those lines.

The primary figure is broker CPU time (the broker process's CPU clock, all its threads, to the nanosecond:
benchlib.cpu_seconds) per message or per request: on a shared 2-core machine throughput is noisy, CPU time much less so.

    scale.py partitions  -b HOST:PORT --broker-pid PID --label kafka --partitions 1000
        creates a topic of N partitions (time until Metadata shows a leader for every one, and the longest an
        ApiVersions round trip on another connection took meanwhile: how long the broker stopped serving),
        RSS and open files before/after (per partition), CPU per Metadata request for the topic, produce of
        --messages x 100 B spread over every partition (librdkafka, CPU per message, msg/s), CPU per full Fetch of
        every partition at its high watermark (nothing new: a caught-up consumer's request), consume of the
        messages (librdkafka, assign() from offset 0, CPU per message; timed from the first message: consume()).
    scale.py connections -b ... --connections C
        opens C connections that each send ApiVersions and Metadata, as a client does (RSS and open files per
        connection), measures CPU while they sit idle, then has every connection send one small Produce (10 x 100 B,
        acks=1) and wait for its answer, round after round (~--requests requests in all): many small producers at
        once. CPU per request and requests/s.
    scale.py msgsize -b ... --size S
        produces ~--bytes bytes of S-byte messages into one partition (librdkafka, linger.ms=5) and consumes them
        (timed from the first message: consume()): CPU per message and per MB, msg/s, MB/s, the log's records per
        batch (--log-dir); then the same-log consume (--same-log-batch) of a topic of its own.
    scale.py plot --data bench/results/DAY-MACHINE/scale.jsonl --outdir bench/results/DAY-MACHINE
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import struct
import sys
import time
import uuid
from typing import Any
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: benchlib
from benchlib import cpu_seconds as broker_cpu, results_file  # noqa: E402
import cpuwin  # noqa: E402

# --cpu-detail: each produce / consume window also records what the broker's CPU in it went to (cpuwin.window)
CPU_DETAIL = False

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
_I32 = struct.Struct(">i")


# ----------------------------------------------------------------------------------------------- broker probes

def broker_cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) seconds: system time is the kernel's share (sockets, files)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def broker_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def broker_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def emit(args: argparse.Namespace, result: dict[str, Any]) -> None:
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"tool": "scale", "label": args.label, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "kbus_commit": commit, "loadavg_start": os.getloadavg()[0], **result}
    line = json.dumps(result)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


# ----------------------------------------------------------------------------------------------- raw requests
def _schemas() -> dict[str, Any]:
    from kio.index import load_request_schema, load_response_schema

    return {
        "api_req": load_request_schema(18, 0), "api_resp": load_response_schema(18, 0),
        "meta_req": load_request_schema(3, 9), "meta_resp": load_response_schema(3, 9),
        "prod_req": load_request_schema(0, 8), "prod_resp": load_response_schema(0, 8),
    }


def metadata_request(s: dict[str, Any], topics: list[str] | None) -> Any:
    from kbus.protocol.codec import build, nested

    return build(s["meta_req"], topics=None if topics is None else [
        build(nested(s["meta_req"], "MetadataRequestTopic"), name=t) for t in topics
    ], allow_auto_topic_creation=False)


async def stall_probe(bootstrap: str, stop: asyncio.Event, out: list[float]) -> None:
    """ApiVersions round trips, one every 10 ms, on a connection of their own until `stop`: the longest is how
    long the broker did not serve a cheap request."""
    from kbus.protocol.client import KafkaConnection

    s = _schemas()
    conn = KafkaConnection(*host_port(bootstrap), "scale-probe")
    await conn.connect(30)
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            await conn.request(s["api_req"](), s["api_resp"], timeout=300)
            out.append(time.monotonic() - t0)
            await asyncio.sleep(0.01)
    finally:
        await conn.close()


async def wait_leaders(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    from kbus.protocol.client import KafkaConnection

    s = _schemas()
    conn = KafkaConnection(*host_port(bootstrap), "scale-meta")
    await conn.connect(30)
    deadline = time.monotonic() + timeout
    try:
        while True:
            resp = await conn.request(metadata_request(s, [topic]), s["meta_resp"], timeout=300)
            parts = resp.topics[0].partitions if resp.topics else ()
            if len(parts) == partitions and all(p.error_code == 0 and p.leader_id >= 0 for p in parts):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: {sum(p.leader_id >= 0 for p in parts)}/{partitions} leaders")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def create_topic_timed(args: argparse.Namespace, topic: str, partitions: int) -> dict[str, float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    stop = asyncio.Event()
    rtts: list[float] = []
    probe = asyncio.create_task(stall_probe(args.bootstrap, stop, rtts))
    await asyncio.sleep(0.5)
    # Kafka answers CreateTopics for 10,000 partitions after ~1 min: past librdkafka's default 60 s socket timeout
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "socket.timeout.ms": 300_000})
    t0 = time.monotonic()
    cpu0 = broker_cpu(args.broker_pid)

    def create() -> None:
        admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=600, request_timeout=600)[
            topic].result(900)

    await asyncio.to_thread(create)
    answered = time.monotonic() - t0
    await wait_leaders(args.bootstrap, topic, partitions, 900)
    created = time.monotonic() - t0
    cpu = broker_cpu(args.broker_pid) - cpu0
    await asyncio.sleep(0.5)
    stop.set()
    await probe
    return {"create_answered_s": answered, "create_s": created, "create_cpu_s": cpu,
            "create_max_stall_ms": max(rtts) * 1000, "probe_requests": len(rtts)}


async def cpu_per_request(args: argparse.Namespace, make: Any, resp_type: Any, n: int) -> float:
    from kbus.protocol.client import KafkaConnection

    conn = KafkaConnection(*host_port(args.bootstrap), "scale-req")
    await conn.connect(30)
    try:
        body = make()
        await conn.request(body, resp_type, timeout=300)  # warm
        cpu0 = broker_cpu(args.broker_pid)
        for _ in range(n):
            await conn.request(body, resp_type, timeout=300)
        return (broker_cpu(args.broker_pid) - cpu0) / n * 1e6
    finally:
        await conn.close()


async def high_watermarks(args: argparse.Namespace, topic: str, n: int) -> dict[int, int]:
    """Every partition's high watermark, from a Fetch at offset 0 of at most 1 byte each."""
    from fetch_sessions import FetchResp, fetch_request

    from kbus.protocol.client import KafkaConnection

    conn = KafkaConnection(*host_port(args.bootstrap), "scale-hw")
    await conn.connect(30)
    try:
        body: Any = fetch_request(topic, dict.fromkeys(range(n), 0), 0, -1)
        one_byte = dataclasses.replace  # the records are not wanted, only the offsets
        body = one_byte(body, topics=tuple(
            one_byte(t, partitions=tuple(one_byte(p, partition_max_bytes=1) for p in t.partitions))
            for t in body.topics))  # fmt: skip
        resp = await conn.request(body, FetchResp, timeout=300)
    finally:
        await conn.close()
    hw = {p.partition_index: p.high_watermark for t in resp.responses for p in t.partitions if not p.error_code}
    if len(hw) != n:
        raise RuntimeError(f"high watermarks of {topic}: {len(hw)} of {n} partitions answered")
    return hw


# ----------------------------------------------------------------------------------------------- librdkafka load
def produce(args: argparse.Namespace, topic: str, partitions: int, count: int, size: int) -> dict[str, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "acks": "1",
                  "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576,
                  "message.max.bytes": 1000000})
    p.list_topics(topic, timeout=60)
    payload = os.urandom(size)
    failed = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    snap0 = cpuwin.snapshot(args.broker_pid) if CPU_DETAIL else None
    cpu0 = broker_cpu(args.broker_pid)
    t0 = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(300)
    dt = time.monotonic() - t0
    cpu = broker_cpu(args.broker_pid) - cpu0
    detail = {} if snap0 is None else {"produce_detail": cpuwin.window(snap0, cpuwin.snapshot(args.broker_pid))}
    if left or failed:
        raise RuntimeError(f"produce: {left} not delivered, {failed} failed")
    return {"produce_msgs": count, "produce_msg_s": count / dt, "produce_mb_s": count * size / dt / 1e6,
            "produce_cpu_us_per_msg": cpu / count * 1e6, **detail}


# librdkafka postpones a partition's next Fetch by fetch.queue.backoff.ms (default 1,000 ms) whenever its local
# queue holds queued.min.messages (100,000) or more, and does not fetch again sooner when the application drains it:
# with 10 B / 100 B messages a fast broker fills 100,000 before consume() takes them, and the 300,000 messages then
# took ~1.2 s or ~2.1 s depending on whether that 1 s pause happened (kbus and Kafka alike; issue 23). 10 ms keeps
# the queue bound without the pause.
CONSUMER_FETCH_QUEUE_BACKOFF_MS = 10


def consume(args: argparse.Namespace, topic: str, partitions: int, count: int, size: int) -> dict[str, float]:
    """Consume `count` messages from offset 0. The clock and the broker-CPU window both start when the first
    message arrives (as kafka-consumer-perf-test times its fetch rate without the group join) and cover the other
    count - 1 messages: the client's start (bootstrap, Metadata, connections, the first Fetch's round trip) is not
    the broker's consume rate; how long it took is kept apart, consume_first_msg_s. The broker may have sent up to
    one Fetch response per partition (max.partition.fetch.bytes) before the window opens, for both systems alike.
    The consumer's own CPU in the window is kept too: on a shared 2-core machine the rate is often the CPU share
    the client got (bench/notes/consume-2026-11-27-s13.md)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"scale-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576,
                  "fetch.queue.backoff.ms": CONSUMER_FETCH_QUEUE_BACKOFF_MS})
    try:
        start = time.monotonic()
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        deadline = start + 300
        got = 0
        while got == 0 and time.monotonic() < deadline:
            got = sum(m.error() is None for m in c.consume(1, 1.0))
        snap0 = cpuwin.snapshot(args.broker_pid) if CPU_DETAIL else None
        cpu0 = broker_cpu(args.broker_pid)
        own0 = time.process_time()
        t0 = time.monotonic()
        while got < count and time.monotonic() < deadline:
            # at most what is left: librdkafka's consume(n, timeout) waits the whole timeout for n messages, so
            # asking for 10,000 of the last 2,000 (100 KB x 2,000 is the whole message-size point) timed the 1 s
            for m in c.consume(min(10000, count - got), 1.0):
                if m.error() is None:
                    got += 1
        dt = time.monotonic() - t0
        cpu = broker_cpu(args.broker_pid) - cpu0
        own = time.process_time() - own0
        detail = {} if snap0 is None else {"consume_detail": cpuwin.window(snap0, cpuwin.snapshot(args.broker_pid))}
    finally:
        c.close()
    if got < count:
        raise RuntimeError(f"consume: {got}/{count}")
    timed = count - 1
    return {"consume_msg_s": timed / dt, "consume_mb_s": timed * size / dt / 1e6,
            "consume_cpu_us_per_msg": cpu / timed * 1e6, "consume_first_msg_s": t0 - start,
            # the consumer's own CPU (this process: the Python thread that drains it and librdkafka's threads
            # that parse the batches): where the rate is the client's, msg/s follows the CPU share it got
            "consume_client_cpu_us_per_msg": own / timed * 1e6, "consume_client_cpu_of_wall": own / dt, **detail}


# ----------------------------------------------------------------------------------------------- the log read
_BATCH_HEAD = struct.Struct(">qi")  # a v2 batch's baseOffset, batchLength (then ..., recordsCount at byte 57)
_RECORDS_AT = 57
_HEAD_BYTES = 61


def log_shape(log_dir: str, topic: str, partitions: int, per_partition: int | None = None) -> dict[str, float]:
    """The batches a consumer of `topic` from offset 0 reads, from the segment files under `log_dir` (Kafka's
    and kbus's layout alike: DIR/TOPIC-P/*.log of v2 batches): batches, records, records per batch.
    `per_partition`: only batches that start below that offset (what a consume of the first N messages of each
    partition reads; the partitions axis's topic keeps every round's messages). One pread of a header per batch."""
    batches = records = nbytes = 0
    for p in range(partitions):
        for path in sorted(Path(log_dir, f"{topic}-{p}").glob("*.log")):
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                pos = 0
                while pos + _HEAD_BYTES <= size:
                    head = os.pread(fd, _HEAD_BYTES, pos)
                    if len(head) < _HEAD_BYTES:
                        break
                    base, length = _BATCH_HEAD.unpack_from(head)
                    if length <= 0 or (per_partition is not None and base >= per_partition):
                        break
                    records += _I32.unpack_from(head, _RECORDS_AT)[0]
                    batches += 1
                    nbytes += 12 + length
                    pos += 12 + length
            finally:
                os.close(fd)
    return {"log_batches": batches, "log_records": records, "log_bytes": nbytes,
            "records_per_batch": records / batches if batches else 0.0}


def same_log_batch_records(n: int, size: int) -> int:
    """Records per batch of the same-log topic: n, or fewer where n records would not fit in one Produce under
    message.max.bytes (1 MB: 100 KB messages go 9 to a batch)."""
    return max(1, min(n, 900_000 // (size + 20)))


async def produce_fixed(bootstrap: str, topic: str, partitions: int, count: int, size: int, per_batch: int,
                        in_flight: int = 8) -> dict[str, Any]:
    """The same log for every broker: `count` messages of `size` random bytes (one payload for all) in batches of
    exactly `per_batch` records, one batch per partition per Produce (acks=1; Kafka takes one batch per partition
    and request), `in_flight` requests pipelined on one connection. What a librdkafka producer writes depends on
    the broker: its batches grow while a slower broker keeps it waiting. The frame is encoded once; only its
    correlation id changes."""
    from kio.serial import entity_reader

    from kbus.protocol.codec import build, encode_request, nested
    from kbus.protocol.record_batch import build_batch

    s = _schemas()
    batch = build_batch([(None, os.urandom(size))] * per_batch)
    part_type = nested(s["prod_req"], "PartitionProduceData")
    topic_type = nested(s["prod_req"], "TopicProduceData")
    frame = bytearray(encode_request(build(s["prod_req"], acks=1, timeout=30000, topic_data=[
        build(topic_type, name=topic, partition_data=[build(part_type, index=p, records=batch)
                                                       for p in range(partitions)])]), 0, "scale-same-log"))
    read_resp = entity_reader(s["prod_resp"])
    requests = -(-count // (per_batch * partitions))
    reader, writer = await asyncio.open_connection(*host_port(bootstrap))
    errors: list[int] = []

    async def read_answers() -> None:
        for _ in range(requests):
            size_ = _I32.unpack(await reader.readexactly(4))[0]
            body = await reader.readexactly(size_)
            resp, _ = read_resp(body, 4)  # Produce v8: header v0, the correlation id alone
            errors.extend(p.error_code for t in resp.responses for p in t.partition_responses if p.error_code)
            window.release()

    window = asyncio.Semaphore(in_flight)
    answers = asyncio.create_task(read_answers())
    try:
        for i in range(requests):
            await window.acquire()
            _I32.pack_into(frame, 8, i)  # size(4) api_key(2) api_version(2) correlation_id(4)
            writer.write(frame)
            await writer.drain()
        await asyncio.wait_for(answers, 300)
    finally:
        answers.cancel()
        writer.close()
    if errors:
        raise RuntimeError(f"same-log produce to {topic}: errors {sorted(set(errors))[:5]}")
    return {"same_log_msgs": requests * per_batch * partitions, "same_log_batch_records": per_batch}


def topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60).topics


def same_log(args: argparse.Namespace, topic: str, partitions: int, count: int, size: int) -> dict[str, Any]:
    """The consume cell over the same log for every broker: `topic` is made once (the first round) with
    produce_fixed's batches, and every round consumes it as consume() does. Keys prefixed `same_log_`."""
    per_batch = same_log_batch_records(args.same_log_batch, size)
    count = -(-count // (per_batch * partitions)) * per_batch * partitions  # whole batches in every partition
    if not topic_exists(args.bootstrap, topic):
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap, "socket.timeout.ms": 300_000})
        admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=600, request_timeout=600)[
            topic].result(900)
        asyncio.run(wait_leaders(args.bootstrap, topic, partitions, 900))
        asyncio.run(produce_fixed(args.bootstrap, topic, partitions, count, size, per_batch))
    out: dict[str, Any] = {"same_log_msgs": count, "same_log_batch_records": per_batch}
    if args.log_dir:
        shape = log_shape(args.log_dir, topic, partitions)
        out["same_log_records_per_batch"] = shape["records_per_batch"]
    res = consume(args, topic, partitions, count, size)
    out.update({f"same_log_{k}": v for k, v in res.items()})
    return out


def consumed_log_shape(args: argparse.Namespace, topic: str, partitions: int, per_partition: int | None) -> dict:
    """The records per batch of what consume() read (nothing without --log-dir)."""
    if not args.log_dir:
        return {}
    shape = log_shape(args.log_dir, topic, partitions, per_partition)
    return {"consume_records_per_batch": shape["records_per_batch"], "consume_log_batches": shape["log_batches"]}


# ----------------------------------------------------------------------------------------------- the axes
def point_of(args: argparse.Namespace) -> dict[str, Any]:
    """What names the point a command measures (its JSON line's first keys, a failed one's too)."""
    if args.cmd == "partitions":
        return {"axis": "partitions", "x": args.partitions, "partitions": args.partitions, "phase": args.phase}
    if args.cmd == "connections":
        return {"axis": "connections", "x": args.connections, "connections": args.connections}
    return {"axis": "msgsize", "x": args.size, "size": args.size}


def run_partitions(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Phase `create` makes the topic `scale-p<N>` (memory is measured here, before any traffic grows the
    broker's heap: scale.sh creates every size first); phase `load` then measures the requests on it."""
    from fetch_sessions import FetchResp, fetch_request

    n = args.partitions
    topic = f"scale-p{n}"
    pid = args.broker_pid
    if args.phase == "create":
        rss0, fds0 = broker_rss_mb(pid), broker_fds(pid)
        out.update(rss_before_mb=rss0, fds_before=fds0)
        cpu0 = broker_cpu(pid)
        out.update(asyncio.run(create_topic_timed(args, topic, n)))
        time.sleep(2)
        # the broker's CPU from the creation's start to 2 s after every partition had a leader: what it still
        # does for the topic once Metadata shows the leaders (hosting the replicas, writing their files) included
        out["create_cpu_settled_s"] = broker_cpu(pid) - cpu0
        rss1, fds1 = broker_rss_mb(pid), broker_fds(pid)
        out.update(rss_after_mb=rss1, fds_after=fds1, rss_kb_per_partition=(rss1 - rss0) * 1024 / n,
                   fds_per_partition=(fds1 - fds0) / n)
        emit(args, out)
        return
    s = _schemas()
    reqs = max(10, min(300, 100_000 // n))
    out["metadata_cpu_us_per_request"] = asyncio.run(
        cpu_per_request(args, lambda: metadata_request(s, [topic]), s["meta_resp"], reqs))
    out["metadata_requests"] = reqs
    count = max(args.messages, n)
    out.update(produce(args, topic, n, count, 100))
    # at each partition's high watermark, as the broker reports it: the topic stays from round to round, so after
    # the first round it holds more than this round's `count` messages (a fetch from count // n read them all)
    offsets = asyncio.run(high_watermarks(args, topic, n))
    out["fetch_cpu_us_per_request"] = asyncio.run(
        cpu_per_request(args, lambda: fetch_request(topic, offsets, 0, -1), FetchResp, reqs))
    out.update(consume(args, topic, n, count, 100))
    out.update(consumed_log_shape(args, topic, n, count // n))
    if args.same_log_batch and n <= args.same_log_max_partitions:
        out.update(same_log(args, f"scale-same-p{n}", n, count, 100))
    out["rss_end_mb"] = broker_rss_mb(pid)
    emit(args, out)


async def _connections(args: argparse.Namespace) -> dict[str, Any]:
    from kbus.protocol.codec import build, encode_request, nested
    from kbus.protocol.record_batch import build_batch

    s = _schemas()
    host, port = host_port(args.bootstrap)
    pid = args.broker_pid
    c = args.connections
    rss0, fds0 = broker_rss_mb(pid), broker_fds(pid)
    # what a client sends first: ApiVersions, then Metadata for its topic
    hello = [encode_request(s["api_req"](), 1, "scale-conn"),
             encode_request(metadata_request(s, [args.topic]), 2, "scale-conn")]
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def read_frame(reader: asyncio.StreamReader) -> bytes:
        size = _I32.unpack(await reader.readexactly(4))[0]
        return await reader.readexactly(size)

    async def open_one() -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 60)
        for frame in hello:
            writer.write(frame)
            await read_frame(reader)
        conns.append((reader, writer))

    t0 = time.monotonic()
    for i in range(0, c, 50):  # 50 at a time: a listen backlog of 50 (Java's default) must not overflow
        await asyncio.gather(*(open_one() for _ in range(min(50, c - i))))
    opened_s = time.monotonic() - t0
    await asyncio.sleep(2)
    rss1, fds1 = broker_rss_mb(pid), broker_fds(pid)
    cpu0 = broker_cpu(pid)
    await asyncio.sleep(args.idle_seconds)
    idle_cpu = broker_cpu(pid) - cpu0
    # many small producers: every connection sends one Produce and waits for it, round after round
    batch = build_batch([(None, b"x" * 100)] * 10)
    part_type = nested(s["prod_req"], "PartitionProduceData")
    topic_type = nested(s["prod_req"], "TopicProduceData")
    frames = [encode_request(build(s["prod_req"], acks=1, timeout=30000, topic_data=[
        build(topic_type, name=args.topic, partition_data=[build(part_type, index=p, records=batch)])]), 3,
        "scale-conn") for p in range(args.topic_partitions)]
    rounds = max(1, args.requests // c)

    async def produce_rounds(i: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frame = frames[i % len(frames)]
        for _ in range(rounds):
            writer.write(frame)
            resp = await read_frame(reader)
            if len(resp) < 8:
                raise RuntimeError("short produce response")

    user0, sys0 = broker_cpu_split(pid)
    t0 = time.monotonic()
    await asyncio.gather(*(produce_rounds(i, r, w) for i, (r, w) in enumerate(conns)))
    dt = time.monotonic() - t0
    user1, sys1 = broker_cpu_split(pid)
    cpu = user1 - user0 + sys1 - sys0
    for _, w in conns:
        w.close()
    return {"axis": "connections", "x": c, "connections": c, "open_s": opened_s, "rss_before_mb": rss0,
            "rss_after_mb": rss1, "fds_before": fds0, "fds_after": fds1,
            "rss_kb_per_connection": (rss1 - rss0) * 1024 / c, "idle_cpu_ms_per_s": idle_cpu / args.idle_seconds * 1e3,
            "produce_requests": rounds * c, "produce_req_s": rounds * c / dt,
            "produce_cpu_us_per_request": cpu / (rounds * c) * 1e6,
            "produce_sys_us_per_request": (sys1 - sys0) / (rounds * c) * 1e6}


def run_connections(args: argparse.Namespace, out: dict[str, Any]) -> None:
    out.update(asyncio.run(_connections(args)))
    emit(args, out)
    time.sleep(2)  # let the broker close them before the next point


def run_msgsize(args: argparse.Namespace, out: dict[str, Any]) -> None:
    size = args.size
    topic = f"scale-s{size}-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(120)
    asyncio.run(wait_leaders(args.bootstrap, topic, 1, 120))
    count = max(2000, min(300_000, args.bytes // size))
    out.update(produce(args, topic, 1, count, size))
    out.update(consume(args, topic, 1, count, size))
    out.update(consumed_log_shape(args, topic, 1, None))
    if args.same_log_batch:
        out.update(same_log(args, f"scale-same-s{size}", 1, count, size))
    out["produce_cpu_us_per_mb"] = out["produce_cpu_us_per_msg"] * 1e6 / size
    out["consume_cpu_us_per_mb"] = out["consume_cpu_us_per_msg"] * 1e6 / size
    admin.delete_topics([topic])
    emit(args, out)


# ----------------------------------------------------------------------------------------------- charts
CHARTS = {
    "partitions": ("partitions in the topic", [
        ("create_s", "topic creation, s (until every partition has a leader)"),
        ("create_max_stall_ms", "longest ApiVersions round trip during creation, ms"),
        ("metadata_cpu_us_per_request", "broker CPU µs per Metadata request (the topic)"),
        ("fetch_cpu_us_per_request", "broker CPU µs per full Fetch (every partition, nothing new)"),
        ("produce_cpu_us_per_msg", "broker CPU µs per produced 100 B message"),
        ("produce_msg_s", "produce msg/s (librdkafka, spread over every partition)"),
        ("consume_cpu_us_per_msg", "broker CPU µs per consumed message"),
        ("rss_after_mb", "broker RSS MB once created (all topics so far: up to 11,111 partitions)"),
    ]),
    "connections": ("concurrent connections", [
        ("produce_cpu_us_per_request", "broker CPU µs per small Produce (10 x 100 B)"),
        ("produce_req_s", "Produce requests/s, every connection sending"),
        ("rss_kb_per_connection", "RSS growth per connection, KB"),
        ("idle_cpu_ms_per_s", "broker CPU ms/s with the connections idle"),
    ]),
    "msgsize": ("message size, bytes", [
        ("produce_cpu_us_per_msg", "broker CPU µs per produced message"),
        ("consume_cpu_us_per_msg", "broker CPU µs per consumed message"),
        ("produce_mb_s", "produce MB/s"),
        ("consume_mb_s", "consume MB/s"),
    ]),
}
_CONSUME_LOGS = [("consume_msg_s", "consume msg/s"),
                 ("consume_records_per_batch", "records per batch of the log consumed (each broker's own)"),
                 ("consume_client_cpu_us_per_msg", "the consumer's own CPU µs per message"),
                 ("consume_client_cpu_of_wall", "the consumer's CPU share of the window (cores)"),
                 ("same_log_consume_cpu_us_per_msg", "the same log for every broker: broker CPU µs per message"),
                 ("same_log_consume_msg_s", "the same log for every broker: consume msg/s")]
TABLE_ONLY = {
    "partitions": [("rss_kb_per_partition", "RSS growth per partition, KB (JVM: heap pages touched)"),
                   ("create_cpu_s", "broker CPU s to create the topic"),
                   ("create_cpu_settled_s", "broker CPU s to create the topic, until 2 s after it had leaders"),
                   *_CONSUME_LOGS],
    "connections": [("produce_sys_us_per_request", "of which kernel (system) µs")],
    "msgsize": _CONSUME_LOGS,
}
COLORS = {"kafka": "tab:blue", "kbus": "tab:orange", "kbus-base": "tab:gray"}


def load_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    with open(args.data) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["time"] >= args.since] if args.since else rows


def medians(rows: list[dict[str, Any]], axis: str) -> dict[str, dict[int, dict[str, float]]]:
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("axis") == axis:
            grouped.setdefault((r["label"], r["x"]), []).append(r)
    out: dict[str, dict[int, dict[str, float]]] = {}
    for (label, x), rs in grouped.items():
        keys = {k for r in rs for k, v in r.items() if isinstance(v, int | float)}
        out.setdefault(label, {})[x] = {k: statistics.median(r[k] for r in rs if k in r) for k in keys}
    return out


def run_plot(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_rows(args)
    for axis, (xlabel, metrics) in CHARTS.items():
        data = medians(rows, axis)
        if not data or (args.axes and axis not in args.axes):
            continue
        cols = 2
        nrows = (len(metrics) + 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(11, 3.4 * nrows), squeeze=False)
        for ax, (key, title) in zip(axes.flat, metrics, strict=False):
            for label in sorted(data, key=lambda lbl: (lbl != "kafka", lbl)):
                pts = sorted((x, v[key]) for x, v in data[label].items() if key in v)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o--" if label == "kbus-base" else "o-",
                            label=label, color=COLORS.get(label))
            ax.set_xscale("log")
            values = [v[key] for lbl in data for v in data[lbl].values() if key in v]
            if values and min(values) > 0:  # RSS growth can be 0 or negative (freed memory reused): linear then
                ax.set_yscale("log")
            ax.set_title(title, fontsize=9)
            ax.set_xlabel(xlabel, fontsize=8)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        for ax in list(axes.flat)[len(metrics):]:
            ax.set_visible(False)
        fig.suptitle(f"kbus vs Apache Kafka 3.9.2: {xlabel} (2 shared cores; medians)", fontsize=11)
        fig.tight_layout()
        path = os.path.join(args.outdir, f"scale_{axis}.png")
        fig.savefig(path, dpi=90)
        print(f"wrote {path}")
        plt.close(fig)


def run_table(args: argparse.Namespace) -> None:
    """Markdown tables (kbus / Kafka ratios) for bench/RESULTS.md."""
    rows = load_rows(args)
    for axis, (xlabel, metrics) in CHARTS.items():
        data = medians(rows, axis)
        if "kafka" not in data or "kbus" not in data or (args.axes and axis not in args.axes):
            continue
        xs = sorted(set(data["kafka"]) & set(data["kbus"]))
        before = data.get("kbus-base", {})
        title = "kafka / kbus (kbus ÷ kafka)" + (" [kbus-base ÷ kafka]" if before else "")
        print(f"\n**{xlabel}: {title}**\n")
        print("| metric | " + " | ".join(f"{x:,}" for x in xs) + " |")
        print("|---|" + "---|" * len(xs))
        for key, title in metrics + TABLE_ONLY.get(axis, []):
            cells = []
            for x in xs:
                a, b = data["kafka"][x].get(key), data["kbus"][x].get(key)
                if a is None or b is None:
                    cells.append("")
                else:
                    ratio = f" ({b / a:.2f}x)" if a else ""
                    old = before.get(x, {}).get(key)
                    was = f" [{old / a:.2f}x]" if old is not None and a else ""
                    cells.append(f"{_fmt(a)} / {_fmt(b)}{ratio}{was}")
            print(f"| {title} | " + " | ".join(cells) + " |")


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("partitions", "connections", "msgsize"):
        p = sub.add_parser(name)
        p.add_argument("-b", "--bootstrap", required=True)
        p.add_argument("--broker-pid", type=int, required=True)
        p.add_argument("--label", required=True)
        p.add_argument("--out", default=None)
        p.add_argument("--cpu-detail", action="store_true", default=bool(os.environ.get("SCALE_CPU_DETAIL")),
                       help="record what the broker's CPU in each window went to (bench/lib/cpuwin.py)")
        p.add_argument("--log-dir", default=None,
                       help="the broker's log.dirs: the consume cells then record the records per batch they read")
        p.add_argument("--same-log-batch", type=int, default=0,
                       help="also consume a topic written with batches of exactly N records, the same for every "
                            "broker (0: not)")
        p.add_argument("--same-log-max-partitions", type=int, default=1000,
                       help="the same-log consume only up to this many partitions (its topic adds as many)")
        if name == "partitions":
            p.add_argument("--partitions", type=int, required=True)
            p.add_argument("--phase", choices=("create", "load"), required=True)
            p.add_argument("--messages", type=int, default=100_000)
        elif name == "connections":
            p.add_argument("--connections", type=int, required=True)
            p.add_argument("--topic", required=True, help="an existing topic the producers write to")
            p.add_argument("--topic-partitions", type=int, default=10)
            p.add_argument("--requests", type=int, default=20_000)
            p.add_argument("--idle-seconds", type=float, default=5)
        else:
            p.add_argument("--size", type=int, required=True)
            p.add_argument("--bytes", type=int, default=30_000_000)
    for name in ("plot", "table"):
        p = sub.add_parser(name)
        p.add_argument("--data", default=results_file("scale.jsonl"))
        p.add_argument("--outdir", default=str(Path(results_file("scale.jsonl")).parent))
        p.add_argument("--since", default=None)
        p.add_argument("--axes", nargs="*", default=None, help="only these (partitions, connections, msgsize)")
    args = ap.parse_args()
    global CPU_DETAIL
    CPU_DETAIL = getattr(args, "cpu_detail", False)
    if args.cmd in ("plot", "table"):
        {"plot": run_plot, "table": run_table}[args.cmd](args)
        return 0
    out = point_of(args)
    try:
        {"partitions": run_partitions, "connections": run_connections, "msgsize": run_msgsize}[args.cmd](args, out)
    except Exception as exc:
        # the point's line all the same, with what was measured before the failure and why it failed: the shape
        # table marks the system's cells failed instead of leaving them blank (bench/lib/shapes.py)
        emit(args, {**out, "failed": f"{type(exc).__name__}: {exc}"[:500]})
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
