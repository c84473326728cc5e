"""Reading systemd unit files the way systemd does (enough of it for kbus's units): sections, `\\` continuation
lines, repeated keys, Environment= assignments and ExecStart= command lines with ${VAR} expansion."""

from __future__ import annotations

import re
import shlex


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        assert current is not None, f"key outside a section: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def environment(service: dict[str, list[str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in service.get("Environment", []):
        for assignment in shlex.split(value):
            k, _, v = assignment.partition("=")
            env[k] = v
    return env


def exec_start(service: dict[str, list[str]], env: dict[str, str]) -> list[str]:
    """ExecStart= as the argv systemd would run: `${VAR}` expands in place, `$VAR` splits into words."""
    (line,) = service["ExecStart"]
    line = line.lstrip("-@:+!")
    line = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), line)
    argv: list[str] = []
    for word in shlex.split(line):
        m = re.fullmatch(r"\$(\w+)", word)
        argv.extend(env.get(m.group(1), "").split() if m else [word])
    return argv
