"""How Kafka's tools match --topic/--include patterns against topic names (the name rules are in
kbus.common.topics)."""

from __future__ import annotations

import re


def include_list(pattern: str) -> re.Pattern[str]:
    """Kafka's IncludeList (--include, --topic in kafka-topics): a Java regular expression where ',' means '|'.
    re.error for a pattern that does not compile."""
    return re.compile(pattern.strip().replace(",", "|"))


def match_topics(pattern: str, names: list[str]) -> list[str]:
    """kafka-topics treats --topic as a regular expression matched against the whole name (except with
    --create), with ',' meaning '|' as in Kafka's IncludeList; a pattern that is not a valid regex is taken
    literally."""
    try:
        regex = include_list(pattern)
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if regex.fullmatch(n)]
