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
