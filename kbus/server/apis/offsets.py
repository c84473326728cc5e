"""ListOffsets (2) and DeleteRecords (21)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.delete_records.v2 import response as dr
from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import response as lo
from kio.schema.list_offsets.v7.request import ListOffsetsRequest

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.kio_types import NO_TIME, i32_, i64_
from kbus.server.apis.errors import error_code_for, leader_epoch_error
from kbus.server.apis.registry import RequestContext, api

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

# Kafka's KafkaApis.timestampMinSupportedVersion: the negative (special) timestamps ListOffsets knows, each from
# its version on (latest, earliest; max-timestamp v7; earliest-local v8; latest-tiered v9); any other negative
# timestamp, or one the request's version predates, is UNSUPPORTED_VERSION
_SPECIAL_TIMESTAMP_VERSION = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}

@api(2, 1, 7, request=ListOffsetsRequest)
async def list_offsets(m: Managers, ctx: RequestContext, request: ListOffsetsRequest) -> lo.ListOffsetsResponse:
    topics: list[lo.ListOffsetsTopicResponse] = []
    read_committed = request.isolation_level == 1  # v1 has none: 0, read_uncommitted
    for t in request.topics:
        parts: list[lo.ListOffsetsPartitionResponse] = []
        for p in t.partitions:
            offset, timestamp, epoch = -1, -1, -1
            part, error = m.replicas.leader_partition(t.name, p.partition_index)
            if not ctx.authorized(Operation.DESCRIBE, ResourceType.TOPIC, t.name):
                code = ErrorCode.topic_authorization_failed
            elif p.timestamp < 0 and _SPECIAL_TIMESTAMP_VERSION.get(p.timestamp, 2**15) > ctx.api_version:
                code = ErrorCode.unsupported_version
            elif part is None:
                code = error
            elif (err := leader_epoch_error(part, p.current_leader_epoch)) is not None:
                code = err
            else:
                try:
                    offset, timestamp = part.offset_for_timestamp(p.timestamp, read_committed)
                    code, epoch = ErrorCode.none, part.leader_epoch
                except Exception as exc:
                    code = error_code_for(exc)
            parts.append(lo.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                                         timestamp=i64_(timestamp), offset=i64_(offset),
                                                         leader_epoch=i32_(epoch)))
        topics.append(lo.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return lo.ListOffsetsResponse(throttle_time=NO_TIME, topics=tuple(topics))


@api(21, 0, 2, request=DeleteRecordsRequest)
async def delete_records(m: Managers, ctx: RequestContext, request: DeleteRecordsRequest) -> dr.DeleteRecordsResponse:
    topics: list[dr.DeleteRecordsTopicResult] = []
    for t in request.topics:
        parts: list[dr.DeleteRecordsPartitionResult] = []
        for p in t.partitions:
            low_watermark = -1
            part, error = m.replicas.leader_partition(t.name, p.partition_index)
            if not ctx.authorized(Operation.DELETE, ResourceType.TOPIC, t.name):
                code = ErrorCode.topic_authorization_failed
            elif part is None:
                code = error
            else:
                offset = part.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > part.high_watermark:
                    code = ErrorCode.offset_out_of_range
                else:
                    try:
                        low_watermark = part.delete_records(offset)
                        code = ErrorCode.none
                    except Exception as exc:
                        code = error_code_for(exc)
            parts.append(dr.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                         low_watermark=i64_(low_watermark), error_code=code))
        topics.append(dr.DeleteRecordsTopicResult(name=t.name, partitions=tuple(parts)))
    return dr.DeleteRecordsResponse(throttle_time=NO_TIME, topics=tuple(topics))
