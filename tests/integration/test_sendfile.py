"""Zero copy on real sockets: the sendfile writer keeps frames in order when the socket fills up, and a real broker
serves large fetches from segment files with sendfile, every message intact, filling a consumer's size limit at once
(as Kafka does) from a log of one-record batches."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import uvloop

from kbus.protocol.client import KafkaConnection
from kbus.protocol.codec import build, nested, request_type, response_type
from kbus.protocol.splice import FileRegion, SplicedFrame
from kbus.server.network.sendfile import SendfileWriter
from tests.integration.test_metrics_endpoint import samples, scrape, value
from tests.kbus_processes import free_port

pytestmark = pytest.mark.integration
FETCH = 1  # api key


def test_writer_keeps_order_through_a_full_socket(tmp_path: Path) -> None:
    blob = os.urandom(6_000_000)
    path = tmp_path / "segment.log"
    path.write_bytes(blob)
    fd = os.open(path, os.O_RDONLY)
    frames: list[bytes | SplicedFrame] = [
        b"first plain frame",
        SplicedFrame((b"head-1", FileRegion(fd, 0, 3_000_000), b"tail-1")),
        b"plain in between",
        SplicedFrame((b"head-2", FileRegion(fd, 3_000_000, 3_000_000))),
        b"last plain frame",
    ]
    expected = b"".join(
        b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRegion) else p for p in f.parts)
        if isinstance(f, SplicedFrame) else f for f in frames)
    received = bytearray()

    def slow_reader(sock: socket.socket) -> None:
        time.sleep(0.3)  # let the socket fill so the writer must wait for it
        while len(received) < len(expected):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received.extend(chunk)

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        reader = threading.Thread(target=slow_reader, args=(theirs,))
        reader.start()
        drained = asyncio.Event()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        writer = SendfileWriter(loop, transport, drained.set, lambda exc: pytest.fail(str(exc)))
        writer.write(frames[:2])
        writer.write(frames[2:])  # queued behind the region still being sent
        stalled = writer.stalled
        if stalled:
            await asyncio.wait_for(drained.wait(), 30)
        writer.write([b"after the drain"])
        await asyncio.sleep(0.2)
        writer.close()
        transport.close()
        await asyncio.to_thread(reader.join, 30)
        theirs.close()
        return stalled

    expected += b"after the drain"
    try:
        stalled = uvloop.run(main())
    finally:
        os.close(fd)
    assert stalled, "the socket never filled: the test did not exercise waiting"
    assert len(received) == len(expected) and bytes(received) == expected


def test_large_fetches_are_sent_from_the_file_intact(broker_factory) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    metrics_port = free_port()
    b = broker_factory({"metrics.port": str(metrics_port)})
    topic = f"zc-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 200_000})
    n = 6000
    for i in range(n):
        p.produce(topic, value=i.to_bytes(4, "big") + os.urandom(996), key=str(i).encode(), partition=i % 3)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "zc", "enable.auto.commit": False,
                  "fetch.max.bytes": 4_000_000, "max.partition.fetch.bytes": 2_000_000})
    c.assign([TopicPartition(topic, i, 0) for i in range(3)])
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 60
    while sum(map(len, seen.values())) < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            assert m.error() is None, m.error()
            i = int.from_bytes(m.value()[:4], "big")
            assert m.key() == str(i).encode() and len(m.value()) == 1000
            seen[m.partition()].append(i)
    c.close()
    for part, got in seen.items():
        assert got == list(range(part, n, 3)), f"partition {part}: messages missing or out of order"
    s = samples(scrape(metrics_port)[2])
    assert value(s, "kbus_messages_out_total", topic=topic) == n
    sent_by_sendfile = value(s, "kbus_sendfile_bytes_total")
    assert sent_by_sendfile and sent_by_sendfile > n * 1000 * 0.5, "most record bytes should go by sendfile"


def test_one_record_batches_are_served_and_counted(broker_factory) -> None:
    # what producers with linger.ms=0 leave behind: one batch per record. Fetches of them go by sendfile and
    # kbus_messages_out_total counts them from each range's ends (no header read per batch), still exactly
    from confluent_kafka import Consumer, Producer, TopicPartition

    metrics_port = free_port()
    b = broker_factory({"metrics.port": str(metrics_port), "num.partitions": "1"})
    topic = f"onerec-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": 1})
    n = 3000
    for i in range(n):
        p.produce(topic, value=i.to_bytes(4, "big") + b"x" * 96)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "onerec", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 50_000})  # about 300 batches a fetch, some ending mid-batch
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[int] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            assert m.error() is None, m.error()
            got.append(int.from_bytes(m.value()[:4], "big"))
    c.close()
    assert got == list(range(n))
    s = samples(scrape(metrics_port)[2])
    assert value(s, "kbus_messages_out_total", topic=topic) == n
    assert (value(s, "kbus_sendfile_bytes_total") or 0) > n * 100 * 0.5, "most record bytes should go by sendfile"


def test_a_consumers_fetch_of_one_record_batches_fills_the_limit_at_once(broker) -> None:
    # issue 23: what a librdkafka consumer asks for (max wait 500 ms, min bytes 1, 1 MB per partition) over a log of
    # one-record batches (linger.ms=0). Kafka 3.9 answers at once with the limit filled: it cuts the file range at
    # the byte limit (the client drops the cut batch), kbus stops at the last whole batch, so at most one batch less.
    # At the log end the same fetch waits its max wait out.
    from confluent_kafka import Producer

    topic = f"onerec-fill-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": 1})
    n = 7000  # 100-byte records: ~1.2 MB of 170-byte batches
    for i in range(n):
        p.produce(topic, value=i.to_bytes(4, "big") + b"x" * 96)
    assert p.flush(60) == 0
    limit = 1 << 20
    host, port = broker.bootstrap.split(":")

    def fetch(offset: int, max_wait_ms: int) -> Any:
        req = request_type(FETCH, 12)
        part = build(nested(req, "FetchPartition"), partition=0, fetch_offset=offset, current_leader_epoch=-1,
                     last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=limit)  # fmt: skip
        return build(req, replica_id=-1, max_wait=max_wait_ms, min_bytes=1, max_bytes=50 * limit, session_epoch=-1,
                     topics=[build(nested(req, "FetchTopic"), topic=topic, partitions=[part])])  # fmt: skip

    async def timed(offset: int, max_wait_ms: int) -> tuple[float, bytes, int]:
        conn = KafkaConnection(host, int(port), "onerec-fill")
        try:
            started = time.monotonic()
            resp = await conn.request(fetch(offset, max_wait_ms), response_type(FETCH, 12), timeout=30)
            part = resp.responses[0].partitions[0]
            return time.monotonic() - started, bytes(part.records or b""), part.high_watermark
        finally:
            await conn.close()

    took, records, hw = asyncio.run(timed(0, 2000))
    assert hw == n
    assert took < 1.0, f"a fetch with data to send waited {took:.2f}s"
    whole, largest = 0, 0  # bytes of the whole batches at the front (Kafka's response may end in a cut one)
    while whole + 12 <= len(records):
        size = 12 + int.from_bytes(records[whole + 8:whole + 12], "big")
        if whole + size > len(records):
            break
        whole, largest = whole + size, max(largest, size)
    assert limit - largest < whole <= len(records) <= limit, (whole, len(records), largest)
    took, records, _ = asyncio.run(timed(n, 300))
    assert records == b"" and took >= 0.25, f"a fetch at the log end answered after {took:.2f}s"
