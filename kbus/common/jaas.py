"""The JAAS property Kafka uses for SASL (`sasl.jaas.config`, `listener.name.<l>.<mech>.sasl.jaas.config`):
`<LoginModule class> <flag> key="value" ... ;`. Only the first login module counts, as in Kafka's JaasContext
for a broker listener."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbus.common.broker_config import ConfigError

_TOKEN = re.compile(r'\s*(?:"((?:\\.|[^"\\])*)"|([^\s=;"]+)|(=)|(;))')


@dataclass(frozen=True)
class JaasModule:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse(text: str, key: str = "sasl.jaas.config") -> JaasModule:
    """The first login module of `text`. An error says where (character position, the option before) and what was
    expected, never what is there: the text holds passwords."""
    tokens: list[tuple[str, str, int]] = []  # (kind, value, position): kind in w(ord) s(tring) = ;
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ConfigError(f"{key}: cannot parse the JAAS configuration at character {pos + 1}"
                              " (an unterminated quote?)")
        start = m.end() - len(m.group(0).lstrip())
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("s", re.sub(r"\\(.)", r"\1", m.group(1)), start))
        elif m.group(2) is not None:
            tokens.append(("w", m.group(2), start))
        elif m.group(3):
            tokens.append(("=", "=", start))
        else:
            tokens.append((";", ";", start))
    if len(tokens) < 2 or tokens[0][0] != "w" or tokens[1][0] != "w":
        raise ConfigError(f"{key}: expected '<LoginModule> <required|requisite|sufficient|optional> key=\"value\" ;'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise ConfigError(f"{key}: invalid control flag at character {tokens[1][2] + 1}"
                          " (expected required, requisite, sufficient or optional)")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        name, eq, value = (tokens[i + k] if i + k < len(tokens) else ("", "", len(text)) for k in range(3))
        if name[0] != "w" or eq[0] != "=" or value[0] not in ("w", "s"):
            after = f" after option {list(options)[-1]!r}" if options else ""
            raise ConfigError(f'{key}: expected key="value" at character {name[2] + 1}{after}')
        options[name[1]] = value[1]
        i += 3
    if i >= len(tokens):
        raise ConfigError(f"{key}: the JAAS configuration must end with ';'")
    return JaasModule(module, flag, options)
