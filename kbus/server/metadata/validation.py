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
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def validate_topic_configs(configs: dict[str, str | None]) -> None:
    """Unknown names and bad values are INVALID_CONFIG, as in Kafka (LogConfig knows every TopicConfig name).
    A None value (a deletion) only needs a known name."""
    from kbus.server.log.config import TOPIC_CONFIG_NAMES, LogConfig
    from kbus.server.metadata.errors import InvalidConfigError

    for key in configs:
        if key not in TOPIC_CONFIG_NAMES:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
    try:
        LogConfig.from_properties({k: v for k, v in configs.items() if v is not None})
    except ValueError as exc:
        raise InvalidConfigError(str(exc)) from None
