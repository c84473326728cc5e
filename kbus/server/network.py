"""asyncio listeners. Per connection: read frames, dispatch, write responses in request order.

Like Kafka, a connection has one request in flight inside the broker at a time (Kafka mutes the channel), so
responses are naturally ordered; clients still pipeline requests on the socket, which keeps throughput up.
A malformed frame closes only that connection, with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.protocol.codec import (
    API_VERSIONS_KEY,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    build,
    decode_request,
    encode_response,
    frame_size,
    nested,
    parse_request_header,
    response_type,
)
from kbus.server.apis.registry import API_TABLE, RequestContext, supported
from kbus.server.metrics import METRICS

if TYPE_CHECKING:
    from kbus.server.broker import Broker

log = logging.getLogger("kbus.network")
_conn_ids = itertools.count(1)
WRITE_HIGH_WATER = 4 << 20
PRODUCE_KEY = b"\x00\x00"
MAX_PIPELINED = 64  # produce requests one connection may have waiting on replicas at once


def unsupported_version_response(header: RequestHeader) -> bytes:
    """KIP-511: an ApiVersions request at a version we do not know is answered in the v0 layout with
    UNSUPPORTED_VERSION and our ranges, so the client can retry at a version both sides speak."""
    if header.api_key != API_VERSIONS_KEY:
        raise ProtocolError(f"unsupported version {header.api_version} of API key {header.api_key}")
    v0 = response_type(API_VERSIONS_KEY, 0)
    keys = [
        build(nested(v0, "ApiVersion"), api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(API_TABLE.values(), key=lambda s: s.key)
    ]
    body = build(v0, error_code=ErrorCode.unsupported_version, api_keys=keys)
    return encode_response(RequestHeader(API_VERSIONS_KEY, 0, header.correlation_id, header.client_id, False), body)


class KafkaServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        for listener in self.config.listeners:
            host = listener.host or None
            server = await asyncio.start_server(
                self._serve_connection, host, listener.port, reuse_address=True, backlog=512
            )
            self._servers.append(server)
            bound = server.sockets[0].getsockname()
            log.info("Awaiting socket connections on %s:%d (%s)", bound[0], bound[1], listener.name)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        for server in self._servers:
            await server.wait_closed()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn_id = f"{peer[0]}:{peer[1]}-{next(_conn_ids)}"
        responses: asyncio.Queue[asyncio.Task[bytes | None] | None] = asyncio.Queue()
        sender = asyncio.create_task(self._send_responses(responses, writer, conn_id))
        inflight: set[asyncio.Task[bytes | None]] = set()
        try:
            while not sender.done():
                frame = await self._read_frame(reader, conn_id)
                if frame is None or sender.done():  # EOF, a bad frame, or a failed response: stop reading
                    return
                # Produce requests are pipelined: each appends at once (tasks start in arrival order, so appends keep
                # the client's order) and then waits for its replicas concurrently with the next ones. Everything
                # else runs alone, after what came before, as in Kafka. Responses leave in request order.
                pipelined = frame[:2] == PRODUCE_KEY
                if inflight and (not pipelined or len(inflight) >= MAX_PIPELINED):
                    await asyncio.wait(
                        inflight, return_when=asyncio.ALL_COMPLETED if not pipelined else asyncio.FIRST_COMPLETED
                    )
                handler = asyncio.create_task(self._handle(frame, peer, conn_id))
                inflight.add(handler)
                handler.add_done_callback(inflight.discard)
                responses.put_nowait(handler)
                if not pipelined:
                    await asyncio.wait({handler})
        except (ConnectionError, asyncio.CancelledError):
            for t in inflight:
                t.cancel()
        finally:
            responses.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            self._connections.discard(task)
            writer.close()

    async def _read_frame(self, reader: asyncio.StreamReader, conn_id: str) -> bytes | None:
        """The next request frame, or None when the connection should close (EOF or a bad size prefix)."""
        max_frame = self.config.socket_request_max_bytes
        try:
            prefix = await reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                log.warning("Closing connection %s: truncated frame size", conn_id)
            return None
        try:
            size = frame_size(prefix, max_frame)
        except ProtocolError as exc:
            log.warning("Closing connection %s: %s", conn_id, exc)
            return None
        try:
            return await reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            log.warning("Closing connection %s: truncated frame (%d of %d bytes)", conn_id, len(exc.partial), size)
            return None

    async def _send_responses(
        self, responses: asyncio.Queue[asyncio.Task[bytes | None] | None], writer: asyncio.StreamWriter, conn_id: str
    ) -> None:
        try:
            while (handler := await responses.get()) is not None:
                data = await handler
                if data is not None:
                    writer.write(data)
                    if writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                        await writer.drain()
        except ProtocolError as exc:
            log.warning("Closing connection %s: %s", conn_id, exc)
            writer.close()
        except (ConnectionError, asyncio.CancelledError):
            writer.close()
        except Exception:
            log.exception("Closing connection %s after an unexpected error", conn_id)
            writer.close()

    async def _handle(self, frame: bytes, peer: tuple[Any, ...], conn_id: str) -> bytes | None:
        try:
            header, body_offset = parse_request_header(frame, supported=supported)
        except UnsupportedVersionError as exc:
            return unsupported_version_response(exc.header)
        request = decode_request(frame, header, body_offset)
        ctx = RequestContext(header, str(peer[0]), int(peer[1]), conn_id)
        spec = API_TABLE[header.api_key]
        started = time.perf_counter()
        response = await spec.handler(self.broker, ctx, request)
        data = None if response is None else encode_response(header, response)
        METRICS.observe("kbus_request_latency_seconds", time.perf_counter() - started, api=spec.name)
        METRICS.inc("kbus_requests_total", api=spec.name)
        return data
