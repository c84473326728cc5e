"""Errors of the replicated write path; `error_name` is the Kafka error each maps to."""


class ReplicationError(Exception):
    error_name = "UNKNOWN_SERVER_ERROR"


class NotEnoughReplicasError(ReplicationError):
    error_name = "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(ReplicationError):
    error_name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class NotLeaderError(ReplicationError):
    error_name = "NOT_LEADER_OR_FOLLOWER"


class RequestTimedOutError(ReplicationError):
    error_name = "REQUEST_TIMED_OUT"
