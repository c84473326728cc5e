"""The connection's per-request header and Produce decode in isolation, from the tree it is run in (sys.path[0]):
parse_request_header vs this session's RequestHeaderReader (the last answer kept per connection), and the Produce
v8 body decode (10 x 100 B, one topic, one partition: scale.py's connections point's request). Process CPU per
call, best of 5 x 200,000.

    (cd TREE && /work/wt/h1-conn/.venv/bin/python /work/wt/h1-conn/bench/results/2026-11-27-s16-conn/decode_micro.py)
"""

import sys
import time

sys.path.insert(0, ".")
import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.protocol import codec
from kbus.protocol.codec import build, encode_request, nested, parse_request_header, request_type
from kbus.protocol.produce_request_decode import decode_produce_request
from kbus.protocol.record_batch import build_batch
from kbus.server.apis.registry import CATALOG

R = request_type(0, 8)
frame = encode_request(build(R, acks=1, timeout=30000, topic_data=[build(nested(R, "TopicProduceData"), name="scale-conn", partition_data=[build(nested(R, "PartitionProduceData"), index=3, records=build_batch([(None, b"x" * 100)] * 10))])]), 7, "scale-conn")[4:]  # noqa: E501
sup = CATALOG.supports
N = 200_000


def best(fn) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(5):
        t = time.process_time()
        for _ in range(N):
            fn()
        out.append((time.process_time() - t) / N * 1e9)
    return min(out)


print(f"parse_request_header: {best(lambda: parse_request_header(frame, supported=sup)):.0f} ns")
if hasattr(codec, "RequestHeaderReader"):
    reader = codec.RequestHeaderReader(sup)
    print(f"RequestHeaderReader.read: {best(lambda: reader.read(frame)):.0f} ns")
_, at = parse_request_header(frame, supported=sup)
print(f"decode_produce_request v8: {best(lambda: decode_produce_request(frame, 8, at)):.0f} ns")
