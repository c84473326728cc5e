"""Kafka's error codes (kio's ErrorCode, generated from Kafka's own list) and the one exception base every kbus
layer raises: a `KafkaError` carries the `ErrorCode` a response answers with, so the API layer maps any of them
the same way (kbus.server.apis.errors). Errors that more than one layer raises live here; a layer's own ones
(log, replication, ZooKeeper) subclass KafkaError where they are raised."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidTopicError",
    "KafkaError",
    "NotControllerError",
    "PolicyViolationError",
    "TopicExistsError",
    "UnknownTopicError",
    "UsageError",
]


class KafkaError(Exception):
    """An error a Kafka client is told about by its code; the message goes out as the error message where the
    response has one. UNKNOWN_SERVER_ERROR (the base's code) is what Kafka answers for anything unexpected."""

    error_code: ErrorCode = ErrorCode.unknown_server_error  # per class; an instance may carry its own


class TopicExistsError(KafkaError):
    error_code = ErrorCode.topic_already_exists


class UnknownTopicError(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class InvalidTopicError(KafkaError):
    error_code = ErrorCode.invalid_topic_exception


class InvalidPartitionsError(KafkaError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


class InvalidReplicaAssignmentError(KafkaError):
    error_code = ErrorCode.invalid_replica_assignment


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.invalid_config


class InvalidRequestError(KafkaError):
    error_code = ErrorCode.invalid_request


class ThrottlingQuotaExceededError(KafkaError):
    """A strict controller_mutation_rate quota refused a topic or partition mutation (KIP-599)."""

    error_code = ErrorCode.throttling_quota_exceeded


class PolicyViolationError(KafkaError):
    error_code = ErrorCode.policy_violation


class NotControllerError(KafkaError):
    """A request only the controller answers (ElectLeaders, partition reassignments) reached another broker."""

    error_code = ErrorCode.not_controller


class UsageError(Exception):
    """A bad option or config value from the person running a tool or the broker, found after parsing: shown
    as one line naming what is wrong, exit non-zero, never a traceback."""
