"""One dispatch table from API key to handler (Kafka's KafkaApis as a table of contents).

A handler is `async def handle(managers, ctx, request) -> response | None` (`managers`: the broker's managers
it may call, see managers.py). A handler registered with `request=` (kio's class of the newest version it serves,
or the last class of each shape when Kafka removed a field: `request=(V7, V10)`) receives every version's request
as that class, fields the version lacks holding Kafka's defaults (kbus.protocol.upgrade); the others (the
hand-decoded hot APIs, and handlers not yet moved) receive the decoded message for `ctx.api_version`. The
response is kio's response class of the newest version the handler serves (its return annotation says which, so
mypy checks every field), or of an older version where Kafka removed a field (FindCoordinator v0-3); the network
layer writes it in the request's version (kbus.protocol.upgrade.to_version: fields that version lacks are dropped,
an error it cannot carry is refused). The hot APIs may answer an EncodedBody (a body they encoded themselves).
Returning None sends no response (Produce, acks=0).
Handler modules register themselves with `@api(key, min_version, max_version)`; `ApiVersions` advertises exactly
this table, so nothing is advertised that is not implemented. Each entry also declares what the connection layer
needs to know about it (`ApiFlags`: may be pipelined, allowed before authentication); `CATALOG` is the table as
the connection (kbus.protocol.connection) sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache, wraps
from typing import TYPE_CHECKING, Any, TypeVar, overload

from kio.schema.index import api_key_map

from kbus.protocol.codec import Response, request_type
from kbus.protocol.connection import ApiFlags, ApiTable
from kbus.protocol.upgrade import Upgrade, UpgradeError, upgrades_for, version_of

# the request context lives in a compiled module of its own; handlers import it from here
from kbus.server.apis.context import PLAINTEXT_LISTENER, AppendOrder, RequestContext

__all__ = ["API_TABLE", "CATALOG", "PLAINTEXT_LISTENER", "ApiSpec", "AppendOrder", "RequestContext", "api",
           "api_name", "supported"]

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

NO_FLAGS = ApiFlags()
Handler = Callable[["Managers", "RequestContext", Any], Awaitable[Response | None]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler
    flags: ApiFlags = NO_FLAGS
    requests: tuple[type, ...] = ()  # the kio request classes the handler takes (api's `request`); () for any

    @property
    def name(self) -> str:
        """Kafka's API name, e.g. "Produce", "OffsetCommit"."""
        return api_name(self.key)


@cache  # read twice per request (the request metrics' label): built once per API key
def api_name(key: int) -> str:
    return "".join(part.capitalize() for part in api_key_map.get(key, str(key)).split("_"))


API_TABLE: dict[int, ApiSpec] = {}
# API_TABLE as the connection (kbus.protocol.connection) sees it, in compiled code; api() fills both
CATALOG = ApiTable()


R = TypeVar("R")
R2 = TypeVar("R2")
R3 = TypeVar("R3")


@overload
def api(
    key: int, min_version: int, max_version: int, *, pipelined: bool = ..., before_auth: bool = ...
) -> Callable[[Handler], Handler]: ...


@overload
def api(
    key: int, min_version: int, max_version: int, *, request: type[R], pipelined: bool = ..., before_auth: bool = ...
) -> Callable[[Callable[[Managers, RequestContext, R], Awaitable[Response | None]]],
              Callable[[Managers, RequestContext, R], Awaitable[Response | None]]]: ...


@overload
def api(
    key: int, min_version: int, max_version: int, *, request: tuple[type[R], type[R2]], pipelined: bool = ...,
    before_auth: bool = ...,
) -> Callable[[Callable[[Managers, RequestContext, R | R2], Awaitable[Response | None]]],
              Callable[[Managers, RequestContext, R | R2], Awaitable[Response | None]]]: ...


@overload
def api(
    key: int, min_version: int, max_version: int, *, request: tuple[type[R], type[R2], type[R3]],
    pipelined: bool = ..., before_auth: bool = ...,
) -> Callable[[Callable[[Managers, RequestContext, R | R2 | R3], Awaitable[Response | None]]],
              Callable[[Managers, RequestContext, R | R2 | R3], Awaitable[Response | None]]]: ...


def api(
    key: int, min_version: int, max_version: int, *, request: type | tuple[type, ...] | None = None,
    pipelined: bool = False, before_auth: bool = False,
) -> Callable[[Any], Any]:
    """Register a handler. `request`: the kio request class(es) the handler takes (see the module's docstring);
    the newest must be `max_version`'s, and every version from `min_version` must upgrade to one of them, or the
    import fails here. `pipelined`: the connection may dispatch it while earlier requests still wait (the
    handler must do its ordered work before its first await). `before_auth`: served before the client has
    authenticated (Kafka: ApiVersions and the SASL APIs only)."""

    def register(handler: Handler) -> Handler:
        served = handler
        targets = () if request is None else request if isinstance(request, tuple) else (request,)
        if targets:
            served = _upgrading(handler, _upgrades(key, min_version, max_version, targets))
        if key in API_TABLE:
            raise RuntimeError(f"API {key} registered twice")
        flags = ApiFlags(pipelined, before_auth)
        API_TABLE[key] = ApiSpec(key, min_version, max_version, served, flags, targets)
        CATALOG.add(key, min_version, max_version, flags)
        return handler

    return register


def _upgrades(key: int, min_version: int, max_version: int, targets: tuple[type, ...]) -> dict[type, Upgrade]:
    newest = max(targets, key=version_of)
    if newest is not request_type(key, max_version):
        raise UpgradeError(f"API {key}: {newest.__module__}.{newest.__name__} is not v{max_version}'s request class")
    versions: dict[int, type] = {}
    for version in range(min_version, max_version + 1):
        source = request_type(key, version)
        if source is None:
            raise UpgradeError(f"API {key} v{version}: kio has no request class")
        versions[version] = source
    return upgrades_for(versions, targets)


def _upgrading(handler: Handler, upgrades: dict[type, Upgrade]) -> Handler:
    """The handler behind its upgrade: one dict lookup for a request already of its class. Not async itself (it
    returns the handler's coroutine): no second coroutine per request."""

    @wraps(handler)
    def handle(m: Managers, ctx: RequestContext, request: Any) -> Awaitable[Response | None]:
        upgrade = upgrades.get(type(request))
        return handler(m, ctx, request if upgrade is None else upgrade(request))
    return handle


def supported(key: int, version: int) -> bool:
    return CATALOG.supports(key, version)
