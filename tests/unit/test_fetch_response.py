"""The hand-written Fetch response encoder writes exactly the bytes kio's generic writer does, for every Fetch
version the broker serves, and kio reads them back."""

from __future__ import annotations

import io
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from kbus.protocol.codec import build, nested, response_type
from kbus.protocol.fetch_response import EncodedBody, PartitionEntry, encode_fetch_response

TOPICS: list[tuple[str, list[PartitionEntry]]] = [
    ("orders", [
        PartitionEntry(0, 0, 42, 40, 3, None, b"\x01" * 70),
        PartitionEntry(1, 0, 7, 7, 0, [(1000, 5), (1001, 6)], b"", 2),
        PartitionEntry(2, 6),  # NOT_LEADER_OR_FOLLOWER, offsets unknown
        PartitionEntry(3, 0, 12, 11, 4, None, b"", 1),  # nothing new: the encoder's one-pack entry
    ]),
    ("é-" + "x" * 200, [PartitionEntry(9, 0, 2**40, 2**40 - 1, 2**33, [], b"r" * 300)]),
    ("empty", []),
]  # fmt: skip


def kio_bytes(version: int, topics: list[tuple[str, list[PartitionEntry]]], **top: Any) -> bytes:
    cls = response_type(1, version)
    body = build(cls, responses=[
        build(nested(cls, "FetchableTopicResponse"), topic=name, partitions=[
            build(nested(cls, "PartitionData"), partition_index=p.partition_index, error_code=p.error_code,
                  high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                  log_start_offset=p.log_start_offset, preferred_read_replica=p.preferred_read_replica,
                  records=p.records, aborted_transactions=None if p.aborted_transactions is None else [
                      build(nested(cls, "AbortedTransaction"), producer_id=a, first_offset=b)
                      for a, b in p.aborted_transactions])
            for p in parts])
        for name, parts in topics], **top)  # fmt: skip
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    return out.getvalue()


@pytest.mark.parametrize("version", range(4, 13))
def test_same_bytes_as_kio(version: int) -> None:
    mine = encode_fetch_response(version, TOPICS, throttle_time_ms=5, error_code=0, session_id=77)
    assert isinstance(mine, EncodedBody)
    assert mine.data == kio_bytes(version, TOPICS, throttle_time=5, error_code=0, session_id=77)
    decoded, size = entity_reader(response_type(1, version))(mine.data, 0)
    assert size == len(mine.data)
    parts = {(t.topic, p.partition_index): p for t in decoded.responses for p in t.partitions}
    assert parts[("orders", 1)].high_watermark == 7
    aborted = parts[("orders", 1)].aborted_transactions
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(1000, 5), (1001, 6)]
    assert bytes(parts[("orders", 0)].records) == b"\x01" * 70


@pytest.mark.parametrize("version", [4, 7, 12])
def test_an_error_response_without_partitions(version: int) -> None:
    mine = encode_fetch_response(version, [], error_code=70, session_id=0)
    assert mine.data == kio_bytes(version, [], error_code=70, session_id=0)


def test_versions_outside_4_to_12_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(13, [])
