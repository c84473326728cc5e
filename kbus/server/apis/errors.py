"""Exceptions from the managers -> Kafka error codes, in one place."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kbus.protocol.record_batch import CorruptRecordError, InvalidRecordError
from kbus.server.log import errors as log_errors
from kbus.server.metadata.errors import MetadataError
from kbus.server.replication.errors import ReplicationError

if TYPE_CHECKING:
    from kbus.server.partition import Partition

log = logging.getLogger("kbus.server.apis")

_BY_TYPE: list[tuple[type[BaseException], ErrorCode]] = [
    (CorruptRecordError, ErrorCode.corrupt_message),
    (InvalidRecordError, ErrorCode.invalid_record),
]


def error_code_for(exc: BaseException) -> ErrorCode:
    if isinstance(exc, MetadataError | ReplicationError):
        return ErrorCode[exc.error_name.lower()]
    if isinstance(exc, log_errors.LogError) and exc.error_code >= 0:
        return ErrorCode(exc.error_code)
    for typ, code in _BY_TYPE:
        if isinstance(exc, typ):
            return code
    log.exception("Unexpected error", exc_info=exc)
    return ErrorCode.unknown_server_error


def error_message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def leader_epoch_error(part: Partition, current_leader_epoch: int) -> ErrorCode | None:
    """KIP-320: a client that knows a newer epoch than ours (UNKNOWN_LEADER_EPOCH) or an older one
    (FENCED_LEADER_EPOCH) must refresh its metadata; -1 means the client does not say."""
    if current_leader_epoch < 0:
        return None
    if current_leader_epoch < part.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if current_leader_epoch > part.leader_epoch:
        return ErrorCode.unknown_leader_epoch
    return None
