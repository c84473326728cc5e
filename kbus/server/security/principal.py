"""Principals from TLS client certificates: Kafka's ssl.principal.mapping.rules (SslPrincipalMapper)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbus.common.broker_config import ConfigError
from kbus.common.security import KafkaPrincipal

# Kafka's RULE_SPLITTER: rules are joined by commas, and a rule's pattern may itself contain (escaped) commas
_RULE = re.compile(r"\s*(DEFAULT|RULE:((\\.|[^\\/])+)/((\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*([,\n]\s*|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT (the whole DN)
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn) or self.pattern.search(dn)
        if m is None:
            return None
        # Java's $1 group references -> Python's \g<1>
        out = m.expand(re.sub(r"\$(\d+)", r"\\g<\1>", self.replacement))
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self._rules: list[_Rule] = []
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
            pos = m.end()
            if m.group(7):
                raise ConfigError(f"ssl.principal.mapping.rules: invalid rule {m.group(7)!r}")
            if m.group(1) == "DEFAULT":
                self._rules.append(_Rule(None))
            elif m.group(2) is not None:
                pattern = m.group(2).replace("\\/", "/")
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {exc}") from None
                self._rules.append(_Rule(compiled, m.group(4).replace("\\/", "/"), m.group(6)))

    def name(self, distinguished_name: str) -> str:
        for rule in self._rules:
            out = rule.apply(distinguished_name)
            if out is not None:
                return out
        raise ValueError(f"No rule applies to {distinguished_name}")


def certificate_principal(der: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal | None:
    """The principal of a client certificate (User:<mapped subject DN>); None without one."""
    if not der:
        return None
    from cryptography import x509  # only TLS listeners with client certificates need it

    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()  # like Java's X500Principal.getName()
    return KafkaPrincipal("User", mapper.name(subject))
