"""A minimal asyncio Kafka-protocol client for broker-to-broker traffic (follower fetches, leader-epoch
queries). One request in flight per connection, which is all a replica fetcher needs."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from kio.serial import entity_reader

from kbus.protocol.bounds import check_bounds
from kbus.protocol.codec import API_VERSIONS_KEY, ProtocolError, encode_request, skip_tagged_fields

_I32 = struct.Struct(">i")


class KafkaConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    async def connect(self, timeout: float = 5.0) -> None:
        self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout)

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
        req_type = type(body)
        flexible = bool(req_type.__flexible__)
        data = encode_request(body, self._correlation, self.client_id)
        self._writer.write(data)
        await self._writer.drain()
        size = _I32.unpack(await asyncio.wait_for(self._reader.readexactly(4), timeout))[0]
        frame = await asyncio.wait_for(self._reader.readexactly(size), timeout)
        (corr,) = _I32.unpack_from(frame, 0)
        if corr != self._correlation:
            raise ProtocolError(f"correlation id {corr} != {self._correlation}")
        pos = 4
        if flexible and int(req_type.__api_key__) != API_VERSIONS_KEY:  # KIP-511: ApiVersions has no v1 header
            pos = skip_tagged_fields(frame, pos)
        check_bounds(response_type, frame, pos)  # a broken peer must not make kio allocate what a count claims
        value: Any
        value, _ = entity_reader(response_type)(frame, pos)
        return value
