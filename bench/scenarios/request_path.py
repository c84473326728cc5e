"""The broker's request path in-process, for before/after comparisons on a busy machine: a real standalone
Broker (log under a temp dir), its Produce handler called with one 1000 x 100 B batch (acks=all) and its Fetch
handler reading them back, no network and no client. Prints the CPU time of the least disturbed block of 100
requests. Run it from each tree with that tree's python:

    (cd OTHER_TREE && .venv/bin/python "$OLDPWD/bench/scenarios/request_path.py" 2000)
    .venv/bin/python bench/scenarios/request_path.py 2000
"""

from __future__ import annotations

import asyncio
import io
import sys
import tempfile
import time
from typing import Any

from kio.serial import entity_reader, entity_writer

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.protocol.codec import RequestHeader, build, nested, request_type
from kbus.protocol.record_batch import build_batch
from kbus.server.apis.registry import API_TABLE, RequestContext
from kbus.server.broker import Broker

try:
    from kbus.common.broker_config import KafkaConfig
except ImportError:  # trees from before kbus.common
    from kbus.server.config import KafkaConfig  # type: ignore[no-redef]

BLOCK = 100


def request(key: int, version: int, **fields: Any) -> tuple[Any, RequestHeader]:
    cls = request_type(key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, **fields))
    return entity_reader(cls)(buf.getvalue(), 0)[0], RequestHeader(key, version, 1, "bench", bool(cls.__flexible__))


def entity(key: int, version: int, entity_name: str, /, **fields: Any) -> Any:
    return build(nested(request_type(key, version), entity_name), **fields)


async def main(rounds: int) -> None:
    log_dir = tempfile.mkdtemp()
    config = KafkaConfig.load(None, [f"log.dirs={log_dir}", "zookeeper.connect=", "listeners=PLAINTEXT://127.0.0.1:0"])
    broker = Broker(config)
    await broker.start()
    # handlers take the broker's Managers since the managers refactor, the Broker itself before it
    target = getattr(broker, "managers", broker)
    await broker.ensure_topic("bench", 1, 1, {})
    batch = build_batch([(None, b"x" * 100)] * 1000)
    produce_req, produce_header = request(0, 9, acks=-1, timeout=5000, topic_data=(
        entity(0, 9, "TopicProduceData", name="bench", partition_data=(
            entity(0, 9, "PartitionProduceData", index=0, records=batch),)),))  # fmt: skip
    produce, fetch = API_TABLE[0].handler, API_TABLE[1].handler
    ctx = RequestContext(produce_header, "127.0.0.1", 1, "c")
    for _ in range(200):  # warm-up
        await produce(target, ctx, produce_req)
    blocks = []
    for _ in range(rounds // BLOCK):
        t0 = time.process_time()
        for _ in range(BLOCK):
            await produce(target, ctx, produce_req)
        blocks.append((time.process_time() - t0) / BLOCK)
    t_produce = min(blocks)
    fetch_ctx = RequestContext(RequestHeader(1, 12, 2, "bench", True), "127.0.0.1", 1, "c")
    fetch_blocks, t0 = [], time.process_time()
    for i in range(rounds):
        if i and i % BLOCK == 0:
            fetch_blocks.append((time.process_time() - t0) / BLOCK)
            t0 = time.process_time()
        fetch_req, _ = request(1, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, topics=(
            entity(1, 12, "FetchTopic", topic="bench", partitions=(
                entity(1, 12, "FetchPartition", partition=0, fetch_offset=i * 1000, partition_max_bytes=1 << 20,
                       current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1),)),))  # fmt: skip
        await fetch(target, fetch_ctx, fetch_req)
    t_fetch = min(fetch_blocks)
    await broker.stop()
    print(
        f"produce {t_produce * 1e6:.0f} us/request ({t_produce * 1e3:.3f} us/msg)  fetch {t_fetch * 1e6:.0f} us/request"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
