"""A JAAS login configuration file, the one `-Djava.security.auth.login.config=FILE` names (Java's ConfigFile):

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka"
        password="kafka-secret";
    };

Sections of login modules, each `<class> <flag> key=value ... ;`; `//` and `/* */` comments. Errors name the file
and line, never a value (values are passwords).
"""

from __future__ import annotations

import re
from pathlib import Path

from kbus.common.broker_config import ConfigError
from kbus.common.jaas import JaasModule

_TOKEN = re.compile(r'"((?:\\.|[^"\\])*)"|//[^\n]*|/\*.*?\*/|([{}=;])|([^\s{}=;"]+)|(\s+)', re.DOTALL)
_FLAGS = ("required", "requisite", "sufficient", "optional")


def parse_file(path: str) -> dict[str, list[JaasModule]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"java.security.auth.login.config: cannot read {path}: {exc}") from None
    return parse(text, path)


def parse(text: str, source: str = "JAAS file") -> dict[str, list[JaasModule]]:
    # (kind, value, line): kind "s" quoted string, "w" word, or the punctuation itself
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        line = text.count("\n", 0, pos) + 1
        if m is None:
            raise ConfigError(f"{source}, line {line}: cannot parse the JAAS configuration (unclosed quote?)")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("s", re.sub(r"\\(.)", r"\1", m.group(1)), line))
        elif m.group(2):
            tokens.append((m.group(2), m.group(2), line))
        elif m.group(3):
            tokens.append(("w", m.group(3), line))
    sections: dict[str, list[JaasModule]] = {}
    i = 0

    def expect(kind: str, what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind:
            line = tokens[i][2] if i < len(tokens) else text.count("\n") + 1
            raise ConfigError(f"{source}, line {line}: expected {what} in the JAAS configuration")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        name = expect("w", "a section name")
        expect("{", "'{'")
        modules: list[JaasModule] = []
        while i < len(tokens) and tokens[i][0] != "}":
            module = expect("w", "a login module class")
            flag = expect("w", "a control flag (required, requisite, sufficient, optional)").lower()
            if flag not in _FLAGS:
                raise ConfigError(f"{source}, line {tokens[i - 1][2]}: invalid control flag for {module}")
            options: dict[str, str] = {}
            while i < len(tokens) and tokens[i][0] == "w":
                key = expect("w", "an option name")
                expect("=", f"'=' after {key}")
                if i >= len(tokens) or tokens[i][0] not in ("w", "s"):
                    raise ConfigError(f"{source}, line {tokens[i - 1][2]}: expected a value for {key}")
                options[key] = tokens[i][1]
                i += 1
            expect(";", f"';' after the options of {module}")
            modules.append(JaasModule(module, flag, options))
        expect("}", "'}'")
        expect(";", f"';' after section {name}")
        sections[name] = modules
    return sections
