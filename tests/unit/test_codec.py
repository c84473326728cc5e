"""Wire codec, sans sockets: frames, headers, kio round trips, the ApiVersions quirks librdkafka depends on."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from kbus.protocol.codec import (
    ProtocolError,
    RequestHeaderReader,
    UnsupportedVersionError,
    build,
    decode_request,
    encode_response,
    frame_size,
    nested,
    parse_request_header,
    response_type,
)


def header(api_key: int, version: int, corr: int, client: bytes | None = b"c", flexible: bool = False) -> bytes:
    cid = struct.pack(">h", -1) if client is None else struct.pack(">h", len(client)) + client
    return struct.pack(">hhi", api_key, version, corr) + cid + (b"\x00" if flexible else b"")


def always(_k: int, _v: int) -> bool:
    return True


def test_frame_size_reads_the_prefix():
    assert frame_size(struct.pack(">i", 1000), 1000) == 1000


@pytest.mark.parametrize("size", [-1, 1001])
def test_frame_size_rejects_bad_sizes(size):
    with pytest.raises(ProtocolError):
        frame_size(struct.pack(">i", size), 1000)


def test_flexible_header_and_body_decode():
    # ApiVersions v3 is flexible: header v2 (tagged fields), compact strings in the body
    body = b"\x06kcat1" + b"\x041.0" + b"\x00"
    frame = header(18, 3, 42, flexible=True) + body
    h, pos = parse_request_header(frame, supported=always)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.flexible) == (18, 3, 42, "c", True)
    req = decode_request(frame, h, pos)
    assert req.client_software_name == "kcat1"


def test_unsupported_version_and_unknown_key():
    frame = header(18, 3, 1, flexible=True) + b"\x01\x01\x00"
    with pytest.raises(UnsupportedVersionError):
        parse_request_header(frame, supported=lambda k, v: v <= 2)
    with pytest.raises(UnsupportedVersionError):
        parse_request_header(header(999, 0, 1), supported=always)


def test_truncated_header_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        parse_request_header(b"\x00\x03\x00", supported=always)
    with pytest.raises(ProtocolError):
        parse_request_header(struct.pack(">hhih", 3, 1, 1, 50) + b"short", supported=always)


def test_malformed_body_is_a_protocol_error():
    frame = header(3, 1, 1) + b"\x00\x00\x00\x05"  # claims 5 topics, has none
    h, pos = parse_request_header(frame, supported=always)
    with pytest.raises(ProtocolError):
        decode_request(frame, h, pos)


def test_api_versions_response_has_no_header_tagged_fields_even_at_v3():
    h, _ = parse_request_header(header(18, 3, 9, flexible=True) + b"\x01\x01\x00", supported=always)
    rt = response_type(18, 3)
    resp = build(
        rt,
        error_code=0,
        api_keys=[build(nested(rt, "ApiVersion"), api_key=0, min_version=3, max_version=9)],
        throttle_time=0,
    )
    data = encode_response(h, resp)
    size, corr = struct.unpack_from(">ii", data)
    assert size == len(data) - 4 and corr == 9
    assert data[8:10] == b"\x00\x00"  # error code straight after the correlation id: no tag byte in between


def test_flexible_response_header_carries_empty_tagged_fields():
    h, _ = parse_request_header(header(3, 12, 5, flexible=True) + b"\x01\x00\x00\x00", supported=always)
    rt = response_type(3, 12)
    data = encode_response(h, build(rt, throttle_time=0, brokers=[], cluster_id="x", controller_id=0, topics=[]))
    assert data[8] == 0  # header tagged-field count


def test_build_drops_unknown_fields_and_converts_types():
    rt = response_type(0, 3)  # Produce v3 has no log_start_offset, record_errors
    part = build(
        nested(rt, "PartitionProduceResponse"),
        index=0,
        error_code=3,
        base_offset=5,
        log_append_time=-1,
        log_start_offset=0,
        record_errors=(),
    )
    assert part.error_code == ErrorCode.unknown_topic_or_partition
    assert not hasattr(part, "log_start_offset")


def test_skip_tagged_fields_is_shared_by_server_and_client() -> None:
    from kbus.protocol.codec import skip_tagged_fields
    from kbus.protocol.errors import ProtocolError

    # two tagged fields (tag 0 with 3 bytes, tag 5 with 0 bytes), then the body
    frame = b"\x02" + b"\x00\x03abc" + b"\x05\x00" + b"BODY"
    assert frame[skip_tagged_fields(frame, 0):] == b"BODY"
    assert skip_tagged_fields(b"\x00rest", 0) == 1
    with pytest.raises(ProtocolError):
        skip_tagged_fields(b"\x01\x00\x7f" + b"short", 0)


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("retention", [2**63 - 1, -(2**63), 10**16])
def test_offset_commit_retention_beyond_a_timedelta_decodes(version: int, retention: int) -> None:
    """Issue 28: kio decodes retentionTimeMs (a long) through int64 microseconds, which fails past +-292,000 years,
    so the whole OffsetCommit was refused and its connection closed; Kafka answers it. kbus clamps it there."""
    import datetime
    import io
    import sys

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    from kbus.protocol.codec import decode_request, parse_request_header

    cls = load_request_schema(8, version)
    mod = sys.modules[cls.__module__]
    req = cls(group_id="g", generation_id_or_member_epoch=-1, member_id="m",
              retention_time=datetime.timedelta(milliseconds=0x123456),
              topics=(mod.OffsetCommitRequestTopic(name="t", partitions=(
                  mod.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata=""),)),))
    out = io.BytesIO()
    entity_writer(cls)(out, req)
    body = bytearray(out.getvalue())
    at = body.find(struct.pack(">q", 0x123456))
    struct.pack_into(">q", body, at, retention)
    frame = struct.pack(">hhih", 8, version, 1, 1) + b"c" + bytes(body)
    header, pos = parse_request_header(frame, supported=lambda k, v: True)
    value = decode_request(frame, header, pos)
    bound = datetime.timedelta(milliseconds=(2**63 - 1) // 1000)
    assert value.retention_time == (bound if retention > 0 else -bound)
    assert value.topics[0].partitions[0].committed_offset == 5 and value.member_id == "m"


def test_a_connections_header_reader_reads_what_parse_request_header_reads() -> None:
    """RequestHeaderReader keeps the last header parse_request_header gave and reuses it (new correlation id) while
    the (key, version) pair and the client id bytes repeat: the same headers and body offsets, every refusal
    still made, and the catalog asked only when something changed."""
    asked: list[tuple[int, int]] = []

    def supported(key: int, version: int) -> bool:
        asked.append((key, version))
        return key != 999 and version <= 12

    reader = RequestHeaderReader(supported)
    frames = [
        header(0, 8, 1, b"producer") + b"body",
        header(0, 8, 2, b"producer") + b"body",  # the kept answer: nothing asked
        header(0, 8, 3, b"producez") + b"body",  # same length, other bytes
        header(0, 8, 4, b"produce") + b"body",  # a prefix of the kept id
        header(0, 8, 5, None),
        header(0, 8, 6, None),
        header(0, 8, 7, b""),
        header(0, 8, 8, b""),
        header(0, 9, 9, b"p", flexible=True) + b"x",
        header(0, 9, 10, b"p", flexible=True) + b"x",
        header(0, 9, 11, b"p") + b"\x01\x00\x01z" + b"x",  # one tagged field in the header, skipped
        header(3, 1, 12, b"\xff\xfe"),  # not UTF-8: replaced, as parse_request_header does
        header(3, 1, 13, b"\xff\xfe"),
    ]
    for frame in frames:
        assert reader.read(frame) == parse_request_header(frame, supported=lambda k, v: k != 999 and v <= 12)
    assert reader.read(frames[-1])[0].client_id == "\ufffd\ufffd"
    assert asked == [(0, 8), (0, 8), (0, 8), (0, 8), (0, 8), (0, 9), (3, 1)]
    # refusals after a kept answer: the same errors as parse_request_header's
    reader.read(header(0, 8, 20, b"producer"))
    with pytest.raises(UnsupportedVersionError):
        reader.read(header(0, 13, 21, b"producer"))
    with pytest.raises(UnsupportedVersionError):
        reader.read(header(999, 8, 22, b"producer"))
    with pytest.raises(ProtocolError, match="truncated client_id"):
        reader.read(header(0, 8, 23, b"producer")[:-1])  # the kept id's length, its bytes cut short
    with pytest.raises(ProtocolError, match="shorter than a request header"):
        reader.read(header(0, 8, 24, b"producer")[:9])
    with pytest.raises(ProtocolError, match="bad client_id length"):
        reader.read(struct.pack(">hhih", 0, 8, 25, -2))
    h, pos = reader.read(header(0, 8, 26, b"producer") + b"body")  # the kept answer is still the good one
    assert (h.correlation_id, h.client_id, pos) == (26, "producer", 18)
