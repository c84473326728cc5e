"""Helpers every command shares: one-line errors, key=value and .properties parsing, and the bootstrap check
that makes an unreachable broker fail in seconds instead of hanging."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path
from typing import NoReturn

import typer
from typer.core import TyperCommand

# Kafka's ToolsUtils.validatePortOrDie accepts host:port pairs separated by commas; hosts may be bracketed IPv6.
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^\s:,\[\]]+):(\d{1,5})$")
CONNECT_TIMEOUT_S = 3.0


class UsageError(Exception):
    """A bad option value or combination, found after typer has parsed the command line."""


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one line on stderr and leave with a non-zero exit code."""
    print(message, file=sys.stderr, flush=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_key_values(items: list[str] | None, option: str) -> dict[str, str]:
    """`--property k=v` style lists -> dict; the value may itself contain '=' (split on the first one)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid {option} '{item}': expected key=value")
        out[key.strip()] = value
    return out


def _unescape_properties(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(escapes.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties' format: `#`/`!` comments, `key=value`, `key: value` or `key value`, backslash
    line continuations and escapes."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        if m is None:
            continue
        key = _unescape_properties(m.group(1))
        if key:
            props[key] = _unescape_properties(m.group(2))
    return props


def load_properties(path: str) -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"Cannot read properties file {path}: {exc.strerror or exc}") from None


def validate_bootstrap(bootstrap: str | None, option: str = "--bootstrap-server") -> list[tuple[str, int]]:
    if not bootstrap:
        raise UsageError(f"Missing required argument \"[{option.lstrip('-')}]\"")
    servers: list[tuple[str, int]] = []
    for part in bootstrap.split(","):
        m = _HOST_PORT.match(part.strip())
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise UsageError(
                f"Invalid {option} '{bootstrap}'. Please provide valid host:port like host1:9091,host2:9092"
            )
        servers.append((m.group(1).strip("[]"), int(m.group(2))))
    return servers


def check_reachable(bootstrap: str, option: str = "--bootstrap-server") -> None:
    """Fail fast with the OS's reason when no bootstrap server accepts a TCP connection; Kafka clients would
    instead retry quietly for a minute."""
    reasons: list[str] = []
    for host, port in validate_bootstrap(bootstrap, option):
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return
        except TimeoutError:
            reasons.append(f"{host}:{port}: timed out after {CONNECT_TIMEOUT_S:g} s")
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise ConnectionError(f"Could not connect to any broker ({'; '.join(reasons)})")


class KafkaStyleCommand(TyperCommand):
    """Options listed in `optional_values` may stand alone and then take the given value, as in Kafka's
    scripts (`--compression-codec` alone means gzip, `consumer-groups --list --state` means every state);
    click options otherwise always need a value. (Typographic dashes pasted from articles are fixed for every
    command in kbus.cli.main.)"""

    optional_values: dict[str, str] = {}

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, arg in enumerate(args):
            out.append(arg)
            if arg in self.optional_values and (i + 1 == len(args) or args[i + 1].startswith("--")):
                out.append(self.optional_values[arg])
        return super().parse_args(ctx, out)
