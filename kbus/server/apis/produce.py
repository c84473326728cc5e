"""Produce (0): each partition's batch is validated as Kafka's LogValidator does (kbus.protocol.validation: one
compiled pass over its records), then goes to the log as bytes; the response is encoded by hand
(kbus.protocol.produce_response), as it is paid once per request."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.common.topics import is_internal
from kbus.protocol.codec import ms
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.produce_response import PartitionProduceResult, encode_produce_response
from kbus.protocol.validation import RecordValidationError, ValidationPolicy, validate_produce
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import RequestContext, api
from kbus.server.apis.throttling import request_quota_throttle
from kbus.server.metrics import METRICS, labels_key

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.log.log import AppendResult
    from kbus.server.partition import Partition


@api(0, 3, 9, pipelined=True)
async def produce(m: Managers, ctx: RequestContext, request: Any) -> EncodedBody | None:
    """Every partition is appended before anything is awaited: with pipelined requests (network.py) that keeps
    appends in the order requests arrived; the acks=all waits then run together."""
    acks = request.acks
    timeout_ms = ms(request.timeout)
    appended: list[tuple[_Outcome, Partition, AppendResult, str]] = []
    responses: list[tuple[str, list[_Outcome]]] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        parts: list[_Outcome] = []
        for pd in topic_data.partition_data:
            out = _Outcome(pd.index)
            parts.append(out)
            part, error = m.replicas.leader_partition(name, pd.index)
            if acks not in (0, 1, -1):
                out.error_code = ErrorCode.invalid_required_acks
            elif not ctx.authorized(Operation.WRITE, ResourceType.TOPIC, name):
                out.error_code = ErrorCode.topic_authorization_failed
            elif part is None:
                out.error_code = error
            elif is_internal(name):  # only the broker writes __consumer_offsets, as in Kafka
                out.error_code = ErrorCode.invalid_topic_exception
                out.error_message = f"Cannot append to internal topic {name}"
            elif not pd.records:
                out.error_code = ErrorCode.corrupt_message
            else:
                try:
                    records = validate_produce(pd.records, _policy(part), int(time.time() * 1000),
                                               ctx.api_version)
                    result = m.replicas.append_records(part, records, acks)
                except RecordValidationError as exc:
                    out.error_code = exc.error_code
                    out.error_message = str(exc)
                    out.record_errors = [(e.batch_index, e.message) for e in exc.record_errors]
                except Exception as exc:
                    out.error_code = error_code_for(exc)
                    out.error_message = error_message(exc)
                else:
                    appended.append((out, part, result, name))
        responses.append((name, parts))
    if appended:
        parked = time.perf_counter()
        outcomes: list[BaseException | None]
        if len(appended) == 1:  # one partition (nearly every request): its wait directly, no task and no gather
            _, one_part, one_result, _ = appended[0]
            try:
                await m.replicas.wait_for_acks(one_part, one_result, acks, timeout_ms)
                outcomes = [None]
            except Exception as exc:
                outcomes = [exc]
        else:
            outcomes = await asyncio.gather(
                *(m.replicas.wait_for_acks(part, result, acks, timeout_ms) for _, part, result, _ in appended),
                return_exceptions=True,
            )
        for (out, _, result, name), outcome in zip(appended, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                out.failed(outcome)
            else:
                out.appended(result, name)
        ctx.parked_s += time.perf_counter() - parked
    quotas = m.quotas
    if quotas.produce.enabled:
        # Kafka records the whole request's size once the appends are answered; the throttle goes in the
        # response and the network mutes the connection for it (for acks=0 too, with no response)
        ctx.throttle_time_ms = quotas.produce.record_and_throttle(ctx.principal.name, ctx.client_id, ctx.size)
    if quotas.request.enabled:
        ctx.throttle_time_ms = max(ctx.throttle_time_ms, request_quota_throttle(m, ctx))
    if acks == 0:
        return None
    return encode_produce_response(
        ctx.api_version, [(name, [o.result() for o in parts]) for name, parts in responses],
        throttle_time_ms=ctx.throttle_time_ms,
    )


class _Outcome:
    """One partition's answer while the request is under way."""

    __slots__ = (
        "base_offset",
        "error_code",
        "error_message",
        "index",
        "log_append_time_ms",
        "log_start_offset",
        "record_errors",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.error_code = ErrorCode.none
        self.error_message: str | None = None
        self.record_errors: list[tuple[int, str | None]] = []
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.log_start_offset = -1

    def failed(self, exc: BaseException) -> None:
        self.error_code = error_code_for(exc)
        self.error_message = error_message(exc)

    def appended(self, result: AppendResult, topic: str) -> None:
        if not result.duplicate:
            key = labels_key(topic=topic)
            METRICS.inc_key("kbus_messages_in_total", key, result.num_records)
            METRICS.inc_key("kbus_bytes_in_total", key, result.size_bytes)
        self.error_code = ErrorCode.none
        self.base_offset = result.first_offset
        self.log_append_time_ms = result.log_append_time_ms
        self.log_start_offset = result.log_start_offset

    def result(self) -> PartitionProduceResult:
        return PartitionProduceResult(
            self.index, self.error_code, self.base_offset, self.log_append_time_ms, self.log_start_offset,
            self.record_errors, self.error_message,
        )  # fmt: skip


def _policy(part: Partition) -> ValidationPolicy:
    """The partition's validation policy, rebuilt only when its LogConfig object changes (a config change
    replaces it), not per request."""
    config = part.config
    cached = part.validation_policy
    if cached is not None and cached[0] is config:
        return cached[1]
    before, after = ValidationPolicy.timestamp_bounds(
        config.message_timestamp_difference_max_ms, config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
    )
    policy = ValidationPolicy(
        f"{part.topic}-{part.index}", compacted=config.compact_enabled, log_append_time=config.log_append_time,
        timestamp_before_max_ms=before, timestamp_after_max_ms=after,
    )
    part.validation_policy = (config, policy)
    return policy
