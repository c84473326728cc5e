"""Kafka's topic-name rules (org.apache.kafka.common.internals.Topic), checked before any request so the tool
answers the same way whichever back end (broker or ZooKeeper) it talks to."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> str | None:
    """None when legal, else Kafka's InvalidTopicException message."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def has_collision_chars(name: str) -> bool:
    """'.' and '_' map to the same metric name, so Kafka warns about topics that use either."""
    return "." in name or "_" in name


def match_topics(pattern: str, names: list[str]) -> list[str]:
    """kafka-topics treats --topic as a regular expression matched against the whole name (except with
    --create), with ',' meaning '|' as in Kafka's IncludeList; a pattern that is not a valid regex is taken
    literally."""
    try:
        regex = re.compile(pattern.strip().replace(",", "|"))
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if regex.fullmatch(n)]
