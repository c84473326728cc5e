"""Java .properties files as java.util.Properties.load reads them (Kafka reads server.properties, client configs
and ZooKeeper reads zookeeper.properties that way): the one parser every kbus component uses.

Rules kept from Java: `#`/`!` comment lines; `key=value`, `key:value` or `key value` (one separator, whitespace
around it dropped); a line ending in an odd number of backslashes continues on the next, whose leading whitespace
is dropped; escapes `\\t \\n \\r \\f \\uXXXX` and `\\x` for any other x (so `\\=`, `\\:`, `\\ `, `\\\\`
are literal); the last of repeated keys wins; trailing whitespace of a value is kept (Kafka's ConfigDef trims where
it parses). Files are read as UTF-8, not Java's ISO-8859-1 (both agree on ASCII)."""

from __future__ import annotations

import re
from pathlib import Path

_WHITESPACE = " \t\f"
_SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


class PropertiesError(ValueError):
    """Text java.util.Properties refuses too (a malformed \\uXXXX escape)."""


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read and parse a file; OSError and PropertiesError go to the caller, which names the file."""
    return parse_properties(Path(path).read_text(encoding="utf-8"))


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None
    for natural in _NATURAL_LINE.split(text):
        line = natural.lstrip(_WHITESPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        lines.append((pending or "") + line)
        pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _split(line: str) -> tuple[str, str]:
    """Key and value of a logical line, both still escaped."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in _SEPARATORS or ch in _WHITESPACE:
            break
        i += 1
    key_end = min(i, n)
    while i < n and line[i] in _WHITESPACE:
        i += 1
    if i < n and line[i] in _SEPARATORS:
        i += 1
        while i < n and line[i] in _WHITESPACE:
            i += 1
    return line[:key_end], line[i:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch != "\\":
            out.append(ch)
            continue
        if i == n:
            break  # a lone backslash at the very end of the file: Java drops it
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i : i + 4]
            if not _HEX4.fullmatch(digits):
                raise PropertiesError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    joined = "".join(out)
    try:
        # \uD83D\uDE00 is one character written as a UTF-16 surrogate pair, as in Java
        return joined.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        return joined  # a lone surrogate stays as Java keeps it
