"""Reading Java .properties files (zookeeper.properties is one), without any I/O policy beyond reading text."""

from __future__ import annotations

import re
from pathlib import Path

_KEY_VALUE = re.compile(r"((?:\\.|[^=:\s\\])+)\s*[=:\s]?\s*(.*)$")


def parse_properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties that config files use: `k=v`, `k: v`, `k v`, `#`/`!` comments,
    and backslash line continuation. Later keys win, as in Java."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        line = pending + line
        pending = ""
        # an odd number of trailing backslashes continues the logical line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        m = _KEY_VALUE.match(line)
        if m:
            props[m.group(1).replace("\\", "")] = m.group(2).rstrip()
    if pending:
        m = _KEY_VALUE.match(pending)
        if m:
            props[m.group(1)] = m.group(2).rstrip()
    return props


def read_properties(path: str | Path) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"))
