"""Kafka's (Java) client security keys as librdkafka spells them, for every kbus client path (the CLI's
--command-config / --producer.config / --consumer.config, the Spark source's `kafka.*` options)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kbus.common import tls
from kbus.common.broker_config import ConfigError
from kbus.common.jaas import parse
from kbus.common.security import PLAINTEXT, ClientSecurity


def translate_security(conf: dict[str, Any]) -> dict[str, Any]:
    """Kafka's client security keys -> librdkafka's: the JAAS line's username/password become sasl.username /
    sasl.password, PEM trust and key stores become ssl.ca.location / ssl.certificate.location + ssl.key.location
    (PKCS12 keystores librdkafka reads itself). `security.protocol`, `sasl.mechanism` and ssl.keystore.* for
    PKCS12 are the same keys in both."""
    out = dict(conf)
    jaas_text = out.pop("sasl.jaas.config", None)
    if jaas_text:
        options = parse(str(jaas_text)).options
        if "username" in options:
            out.setdefault("sasl.username", options["username"])
        if "password" in options:
            out.setdefault("sasl.password", options["password"])
    trust_type = str(out.pop("ssl.truststore.type", "PEM")).upper()
    if "ssl.truststore.location" in out and trust_type == "PEM":
        out.setdefault("ssl.ca.location", out.pop("ssl.truststore.location"))
    if "ssl.truststore.certificates" in out:
        out.setdefault("ssl.ca.pem", out.pop("ssl.truststore.certificates"))
    out.pop("ssl.truststore.password", None)
    key_type = str(out.pop("ssl.keystore.type", "PKCS12")).upper()
    if key_type == "PEM" and "ssl.keystore.location" in out:
        pem = out.pop("ssl.keystore.location")
        out.setdefault("ssl.certificate.location", pem)
        out.setdefault("ssl.key.location", pem)
        out.pop("ssl.keystore.password", None)
    if "ssl.keystore.certificate.chain" in out:
        out.setdefault("ssl.certificate.pem", out.pop("ssl.keystore.certificate.chain"))
    if "ssl.keystore.key" in out:
        out.setdefault("ssl.key.pem", out.pop("ssl.keystore.key"))
    if "ssl.key.password" in out:
        out.setdefault("ssl.key.password", out.pop("ssl.key.password"))
    algorithm = out.pop("ssl.endpoint.identification.algorithm", None)
    if algorithm is not None:
        out["ssl.endpoint.identification.algorithm"] = "https" if str(algorithm).lower() == "https" else "none"
    return out


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*) as kbus's own wire
    client's settings (the tools that speak the protocol themselves: log-dirs, leader-election, reassignment,
    transactions)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"security.protocol: unknown protocol {protocol}")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    ctx = tls.client_context(props) if "SSL" in protocol else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(protocol, ctx)
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError(f"sasl.mechanism: {mechanism} is not supported by kbus (PLAIN, SCRAM-SHA-256/512)")
    options = parse(props["sasl.jaas.config"]).options if props.get("sasl.jaas.config") else {}
    return ClientSecurity(protocol, ctx, mechanism, options.get("username", ""), options.get("password", ""))
