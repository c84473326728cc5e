"""A minimal asyncio Kafka-protocol client for broker-to-broker traffic (follower fetches, leader-epoch
queries). One request in flight per connection, which is all a replica fetcher needs.

A replica fetcher sends a request after every response, and the leader's high watermark (and so every acks=all
Produce) waits for it, so a round trip costs one future and one timer: the response frame is assembled by a
Protocol into one buffer of the size its header announces, not read through a StreamReader (two `wait_for`
tasks per response, its buffer copied again on every read and the transport paused and resumed at every 128 KB
of a large Fetch response)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any, cast

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader

from kbus.common.security import PLAINTEXT, ClientSecurity
from kbus.protocol.bounds import check_bounds
from kbus.protocol.codec import API_VERSIONS_KEY, ProtocolError, encode_request, skip_tagged_fields
from kbus.protocol.fetch_request import FetchRequestV12

_I32 = struct.Struct(">i")


class AuthenticationError(ConnectionError):
    """The peer refused our SASL login (the message is the broker's)."""




class _FrameReader(asyncio.Protocol):
    """Response frames (an int32 size, then that many bytes) off one connection, each handed to the waiting
    request's future as bytes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[bytes] | None = None
        self.lost: Exception | None = None  # why the connection ended (once it has)
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._head = bytearray()  # the next frame's size bytes while they arrive
        # the pieces of a frame larger than what has arrived, joined (one copy) once `_missing` is 0: a fresh
        # zero-filled buffer of the frame's size costs more than the copy (calloc's pages, faulted in one by one)
        self._parts: list[memoryview] = []
        self._missing = 0
        self._early: list[bytes] = []  # frames no request waited for yet

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TCPTransport is not a subclass of it

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        pos, end = 0, len(data)
        while pos < end:
            if self._missing:
                take = min(self._missing, end - pos)
                self._parts.append(view[pos : pos + take])
                self._missing -= take
                pos += take
                if not self._missing:
                    parts, self._parts = self._parts, []
                    self._deliver(b"".join(parts))
                continue
            if not self._head and end - pos >= 4:
                (size,) = _I32.unpack_from(data, pos)
                pos += 4
            else:
                take = min(4 - len(self._head), end - pos)
                self._head += view[pos : pos + take]
                pos += take
                if len(self._head) < 4:
                    return
                (size,) = _I32.unpack(self._head)
                self._head.clear()
            if size < 4:  # a response frame starts with its correlation id
                self._fail(ProtocolError(f"response frame of {size} bytes"))
                return
            if end - pos >= size:  # the whole frame in this chunk
                self._deliver(bytes(view[pos : pos + size]))
                pos += size
            else:
                self._missing = size

    def _deliver(self, frame: bytes) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            self.waiter = None
            waiter.set_result(frame)
        else:
            self._early.append(frame)

    def next_frame(self) -> asyncio.Future[bytes]:
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if self._early:
            fut.set_result(self._early.pop(0))
        elif self.lost is not None:
            fut.set_exception(self.lost)
        else:
            self.waiter = fut
        return fut

    def _fail(self, exc: Exception) -> None:
        if self.lost is None:
            self.lost = exc
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionResetError("connection closed by the peer") if exc is None else
                   exc if isinstance(exc, OSError) else ConnectionError(str(exc)))  # fmt: skip
        if not self.closed.done():
            self.closed.set_result(None)


def _time_out(fut: asyncio.Future[bytes], timeout: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no response in {timeout:g} s"))


class KafkaConnection:
    def __init__(self, host: str, port: int, client_id: str, security: ClientSecurity = PLAINTEXT) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self._proto: _FrameReader | None = None
        self._correlation = 0

    async def connect(self, timeout: float = 5.0) -> None:
        ctx = self.security.ssl_context
        loop = asyncio.get_running_loop()
        opened = loop.create_connection(_FrameReader, self.host, self.port, ssl=ctx,
                                        server_hostname=self.host if ctx else None)  # fmt: skip
        _, self._proto = await asyncio.wait_for(opened, timeout)
        if self.security.sasl_mechanism:
            try:
                await asyncio.wait_for(self._authenticate(), timeout)
            except BaseException:
                await self.close()
                raise

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate v2 requests (Kafka's client)."""
        sec = self.security
        handshake = await self.request(SaslHandshakeRequest(mechanism=sec.sasl_mechanism), SaslHandshakeResponse)
        if handshake.error_code != 0:
            raise AuthenticationError(
                f"SASL mechanism {sec.sasl_mechanism} refused (enabled: {', '.join(handshake.mechanisms)})"
            )
        if sec.sasl_mechanism == "PLAIN":
            await self._sasl_step(f"\0{sec.username}\0{sec.password}".encode())
            return
        import scramp

        client = scramp.ScramClient([sec.sasl_mechanism], sec.username, sec.password)
        server_first = await self._sasl_step(client.get_client_first().encode())
        client.set_server_first(server_first.decode())
        server_final = await self._sasl_step(client.get_client_final().encode())
        client.set_server_final(server_final.decode())

    async def _sasl_step(self, token: bytes) -> bytes:
        answer = await self.request(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
        if answer.error_code != 0:
            raise AuthenticationError(answer.error_message or f"SASL authentication failed ({answer.error_code})")
        return bytes(answer.auth_bytes)

    @property
    def connected(self) -> bool:
        proto = self._proto
        return proto is not None and proto.transport is not None and not proto.transport.is_closing()

    async def close(self) -> None:
        proto, self._proto = self._proto, None
        if proto is not None and proto.transport is not None:
            proto.transport.close()
            with contextlib.suppress(ConnectionError, OSError):
                await proto.closed

    async def request(self, body: Any, response_type: type, timeout: float = 30.0) -> Any:
        if self._proto is None:
            await self.connect()
        proto = self._proto
        assert proto is not None and proto.transport is not None
        if proto.waiter is not None:
            raise RuntimeError("a request is already in flight on this connection")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        if isinstance(body, FetchRequestV12):  # the replica fetcher's, encoded by hand
            api_key, flexible = body.api_key, body.flexible
            data = body.frame(self._correlation, self.client_id)
        else:
            req_type = type(body)
            api_key, flexible = int(req_type.__api_key__), bool(req_type.__flexible__)
            data = encode_request(body, self._correlation, self.client_id)
        if proto.lost is not None:
            raise proto.lost
        proto.transport.write(data)
        fut = proto.next_frame()
        timer = asyncio.get_running_loop().call_later(timeout, _time_out, fut, timeout)
        try:
            frame = await fut
        except BaseException:
            # timed out, cancelled or lost: a late response would answer the next request; the connection ends
            proto.waiter = None
            proto.transport.abort()
            raise
        finally:
            timer.cancel()
        (corr,) = _I32.unpack_from(frame, 0)
        if corr != self._correlation:
            raise ProtocolError(f"correlation id {corr} != {self._correlation}")
        pos = 4
        if flexible and api_key != API_VERSIONS_KEY:  # KIP-511: ApiVersions has no v1 header
            pos = skip_tagged_fields(frame, pos)
        check_bounds(response_type, frame, pos)  # a broken peer must not make kio allocate what a count claims
        value: Any
        value, _ = entity_reader(response_type)(frame, pos)
        return value
