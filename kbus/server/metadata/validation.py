"""Kafka's topic-name rules (org.apache.kafka.common.internals.Topic)."""

import re

from kbus.server.metadata.errors import InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
