"""The hand-encoded Produce response body is byte for byte what kio's generic writer makes, for every version kbus
answers, and decodes back to the same values."""

from __future__ import annotations

import io

import pytest
from kio.serial import entity_reader, entity_writer

from kbus.protocol.codec import build, nested, response_type
from kbus.protocol.produce_response import (
    MAX_VERSION,
    MIN_VERSION,
    NodeEndpoint,
    PartitionProduceResult,
    encode_produce_response,
)

TOPICS = [
    ("orders", [
        PartitionProduceResult(0, 0, base_offset=41, log_start_offset=0),
        PartitionProduceResult(7, 0, base_offset=2**40, log_append_time_ms=1_795_000_000_123, log_start_offset=12),
    ]),
    ("bad-ünïcode", [
        PartitionProduceResult(3, 87, error_message="Record 1 failed: invalid",
                               record_errors=[(1, "Compacted topic cannot accept message without key"), (4, None)]),
        PartitionProduceResult(4, 6),
    ]),
    ("empty-topic", []),
]  # fmt: skip


def kio_bytes(version: int, topics: list[tuple[str, list[PartitionProduceResult]]], throttle_time_ms: int,
              endpoints: list[NodeEndpoint] | None = None) -> bytes:
    rt = response_type(0, version)
    response = build(
        rt,
        throttle_time=throttle_time_ms,
        node_endpoints=[build(nested(rt, "NodeEndpoint"), node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                        for n in endpoints or ()] if version >= 10 else (),
        responses=[
            build(
                nested(rt, "TopicProduceResponse"),
                name=name,
                partition_responses=[
                    build(
                        nested(rt, "PartitionProduceResponse"),
                        index=p.index,
                        error_code=p.error_code,
                        base_offset=p.base_offset,
                        log_append_time=p.log_append_time_ms,
                        log_start_offset=p.log_start_offset,
                        error_message=p.error_message,
                        record_errors=[
                            build(nested(rt, "BatchIndexAndErrorMessage"), batch_index=i, batch_index_error_message=m)
                            for i, m in p.record_errors
                        ] if version >= 8 else (),
                        current_leader=build(nested(rt, "LeaderIdAndEpoch"), leader_id=p.current_leader[0],
                                             leader_epoch=p.current_leader[1]) if version >= 10 else None,
                    )
                    for p in parts
                ],
            )
            for name, parts in topics
        ],
    )
    out = io.BytesIO()
    entity_writer(rt)(out, response)
    return out.getvalue()


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_same_bytes_as_kio(version: int) -> None:
    for topics in (TOPICS, [], [("t", [PartitionProduceResult(0, 0, base_offset=0)])]):
        assert encode_produce_response(version, topics, throttle_time_ms=250).data == kio_bytes(version, topics, 250)


@pytest.mark.parametrize("version", [MIN_VERSION, 8, MAX_VERSION])
def test_decodes_back(version: int) -> None:
    data = encode_produce_response(version, TOPICS).data
    decoded, end = entity_reader(response_type(0, version))(data, 0)
    assert end == len(data)
    assert [t.name for t in decoded.responses] == [name for name, _ in TOPICS]
    first = decoded.responses[0].partition_responses[1]
    assert (first.index, first.base_offset) == (7, 2**40)
    assert first.log_append_time is not None and int(first.log_append_time.timestamp() * 1000) == 1_795_000_000_123
    failed = decoded.responses[1].partition_responses[0]
    assert failed.error_code == 87
    if version >= 8:
        assert failed.error_message == "Record 1 failed: invalid"
        assert [(e.batch_index, e.batch_index_error_message) for e in failed.record_errors] == [
            (1, "Compacted topic cannot accept message without key"), (4, None),
        ]  # fmt: skip


LEADER_MOVED = [("moved", [PartitionProduceResult(0, 6, current_leader=(2, 7)), PartitionProduceResult(1, 0)])]
ENDPOINTS = [NodeEndpoint(2, "broker-2.example", 9093, "rack-b"), NodeEndpoint(3, "h3", 9094)]


@pytest.mark.parametrize("version", range(10, MAX_VERSION + 1))
def test_kip951_leader_hints_same_bytes_as_kio(version: int) -> None:
    """v10+: NOT_LEADER_OR_FOLLOWER's CurrentLeader (tagged, per partition), NodeEndpoints (tagged, top level)."""
    ours = encode_produce_response(version, LEADER_MOVED, throttle_time_ms=5, node_endpoints=ENDPOINTS).data
    assert ours == kio_bytes(version, LEADER_MOVED, 5, ENDPOINTS)
    decoded, end = entity_reader(response_type(0, version))(ours, 0)
    assert end == len(ours)
    hint = decoded.responses[0].partition_responses[0].current_leader
    assert (hint.leader_id, hint.leader_epoch) == (2, 7)
    assert [(n.node_id, n.host, n.port, n.rack) for n in decoded.node_endpoints] == [
        (2, "broker-2.example", 9093, "rack-b"), (3, "h3", 9094, None)]


ONE_PARTITION = [
    PartitionProduceResult(0, 0, base_offset=0),
    PartitionProduceResult(2**31 - 1, 0, base_offset=2**62, log_append_time_ms=1_795_000_000_123, log_start_offset=9),
    PartitionProduceResult(5, 6),  # an error code alone
    PartitionProduceResult(5, 87, error_message="Record 0 failed"),
    PartitionProduceResult(5, 87, record_errors=[(0, None)]),
    PartitionProduceResult(5, 6, current_leader=(2, 7)),
]  # fmt: skip


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_one_partition_responses_same_bytes_as_kio(version: int) -> None:
    """One topic with one partition (every version writes it with one pack when nothing optional is in it; v3-v7
    whatever the record errors and message, which they do not carry): each optional part present in turn, a topic
    name at the one-byte length varint's limit and past it, one whose int16 length needs both bytes, node endpoints,
    and a throttle time."""
    for name in ("t", "x" * 126, "x" * 127, "ü" * 64, "y" * 300):
        for p in ONE_PARTITION:
            topics = [(name, [p])]
            assert encode_produce_response(version, topics, throttle_time_ms=7).data == kio_bytes(version, topics, 7)
            if version >= 10:
                with_endpoints = encode_produce_response(version, topics, node_endpoints=ENDPOINTS).data
                assert with_endpoints == kio_bytes(version, topics, 0, ENDPOINTS)


def test_versions_outside_the_range_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_produce_response(MAX_VERSION + 1, [])
    with pytest.raises(ValueError):
        encode_produce_response(MIN_VERSION - 1, [])
