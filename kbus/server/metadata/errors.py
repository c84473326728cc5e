"""Errors raised by metadata stores (local or ZooKeeper); the API layer maps each to its Kafka error code."""


class MetadataError(Exception):
    """Base class; `error_name` is the Kafka error it maps to."""

    error_name = "UNKNOWN_SERVER_ERROR"


class TopicExistsError(MetadataError):
    error_name = "TOPIC_ALREADY_EXISTS"


class UnknownTopicError(MetadataError):
    error_name = "UNKNOWN_TOPIC_OR_PARTITION"


class InvalidTopicError(MetadataError):
    error_name = "INVALID_TOPIC_EXCEPTION"


class InvalidPartitionsError(MetadataError):
    error_name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(MetadataError):
    error_name = "INVALID_REPLICATION_FACTOR"


class InvalidConfigError(MetadataError):
    error_name = "INVALID_CONFIG"
