"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2, Kafka's SaslServerAuthenticator as two handlers.

v1 handshakes carry the mechanism's tokens in SaslAuthenticate requests; after a v0 handshake the client sends bare
tokens (no Kafka header), which the connection hands to `raw_token`. A failed login is answered with
SASL_AUTHENTICATION_FAILED after connection.failed.authentication.delay.ms and the connection closes; an unknown
mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection closes too.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode as E
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from kbus.protocol.connection import Connection
from kbus.protocol.kio_types import NO_TIME64, ms64
from kbus.server.apis.registry import RequestContext, api
from kbus.server.security.sasl import ListenerSasl, SaslAuthenticationError

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.security.manager import SecurityManager

log = logging.getLogger("kbus.security")


def _listener_sasl(security: SecurityManager | None, listener: str) -> ListenerSasl | None:
    return None if security is None else security.listener(listener).sasl


@api(17, 0, 1, before_auth=True, request=SaslHandshakeRequest)
async def sasl_handshake(
    managers: Managers, ctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    security, conn = managers.security, ctx.connection
    sasl = _listener_sasl(security, ctx.listener.name)
    if security is None or sasl is None or conn is None or conn.sasl is not None:
        return SaslHandshakeResponse(error_code=E.illegal_sasl_state, mechanisms=())
    mechanism = request.mechanism
    if mechanism not in sasl.enabled:
        conn.close(f"unsupported SASL mechanism {mechanism}")
        return SaslHandshakeResponse(error_code=E.unsupported_sasl_mechanism, mechanisms=sasl.enabled)
    conn.sasl = sasl.server(mechanism, security.credentials)
    if ctx.api_version == 0:
        conn.expect_raw_sasl_token()
    return SaslHandshakeResponse(error_code=E.none, mechanisms=sasl.enabled)


async def _evaluate(
    sasl: ListenerSasl, ctx_listener: str, conn: Connection, token: bytes, peer: tuple[str, int]
) -> tuple[bytes, str | None]:
    """(challenge, error message); on success of the last step the connection is authenticated. `peer` is the
    client's (address, port), named in the failed-authentication line as Kafka's Selector does."""
    exchange = conn.sasl
    assert exchange is not None
    before = conn.principal if conn.authenticated else None
    try:
        challenge = await asyncio.to_thread(exchange.evaluate, token)  # SCRAM reads credentials from ZooKeeper
    except SaslAuthenticationError as exc:
        conn.sasl = None
        # Kafka's Selector: "Failed [re-]authentication with /<address> (channelId=...) (<reason>)"
        log.info("Failed %sauthentication with /%s (port %d on %s) (%s)",
                 "" if before is None else "re-", peer[0], peer[1], ctx_listener, exc)
        await asyncio.sleep(sasl.failed_delay_ms / 1000)  # Kafka delays the answer to slow down guessing
        conn.close(f"authentication failed ({exchange.mechanism})")
        return b"", str(exc)
    if exchange.complete:
        principal = exchange.principal
        assert principal is not None
        if before is not None and before != principal:  # KIP-368: a session cannot change hands
            conn.close("re-authentication as a different principal")
            return b"", f"Cannot change principals during re-authentication from {before}: {principal}"
        conn.authenticate(principal, sasl.reauth_ms)
        log.debug("Authenticated %s with %s on %s", principal, exchange.mechanism, ctx_listener)
    return challenge, None


@api(36, 0, 2, before_auth=True, request=SaslAuthenticateRequest)
async def sasl_authenticate(
    managers: Managers, ctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    conn = ctx.connection
    sasl = _listener_sasl(managers.security, ctx.listener.name)
    if conn is None or sasl is None or conn.sasl is None:
        if conn is not None:
            conn.close("SaslAuthenticate without a SaslHandshake")
        return SaslAuthenticateResponse(
            error_code=E.illegal_sasl_state,
            error_message="Unexpected SaslAuthenticate request without a SaslHandshake",
            auth_bytes=b"",
            session_lifetime=NO_TIME64,
        )
    challenge, error = await _evaluate(
        sasl, ctx.listener.name, conn, bytes(request.auth_bytes), (ctx.client_host, ctx.client_port)
    )
    if error is not None:
        return SaslAuthenticateResponse(
            error_code=E.sasl_authentication_failed, error_message=error, auth_bytes=b"", session_lifetime=NO_TIME64
        )
    lifetime = sasl.reauth_ms if conn.authenticated and ctx.api_version >= 1 else 0
    return SaslAuthenticateResponse(error_code=E.none, error_message=None, auth_bytes=challenge,
                                    session_lifetime=ms64(lifetime))


async def raw_token(
    security: SecurityManager, listener: str, conn: Connection, token: bytes, peer: tuple[str, int]
) -> bytes | None:
    """A bare SASL token after a v0 handshake: the framed challenge, or None (fail: the connection closes)."""
    sasl = _listener_sasl(security, listener)
    if conn.sasl is None or sasl is None:
        return None
    challenge, error = await _evaluate(sasl, listener, conn, token, peer)
    if error is not None:
        return None
    if conn.sasl is not None:  # more steps to come (SCRAM): the next frame is a bare token too
        conn.expect_raw_sasl_token()
    return struct.pack(">i", len(challenge)) + challenge
