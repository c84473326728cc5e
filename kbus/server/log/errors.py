"""Errors raised by the log layer. Each carries the Kafka error code the broker answers with (KafkaError)."""

from __future__ import annotations

from kbus.common.errors import ErrorCode, KafkaError
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


class LogError(KafkaError):
    """Base of the log layer's errors."""


class OffsetOutOfRangeError(LogError):
    error_code = ErrorCode.offset_out_of_range


class RecordTooLargeError(LogError):
    """A batch is larger than max.message.bytes."""

    error_code = ErrorCode.message_too_large


class RecordBatchTooLargeError(LogError):
    """The appended records cannot fit in a segment (segment.bytes)."""

    error_code = ErrorCode.record_list_too_large


class OutOfOrderSequenceError(LogError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(LogError):
    error_code = ErrorCode.invalid_producer_epoch


class InvalidTimestampError(LogError):
    """A CreateTime timestamp further from the broker's clock than message.timestamp.difference.max.ms."""

    error_code = ErrorCode.invalid_timestamp


class KafkaStorageError(LogError):
    """A log directory or file cannot be used (I/O error, locked by another broker)."""

    error_code = ErrorCode.kafka_storage_error


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset is below the log end offset (a bug: UNKNOWN_SERVER_ERROR)."""


class InvalidTxnStateError(LogError):
    """A non-transactional write from a producer with an open transaction."""

    error_code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator older than the one that wrote the last marker."""

    error_code = ErrorCode.transaction_coordinator_fenced
