"""One dispatch table from API key to handler (Kafka's KafkaApis as a table of contents).

A handler is `async def handle(managers, ctx, request) -> response | None` (`managers`: the broker's managers
it may call, see managers.py). A handler registered with `request=` (kio's class of the newest version it serves,
or the last class of each shape when Kafka removed a field: `request=(V7, V10)`) receives every version's request
as that class, fields the version lacks holding Kafka's defaults (kbus.protocol.upgrade); the others (the
hand-decoded hot APIs, and handlers not yet moved) receive the decoded message for `ctx.api_version`. The
response is built with `ctx.build(**fields)` (kio's response class for the same version; fields that version
lacks are dropped). Returning None sends no response (Produce with acks=0).
Handler modules register themselves with `@api(key, min_version, max_version)`; `ApiVersions` advertises exactly
this table, so nothing is advertised that is not implemented. Each entry also declares what the connection layer
needs to know about it (`ApiFlags`: may be pipelined, allowed before authentication); `CATALOG` is the table as
the connection (kbus.protocol.connection) sees it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache, wraps
from typing import TYPE_CHECKING, Any, TypeVar, overload

from kio.schema.index import api_key_map

from kbus.common.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, Authorizer, Operation, ResourceType, operations_field
from kbus.common.security import ANONYMOUS, KafkaPrincipal, SecurityProtocol
from kbus.protocol.codec import RequestHeader, build, nested, request_type, response_type
from kbus.protocol.connection import ApiFlags, Connection, ListenerName
from kbus.protocol.splice import RecordSplicer
from kbus.protocol.upgrade import Upgrade, UpgradeError, upgrades_for, version_of

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

NO_FLAGS = ApiFlags()
Handler = Callable[["Managers", "RequestContext", Any], Awaitable[Any]]


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
) -> Callable[[Callable[[Managers, RequestContext, R], Awaitable[Any]]],
              Callable[[Managers, RequestContext, R], Awaitable[Any]]]: ...


@overload
def api(
    key: int, min_version: int, max_version: int, *, request: tuple[type[R], type[R2]], pipelined: bool = ...,
    before_auth: bool = ...,
) -> Callable[[Callable[[Managers, RequestContext, R | R2], Awaitable[Any]]],
              Callable[[Managers, RequestContext, R | R2], Awaitable[Any]]]: ...


@overload
def api(
    key: int, min_version: int, max_version: int, *, request: tuple[type[R], type[R2], type[R3]],
    pipelined: bool = ..., before_auth: bool = ...,
) -> Callable[[Callable[[Managers, RequestContext, R | R2 | R3], Awaitable[Any]]],
              Callable[[Managers, RequestContext, R | R2 | R3], Awaitable[Any]]]: ...


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
    def handle(m: Managers, ctx: RequestContext, request: Any) -> Awaitable[Any]:
        upgrade = upgrades.get(type(request))
        return handler(m, ctx, request if upgrade is None else upgrade(request))
    return handle


def supported(key: int, version: int) -> bool:
    spec = API_TABLE.get(key)
    return spec is not None and spec.min_version <= version <= spec.max_version


class _Catalog:
    """API_TABLE through the connection's ApiCatalog interface."""

    def flags(self, api_key: int) -> ApiFlags | None:
        spec = API_TABLE.get(api_key)
        return None if spec is None else spec.flags

    def supports(self, api_key: int, api_version: int) -> bool:
        return supported(api_key, api_version)


CATALOG = _Catalog()
PLAINTEXT_LISTENER = ListenerName("PLAINTEXT", SecurityProtocol.PLAINTEXT)


class AppendOrder:
    """Per connection: the Produce request, if any, still to append after an await (a transaction verification).
    Pipelined Produce requests append before their first await, in the order they arrived; one that must wait
    first becomes `tail`, and every later one on the connection waits for it before appending (Kafka reads
    nothing more from the connection until a Produce is answered, so its order holds the same way)."""

    __slots__ = ("tail",)

    def __init__(self) -> None:
        self.tail: asyncio.Future[None] | None = None

    def must_wait(self) -> bool:
        tail = self.tail
        return tail is not None and not tail.done()


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    client_host: str
    client_port: int
    connection_id: str
    # Per-request scratch space for handlers (e.g. timing); never shared between requests.
    extra: dict[str, Any] = field(default_factory=dict)
    listener: ListenerName = PLAINTEXT_LISTENER
    # The client's connection (SASL handlers authenticate it); None when a handler is called without one (tests).
    connection: Connection | None = None
    # Set on plaintext connections: Fetch may leave record bytes in the segment file (kbus.protocol.splice).
    splicer: RecordSplicer | None = None
    # the connection's order of Produce appends (None: a handler called without a connection, tests)
    append_order: AppendOrder | None = None

    # Kafka's AclAuthorizer when authorizer.class.name enables it; None: everything is allowed
    authorizer: Authorizer | None = None
    # client quotas: the request's size in bytes (Produce records it), the throttle time a handler decided
    # (Produce/Fetch byte rates; the network adds the request quota's and mutes the connection for the larger),
    # and the seconds the handler spent parked (acks=all, a fetch's long poll), not counted as request time
    size: int = 0
    throttle_time_ms: int = 0
    parked_s: float = 0.0
    quota_exempt: bool = False  # no request quota: a follower's fetch (Kafka's maybeRecordExempt), an acks=0 Produce
    request_time_recorded: bool = False  # request_percentage is recorded once per request (apis/throttling.py)
    started: float = field(default_factory=time.perf_counter)  # when the request was dispatched

    @property
    def principal(self) -> KafkaPrincipal:
        return ANONYMOUS if self.connection is None else self.connection.principal

    def authorized(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """May this request's principal, from this client's host, do `operation` on the resource?"""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.client_host, operation, resource_type, name)

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """KIP-430's bit field for the authorized-operations fields; without an authorizer every operation the
        resource type supports, as Kafka's AuthHelper.authorizedOperations (librdkafka's 0081 checks it)."""
        if self.authorizer is None:
            return operations_field(SUPPORTED_OPERATIONS.get(resource_type, ()))
        return self.authorizer.authorized_operations(self.principal, self.client_host, resource_type, name)

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
