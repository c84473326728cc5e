"""ListOffsets (2) and DeleteRecords (21)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.request import ListOffsetsRequest

from kbus.common.acl import Operation, ResourceType
from kbus.server.apis.errors import error_code_for, leader_epoch_error
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

# Kafka's KafkaApis.timestampMinSupportedVersion: the negative (special) timestamps ListOffsets knows, each from
# its version on (latest, earliest; max-timestamp v7; earliest-local v8; latest-tiered v9); any other negative
# timestamp, or one the request's version predates, is UNSUPPORTED_VERSION
_SPECIAL_TIMESTAMP_VERSION = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}

@api(2, 1, 7, request=ListOffsetsRequest)
async def list_offsets(m: Managers, ctx: RequestContext, request: ListOffsetsRequest) -> Any:
    topics = []
    read_committed = request.isolation_level == 1  # v1 has none: 0, read_uncommitted
    for t in request.topics:
        parts = []
        for p in t.partitions:
            fields: dict[str, Any] = {
                "partition_index": p.partition_index,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            part, error = m.replicas.leader_partition(t.name, p.partition_index)
            if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.name):
                fields["error_code"] = ErrorCode.topic_authorization_failed
            elif p.timestamp < 0 and _SPECIAL_TIMESTAMP_VERSION.get(p.timestamp, 2**15) > ctx.api_version:
                fields["error_code"] = ErrorCode.unsupported_version
            elif part is None:
                fields["error_code"] = error
            elif (err := leader_epoch_error(part, p.current_leader_epoch)) is not None:
                fields["error_code"] = err
            else:
                try:
                    fields["offset"], fields["timestamp"] = part.offset_for_timestamp(p.timestamp, read_committed)
                    fields.update(error_code=ErrorCode.none, leader_epoch=part.leader_epoch)
                except Exception as exc:
                    fields["error_code"] = error_code_for(exc)
            parts.append(ctx.nested("ListOffsetsPartitionResponse", **fields))
        topics.append(ctx.nested("ListOffsetsTopicResponse", name=t.name, partitions=parts))
    return ctx.build(throttle_time=0, topics=topics)


@api(21, 0, 2, request=DeleteRecordsRequest)
async def delete_records(m: Managers, ctx: RequestContext, request: DeleteRecordsRequest) -> Any:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            fields: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1}
            part, error = m.replicas.leader_partition(t.name, p.partition_index)
            if not ctx.authorized(Operation.DELETE, ResourceType.TOPIC, t.name):
                fields["error_code"] = ErrorCode.topic_authorization_failed
            elif part is None:
                fields["error_code"] = error
            else:
                offset = part.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > part.high_watermark:
                    fields["error_code"] = ErrorCode.offset_out_of_range
                else:
                    try:
                        fields["low_watermark"] = part.delete_records(offset)
                        fields["error_code"] = ErrorCode.none
                    except Exception as exc:
                        fields["error_code"] = error_code_for(exc)
            parts.append(ctx.nested("DeleteRecordsPartitionResult", **fields))
        topics.append(ctx.nested("DeleteRecordsTopicResult", name=t.name, partitions=parts))
    return ctx.build(throttle_time=0, topics=topics)
