"""kbus.protocol.client: the broker-to-broker connection (replica fetchers, markers, verification) reassembles
response frames however the bytes arrive, and a request that timed out ends its connection (a late answer must
never be read as the next request's)."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse

from kbus.protocol.client import KafkaConnection, _FrameReader

_I32 = struct.Struct(">i")


def test_frames_are_reassembled_across_any_chunking() -> None:
    async def run() -> None:
        rng = random.Random(7)
        frames = [rng.randbytes(n) for n in (4, 5, 100, 3000, 70_000, 300_000)]
        stream = b"".join(_I32.pack(len(f)) + f for f in frames)
        for _ in range(30):
            reader = _FrameReader()
            pos = 0
            while pos < len(stream):
                n = rng.choice([1, 2, 3, 5, 100, 4096, 65536, 262144])
                reader.data_received(stream[pos : pos + n])
                pos += n
            got = []
            for _ in frames:
                got.append(await reader.next_frame())
            assert got == frames

    asyncio.run(run())


def _api_versions_answer(correlation: int) -> bytes:
    # ApiVersions v0 response: error 0, no api keys
    body = _I32.pack(correlation) + b"\x00\x00" + _I32.pack(0)
    return _I32.pack(len(body)) + body


def test_a_timed_out_request_ends_its_connection() -> None:
    async def run() -> None:
        answered = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal answered
            while True:
                try:
                    size = _I32.unpack(await reader.readexactly(4))[0]
                except asyncio.IncompleteReadError:
                    return
                request = await reader.readexactly(size)
                correlation = _I32.unpack_from(request, 4)[0]
                answered += 1
                if answered == 1:
                    await asyncio.sleep(0.5)  # the first answer comes after the client gave up
                writer.write(_api_versions_answer(correlation))

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = KafkaConnection("127.0.0.1", port, "test")
        await conn.connect()
        with pytest.raises(TimeoutError):
            await conn.request(ApiVersionsRequest(), ApiVersionsResponse, timeout=0.1)
        assert not conn.connected  # not left open with the late answer still to come
        await conn.close()
        await conn.connect()
        answer = await conn.request(ApiVersionsRequest(), ApiVersionsResponse, timeout=5)
        assert answer.error_code == 0
        await conn.close()
        server.close()
        await server.wait_closed()

    asyncio.run(run())


def test_a_closed_peer_fails_the_request_with_a_connection_error() -> None:
    async def run() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(4)
            writer.write(_I32.pack(100) + b"\x00\x00")  # half a frame, then gone
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        conn = KafkaConnection("127.0.0.1", server.sockets[0].getsockname()[1], "test")
        await conn.connect()
        with pytest.raises(ConnectionError):
            await conn.request(ApiVersionsRequest(), ApiVersionsResponse, timeout=5)
        await conn.close()
        server.close()
        await server.wait_closed()

    asyncio.run(run())
