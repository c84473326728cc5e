"""The replica fetcher's hand-encoded Fetch v12 request writes exactly the bytes kio's encoder writes for the same
request (header included), and a broker's decoder reads it back."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader

from kbus.protocol.codec import build, encode_request, ms, nested
from kbus.protocol.fetch_request import FetchPartition, FetchRequestV12

FetchReq = load_request_schema(1, 12)


def kio_frame(req: FetchRequestV12, correlation_id: int, client_id: str) -> bytes:
    body = build(
        FetchReq,
        replica_id=req.replica_id,
        max_wait=req.max_wait_ms,
        min_bytes=req.min_bytes,
        max_bytes=req.max_bytes,
        isolation_level=req.isolation_level,
        session_id=req.session_id,
        session_epoch=req.session_epoch,
        topics=[
            build(
                nested(FetchReq, "FetchTopic"),
                topic=topic,
                partitions=[
                    build(
                        nested(FetchReq, "FetchPartition"),
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in parts
                ],
            )
            for topic, parts in req.topics
        ],
        forgotten_topics_data=[
            build(nested(FetchReq, "ForgottenTopic"), topic=topic, partitions=list(indexes))
            for topic, indexes in req.forgotten
        ],
        rack_id=req.rack_id,
    )
    return encode_request(body, correlation_id, client_id)


CASES = [
    FetchRequestV12(1, 500, 1, 10 << 20, [("t", [FetchPartition(0, 3, 1234, 0, 1 << 20)])]),
    FetchRequestV12(
        2,
        500,
        1,
        10 << 20,
        [
            ("__consumer_offsets", [FetchPartition(i, i % 5, i * 1_000_003, i, 1048576) for i in range(0, 50, 3)]),
            ("lat-1-lat", [FetchPartition(0, 0, 2**40 + 7, 2**33, 1048576)]),
            ("é" * 70, [FetchPartition(2**31 - 1, 2**31 - 1, 2**63 - 1, 2**63 - 1, 2**31 - 1)]),  # long name, maxima
        ],
    ),
    FetchRequestV12(3, 0, 0, 1, []),  # nothing listed
    FetchRequestV12(4, 100, 1, 5, [("x", [FetchPartition(1, -1, 0, -1, 0, last_fetched_epoch=9)])],
                    session_id=7, session_epoch=2, rack_id="rack-a"),
    # an incremental fetch of a session: one partition moved on, two dropped from one topic, one from another
    FetchRequestV12(5, 500, 1, 10 << 20, [("t", [FetchPartition(0, 3, 99, 0, 1 << 20)])],
                    forgotten=[("t", [1, 2]), ("é" * 3, [2**31 - 1])], session_id=2**31 - 1, session_epoch=8),
    FetchRequestV12(6, 500, 1, 10 << 20, [], forgotten=[("gone", [0])], session_id=1, session_epoch=1),
]


@pytest.mark.parametrize("req", CASES)
def test_the_same_bytes_as_kio(req: FetchRequestV12) -> None:
    for correlation_id, client_id in ((1, "broker-1-fetcher-2"), (2**31 - 1, "")):
        assert req.frame(correlation_id, client_id) == kio_frame(req, correlation_id, client_id)


def test_a_broker_reads_it_back() -> None:
    req = CASES[1]
    frame = req.frame(5, "broker-2-fetcher-1")
    body_offset = 4 + 2 + 2 + 4 + 2 + len("broker-2-fetcher-1") + 1
    decoded, _ = entity_reader(FetchReq)(frame, body_offset)
    assert decoded.replica_id == 2 and ms(decoded.max_wait) == 500 and decoded.session_epoch == -1
    assert [(t.topic, [(p.partition, p.fetch_offset) for p in t.partitions]) for t in decoded.topics] == [
        (topic, [(p.partition, p.fetch_offset) for p in parts]) for topic, parts in req.topics
    ]
