"""The one exception the admin layer raises, carrying Kafka's error name so callers can branch on it."""

from __future__ import annotations


class AdminError(Exception):
    """An admin operation failed; `message` is fit to show a user as is, `name` is Kafka's error name
    (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, ...) or a librdkafka local one (_TIMED_OUT, ...)."""

    def __init__(self, message: str, name: str = "UNKNOWN_SERVER_ERROR") -> None:
        super().__init__(message)
        self.message = message
        self.name = name

    def __str__(self) -> str:
        return self.message
