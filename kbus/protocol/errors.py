"""Errors of the sans-I/O protocol layer."""

from __future__ import annotations

from kbus.common.errors import ErrorCode, KafkaError


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid Kafka request: the connection must be closed."""


# The record-batch errors live here, not in kbus.protocol.record_batch: that module is compiled by mypyc (setup.py),
# which drops a class-level `error_code` override in an exception subclass of an interpreted class (every such error
# answered UNKNOWN_SERVER_ERROR). tests/unit/test_produce_validation.py checks their codes.
class CorruptRecordError(KafkaError, ValueError):
    """Not a well-formed batch: truncated, bad length or CRC mismatch (Kafka CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError, ValueError):
    """The batch is well-formed but not acceptable, e.g. magic != 2 (Kafka INVALID_RECORD)."""

    error_code = ErrorCode.invalid_record
