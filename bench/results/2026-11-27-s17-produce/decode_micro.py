"""The Produce body decode in isolation, from the tree it is run in (sys.path[0]): the one-record Produce v9 of
small_requests.py (acks=-1, 100 B, client "bench") and scale.py's connections request (10 x 100 B, acks=1) as v8
and as v9. Process CPU per call, best of 5 x 200,000, a lambda's call included in each.

    (cd TREE && /work/wt/h1-produce/.venv/bin/python $R/decode_micro.py)   # R: this directory
"""

import sys
import time

sys.path.insert(0, ".")
from kbus.protocol.codec import build, encode_request, nested, parse_request_header, request_type
from kbus.protocol.produce_request_decode import decode_produce_request
from kbus.protocol.record_batch import build_batch

N = 200_000


def frame(version: int, acks: int, records: int, topic: str) -> bytes:
    R = request_type(0, version)
    return encode_request(build(R, acks=acks, timeout=30000, topic_data=[build(nested(R, "TopicProduceData"), name=topic, partition_data=[build(nested(R, "PartitionProduceData"), index=3, records=build_batch([(None, b"x" * 100)] * records))])]), 7, "c")[4:]  # noqa: E501


def best(fn) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(5):
        t = time.process_time()
        for _ in range(N):
            fn()
        out.append((time.process_time() - t) / N * 1e9)
    return min(out)


for what, version, acks, records, topic in [("one-record (small_requests)", 9, -1, 1, "small-produce"),
                                            ("10 x 100 B (scale connections)", 8, 1, 10, "scale-conn"),
                                            ("10 x 100 B (scale connections)", 9, 1, 10, "scale-conn")]:
    f = frame(version, acks, records, topic)
    _, at = parse_request_header(f, supported=lambda k, v: True)
    ns = best(lambda f=f, version=version, at=at: decode_produce_request(f, version, at))
    print(f"decode_produce_request v{version} {what}: {ns:.0f} ns")
