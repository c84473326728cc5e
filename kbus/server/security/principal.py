"""Principals from TLS client certificates: Kafka's ssl.principal.mapping.rules (SslPrincipalMapper)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kbus.common.broker_config import ConfigError
from kbus.common.security import KafkaPrincipal

# Kafka's RULE_SPLITTER and RULE_PARSER in one: rules are joined by commas, a rule's pattern may itself contain
# (escaped) commas; group 7 is text after a rule's /L or /U, group 8 what is neither DEFAULT nor a RULE (both invalid
# unless empty: empty rules are ignored)
_RULE = re.compile(r"\s*(DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?)(.*?)|(.*?))\s*([,\n]\s*|$)")


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's Matcher.replaceAll replacement syntax: \\x is a literal x, $n a group reference. Like Kafka's
    escapeLiteralBackReferences, a reference to a group the pattern does not have is kept literally (after
    dropping trailing digits while the number is too large: $12 with one group is group 1 then "2")."""
    parts: list[str | int] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            parts.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            number = int(replacement[i + 1])
            while j < len(replacement) and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups:
                number = number * 10 + int(replacement[j])
                j += 1
            if number > groups:  # no such group: the text stays as written
                parts.append(replacement[i:j])
            else:
                parts.append(number)
            i = j
        else:
            parts.append(c)
            i += 1

    def expand(m: re.Match[str]) -> str:
        return "".join(m.group(p) or "" if isinstance(p, int) else p for p in parts)

    return expand


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT (the whole DN)
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        """The rule's name for dn, or None when the rule does not apply. A rule applies only when its pattern
        matches the WHOLE DN (Kafka's Matcher.matches()): a pattern found inside a longer DN must not map it, or
        "CN=admin,OU=kafkaX" would pass for "CN=admin,OU=kafka". The name is then Kafka's
        dn.replaceAll(pattern, replacement)."""
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out

    def __str__(self) -> str:  # Kafka's Rule.toString
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}" + (f"/{self.case}" if self.case else "")


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self._rules: list[_Rule] = []
        text = rules.strip()  # Kafka: no rules at all (then no certificate maps to a name)
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
            pos = m.end()
            if m.group(8) or m.group(7):
                raise ConfigError(f"ssl.principal.mapping.rules: invalid rule {m.group(1)!r}")
            if m.group(1) == "DEFAULT":
                self._rules.append(_Rule(None))
            elif m.group(2) is not None:
                pattern = m.group(2)  # as Java, "\\/" in a pattern is a literal "/" (Python's re agrees)
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {exc}") from None
                self._rules.append(_Rule(compiled, m.group(4), m.group(6)))

    def name(self, distinguished_name: str) -> str:
        for rule in self._rules:
            out = rule.apply(distinguished_name)
            if out is not None:
                return out
        raise ValueError(f"No rule applies to {distinguished_name}")

    def __str__(self) -> str:  # Kafka's SslPrincipalMapper.toString
        return f"SslPrincipalMapper(rules = [{', '.join(str(r) for r in self._rules)}])"


def certificate_principal(der: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal | None:
    """The principal of a client certificate (User:<mapped subject DN>); None without one."""
    if not der:
        return None
    from cryptography import x509  # only TLS listeners with client certificates need it

    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()  # like Java's X500Principal.getName()
    return KafkaPrincipal("User", mapper.name(subject))
