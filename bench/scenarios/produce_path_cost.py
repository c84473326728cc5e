"""Instructions per Produce request in process, for before/after comparisons that a loaded machine's CPU time cannot
make (bench/scenarios/produce_path_cost.sh runs this under callgrind for two trees): the frame's header read by a
connection's RequestHeaderReader, the body decoded by the connection's decoder (request_body.decode_body), the
Produce handler over a standalone Broker whose log is in a temp dir, the response encoded. No socket. Three
requests, each N times after a warm-up, callgrind counting only around the N (one dump each, in this order):
  onerec-v9   one record of 100 B, acks=-1, Produce v9 (small_requests.py's request)
  conn-v8     10 x 100 B, acks=1, Produce v8 (scale.py's connections point's request)
  conn-v9     the same as v9 (what librdkafka and the Java client send)
Without CALLGRIND_SHIM it prints process CPU per request of each (best of 5 blocks), for a quick look.

    PRODUCE_COST_COUNT=2000 .venv/bin/python bench/scenarios/produce_path_cost.py
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, ".")  # the tree it is run from, before any installed kbus

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.broker_config import KafkaConfig
from kbus.protocol.codec import RequestHeaderReader, build, encode_request, encode_response, nested, request_type
from kbus.protocol.record_batch import build_batch
from kbus.protocol.request_body import decode_body
from kbus.server.apis.registry import API_TABLE, CATALOG, RequestContext
from kbus.server.broker import Broker

# CALLGRIND_SHIM: a library whose cg_on / cg_off start and stop callgrind's instrumentation (produce_path_cost.sh)
CG = ctypes.CDLL(os.environ["CALLGRIND_SHIM"]) if os.environ.get("CALLGRIND_SHIM") else None
N = int(os.environ.get("PRODUCE_COST_COUNT", "2000"))
CASES = [("onerec-v9", 9, -1, 1), ("conn-v8", 8, 1, 10), ("conn-v9", 9, 1, 10)]


def frame(version: int, acks: int, records: int) -> bytes:
    R = request_type(0, version)

    def entity(name: str, /, **fields: Any) -> Any:
        return build(nested(R, name), **fields)

    body = build(R, acks=acks, timeout=30000, topic_data=[entity("TopicProduceData", name="bench", partition_data=[
        entity("PartitionProduceData", index=0, records=build_batch([(None, b"x" * 100)] * records))])])
    return encode_request(body, 7, "bench")[4:]  # what the connection hands over: the frame without its size


async def main() -> None:
    log_dir = tempfile.mkdtemp(prefix="produce-path-cost-")
    config = KafkaConfig.load(None, [f"log.dirs={log_dir}", "zookeeper.connect=", "listeners=PLAINTEXT://127.0.0.1:0"])
    broker = Broker(config)
    await broker.start()
    await broker.ensure_topic("bench", 1, 1, {})
    produce = API_TABLE[0].handler
    for name, version, acks, records in CASES:
        f = frame(version, acks, records)
        reader = RequestHeaderReader(CATALOG.supports)

        async def one() -> None:
            header, at = reader.read(f)  # noqa: B023 - each case's own
            request = decode_body(f, header, at)  # noqa: B023
            response = await produce(broker.managers, RequestContext(header, "127.0.0.1", 1, "c"), request)
            assert response is not None
            encode_response(header, response)

        for _ in range(500):  # warm-up: caches, the log's first segment
            await one()
        if CG is not None:
            CG.cg_on()
            for _ in range(N):
                await one()
            CG.cg_off()
        else:
            blocks = []
            for _ in range(5):
                t0 = time.process_time()
                for _ in range(N):
                    await one()
                blocks.append((time.process_time() - t0) / N * 1e6)
            print(f"{name}: {min(blocks):.1f} us/request (best of 5 x {N})")
    await broker.stop()
    shutil.rmtree(log_dir, ignore_errors=True)  # each run's standalone log dir


if __name__ == "__main__":
    asyncio.run(main())
