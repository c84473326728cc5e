"""The broker's operations endpoint: GET /metrics (Prometheus text format 0.0.4) and GET /health (JSON).

A deliberately tiny HTTP/1.0-style server on asyncio (one request per connection, then close): scrapers and
probes need nothing more, and it keeps the broker free of an HTTP dependency.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from kbus.server.util.metrics import METRICS, Metrics

if TYPE_CHECKING:
    from kbus.ops.broker_metrics import BrokerView

log = logging.getLogger("kbus.ops.http")

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes

    def encode(self, head_only: bool = False) -> bytes:
        head = (
            f"HTTP/1.1 {self.status} {HTTPStatus(self.status).phrase}\r\n"
            f"Content-Type: {self.content_type}\r\n"
            f"Content-Length: {len(self.body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("ascii")
        return head if head_only else head + self.body


def parse_request_line(head: bytes) -> tuple[str, str] | None:
    """(method, path without query) from the first line of a request head, or None when it is not HTTP."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    return parts[0].upper(), parts[1].split("?", 1)[0]


class OpsEndpoint:
    """Routes /metrics and /health; `health` returns (healthy, JSON-able details)."""

    def __init__(self, metrics: Metrics, health: Callable[[], tuple[bool, dict[str, Any]]]) -> None:
        self.metrics = metrics
        self.health = health
        self._server: asyncio.base_events.Server | None = None

    def respond(self, method: str, path: str) -> Response:
        if method not in ("GET", "HEAD"):
            return Response(405, "text/plain", b"only GET and HEAD\n")
        if path == "/metrics":
            return Response(200, PROMETHEUS_TEXT, self.metrics.render().encode())
        if path == "/health":
            ok, details = self.health()
            return Response(200 if ok else 503, "application/json", (json.dumps(details) + "\n").encode())
        if path == "/":
            return Response(200, "text/plain", b"kbus broker: /metrics /health\n")
        return Response(404, "text/plain", b"not found: try /metrics or /health\n")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            request = parse_request_line(head)
            if request is None:
                response, head_only = Response(400, "text/plain", b"bad request\n"), False
            else:
                response, head_only = self.respond(*request), request[0] == "HEAD"
            writer.write(response.encode(head_only))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass  # a scanner or a dropped probe: nothing worth logging
        except Exception:
            log.exception("metrics endpoint failed to answer")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port, limit=MAX_REQUEST_HEAD, reuse_address=True)
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None


async def start_for_broker(broker: BrokerView, host: str, port: int, metrics: Metrics = METRICS) -> OpsEndpoint:
    """Register the broker's gauges and serve /metrics and /health for it; stop() it before the broker."""
    from kbus.ops import broker_metrics
    from kbus.ops.health import evaluate

    broker_metrics.register(broker, metrics)

    def health() -> tuple[bool, dict[str, Any]]:
        report = evaluate(broker)
        return report.healthy, report.as_dict()

    endpoint = OpsEndpoint(metrics, health)
    bound_host, bound_port = await endpoint.start(host, port)
    log.info("Metrics endpoint listening on http://%s:%d/metrics (health on /health)", bound_host, bound_port)
    return endpoint
