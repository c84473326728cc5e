"""What a handler knows of the request it serves (`RequestContext`) and the connection's order of Produce appends
(`AppendOrder`). Compiled (setup.py COMPILED): a context is made for every request and read by the compiled
handlers and network layer, so these are plain classes whose __init__ mypyc compiles (a dataclass's generated
__init__ stays interpreted: ~1 us per request) and whose fields compiled callers read directly."""

from __future__ import annotations

import asyncio
import time
from typing import Final

from kio.static.protocol import Entity

from kbus.common.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, Authorizer, Operation, ResourceType, operations_field
from kbus.common.security import ANONYMOUS, KafkaPrincipal, SecurityProtocol
from kbus.protocol.codec import RequestHeader, response_type
from kbus.protocol.connection import Connection, ListenerName
from kbus.protocol.splice import RecordSplicer

PLAINTEXT_LISTENER = ListenerName("PLAINTEXT", SecurityProtocol.PLAINTEXT)
_perf_counter: Final = time.perf_counter  # a C static: not the module's `time` and its attribute per request


class AppendOrder:
    """Per connection: the Produce request, if any, still to append after an await (a transaction verification).
    Pipelined Produce requests append before their first await, in the order they arrived; one that must wait
    first becomes `tail`, and every later one on the connection waits for it before appending (Kafka reads
    nothing more from the connection until a Produce is answered, so its order holds the same way)."""

    def __init__(self) -> None:
        self.tail: asyncio.Future[None] | None = None

    def must_wait(self) -> bool:
        tail = self.tail
        return tail is not None and not tail.done()


class RequestContext:
    """One request as its handler sees it: the header, the client, the connection and listener it came on, and
    what the handler decides for the network layer (throttle time, quota exemption)."""

    def __init__(
        self,
        header: RequestHeader,
        client_host: str,
        client_port: int,
        connection_id: str,
        *,
        listener: ListenerName = PLAINTEXT_LISTENER,
        connection: Connection | None = None,
        splicer: RecordSplicer | None = None,
        append_order: AppendOrder | None = None,
        authorizer: Authorizer | None = None,
        size: int = 0,
    ) -> None:
        self.header = header
        self.client_host = client_host
        self.client_port = client_port
        self.connection_id = connection_id
        self.listener = listener
        # The client's connection (SASL handlers authenticate it); None when a handler is called without one (tests)
        self.connection = connection
        # Set on plaintext connections: Fetch may leave record bytes in the segment file (kbus.protocol.splice)
        self.splicer = splicer
        # the connection's order of Produce appends (None: a handler called without a connection, tests)
        self.append_order = append_order
        # Kafka's AclAuthorizer when authorizer.class.name enables it; None: everything is allowed
        self.authorizer = authorizer
        # client quotas: the request's size in bytes (Produce records it), the throttle time a handler decided
        # (Produce/Fetch byte rates; the network adds the request quota's and mutes the connection for the larger),
        # and the seconds the handler spent parked (acks=all, a fetch's long poll), not counted as request time
        self.size = size
        self.throttle_time_ms = 0
        self.parked_s = 0.0
        # no request quota: a follower's fetch (Kafka's maybeRecordExempt), an acks=0 Produce
        self.quota_exempt = False
        self.request_time_recorded = False  # request_percentage is recorded once per request (apis/throttling.py)
        self.started = _perf_counter()  # when the request was dispatched

    def __repr__(self) -> str:
        return (f"RequestContext(api_key={self.header.api_key}, api_version={self.header.api_version}, "
                f"client={self.client_host}:{self.client_port}, connection_id={self.connection_id!r})")

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
    def response_type(self) -> type[Entity]:
        """kio's response class of this request's version (handlers answer their newest version's class;
        codec.encode_response writes it in this one: kbus.protocol.upgrade.to_version)."""
        return response_type(self.header.api_key, self.header.api_version)
