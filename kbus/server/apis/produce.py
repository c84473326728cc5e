"""Produce (0): each partition's batch is validated as Kafka's LogValidator does (kbus.protocol.validation: one
compiled pass over its records), then goes to the log as bytes."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.common.topics import is_internal
from kbus.protocol.codec import ms
from kbus.protocol.validation import RecordValidationError, ValidationPolicy, validate_produce
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import RequestContext, api
from kbus.server.metrics import METRICS

if TYPE_CHECKING:
    from kbus.common.topic_config import LogConfig
    from kbus.server.apis.managers import Managers
    from kbus.server.log.log import AppendResult
    from kbus.server.partition import Partition


@api(0, 3, 9, pipelined=True)
async def produce(m: Managers, ctx: RequestContext, request: Any) -> Any:
    """Every partition is appended before anything is awaited: with pipelined requests (network.py) that keeps
    appends in the order requests arrived; the acks=all waits then run together."""
    acks = request.acks
    timeout_ms = ms(request.timeout)
    appended: list[tuple[dict[str, Any], Partition, AppendResult, str]] = []
    responses = []
    for topic_data in request.topic_data:
        name = topic_data.name
        parts = []
        for pd in topic_data.partition_data:
            fields: dict[str, Any] = {
                "index": pd.index,
                "base_offset": -1,
                "log_append_time": -1,
                "log_start_offset": -1,
                "record_errors": (),
            }
            parts.append(fields)
            part, error = m.replicas.leader_partition(name, pd.index)
            if acks not in (0, 1, -1):
                fields["error_code"] = ErrorCode.invalid_required_acks
            elif not ctx.authorized(Operation.WRITE, ResourceType.TOPIC, name):
                fields["error_code"] = ErrorCode.topic_authorization_failed
            elif part is None:
                fields["error_code"] = error
            elif is_internal(name):  # only the broker writes __consumer_offsets, as in Kafka
                fields.update(
                    error_code=ErrorCode.invalid_topic_exception,
                    error_message=f"Cannot append to internal topic {name}",
                )
            elif not pd.records:
                fields["error_code"] = ErrorCode.corrupt_message
            else:
                try:
                    records = validate_produce(pd.records, _policy(name, pd.index, part.config),
                                               int(time.time() * 1000), ctx.api_version)
                    result = m.replicas.append_records(part, records, acks)
                except RecordValidationError as exc:
                    fields.update(
                        error_code=exc.error_code,
                        error_message=str(exc),
                        record_errors=[
                            ctx.nested("BatchIndexAndErrorMessage", batch_index=e.batch_index,
                                       batch_index_error_message=e.message)
                            for e in exc.record_errors
                        ],
                    )
                except Exception as exc:
                    fields.update(error_code=error_code_for(exc), error_message=error_message(exc))
                else:
                    appended.append((fields, part, result, name))
        responses.append((name, parts))
    if appended:
        outcomes = await asyncio.gather(
            *(m.replicas.wait_for_acks(part, result, acks, timeout_ms) for _, part, result, _ in appended),
            return_exceptions=True,
        )
        for (fields, _, result, name), outcome in zip(appended, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                fields.update(error_code=error_code_for(outcome), error_message=error_message(outcome))
                continue
            if not result.duplicate:
                METRICS.inc("kbus_messages_in_total", result.num_records, topic=name)
                METRICS.inc("kbus_bytes_in_total", result.size_bytes, topic=name)
            fields.update(
                error_code=ErrorCode.none,
                base_offset=result.first_offset,
                log_append_time=result.log_append_time_ms,
                log_start_offset=result.log_start_offset,
            )
    if acks == 0:
        return None
    return ctx.build(
        responses=[
            ctx.nested(
                "TopicProduceResponse",
                name=name,
                partition_responses=[ctx.nested("PartitionProduceResponse", **f) for f in parts],
            )
            for name, parts in responses
        ],
        throttle_time=0,
    )


def _policy(topic: str, index: int, config: LogConfig) -> ValidationPolicy:
    before, after = ValidationPolicy.timestamp_bounds(
        config.message_timestamp_difference_max_ms, config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
    )
    return ValidationPolicy(
        f"{topic}-{index}", compacted=config.compact_enabled, log_append_time=config.log_append_time,
        timestamp_before_max_ms=before, timestamp_after_max_ms=after,
    )
