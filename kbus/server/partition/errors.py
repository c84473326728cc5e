"""Errors of the replicated write path, each with the Kafka error code it maps to."""

from kbus.common.errors import ErrorCode, KafkaError


class ReplicationError(KafkaError):
    """Base of the replicated write path's errors."""


class NotEnoughReplicasError(ReplicationError):
    error_code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppendError(ReplicationError):
    error_code = ErrorCode.not_enough_replicas_after_append


class NotLeaderError(ReplicationError):
    error_code = ErrorCode.not_leader_or_follower


class RequestTimedOutError(ReplicationError):
    error_code = ErrorCode.request_timed_out
