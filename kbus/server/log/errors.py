"""Errors raised by the log layer. Each carries the Kafka error code the broker should answer with."""

from __future__ import annotations

from kbus.protocol.record_batch import CorruptRecordError, InvalidRecordError

__all__ = [
    "CorruptRecordError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "LogError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    error_code = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    error_code = 1  # OFFSET_OUT_OF_RANGE


class RecordTooLargeError(LogError):
    """A batch is larger than max.message.bytes."""

    error_code = 10  # MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(LogError):
    """The appended records cannot fit in a segment (segment.bytes)."""

    error_code = 18  # RECORD_LIST_TOO_LARGE


class OutOfOrderSequenceError(LogError):
    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    error_code = 47  # INVALID_PRODUCER_EPOCH


class InvalidTimestampError(LogError):
    """A CreateTime timestamp further from the broker's clock than message.timestamp.difference.max.ms."""

    error_code = 32  # INVALID_TIMESTAMP


class KafkaStorageError(LogError):
    """A log directory or file cannot be used (I/O error, locked by another broker)."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset is below the log end offset."""

    error_code = -1


class InvalidTxnStateError(LogError):
    """A non-transactional write from a producer with an open transaction."""

    error_code = 48  # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator older than the one that wrote the last marker."""

    error_code = 52  # TRANSACTION_COORDINATOR_FENCED
