"""Connection handling against a real broker process: malformed frames behind pipelined requests, client resets,
one advertised endpoint per listener, Kafka's socket buffer sizes."""

from __future__ import annotations

import datetime
import os
import re
import socket
import struct
import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from kbus.protocol.codec import encode_request
from kbus.protocol.record_batch import build_batch
from tests.kbus_processes import free_port, wait_for

pytestmark = pytest.mark.integration


def new_topic(bootstrap: str) -> str:
    name = f"conn-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    return name


def produce_frame(topic: str, corr: int, value: bytes | None = None) -> bytes:
    body = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(
                    index=0, records=build_batch([(b"k", b"v%d" % corr if value is None else value)])),),
            ),
        ),
    )
    return encode_request(body, corr, "raw")


def read_responses(sock: socket.socket) -> list[int]:
    """Correlation ids of every response until the broker closes the connection."""
    data = b""
    sock.settimeout(15)
    while chunk := sock.recv(65536):
        data += chunk
    ids = []
    while len(data) >= 8:
        size, corr = struct.unpack_from(">ii", data)
        ids.append(corr)
        data = data[4 + size :]
    return ids


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_produce_behind_a_malformed_frame_is_neither_applied_nor_lost(broker):
    topic = new_topic(broker.bootstrap)
    bad = struct.pack(">i", 12) + struct.pack(">hhi", 0, 9, 2) + b"\x00\x01"  # a Produce header, cut short
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(produce_frame(topic, 1) + bad + produce_frame(topic, 3))
        assert read_responses(sock) == [1]  # the request before the bad frame is answered, then the broker closes
    assert end_offset(broker.bootstrap, topic) == 1  # and the produce behind it was never appended
    log = broker.log_text()
    assert "Traceback" not in log and "never retrieved" not in log


def test_client_resets_with_responses_pending_are_quiet_disconnects(broker):
    topic = new_topic(broker.bootstrap)
    frames = b"".join(produce_frame(topic, i) for i in range(50))
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", broker.port))
        sock.sendall(frames)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST while the broker is answering
    # the broker still serves everyone else, and nothing it acknowledged is lost
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(produce_frame(topic, 999))
        sock.shutdown(socket.SHUT_WR)
        assert read_responses(sock) == [999]
    log = broker.log_text()
    assert "Traceback" not in log and "never retrieved" not in log and "unexpected" not in log.lower()


def test_metadata_answers_with_the_endpoints_of_the_listener_the_client_used(broker_factory):
    external, internal = free_port(), free_port()
    b = broker_factory(
        {
            "listeners": f"EXTERNAL://127.0.0.1:{external},INTERNAL://127.0.0.1:{internal}",
            "advertised.listeners": f"EXTERNAL://127.0.0.1:{external},INTERNAL://localhost:{internal}",
            "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
        },
        port=external,
    )
    seen = {}
    for port in (external, internal):
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        seen[port] = [(x.host, x.port) for x in md.brokers.values()]
    assert seen == {external: [("127.0.0.1", external)], internal: [("localhost", internal)]}
    assert b.alive


def server_side_buffers(port: int, client_port: int) -> tuple[int, int] | None:
    """(receive, send) buffer sizes of the broker's end of one loopback connection as the kernel has them (`ss -tm`:
    rb, tb; Linux keeps twice what SO_RCVBUF / SO_SNDBUF asked for); None until the connection is listed."""
    out = subprocess.run(
        ["ss", "-tmnH", "state", "established", f"( sport = :{port} and dport = :{client_port} )"],
        capture_output=True, text=True, check=True, timeout=10,
    ).stdout  # fmt: skip
    m = re.search(r"\brb(\d+),t\d+,tb(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_accepted_connections_get_the_socket_buffer_sizes_of_the_config(broker, broker_factory):
    # Kafka's Acceptor: SO_RCVBUF = socket.receive.buffer.bytes on the listening socket (accepted connections inherit
    # it), SO_SNDBUF = socket.send.buffer.bytes on each accepted one, both 102400 by default. kbus used to leave both
    # to the kernel's autotuning (a send buffer of ~4 MB at once), whatever the config said.
    custom = broker_factory({"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "98304"})
    for b, expected in ((broker, (2 * 102400, 2 * 102400)), (custom, (2 * 98304, 2 * 65536))):
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
            ends = (b.port, s.getsockname()[1])
            wait_for(lambda ends=ends: server_side_buffers(*ends), 10, "the broker's end of the connection")
            assert server_side_buffers(*ends) == expected, b.overrides


def read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_response_id(sock: socket.socket) -> int:
    size, corr = struct.unpack(">ii", read_exactly(sock, 8))
    read_exactly(sock, size - 4)
    return corr


def test_many_clients_with_split_and_batched_requests_and_one_bad_frame_each_closing_only_its_own(broker):
    """100 connections at once: requests cut into pieces at every kind of boundary (a byte per send, a cut inside
    the size prefix, two and a half requests in one send) are all answered in order; a frame over
    socket.request.max.bytes and a malformed frame close their own connections and no other."""
    topic = new_topic(broker.bootstrap)
    clients = []
    for _ in range(100):
        sock = socket.create_connection(("127.0.0.1", broker.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # every send its own segment
        sock.settimeout(15)
        clients.append(sock)
    huge, bad = clients[10], clients[20]
    huge.sendall(struct.pack(">i", 104857600 + 1) + b"\x00" * 100)  # one byte over the default maximum
    bad.sendall(struct.pack(">i", 10) + struct.pack(">hhi", 0, 9, 2) + b"\x00\x01")  # client_id cut short
    good = [s for s in clients if s is not huge and s is not bad]
    expected: dict[int, list[int]] = {}
    for i, sock in enumerate(good):
        frames = [produce_frame(topic, 1000 * i + n) for n in range(3)]
        stream = b"".join(frames)
        kind = i % 3
        if kind == 0:  # one byte per send for the first frame, the rest at once
            for b in range(len(frames[0])):
                sock.send(stream[b : b + 1])
            sock.sendall(stream[len(frames[0]) :])
        elif kind == 1:  # cut inside the second frame's size prefix
            cut = len(frames[0]) + 2
            sock.sendall(stream[:cut])
            sock.sendall(stream[cut:])
        else:  # two and a half frames, then the rest
            cut = len(frames[0]) + len(frames[1]) + len(frames[2]) // 2
            sock.sendall(stream[:cut])
            sock.sendall(stream[cut:])
        expected[i] = [1000 * i + n for n in range(3)]
    for i, sock in enumerate(good):
        assert [read_response_id(sock) for _ in range(3)] == expected[i]
    for sock in (huge, bad):
        assert sock.recv(100) == b""  # closed by the broker, nothing answered
    for i, sock in enumerate(good):  # and every other connection still serves
        sock.sendall(produce_frame(topic, 5000 + i))
        assert read_response_id(sock) == 5000 + i
    for sock in clients:
        sock.close()
    assert end_offset(broker.bootstrap, topic) == 3 * len(good) + len(good)
    log = broker.log_text()
    assert "Traceback" not in log and "socket.request.max.bytes" in log


def test_large_produce_frames_read_into_their_own_buffers_are_appended_exactly(broker):
    """Large Produce requests (read straight into a buffer of their own, their records appended from it) between
    small ones on one connection, cut at every kind of boundary and pipelined, are appended byte for byte and in
    order; a large frame whose records run past its end closes its own connection only."""
    topic = new_topic(broker.bootstrap)
    values = [b"small-0", os.urandom(300_000), b"small-2", os.urandom(100_000), os.urandom(40_000), b"small-5"]
    frames = [produce_frame(topic, corr, value) for corr, value in enumerate(values)]
    stream = b"".join(frames)
    sock = socket.create_connection(("127.0.0.1", broker.port))
    bad = socket.create_connection(("127.0.0.1", broker.port))
    try:
        cuts = sorted({3, len(frames[0]) + 2, len(frames[0]) + 70_000, len(frames[0]) + len(frames[1]) - 1,
                       len(stream) - len(frames[5]) - 5_000})
        for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            sock.sendall(stream[start:end])
        broken = bytearray(produce_frame(topic, 99, os.urandom(100_000)))
        struct.pack_into(">i", broken, 0, len(broken) - 4 - 50_000)  # the frame ends inside its records
        bad.sendall(broken[: len(broken) - 50_000])
        assert [read_response_id(sock) for _ in values] == list(range(len(values)))
        bad.settimeout(15)
        assert bad.recv(100) == b""  # closed by the broker, nothing answered
    finally:
        sock.close()
        bad.close()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        while len(got) < len(values):
            msgs = c.consume(10, 10)
            assert msgs, f"only {len(got)} of {len(values)} consumed"
            got += [m.value() for m in msgs if m.error() is None]
    finally:
        c.close()
    assert got == values
    assert "Traceback" not in broker.log_text()
