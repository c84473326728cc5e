"""How kafka-topics matches --topic against topic names. (The name rules themselves are in kbus.common.topics.)"""

from __future__ import annotations

import re


def match_topics(pattern: str, names: list[str]) -> list[str]:
    """kafka-topics treats --topic as a regular expression matched against the whole name (except with
    --create), with ',' meaning '|' as in Kafka's IncludeList; a pattern that is not a valid regex is taken
    literally."""
    try:
        regex = re.compile(pattern.strip().replace(",", "|"))
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if regex.fullmatch(n)]
