"""Produce (0): batches go to the log as bytes; only their headers are read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.protocol.codec import ms
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import RequestContext, api
from kbus.server.metrics import METRICS

if TYPE_CHECKING:
    from kbus.server.broker import Broker


def _partition_error(broker: Broker, topic: str, index: int) -> ErrorCode:
    """Why this broker cannot take writes for topic-index."""
    t = broker.metadata.topics().get(topic)
    if t is None or index not in t.partitions:
        return ErrorCode.unknown_topic_or_partition
    return ErrorCode.not_leader_or_follower


@api(0, 3, 9)
async def produce(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
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
            part = broker.get_partition(name, pd.index)
            if acks not in (0, 1, -1):
                fields["error_code"] = ErrorCode.invalid_required_acks
            elif part is None or not part.is_leader:
                fields["error_code"] = _partition_error(broker, name, pd.index)
            elif not pd.records:
                fields["error_code"] = ErrorCode.corrupt_message
            else:
                try:
                    result = await broker.append_records(part, pd.records, acks, ms(request.timeout))
                except Exception as exc:
                    fields["error_code"] = error_code_for(exc)
                    fields["error_message"] = error_message(exc)
                else:
                    if not result.duplicate:
                        METRICS.inc("kbus_messages_in_total", result.num_records, topic=name)
                        METRICS.inc("kbus_bytes_in_total", result.size_bytes, topic=name)
                    fields.update(
                        error_code=ErrorCode.none,
                        base_offset=result.first_offset,
                        log_append_time=result.log_append_time_ms,
                        log_start_offset=result.log_start_offset,
                    )
            parts.append(ctx.nested("PartitionProduceResponse", **fields))
        responses.append(ctx.nested("TopicProduceResponse", name=name, partition_responses=parts))
    if acks == 0:
        return None
    return ctx.build(responses=responses, throttle_time=0)
