"""Exceptions from the managers -> Kafka error codes, in one place."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kbus.common.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbus.server.partition.partition import Partition

log = logging.getLogger("kbus.server.apis")

def error_code_for(exc: BaseException) -> ErrorCode:
    """Every kbus error is a KafkaError carrying its code; anything else is a bug, logged with its traceback."""
    if isinstance(exc, KafkaError):
        if exc.error_code == ErrorCode.unknown_server_error:
            log.warning("Unexpected error: %s: %s", type(exc).__name__, exc)
        return exc.error_code
    log.exception("Unexpected error", exc_info=exc)
    return ErrorCode.unknown_server_error


def error_message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def leader_epoch_error(part: Partition, current_leader_epoch: int) -> ErrorCode | None:
    """KIP-320: a client that knows a newer epoch than ours (UNKNOWN_LEADER_EPOCH) or an older one
    (FENCED_LEADER_EPOCH) must refresh its metadata. -1 means the client does not say; for Fetch any negative
    value does (FetchRequest.optionalEpoch: the Fetch handler asks Partition.leader_epoch_error, the rule's home,
    only for a non-negative one), while
    ListOffsets and OffsetForLeaderEpoch compare any other value, so -2^31 is FENCED_LEADER_EPOCH there, as in Kafka."""
    return part.leader_epoch_error(current_leader_epoch)
