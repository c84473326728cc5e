"""Hostile frames over raw TCP against a real broker process: a frame whose sizes lie closes that connection only;
the broker stays up and keeps serving."""

from __future__ import annotations

import socket
import struct

import pytest

pytestmark = pytest.mark.integration


def _request(api_key: int, version: int, corr: int, body: bytes, flexible: bool) -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, 1) + b"c" + (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(payload)) + payload


def _recv_frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    buf = b""
    while len(buf) < 4:
        chunk = sock.recv(4 - len(buf))
        if not chunk:
            return None
        buf += chunk
    (size,) = struct.unpack(">i", buf)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def api_versions_ok(bootstrap: str) -> bool:
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_request(18, 0, 99, b"", flexible=False))
        resp = _recv_frame(s)
    return resp is not None and struct.unpack_from(">ih", resp, 0) == (99, 0)


@pytest.mark.parametrize(
    ("api_key", "version", "body", "flexible"),
    [
        (3, 9, b"\x81\x80\x80\x80\x10\x01\x00\x00\x00", True),  # Metadata v9: compact array of 2^32 topics (20 bytes)
        (3, 4, b"\x7f\xff\xff\xff\x01", False),  # Metadata v4: 2^31-1 topics
        (0, 9, b"\x00\x00\xff\xff\x00\x00\x75\x30\x02\x02t\xff\xff\xff\xff\x0f", True),  # Produce v9
        (1, 4, b"\xff\xff\xff\xff" + b"\x00" * 13 + b"\xff\xff\xff\xff", False),  # Fetch v4: null topics
    ],
)
def test_lying_sizes_close_the_connection_and_the_broker_serves_on(broker, api_key, version, body, flexible):
    host, port = broker.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_request(api_key, version, 1, body, flexible))
        assert _recv_frame(s) is None  # closed, not answered
    assert broker.alive
    assert api_versions_ok(broker.bootstrap)


def test_metadata_by_topic_id_before_v12_is_invalid_request(broker):
    """Kafka refuses topic ids before Metadata v12 with INVALID_REQUEST per topic (the v11 response cannot carry
    a null name: this used to fail encoding the response and close the connection)."""
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    topic = b"\xff" * 16 + b"\x00" + b"\x00"  # topic_id, name null (compact 0), tagged fields
    body = b"\x02" + topic + b"\x01\x00\x00"  # 1 topic, allow_auto_topic_creation, include_topic_auth_ops, tags
    host, port = broker.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_request(3, 11, 5, body, flexible=True))
        resp = _recv_frame(s)
    assert resp is not None
    value, _ = entity_reader(load_response_schema(3, 11))(resp, 5)
    assert [(t.error_code.value, t.name) for t in value.topics] == [(42, "")]


def _overflowing_batch() -> bytes:
    """One CRC-valid batch whose second record's baseTimestamp + timestampDelta passes Long.MAX_VALUE."""
    from kbus.protocol import record_batch as rb

    body = bytearray()
    for i, delta in enumerate((0, 100)):
        rb.encode_record(body, i, delta, b"k", b"v", [])
    base = 2**63 - 11
    out = bytearray(rb.RECORD_BATCH_OVERHEAD + len(body))
    rb.HEADER_STRUCT.pack_into(out, 0, 0, rb.RECORD_BATCH_OVERHEAD - rb.LOG_OVERHEAD + len(body), -1, 2, 0, 0, 1,
                               base, base, -1, -1, -1, 2)
    out[rb.RECORDS_OFFSET :] = body
    struct.pack_into(">I", out, rb.CRC_OFFSET, rb.crc32c(memoryview(out)[rb.ATTRIBUTES_OFFSET :]))
    return bytes(out)


def test_overflowing_record_timestamps_are_answered_as_kafka_answers(broker):
    """Issue 28: such a batch raised struct.error inside the broker ("Unexpected error", answered UNKNOWN_SERVER_ERROR).
    Kafka 3.9.2 wraps the timestamp like a Java long: it appends the batch when the topic's timestamp bounds are
    unbounded (the default) and refuses it with INVALID_TIMESTAMP, naming the wrapped timestamp, when bounded."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests import fuzzing

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([
        NewTopic("ts-wrap", 1, 1),
        NewTopic("ts-wrap-bounded", 1, 1, config={"message.timestamp.difference.max.ms": "3600000"}),
    ]).values():
        fut.result(30)
    host, port = broker.bootstrap.split(":")
    answers = {}
    for topic in ("ts-wrap", "ts-wrap-bounded"):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(fuzzing.request_frame(0, 9, 5, fuzzing.produce_body(9, topic, _overflowing_batch())))
            answers[topic] = _recv_frame(s)
    from kio.schema.produce.v9.response import ProduceResponse
    from kio.serial import entity_reader

    def partition(frame):
        value, _ = entity_reader(ProduceResponse)(frame, 5)
        return value.responses[0].partition_responses[0]

    ok, bounded = partition(answers["ts-wrap"]), partition(answers["ts-wrap-bounded"])
    assert (int(ok.error_code), ok.base_offset) == (0, 0)
    assert int(bounded.error_code) == 32  # INVALID_TIMESTAMP
    assert bounded.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [r.batch_index for r in bounded.record_errors] == [0, 1]
    assert bounded.record_errors[1].batch_index_error_message.startswith(
        "Timestamp -9223372036854775719 of message with offset 1 is out of range")
    assert "Unexpected error" not in broker.log_text() and "int too large" not in broker.log_text()


def test_a_negative_current_leader_epoch_other_than_minus_one(broker):
    """Found with integer bounds (issue 28): Kafka 3.9.2 answers ListOffsets and OffsetForLeaderEpoch with
    current_leader_epoch -2^31 FENCED_LEADER_EPOCH (only -1 means "not given" there; for Fetch any negative value
    does); kbus took every negative value as "not given"."""
    import asyncio

    from confluent_kafka.admin import AdminClient, NewTopic
    from kio.schema.list_offsets.v7 import request as lo
    from kio.schema.list_offsets.v7 import response as lor
    from kio.schema.offset_for_leader_epoch.v4 import request as oe
    from kio.schema.offset_for_leader_epoch.v4 import response as oer

    from kbus.protocol.client import KafkaConnection

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("epoch-min", 1, 1)])["epoch-min"].result(30)

    async def ask() -> tuple[int, int, int]:
        host, port = broker.bootstrap.split(":")
        c = KafkaConnection(host, int(port), "t")
        try:
            codes = []
            for epoch in (-(2**31), -1):
                r = await c.request(lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(lo.ListOffsetsTopic(
                    name="epoch-min", partitions=(lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch,
                                                                          timestamp=-1),)),)), lor.ListOffsetsResponse)
                codes.append(int(r.topics[0].partitions[0].error_code))
            r = await c.request(oe.OffsetForLeaderEpochRequest(replica_id=-1, topics=(oe.OffsetForLeaderTopic(
                topic="epoch-min", partitions=(oe.OffsetForLeaderPartition(partition=0, current_leader_epoch=-(2**31),
                                                                           leader_epoch=0),)),)),
                oer.OffsetForLeaderEpochResponse)
            codes.append(int(r.topics[0].partitions[0].error_code))
            return codes[0], codes[1], codes[2]
        finally:
            await c.close()

    assert asyncio.run(ask()) == (74, 0, 74)  # FENCED_LEADER_EPOCH, NONE, FENCED_LEADER_EPOCH


def test_list_offsets_refuses_unknown_negative_timestamps(broker):
    """Found with integer bounds (issue 28): a ListOffsets timestamp below 0 that is not one of the special values
    the request's version knows (-1, -2; -3 from v7) is UNSUPPORTED_VERSION in Kafka 3.9.2
    (KafkaApis.timestampMinSupportedVersion); kbus answered offset 0."""
    import asyncio

    from confluent_kafka.admin import AdminClient, NewTopic
    from kio.schema.list_offsets.v6 import request as lo6
    from kio.schema.list_offsets.v6 import response as lor6
    from kio.schema.list_offsets.v7 import request as lo7
    from kio.schema.list_offsets.v7 import response as lor7

    from kbus.protocol.client import KafkaConnection

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ts-special", 1, 1)])["ts-special"].result(30)

    async def code(mod, resp, ts: int) -> int:
        host, port = broker.bootstrap.split(":")
        c = KafkaConnection(host, int(port), "t")
        try:
            r = await c.request(mod.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(mod.ListOffsetsTopic(
                name="ts-special", partitions=(mod.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                        timestamp=ts),)),)), resp.ListOffsetsResponse)
            return int(r.topics[0].partitions[0].error_code)
        finally:
            await c.close()

    v7 = [asyncio.run(code(lo7, lor7, ts)) for ts in (-(2**63), -5, -4, -3, -2, -1, 0)]
    assert v7 == [35, 35, 35, 0, 0, 0, 0]
    assert asyncio.run(code(lo6, lor6, -3)) == 35  # max-timestamp needs v7
