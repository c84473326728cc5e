"""Kafka's security vocabulary shared by the broker's connections, its authorizer (kbus.common.acl) and its
config: the security protocols a listener speaks and the principal a connection authenticates as."""

from __future__ import annotations

import enum
import ssl
from dataclasses import dataclass


class SecurityProtocol(enum.StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Kafka's principal: type and name, written `User:alice`."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(frozen=True)
class ClientSecurity:
    """How a client reaches a listener: TLS (a context from ssl.* keys) and/or SASL (mechanism and login)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str = ""
    username: str = ""
    password: str = ""


PLAINTEXT = ClientSecurity()
