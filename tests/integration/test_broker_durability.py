"""Restarts, crashes and bad input against a real kbus broker process."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.integration


def produce_n(bootstrap: str, topic: str, n: int, **conf: object) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **conf})
    for i in range(n):
        p.produce(topic, value=b"m%d" % i)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    return n


def read_values(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "r", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(m.value() for m in c.consume(10000, 0.5) if not m.error())
    # give a chance to see extra (duplicated) messages
    out.extend(m.value() for m in c.consume(10000, 0.5) if not m.error())
    c.close()
    return out


def test_clean_restart_loses_nothing_and_needs_no_recovery(broker_factory):
    b = broker_factory({"log.segment.bytes": "200000"})
    topic = f"r-{uuid.uuid4().hex[:8]}"
    produce_n(b.bootstrap, topic, 20_000)
    assert b.stop() == 0
    b.start()
    # the restart after SIGTERM trusts the logs: no recovery pass
    last_load = [line for line in b.log_text().splitlines() if " logs from " in line][-1]
    assert "(clean shutdown)" in last_load
    assert read_values(b.bootstrap, topic, 20_000) == [b"m%d" % i for i in range(20_000)]
    produce_n(b.bootstrap, topic, 10)
    assert len(read_values(b.bootstrap, topic, 20_010)) == 20_010


def test_kill_9_during_acks_1_produce_loses_no_acknowledged_message(broker_factory):
    b = broker_factory({"log.segment.bytes": "1000000"})
    topic = f"k-{uuid.uuid4().hex[:8]}"
    produce_n(b.bootstrap, topic, 1)  # create the topic
    acked: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            with lock:
                acked.append(msg.value())

    def run():
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "acks": "1",
                "linger.ms": 1,
                "message.timeout.ms": 3000,
                "retries": 0,
                "enable.idempotence": False,
            }
        )
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic, value=b"a%d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            p.poll(0)
        p.flush(5)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with lock:
            if len(acked) > 50_000:
                break
        time.sleep(0.05)
    b.kill()
    stop.set()
    t.join(30)
    with lock:
        acknowledged = set(acked)
    assert len(acknowledged) > 1000
    b.start()
    stored = read_values(b.bootstrap, topic, len(acknowledged) + 1, timeout=60)
    missing = acknowledged - set(stored)
    assert not missing, f"{len(missing)} acknowledged messages lost"
    assert len(stored) == len(set(stored))  # and nothing duplicated


def test_garbage_and_oversized_frames_do_not_take_the_broker_down(broker):
    payloads = [
        b"\x00\x00\x00\x10" + b"\xff" * 16,  # garbage header
        b"\x00\x00\x00\x0c\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff\x00\x00",  # unknown API key 999
        struct.pack(">i", 200_000_000),  # frame larger than socket.request.max.bytes
        struct.pack(">i", -5),  # negative size
        b"\x00\x00\x01\x00\x00\x03",  # truncated frame, then close
        b"\x00\x00\x00\x2a\x00\x00\x00\x09" + b"\x00" * 38,  # produce v9 with a malformed body
    ]
    for data in payloads:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except (TimeoutError, ConnectionResetError):
                pass
    assert broker.alive
    topic = f"g-{uuid.uuid4().hex[:8]}"
    produce_n(broker.bootstrap, topic, 10)
    assert len(read_values(broker.bootstrap, topic, 10)) == 10
    assert "Closing connection" in broker.log_text()


def test_api_versions_unknown_version_answers_unsupported_version_in_v0_layout(broker):
    # ApiVersions v99: KIP-511 says answer UNSUPPORTED_VERSION (35) in the v0 layout with our ranges.
    body = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00"
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    corr, err, n = struct.unpack_from(">ihi", data, 0)
    assert (corr, err) == (7, 35)
    keys = {struct.unpack_from(">hhh", data, 10 + 6 * i)[0] for i in range(n)}
    assert {0, 1, 2, 3, 18} <= keys
