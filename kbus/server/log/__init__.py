"""Kafka's log layer: segments (.log/.index/.timeindex), partition logs and the log manager."""

from kbus.common.topic_config import LogConfig
from kbus.server.log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kbus.server.log.log import AppendResult, FetchData, Log
from kbus.server.log.manager import LogManager

__all__ = [
    "AppendResult",
    "CorruptRecordError",
    "FetchData",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "Log",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]
