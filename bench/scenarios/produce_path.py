"""A Produce request's path through the broker in-process, for before/after comparisons on a busy machine: the
frame's header parsed and its body decoded (with the bounds pre-pass), the Produce handler (acks=all, one partition
of a standalone Broker whose log is in a temp dir) and the response encoded; no socket and no client. Prints the
CPU time per request of the least disturbed block of 100 (process time, so other processes' load barely moves it).
Run it from each tree with that tree's code first on the path:

    (cd OTHER_TREE && "$OLDPWD/.venv/bin/python" "$OLDPWD/bench/scenarios/produce_path.py" 3000 1)
    .venv/bin/python bench/scenarios/produce_path.py 3000 1        # ROUNDS RECORDS_PER_REQUEST (1, or 150 = a 16 KB batch)
    .venv/bin/python bench/scenarios/produce_path.py 300 1 1000 1  # ... PARTITIONS ACKS: one request over 1,000 partitions
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, ".")  # the tree it is run from, before any installed kbus

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.broker_config import KafkaConfig
from kbus.protocol.codec import (
    build,
    decode_request,
    encode_request,
    encode_response,
    nested,
    parse_request_header,
    request_type,
)
from kbus.protocol.record_batch import build_batch

try:  # the connection decodes Produce by hand since it has kbus/protocol/produce_request_decode.py
    from kbus.protocol.produce_request_decode import decode_produce_request
except ImportError:  # an older tree: kio's reader, as its connection used
    decode_produce_request = None  # type: ignore[assignment]
from kbus.server.apis.registry import API_TABLE, RequestContext
from kbus.server.broker import Broker

BLOCK = 100


def entity(name: str, /, **fields: Any) -> Any:
    return build(nested(request_type(0, 9), name), **fields)


async def main(rounds: int, records: int, partitions: int = 1, acks: int = -1) -> None:
    config = KafkaConfig.load(
        None, [f"log.dirs={tempfile.mkdtemp()}", "zookeeper.connect=", "listeners=PLAINTEXT://127.0.0.1:0"]
    )
    broker = Broker(config)
    await broker.start()
    await broker.ensure_topic("bench", partitions, 1, {})
    batch = build_batch([(None, b"x" * 100)] * records)
    body = build(request_type(0, 9), acks=acks, timeout=5000, topic_data=(
        entity("TopicProduceData", name="bench", partition_data=tuple(
            entity("PartitionProduceData", index=i, records=batch) for i in range(partitions))),))  # fmt: skip
    frame = encode_request(body, 7, "bench")[4:]  # what the connection hands over: the frame without its size
    produce = API_TABLE[0].handler

    async def one() -> None:
        header, at = parse_request_header(frame, supported=lambda key, version: True)
        if decode_produce_request is not None:
            request = decode_produce_request(frame, header.api_version, at)
        else:
            request = decode_request(frame, header, at)
        encode_response(header, await produce(broker.managers, RequestContext(header, "127.0.0.1", 1, "c"), request))

    for _ in range(300):  # warm-up
        await one()
    blocks = []
    for _ in range(rounds // BLOCK):
        t0 = time.process_time()
        for _ in range(BLOCK):
            await one()
        blocks.append((time.process_time() - t0) / BLOCK)
    await broker.stop()
    print(f"{records} record(s) per partition, {partitions} partition(s), acks={acks}: {min(blocks) * 1e6:.1f} us/request "
          f"(least disturbed of {len(blocks)} blocks; median {sorted(blocks)[len(blocks) // 2] * 1e6:.1f})")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:5]]
    asyncio.run(main(*args) if args else main(3000, 1))
