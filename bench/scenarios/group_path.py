"""The group coordinator's request path in-process, for before/after comparisons on a busy machine: a real standalone
Broker (its `__consumer_offsets` under a temp dir, one replica), a consumer group of one member joined and synced
through the handlers, then OffsetCommit v8 (one partition) and Heartbeat v4 frames taken as the network layer takes
them: read by the connection's state machine (header parsed, body decoded: by kio, or by hand where the connection
does), handler run, response encoded and handed back to the connection. No sockets and no client: what is left of a
one-record request's broker CPU once the socket and the event loop are taken out. Prints the CPU time per request
of the least disturbed block of 100 (and of the decode, handler and encode parts). Run it from each tree with that
tree's python:

    (cd OTHER_TREE && .venv/bin/python "$OLDPWD/bench/scenarios/group_path.py" 3000)
    .venv/bin/python bench/scenarios/group_path.py 3000

bench/scenarios/group_path_cost.sh counts instructions instead (callgrind), for two trees.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.broker_config import KafkaConfig
from kbus.protocol.codec import (
    build,
    encode_request,
    encode_response,
    nested,
    request_type,
)
from kbus.protocol.connection import Connection, Request
from kbus.server.apis.registry import API_TABLE, CATALOG, PLAINTEXT_LISTENER, RequestContext
from kbus.server.broker import Broker

BLOCK = 100
# CALLGRIND_SHIM (a library whose cg_on / cg_off start and stop callgrind's instrumentation, as fetch_handler_cost.sh
# builds it) and GROUP_PATH_COUNT=N: count the instructions of N whole requests of each API instead of timing them
CG = ctypes.CDLL(os.environ["CALLGRIND_SHIM"]) if os.environ.get("CALLGRIND_SHIM") else None
COUNT = int(os.environ.get("GROUP_PATH_COUNT", "1000"))


def frame(key: int, version: int, /, **fields: Any) -> bytes:
    cls = request_type(key, version)
    assert cls is not None
    return encode_request(build(cls, **fields), 1, "bench")[4:]


def entity(key: int, version: int, name: str, /, **fields: Any) -> Any:
    cls = request_type(key, version)
    assert cls is not None
    return build(nested(cls, name), **fields)


CONN = Connection(PLAINTEXT_LISTENER, CATALOG, max_frame_bytes=1 << 20)


def read(data: bytes) -> Request:
    """One request through the connection, as the network layer reads it."""
    CONN.receive_data(len(data).to_bytes(4, "big") + data)
    event = CONN.next_event()
    assert isinstance(event, Request), event
    return event


async def serve(target: Any, data: bytes) -> tuple[Any, bytes]:
    request = read(data)
    header = request.header
    response = await API_TABLE[header.api_key].handler(target, RequestContext(header, "127.0.0.1", 1, "c"),
                                                        request.body)  # fmt: skip
    out = encode_response(header, response)
    CONN.send_response(request.seq, out)
    CONN.data_to_send()
    return response, out


async def best(rounds: int, step: Callable[[], Awaitable[object]]) -> float:
    blocks = []
    for _ in range(rounds // BLOCK):
        t0 = time.process_time()
        for _ in range(BLOCK):
            await step()
        blocks.append((time.process_time() - t0) / BLOCK)
    return min(blocks)


async def main(rounds: int) -> None:
    log_dir = tempfile.mkdtemp()
    config = KafkaConfig.load(None, [f"log.dirs={log_dir}", "zookeeper.connect=", "listeners=PLAINTEXT://127.0.0.1:0",
                                     "offsets.topic.num.partitions=1", "offsets.topic.replication.factor=1",
                                     "group.initial.rebalance.delay.ms=0"])  # fmt: skip
    broker = Broker(config)
    await broker.start()
    target = broker.managers
    await broker.ensure_topic("small", 8, 1, {})
    group = "bench-group"
    for _ in range(100):  # the first FindCoordinator creates __consumer_offsets
        found, _ = await serve(target, frame(10, 3, key=group, key_type=0))
        if found.error_code == 0:
            break
        await asyncio.sleep(0.1)
    member_id = ""
    for _ in range(100):
        join = frame(11, 5, group_id=group, session_timeout=45000, rebalance_timeout=60000, member_id=member_id,
                     protocol_type="consumer", protocols=(entity(11, 5, "JoinGroupRequestProtocol", name="range",
                                                                 metadata=b""),))  # fmt: skip
        joined, _ = await serve(target, join)
        member_id = joined.member_id
        if joined.error_code == 0:
            break
        await asyncio.sleep(0.1)
    generation = joined.generation_id
    synced, _ = await serve(target, frame(14, 3, group_id=group, generation_id=generation, member_id=member_id,
                                          assignments=(entity(14, 3, "SyncGroupRequestAssignment",
                                                              member_id=member_id, assignment=b""),)))  # fmt: skip
    assert synced.error_code == 0, synced
    commit = frame(8, 8, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=(
        entity(8, 8, "OffsetCommitRequestTopic", name="small", partitions=(
            entity(8, 8, "OffsetCommitRequestPartition", partition_index=3, committed_offset=1,
                   committed_metadata=""),)),))  # fmt: skip
    heartbeat = frame(12, 4, group_id=group, generation_id=generation, member_id=member_id)
    out = []
    for name, data in (("offsetcommit v8", commit), ("heartbeat v4", heartbeat)):
        request = read(data)
        CONN.send_response(request.seq, None)
        header, body = request.header, request.body
        handler = API_TABLE[header.api_key].handler
        ctx = RequestContext(header, "127.0.0.1", 1, "c")
        response = await handler(target, ctx, body)
        for _ in range(300):  # warm-up
            await serve(target, data)
        if CG is not None:  # instructions of COUNT whole requests only (group_path_cost.sh): one callgrind dump each
            CG.cg_on()
            for _ in range(COUNT):
                await serve(target, data)
            CG.cg_off()
            out.append(f"{name}: {COUNT} requests counted")
            continue

        async def decode(data: bytes = data) -> object:
            request = read(data)
            CONN.send_response(request.seq, None)
            return request.body

        async def handle(handler: Any = handler, header: Any = header, body: Any = body) -> object:
            return await handler(target, RequestContext(header, "127.0.0.1", 1, "c"), body)

        async def encode(header: Any = header, response: Any = response) -> object:
            return encode_response(header, response)

        async def whole(data: bytes = data) -> object:
            return await serve(target, data)

        t_all, t_dec, t_handle, t_enc = [await best(rounds, s) for s in (whole, decode, handle, encode)]
        out.append(f"{name}: {t_all * 1e6:.1f} us/request (decode {t_dec * 1e6:.1f}, handler {t_handle * 1e6:.1f},"
                   f" encode {t_enc * 1e6:.1f})")  # fmt: skip
    await broker.stop()
    shutil.rmtree(log_dir, ignore_errors=True)  # each run's broker writes its own log dir
    print("\n".join(out))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000))
