"""A minimal asyncio Kafka-protocol client for broker-to-broker traffic (follower fetches, leader-epoch
queries). One request in flight per connection, which is all a replica fetcher needs."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

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




class KafkaConnection:
    def __init__(self, host: str, port: int, client_id: str, security: ClientSecurity = PLAINTEXT) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    async def connect(self, timeout: float = 5.0) -> None:
        ctx = self.security.ssl_context
        opened = asyncio.open_connection(self.host, self.port, ssl=ctx, server_hostname=self.host if ctx else None)
        self._reader, self._writer = await asyncio.wait_for(opened, timeout)
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
        return self._writer is not None and not self._writer.is_closing()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None

    async def request(self, body: Any, response_type: type, timeout: float = 30.0) -> Any:
        if self._reader is None or self._writer is None:
            await self.connect()
        assert self._reader is not None and self._writer is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        if isinstance(body, FetchRequestV12):  # the replica fetcher's, encoded by hand
            api_key, flexible = body.api_key, body.flexible
            data = body.frame(self._correlation, self.client_id)
        else:
            req_type = type(body)
            api_key, flexible = int(req_type.__api_key__), bool(req_type.__flexible__)
            data = encode_request(body, self._correlation, self.client_id)
        self._writer.write(data)
        await self._writer.drain()
        size = _I32.unpack(await asyncio.wait_for(self._reader.readexactly(4), timeout))[0]
        frame = await asyncio.wait_for(self._reader.readexactly(size), timeout)
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
