"""One dispatch table from API key to handler (Kafka's KafkaApis as a table of contents).

A handler is `async def handle(broker, ctx, request) -> response | None` where `request` is the decoded kio
message for `ctx.api_version` and the response is built with `ctx.build(**fields)` (kio's response class for the
same version; fields that version lacks are dropped). Returning None sends no response (Produce with acks=0).
Handler modules register themselves with `@api(key, min_version, max_version)`; `ApiVersions` advertises exactly
this table, so nothing is advertised that is not implemented.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.index import api_key_map

from kbus.protocol.codec import RequestHeader, build, nested, response_type

if TYPE_CHECKING:
    from kbus.server.broker import Broker

Handler = Callable[["Broker", "RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler

    @property
    def name(self) -> str:
        """Kafka's API name, e.g. "Produce", "OffsetCommit"."""
        return "".join(part.capitalize() for part in api_key_map.get(self.key, str(self.key)).split("_"))


API_TABLE: dict[int, ApiSpec] = {}


def api(key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        if key in API_TABLE:
            raise RuntimeError(f"API {key} registered twice")
        API_TABLE[key] = ApiSpec(key, min_version, max_version, handler)
        return handler

    return register


def supported(key: int, version: int) -> bool:
    spec = API_TABLE.get(key)
    return spec is not None and spec.min_version <= version <= spec.max_version


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    client_host: str
    client_port: int
    connection_id: str
    # Per-request scratch space for handlers (e.g. timing); never shared between requests.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def response_type(self) -> type:
        return response_type(self.header.api_key, self.header.api_version)

    def build(self, /, **fields: Any) -> Any:
        """The top-level response for this request's version."""
        return build(self.response_type, **fields)

    def nested(self, type_name: str, /, **fields: Any) -> Any:
        """A nested response entity (e.g. 'MetadataResponseTopic') for this request's version; None when the
        version has no such entity (the field holding it is then dropped by build() as well)."""
        try:
            cls = nested(self.response_type, type_name)
        except AttributeError:
            return None
        return build(cls, **fields)
