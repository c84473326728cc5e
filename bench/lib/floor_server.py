"""The measured floor of scale.py's connections point (issue 23): a server with no broker in it.

It speaks just enough Kafka framing for `scale.py connections`: every request frame (size, api key, version,
correlation id, ...) is answered with a fixed response under its correlation id: a Produce v8 answer for one
partition (what kbus writes for the point's 10 x 100 B Produce, acks=1), and the same bytes for the client's
ApiVersions and Metadata hello, which the point reads without parsing. Its broker CPU per request is what Python,
uvloop and the system calls cost a request with no handler at all, on the machine the table ran on.

Built as kbus's network layer is, so the two compare: uvloop, one event loop, TCP_NODELAY, a turn's reads first and
its responses written at the end of the turn (kbus.server.network.processor.ResponseBatch); `--at-once` writes each
response inside its read callback instead. `--log DIR`: every Produce frame's bytes after the header are also
written to an append-only file with one write(2), as a broker's log append is (kbus and Kafka both write the
segment before an acks=1 answer). `--writer-thread`: the turn's responses are written by a second thread (os.writev
releases the GIL), a measure of what moving the socket writes off the event loop's core would give.

    python bench/lib/floor_server.py --port 9092 [--log DIR] [--at-once | --writer-thread]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import queue
import socket
import struct
import threading
from typing import cast

import uvloop

_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ii")  # response: size, correlation id
_REQUEST = struct.Struct(">hhi")  # request header: api key, version, correlation id
_PRODUCE_KEY = 0
_TOPIC = b"scale-conn"
# ProduceResponse v8 (not flexible): [topic name, [index, error_code, base_offset, log_append_time_ms,
# log_start_offset, [record_errors], error_message]], throttle_time_ms
_BODY = (
    struct.pack(">i", 1) + struct.pack(">h", len(_TOPIC)) + _TOPIC + struct.pack(">i", 1)
    + struct.pack(">ihqqq", 0, 0, 0, -1, 0) + struct.pack(">i", 0) + struct.pack(">h", -1)
    + struct.pack(">i", 0)
)


class Turn:
    """The end of one loop turn: the responses its reads made, written once every ready connection was read."""

    def __init__(self, loop: asyncio.AbstractEventLoop, writer: queue.SimpleQueue[tuple[int, list[bytes]]] | None):
        self.loop = loop
        self.held: list[FloorProtocol] = []
        self.scheduled = False
        self.writer = writer

    def hold(self, protocol: FloorProtocol) -> None:
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.end)
        self.held.append(protocol)

    def end(self) -> None:
        held, self.held = self.held, []
        self.scheduled = False
        for protocol in held:
            out, protocol.out = protocol.out, []
            if self.writer is not None:
                self.writer.put((protocol.fd, out))
            elif protocol.transport is not None:
                protocol.transport.writelines(out)


class FloorProtocol(asyncio.Protocol):
    def __init__(self, turn: Turn | None, log_fd: int) -> None:
        self.turn = turn
        self.log_fd = log_fd
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.out: list[bytes] = []
        self.fd = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fd = sock.fileno()

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, end = 0, len(buf)
        answers = self.out
        while end - pos >= 12:
            (size,) = _I32.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            key, _version, correlation = _REQUEST.unpack_from(buf, pos + 4)
            if self.log_fd >= 0 and key == _PRODUCE_KEY:
                os.write(self.log_fd, buf[pos + 12 : pos + 4 + size])
            answers.append(_HEAD.pack(4 + len(_BODY), correlation) + _BODY)
            pos += 4 + size
        self.buf = buf[pos:] if pos < end else b""
        if not answers:
            return
        if self.turn is not None:
            self.turn.hold(self)
        elif self.transport is not None:
            self.out = []
            self.transport.writelines(answers)


def _writer(jobs: queue.SimpleQueue[tuple[int, list[bytes]]]) -> None:
    """--writer-thread: the socket writes, off the event loop's thread (os.writev releases the GIL). A short write
    or EAGAIN is not handled: the point's one small response per connection fits the socket buffer."""
    while True:
        fd, frames = jobs.get()
        with contextlib.suppress(OSError):
            os.writev(fd, frames)


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    log_fd = -1
    if args.log:
        os.makedirs(args.log, exist_ok=True)
        log_fd = os.open(os.path.join(args.log, "00000000000000000000.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    jobs: queue.SimpleQueue[tuple[int, list[bytes]]] | None = None
    if args.writer_thread:
        jobs = queue.SimpleQueue()
        threading.Thread(target=_writer, args=(jobs,), daemon=True).start()
    turn = None if args.at_once else Turn(loop, jobs)
    server = await loop.create_server(lambda: FloorProtocol(turn, log_fd), "127.0.0.1", args.port, backlog=512)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", help="also append every Produce frame's body to a file in this directory (one write(2))")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--at-once", action="store_true", help="write each response in its read callback")
    mode.add_argument("--writer-thread", action="store_true", help="write the turn's responses from a second thread")
    uvloop.run(serve(p.parse_args()))


if __name__ == "__main__":
    main()
