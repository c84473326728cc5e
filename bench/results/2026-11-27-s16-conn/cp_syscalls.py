"""The connection layer's share of a small Produce, in-process: C client connections (KafkaProtocol, each with its
sans-I/O Connection, on a transport that only counts what is written) take turns receiving one Produce frame (10 x
100 B, acks=1, one partition of a standalone Broker whose log is in a temp dir) and answering it, as the scale
scenario's connections axis does over sockets. No socket, no syscall, no client: what is left is kbus's Python per
request (data_received -> framing -> dispatch -> handler -> response -> write), measured at 1 and at C connections
(the per-connection objects of thousands of connections no longer in the CPU's caches). Prints process CPU per
request of the least disturbed block, and the same for the handler alone (decode, produce, encode: produce_path).
Run it from each tree with that tree's code first on the path:

    (cd OTHER_TREE && "$OLDPWD/.venv/bin/python" "$OLDPWD/bench/scenarios/connection_path.py" 5000 20)
    .venv/bin/python bench/scenarios/connection_path.py [CONNECTIONS] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
SYS = int(os.environ.get("SYS", "0"))
getppid = os.getppid
import gc
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, ".")  # the tree it is run from, before any installed kbus

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.broker_config import KafkaConfig
from kbus.protocol.codec import build, encode_request, nested, request_type
from kbus.protocol.record_batch import build_batch
from kbus.server.broker import Broker
from kbus.server.network import processor
from kbus.server.network.connection_quotas import IdleExpiry
from kbus.server.network.processor import KafkaProtocol
from kbus.server.security.manager import SecurityManager


class Transport:
    """What KafkaProtocol uses of an asyncio transport; written bytes are counted, not sent."""

    def __init__(self) -> None:
        self.written = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def writelines(self, frames: list[bytes]) -> None:
        for f in frames:
            self.written += len(f)

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class Owner:
    """The ConnectionOwner a KafkaServer would be."""

    def __init__(self, config: KafkaConfig, broker: Broker) -> None:
        self.config = config
        self.managers = broker.managers
        self.security = SecurityManager(config, lambda _user: {})
        self.idle = IdleExpiry(config.connections_max_idle_ms)
        if hasattr(processor, "ResponseBatch"):  # this tree's KafkaProtocol holds responses to the loop's turn
            self.responses = processor.ResponseBatch(asyncio.get_running_loop())

    def track(self, protocol: KafkaProtocol) -> None:
        self.idle.update(protocol.conn_id, 0)

    def untrack(self, protocol: KafkaProtocol) -> None:
        self.idle.remove(protocol.conn_id)

    def connection_closed(self, listener: str, ip: str) -> None:
        pass


async def main(connections: int, rounds: int) -> None:
    config = KafkaConfig.load(
        None, [f"log.dirs={tempfile.mkdtemp()}", "zookeeper.connect=", "listeners=PLAINTEXT://127.0.0.1:0"]
    )
    broker = Broker(config)
    await broker.start()
    await broker.ensure_topic("bench", 10, 1, {})
    owner = Owner(config, broker)
    security = owner.security.listener(config.listeners[0].name)
    batch = build_batch([(None, b"x" * 100)] * 10)

    def entity(name: str, /, **fields: Any) -> Any:
        return build(nested(request_type(0, 9), name), **fields)

    frames = [encode_request(build(request_type(0, 9), acks=1, timeout=30000, topic_data=(
        entity("TopicProduceData", name="bench", partition_data=(
            entity("PartitionProduceData", index=p, records=batch),)),)), 7, "bench") for p in range(10)]  # fmt: skip
    gc.collect()
    gc.freeze()  # as kbus.server.main does once the broker serves

    async def run(count: int) -> float:
        protocols = []
        transports = []
        for _ in range(count):
            protocol = KafkaProtocol(owner, security, "127.0.0.1")
            transport = Transport()
            protocol.connection_made(transport)  # type: ignore[arg-type]
            protocols.append(protocol)
            transports.append(transport)
        pairs = [(p, frames[i % len(frames)]) for i, p in enumerate(protocols)]
        per_block = max(1, 2000 // count)  # ~2,000 requests per timed block
        blocks = []
        for p, f in pairs:  # warm-up
            p.data_received(f)
        await asyncio.sleep(0)  # the loop's turn ends: a tree that serves reads then (ResponseBatch) does so here
        for _ in range(max(3, rounds // per_block)):
            t0 = time.process_time()
            for _ in range(per_block):
                for p, f in pairs:
                    p.data_received(f)
                    for _ in range(SYS): getppid()
                await asyncio.sleep(0)  # one loop turn per pass, as a poll that found every connection ready
            blocks.append((time.process_time() - t0) / (per_block * count))
        assert all(t.written for t in transports), "a connection answered nothing"
        for p in protocols:
            p.connection_lost(None)
        return min(blocks)

    one = await run(1)
    many = await run(connections)
    await broker.stop()
    print(f"connection_path: {one * 1e6:.1f} us/request on 1 connection, {many * 1e6:.1f} us/request on "
          f"{connections} connections (least disturbed block of ~2,000 requests)")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(args or [5000, 20])))
