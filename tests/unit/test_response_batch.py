"""kbus.server.network.processor.ResponseBatch: the requests a loop turn's reads bring are served once the loop has
read every connection ready in that turn (no read between two handlers), and their responses written after the
turn's handlers (no write(2) between two of them); in request order, before a close, and never to a connection that
is gone. KafkaProtocol runs on a recording transport over a
standalone Broker (its log in a temp dir), as bench/scenarios/connection_path.py does."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.broker_config import KafkaConfig
from kbus.protocol import connection as connection_mod
from kbus.protocol.codec import build, encode_request, nested, request_type
from kbus.protocol.record_batch import build_batch
from kbus.server.broker import Broker
from kbus.server.network.connection_quotas import IdleExpiry
from kbus.server.network.processor import KafkaProtocol, ResponseBatch
from kbus.server.security.manager import SecurityManager


class Transport:
    """What KafkaProtocol uses of an asyncio transport; records what is written and when it is closed."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def writelines(self, frames: list[bytes]) -> None:
        self.log.extend(("write", self, bytes(f)) for f in frames)

    def write(self, data: bytes) -> None:
        self.log.append(("write", self, bytes(data)))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        if not self.closing:  # as asyncio's: a second close does nothing
            self.closing = True
            self.log.append(("close", self, b""))

    def abort(self) -> None:
        self.close()


class Owner:
    """The ConnectionOwner a KafkaServer would be."""

    def __init__(self, config: KafkaConfig, broker: Broker) -> None:
        self.config = config
        self.managers = broker.managers
        self.security = SecurityManager(config, lambda _user: {})
        self.idle = IdleExpiry(config.connections_max_idle_ms)
        self.responses = ResponseBatch(asyncio.get_running_loop())

    def track(self, protocol: KafkaProtocol) -> None:
        pass

    def untrack(self, protocol: KafkaProtocol) -> None:
        pass

    def connection_closed(self, listener: str, ip: str) -> None:
        pass


def produce(correlation_id: int, size: int = 100) -> bytes:
    req = request_type(0, 9)
    assert req is not None

    def entity(name: str, /, **fields: Any) -> Any:
        return build(nested(req, name), **fields)

    return encode_request(build(req, acks=1, timeout=30000, topic_data=(
        entity("TopicProduceData", name="batched", partition_data=(
            entity("PartitionProduceData", index=0, records=build_batch([(None, b"x" * size)])),)),)),
        correlation_id, "test")  # fmt: skip


def correlation_id(frame: bytes) -> int:
    return int(struct.unpack_from(">i", frame, 4)[0])


def run(tmp_path: Path, test: Callable[[Callable[[], tuple[KafkaProtocol, Transport]], list[tuple[str, Any]]],
                                       Awaitable[None]]) -> None:  # fmt: skip
    async def main() -> None:
        config = KafkaConfig.load(
            None, [f"log.dirs={tmp_path}", "zookeeper.connect=", "listeners=PLAINTEXT://127.0.0.1:0"]
        )
        broker = Broker(config)
        await broker.start()
        try:
            await broker.ensure_topic("batched", 1, 1, {})
            owner = Owner(config, broker)
            security = owner.security.listener(config.listeners[0].name)
            log: list[tuple[str, Any]] = []

            def connect() -> tuple[KafkaProtocol, Transport]:
                protocol = KafkaProtocol(owner, security, "127.0.0.1")  # type: ignore[arg-type]
                transport = Transport(log)
                protocol.connection_made(transport)  # type: ignore[arg-type]
                return protocol, transport

            await test(connect, log)
        finally:
            await broker.stop()

    asyncio.run(main())


def test_responses_of_one_loop_turn_are_written_after_every_read_of_it(tmp_path: Path) -> None:
    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        (a, ta), (b, tb) = connect(), connect()
        a.data_received(produce(1))
        b.data_received(produce(2))
        assert log == []  # answered (acks=1 does not wait), but nothing written between the two requests
        await asyncio.sleep(0)  # the loop's next turn
        assert [(kind, t, correlation_id(f)) for kind, t, f in log] == [("write", ta, 1), ("write", tb, 2)]
        # a lone request later: written on the next turn too
        a.data_received(produce(3))
        await asyncio.sleep(0)
        assert [correlation_id(f) for _, _, f in log[2:]] == [3]

    run(tmp_path, test)


def test_pipelined_requests_keep_their_order(tmp_path: Path) -> None:
    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        a, _ = connect()
        a.data_received(produce(1) + produce(2))
        a.data_received(produce(3))  # another read in the same turn: behind the held ones
        await asyncio.sleep(0)
        assert [correlation_id(f) for _, _, f in log] == [1, 2, 3]

    run(tmp_path, test)


def test_a_held_response_goes_out_before_the_connection_closes(tmp_path: Path) -> None:
    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        a, _ = connect()
        a.data_received(produce(1) + struct.pack(">ih", 6, -7) + b"\0" * 4)  # then a frame of an unknown API
        await asyncio.sleep(0)  # the turn's end serves the read: the answer, then the close
        assert [(kind, correlation_id(f) if f else None) for kind, _, f in log] == [("write", 1), ("close", None)]
        await asyncio.sleep(0)
        assert len(log) == 2  # nothing written twice or after the close

    run(tmp_path, test)


def test_nothing_is_written_to_a_connection_lost_before_the_turn_ends(tmp_path: Path) -> None:
    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        (a, _), (b, tb) = connect(), connect()
        a.data_received(produce(1))
        b.data_received(produce(2))
        a.connection_lost(ConnectionResetError())
        await asyncio.sleep(0)
        assert [(kind, t, correlation_id(f)) for kind, t, f in log] == [("write", tb, 2)]

    run(tmp_path, test)


def test_a_turns_requests_are_served_after_every_read_of_it(tmp_path: Path) -> None:
    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        (a, _), (b, _) = connect(), connect()
        assert a.conn is not None and b.conn is not None
        a.data_received(produce(1))
        b.data_received(produce(2))
        # read, not yet served: no handler ran between the two reads
        assert a.conn.buffered > 0 and b.conn.buffered > 0
        await asyncio.sleep(0)  # the turn's end: both served, then both written
        assert (a.conn.buffered, b.conn.buffered) == (0, 0)
        assert [correlation_id(f) for _, _, f in log] == [1, 2]

    run(tmp_path, test)


def test_an_end_of_stream_in_the_same_turn_still_answers_what_was_read(tmp_path: Path) -> None:
    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        a, _ = connect()
        a.data_received(produce(1) + produce(2))
        assert a.eof_received()  # the client half-closes after sending: its requests are still answered
        await asyncio.sleep(0)
        assert [(kind, correlation_id(f) if f else None) for kind, _, f in log] == [
            ("write", 1), ("write", 2), ("close", None)]  # fmt: skip

    run(tmp_path, test)


def test_a_large_frame_read_in_pieces_goes_to_its_own_buffer_within_the_turn(tmp_path: Path) -> None:
    """The turn's reads are served at its end, except a read that holds part of a large frame: served at once, so
    that the rest of the frame is read into the frame's own buffer (no scratch-buffer copy per read)."""

    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        a, _ = connect()
        frame = produce(1, 3 * connection_mod.LARGE_FRAME_MIN)
        pos = 0
        buffers = []
        while pos < len(frame):  # the reads of one loop turn, as a BufferedProtocol transport makes them
            buf = a.get_buffer(-1)
            n = min(len(buf), 16384, len(frame) - pos)
            buf[:n] = frame[pos : pos + n]
            a.buffer_updated(n)
            buffers.append(buf.obj)
            pos += n
        # every read after the first went into the frame's own buffer, not the shared scratch buffer
        assert len(buffers) > 2 and all(b is not connection_mod._SCRATCH for b in buffers[1:])
        await asyncio.sleep(0)
        assert [correlation_id(f) for _, _, f in log] == [1]

    run(tmp_path, test)


def fetch(correlation_id: int, max_wait_ms: int) -> bytes:
    """A Fetch v12 of partition 0 of "batched" from its log end (nothing to read yet): the handler waits."""
    req = request_type(1, 12)
    assert req is not None

    def entity(name: str, /, **fields: Any) -> Any:
        return build(nested(req, name), **fields)

    return encode_request(build(req, replica_id=-1, max_wait=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                                session_epoch=-1, topics=(entity("FetchTopic", topic="batched", partitions=(
                                    entity("FetchPartition", partition=0, fetch_offset=1, current_leader_epoch=-1,
                                           partition_max_bytes=1 << 20),)),)),
                          correlation_id, "test")  # fmt: skip


def test_a_handler_that_waits_goes_on_as_a_task_and_is_answered_in_order(tmp_path: Path) -> None:
    """The compiled processor takes a handler's first step on the reader's stack; one that waits (a Fetch's long
    poll) is carried on by a Task (eager.resume) and answered when it completes, before the requests behind it."""

    async def test(connect: Callable[[], tuple[KafkaProtocol, Transport]], log: list[tuple[str, Any]]) -> None:
        a, _ = connect()
        a.data_received(produce(1))
        await asyncio.sleep(0)
        a.data_received(fetch(2, max_wait_ms=5000) + produce(3))  # the fetch waits for a record after offset 0
        await asyncio.sleep(0)
        assert [correlation_id(f) for _, _, f in log] == [1]  # the fetch parked, and the produce behind it waits
        assert len(a._tasks) == 1
        b, _ = connect()
        b.data_received(produce(4))  # a record for the fetch: it completes, then the rest is answered in order
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(log) == 4:
                break
        assert [(t is a.transport, correlation_id(f)) for _, t, f in log] == [
            (True, 1), (False, 4), (True, 2), (True, 3)]  # fmt: skip
        assert not a._tasks

    run(tmp_path, test)
