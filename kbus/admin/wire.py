"""Admin requests librdkafka does not offer (DescribeLogDirs, ElectLeaders, partition reassignments, client
quotas), sent over the Kafka protocol with kbus's own client: to one broker, to each broker, or to the
controller. Versions are negotiated with ApiVersions, as Kafka's clients do.

Synchronous on the outside (the CLI is), one asyncio run per call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema

from kbus.admin.errors import AdminError
from kbus.protocol.client import PLAINTEXT, ClientSecurity, KafkaConnection
from kbus.protocol.codec import API_VERSIONS_KEY, build, nested

METADATA_KEY = 3
CLIENT_ID = "kbus-admin"
T = TypeVar("T")


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


class AdminSession:
    """Connections of one admin call, with each broker's ApiVersions remembered."""

    def __init__(self, timeout_s: float, security: ClientSecurity = PLAINTEXT) -> None:
        self.timeout_s = timeout_s
        self.security = security
        self._conns: dict[tuple[str, int], KafkaConnection] = {}
        self._versions: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}

    async def _conn(self, host: str, port: int) -> KafkaConnection:
        key = (host, port)
        conn = self._conns.get(key)
        if conn is None:
            conn = KafkaConnection(host, port, CLIENT_ID, self.security)
            try:
                await conn.connect(self.timeout_s)
            except TimeoutError:
                raise ConnectionError(f"{host}:{port}: timed out after {self.timeout_s:g} s") from None
            except OSError as exc:
                raise ConnectionError(f"{host}:{port}: {exc.strerror or exc}") from None
            self._conns[key] = conn
            v0 = request_class(API_VERSIONS_KEY, 0)
            resp = await conn.request(build(v0), response_class(API_VERSIONS_KEY, 0), self.timeout_s)
            self._versions[key] = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
        return conn

    async def version(self, host: str, port: int, api_key: int, ours: tuple[int, int]) -> int:
        await self._conn(host, port)
        theirs = self._versions[(host, port)].get(api_key)
        if theirs is None or theirs[1] < ours[0] or theirs[0] > ours[1]:
            raise AdminError(f"The broker at {host}:{port} does not support API {api_key}", "UNSUPPORTED_VERSION")
        return min(theirs[1], ours[1])

    async def send(self, host: str, port: int, api_key: int, ours: tuple[int, int],
                   make: Callable[[type, int], Any]) -> tuple[Any, int]:  # fmt: skip
        """`make(request_class, version)` builds the request for the negotiated version; returns the response
        and that version."""
        version = await self.version(host, port, api_key, ours)
        conn = await self._conn(host, port)
        body = make(request_class(api_key, version), version)
        return await conn.request(body, response_class(api_key, version), self.timeout_s), version

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()


class WireAdmin:
    def __init__(self, bootstrap: str, timeout_s: float = 30.0, security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = [self._split(b) for b in bootstrap.split(",") if b.strip()]
        self.timeout_s = timeout_s
        self.security = security  # TLS/SASL of the listener (--command-config)

    @staticmethod
    def _split(hostport: str) -> tuple[str, int]:
        host, _, port = hostport.strip().rpartition(":")
        return host.strip("[]"), int(port)

    def run(self, work: Callable[[AdminSession], Awaitable[T]]) -> T:
        async def main() -> T:
            session = AdminSession(self.timeout_s, self.security)
            try:
                return await asyncio.wait_for(work(session), self.timeout_s)
            except TimeoutError:
                raise AdminError(f"No answer within {self.timeout_s:g} s", "REQUEST_TIMED_OUT") from None
            finally:
                await session.close()

        return asyncio.run(main())

    async def cluster(self, session: AdminSession) -> tuple[list[Node], int]:
        """The brokers and the controller id, from the first bootstrap server that answers (Metadata v1+)."""
        reasons: list[str] = []
        for host, port in self.bootstrap:
            try:
                resp, _ = await session.send(host, port, METADATA_KEY, (1, 12), lambda cls, v: build(cls, topics=[]))
            except ConnectionError as exc:
                reasons.append(str(exc))
                continue
            nodes = [Node(int(b.node_id), b.host, int(b.port), b.rack or None) for b in resp.brokers]
            return sorted(nodes, key=lambda n: n.node_id), int(resp.controller_id)
        raise ConnectionError(f"Could not connect to any broker ({'; '.join(reasons)})")

    async def controller(self, session: AdminSession) -> Node:
        nodes, controller_id = await self.cluster(session)
        node = next((n for n in nodes if n.node_id == controller_id), None)
        if node is None:
            raise AdminError("The cluster has no controller right now", "NOT_CONTROLLER")
        return node


__all__ = ["Node", "WireAdmin", "build", "nested"]
