"""Each listener's security, built once at start from the broker's properties (so a setting kbus cannot honour
stops the broker with one line naming it), and the inter-broker client's."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from kbus.common import tls
from kbus.common.acl import Authorizer
from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.security import SecurityProtocol
from kbus.protocol.client import ClientSecurity
from kbus.protocol.connection import ListenerName
from kbus.server.security.principal import SslPrincipalMapper
from kbus.server.security.props import for_listener
from kbus.server.security.sasl import SUPPORTED, CredentialLookup, ListenerSasl, jaas_module

SSL_HANDSHAKE_TIMEOUT_S = 10.0  # a client that stalls its TLS handshake is dropped after this (not the listener)


@dataclass(frozen=True)
class ListenerSecurity:
    listener: ListenerName
    ssl_context: ssl.SSLContext | None  # SSL and SASL_SSL
    principal_mapper: SslPrincipalMapper | None  # SSL: the principal comes from the client certificate
    sasl: ListenerSasl | None  # SASL_PLAINTEXT and SASL_SSL


class SecurityManager:
    def __init__(self, config: KafkaConfig, credentials: CredentialLookup) -> None:
        self.credentials = credentials
        self._listeners: dict[str, ListenerSecurity] = {}
        for lst in config.listeners:
            self._listeners[lst.name] = self._build(config, lst.name)
        self.inter_broker = self._client(config)
        self.authorizer = _authorizer(config)

    @staticmethod
    def _build(config: KafkaConfig, name: str) -> ListenerSecurity:
        protocol = config.security_protocol(name)
        props = for_listener(config.raw, name)
        ctx = tls.server_context(props) if protocol.uses_tls else None
        mapper = None
        if protocol == SecurityProtocol.SSL:
            mapper = SslPrincipalMapper(props.get("ssl.principal.mapping.rules", "DEFAULT"))
        sasl = ListenerSasl.from_props(props) if protocol.uses_sasl else None
        return ListenerSecurity(ListenerName(name, protocol), ctx, mapper, sasl)

    @staticmethod
    def _client(config: KafkaConfig) -> ClientSecurity:
        name = config.inter_broker_listener
        protocol = config.security_protocol(name)
        props = for_listener(config.raw, name)
        ctx = tls.client_context(props) if protocol.uses_tls else None
        if not protocol.uses_sasl:
            return ClientSecurity(protocol.value, ctx)
        mechanism = config.raw.get("sasl.mechanism.inter.broker.protocol", "GSSAPI").strip().upper()
        if mechanism not in SUPPORTED:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol: {mechanism} is not supported by kbus "
                f"(supported: {', '.join(SUPPORTED)})"
            )
        module = jaas_module(props, mechanism)
        options: Mapping[str, str] = module.options if module else {}
        if not options.get("username") or "password" not in options:
            raise ConfigError(
                f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config: needs username and password: "
                "the broker logs in with them on the inter-broker listener"
            )
        return ClientSecurity(protocol.value, ctx, mechanism, options["username"], options["password"])

    def listener(self, name: str) -> ListenerSecurity:
        return self._listeners[name]


ACL_AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")


def _authorizer(config: KafkaConfig) -> Authorizer | None:
    """authorizer.class.name: Kafka's AclAuthorizer (or its pre-2.4 name) switches kbus's authorizer on."""
    name = config.raw.get("authorizer.class.name", "").strip()
    if not name:
        return None
    if name not in ACL_AUTHORIZERS:
        raise ConfigError(
            f"authorizer.class.name: {name} is not supported by kbus (use {ACL_AUTHORIZERS[0]}, kbus's ACL authorizer)"
        )
    return Authorizer.from_props(dict(config.raw))
