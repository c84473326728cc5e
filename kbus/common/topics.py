"""Kafka's topic-name rules and internal topics (org.apache.kafka.common.internals.Topic), for the broker and for
the tools that check a name before sending it."""

from __future__ import annotations

import re
from typing import Final

from kbus.common.errors import InvalidTopicError, PolicyViolationError

MAX_NAME_LENGTH = 249
# Kafka's controller (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH): one CreateTopics or CreatePartitions
# request may not add more partitions than this; without it one request for 2^31-1 partitions wedges the broker
MAX_PARTITIONS_PER_REQUEST = 10_000
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # the share coordinator's (KIP-932)
INTERNAL_TOPICS: Final = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str | None) -> str | None:
    """None when `name` is legal, else Kafka's InvalidTopicException message."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def validate_topic_name(name: str | None) -> None:
    message = topic_name_error(name)
    if message is not None:
        raise InvalidTopicError(message)


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def has_collision_chars(name: str) -> bool:
    """'.' and '_' map to the same metric name, so Kafka warns about topics that use either."""
    return "." in name or "_" in name


def collision_key(name: str) -> str:
    """Names with equal keys collide (they differ only in '.' vs '_'); Kafka refuses the second one."""
    return name.replace(".", "_")


def check_partitions_per_request(total: int) -> None:
    """PolicyViolationError (every topic of the request fails) past Kafka's per-request partition limit."""
    if total > MAX_PARTITIONS_PER_REQUEST:
        raise PolicyViolationError("Excessively large number of partitions per request.")
