"""Fetch (1): long-poll that wakes as soon as data arrives; record bytes come straight from the segment files."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kbus.protocol.codec import ms
from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.apis.errors import error_code_for, leader_epoch_error
from kbus.server.apis.registry import RequestContext, api
from kbus.server.metrics import METRICS

if TYPE_CHECKING:
    from kbus.server.broker import Broker


def _collect(broker: Broker, ctx: RequestContext, request: Any, replica_id: int) -> tuple[list[Any], int, list[Any]]:
    """One pass over the requested partitions: (per-topic responses, bytes gathered, partitions to wait on)."""
    read_committed = replica_id < 0 and getattr(request, "isolation_level", 0) == 1
    remaining = max(request.max_bytes if ctx.api_version >= 3 else 2**31 - 1, 0)
    total = 0
    waits = []
    topics_out = []
    for ft in request.topics:
        parts_out = []
        for fp in ft.partitions:
            part, error = broker.leader_partition(ft.topic, fp.partition)
            fields: dict[str, Any] = {
                "partition_index": fp.partition,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": b"",  # Kafka sends empty records for an error partition; librdkafka rejects a null
            }
            if part is None:
                fields["error_code"] = error
            elif (err := leader_epoch_error(part, getattr(fp, "current_leader_epoch", -1))) is not None:
                fields["error_code"] = err
            else:
                if replica_id >= 0:
                    broker.follower_fetched(part, replica_id, fp.fetch_offset)
                hw = part.high_watermark
                lso = part.last_stable_offset
                # read_committed consumers stop at the LSO; followers read to the log end
                max_offset = part.log.log_end_offset if replica_id >= 0 else lso if read_committed else hw
                fields.update(high_watermark=hw, last_stable_offset=lso, log_start_offset=part.log.log_start_offset)
                try:
                    if fp.fetch_offset >= max_offset and fp.fetch_offset <= part.log.log_end_offset:
                        data = b""
                    else:
                        limit = min(fp.partition_max_bytes, remaining)
                        read = part.log.read(fp.fetch_offset, limit, max_offset=max_offset, min_one_batch=total == 0)
                        data = read.to_bytes()
                except Exception as exc:
                    fields["error_code"] = error_code_for(exc)
                else:
                    fields["error_code"] = ErrorCode.none
                    fields["records"] = data
                    if read_committed:
                        fields["aborted_transactions"] = [
                            ctx.nested("AbortedTransaction", producer_id=a.producer_id, first_offset=a.first_offset)
                            for a in part.log.collect_aborted_txns(fp.fetch_offset, max_offset)
                        ]
                    total += len(data)
                    remaining = max(remaining - len(data), 0)
                    waits.append(part)  # any healthy partition's next append may bring min_bytes closer
            parts_out.append(ctx.nested("PartitionData", **fields))
        topics_out.append(ctx.nested("FetchableTopicResponse", topic=ft.topic, partitions=parts_out))
    return topics_out, total, waits


@api(1, 4, 12)
async def fetch(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    replica_id = getattr(request, "replica_id", -1)
    deadline = time.monotonic() + ms(request.max_wait) / 1000
    min_bytes = request.min_bytes if ms(request.max_wait) > 0 else 0  # Kafka: min_bytes <= 0 answers at once
    while True:
        topics_out, total, waits = _collect(broker, ctx, request, replica_id)
        timeout = deadline - time.monotonic()
        if total >= min_bytes or timeout <= 0 or not waits or broker.stopping:
            break
        # Park on every empty partition; the first append to any of them (or the deadline) ends the wait.
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for part in waits:
            part.add_waiter(fut)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, timeout)
        finally:
            for part in waits:
                part.remove_waiter(fut)
    if replica_id < 0:
        _count_out(topics_out)
    return ctx.build(throttle_time=0, error_code=ErrorCode.none, session_id=0, responses=topics_out)


def _count_out(topics_out: list[Any]) -> None:
    """Messages/bytes out per topic: one header read per batch (not per message) on what is being sent."""
    for t in topics_out:
        nbytes = nmsgs = 0
        for p in t.partitions:
            if p.records:
                nbytes += len(p.records)
                nmsgs += sum(h.records_count for h in iter_complete_batches(p.records))
        if nbytes:
            METRICS.inc("kbus_bytes_out_total", nbytes, topic=t.topic)
            METRICS.inc("kbus_messages_out_total", nmsgs, topic=t.topic)
