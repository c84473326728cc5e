"""SASL on the broker, sans I/O: the mechanisms a listener enables and one server-side exchange per connection.

PLAIN checks the users of the listener's JAAS property (`user_<name>="<password>"`, Kafka's PlainLoginModule);
SCRAM-SHA-256/512 run through `scramp` against the credentials Kafka stores (ZooKeeper `/config/users/<user>` in a
cluster, the local metadata file standalone). Errors carry Kafka's messages.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kbus.common import jaas
from kbus.common.broker_config import ConfigError
from kbus.common.security import KafkaPrincipal
from kbus.server.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kbus.server.security.scram import ScramCredential

log = logging.getLogger("kbus.security")
SUPPORTED = ("PLAIN", *SCRAM_MECHANISMS)
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

# user -> {mechanism: credential}; blocking (a ZooKeeper read): callers run it off the event loop
CredentialLookup = Callable[[str], Mapping[str, str]]


class SaslAuthenticationError(Exception):
    """The client failed to authenticate; the message is what Kafka tells the client."""


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.principal: KafkaPrincipal | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if not user or not password:
            raise SaslAuthenticationError("Authentication failed: username or password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.complete = True
        self.principal = KafkaPrincipal("User", user)
        return b""


class ScramServer:
    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        import scramp  # only SCRAM listeners need it

        self.mechanism = mechanism
        self.complete = False
        self.principal: KafkaPrincipal | None = None
        self._lookup = lookup
        self._user = ""
        # an alphanumeric server nonce, as Kafka's ScramFormatter makes it: librdkafka 2.0 mangles scramp's default
        # (base64-like) one and the exchange fails with "Server nonce doesn't match"
        nonce = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(26))
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info, s_nonce=nonce)
        self._step = 0

    def _auth_info(self, sasl_name: str) -> tuple[bytes, bytes, bytes, int]:
        user = sasl_name.replace("=2C", ",").replace("=3D", "=")  # RFC 5802 saslname (Kafka's ScramFormatter)
        text = self._lookup(user).get(self.mechanism)
        if text is None:
            raise SaslAuthenticationError("Authentication failed: Invalid user credentials")
        cred = ScramCredential.decode(text)
        self._user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> bytes:
        import scramp

        try:
            if self._step == 0:
                self._step = 1
                self._server.set_client_first(token.decode("utf-8"))
                server_first: str = self._server.get_server_first()
                return server_first.encode()
            if self._step == 1:
                self._step = 2
                final = self._client_final(token.decode("utf-8"))
                self.complete = True
                self.principal = KafkaPrincipal("User", self._user)
                return final
        except (scramp.ScramException, UnicodeDecodeError, ValueError) as exc:
            log.debug("SCRAM exchange failed: %s", exc)
            raise SaslAuthenticationError(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}"
            ) from None
        raise SaslAuthenticationError("Authentication failed: unexpected SCRAM message")

    def _client_final(self, message: str) -> bytes:
        """Kafka's check of the client-final message (ScramSaslServer), with scramp's parsed first step.

        Kafka accepts a nonce that *ends with* the server's (librdkafka before 2.1 sends its client nonce twice,
        and it works against Kafka); scramp insists on equality, so this step is Kafka's rule over the RFC 5802
        computations, keyed by what scramp derived in the first step."""
        server = self._server
        attrs = dict(part.split("=", 1) for part in message.split(",") if "=" in part)
        nonce, proof_b64 = attrs.get("r", ""), attrs.get("p", "")
        sent = dict(part.split("=", 1) for part in server.server_first.split(",") if "=" in part)
        if not nonce.endswith(sent["r"]):
            raise ValueError("Invalid SCRAM nonce")
        if base64.b64decode(attrs.get("c", "")) != server.gs2_header.make_cbind_input(None):
            raise ValueError("Invalid SCRAM channel binding")
        without_proof = message[: message.rindex(",p=")]
        auth_message = f"{server.client_first_bare},{server.server_first},{without_proof}".encode()
        digest = SCRAM_MECHANISMS[self.mechanism]
        signature = hmac.new(server.stored_key, auth_message, digest).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), server.stored_key):
            raise ValueError("Invalid client credentials")
        server_signature = hmac.new(server.server_key, auth_message, digest).digest()
        return b"v=" + base64.b64encode(server_signature)


SaslServer = PlainServer | ScramServer


@dataclass(frozen=True)
class ListenerSasl:
    """A SASL listener's settings (properties already scoped to the listener)."""

    enabled: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0: sessions never expire

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ListenerSasl:
        enabled = tuple(
            m.strip().upper() for m in props.get("sasl.enabled.mechanisms", "GSSAPI").split(",") if m.strip()
        )
        for mech in enabled:
            if mech not in SUPPORTED:
                raise ConfigError(
                    f"sasl.enabled.mechanisms: {mech} is not supported by kbus (supported: {', '.join(SUPPORTED)})"
                )
        if not enabled:
            raise ConfigError("sasl.enabled.mechanisms: a SASL listener needs at least one mechanism")
        users: dict[str, str] = {}
        if "PLAIN" in enabled:
            module = jaas_module(props, "PLAIN")
            if module is None or module.login_module != PLAIN_MODULE:
                raise ConfigError(
                    "sasl.jaas.config: SASL/PLAIN needs listener.name.<listener>.plain.sasl.jaas.config (or "
                    "sasl.jaas.config) with "
                    f'{PLAIN_MODULE} and user_<name>="<password>" entries'
                )
            users = {k[5:]: v for k, v in module.options.items() if k.startswith("user_")}
        return cls(
            enabled,
            users,
            _int(props, "connection.failed.authentication.delay.ms", 100),
            _int(props, "connections.max.reauth.ms", 0),
        )

    def server(self, mechanism: str, lookup: CredentialLookup) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return ScramServer(mechanism, lookup)


def jaas_module(props: Mapping[str, str], mechanism: str) -> jaas.JaasModule | None:
    """Kafka's lookup: `<mechanism>.sasl.jaas.config` (after the listener prefix), then `sasl.jaas.config`."""
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = props.get(key) or props.get("sasl.jaas.config")
    if not text:
        return None
    return jaas.parse(text, key if key in props else "sasl.jaas.config")


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(props.get(key, default))
    except ValueError:
        raise ConfigError(f"Invalid value {props[key]!r} for configuration {key}: expected int") from None
