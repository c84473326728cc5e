"""Fetch (1): long-poll that wakes as soon as data arrives; record bytes come straight from the segment files
(on plaintext connections with sendfile, never copied through Python: kbus.protocol.splice)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.fetch_request_decode import FetchRequest
from kbus.protocol.fetch_response import EncodedBody, PartitionEntry, encode_fetch_response
from kbus.protocol.splice import FileRegion
from kbus.server.apis.errors import error_code_for
from kbus.server.apis.registry import RequestContext, api
from kbus.server.apis.throttling import request_quota_throttle
from kbus.server.quotas.manager import ClientQuotaManager, now_ms, sanitized
from kbus.server.replication.fetch_session import FetchContext, FetchSessionError
from kbus.server.util.metrics import METRICS

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.log.log import FetchData
    from kbus.server.partition.partition import Partition


# Record sets smaller than this are copied: one pread costs what one sendfile does, and small fetches (the
# latency path) then keep the transport's single write.
ZERO_COPY_MIN_BYTES = 16384


def _records(ctx: RequestContext, read: FetchData) -> tuple[bytes, int, int]:
    """The partition's `records` field, the bytes it stands for and how many messages they hold.

    The count is the offsets the batches span (FetchData.offset_count), not a header read per batch: a log of
    one-record batches (producers with linger.ms=0) would otherwise cost a pread per record on every fetch.
    It differs from the records sent only where compaction removed records from the batches."""
    if read.size <= 0:
        return b"", 0, 0
    if ctx.splicer is None or read.size < ZERO_COPY_MIN_BYTES:
        data = read.to_bytes()
        return data, len(data), read.offset_count
    return ctx.splicer.placeholder(FileRegion(read.fd, read.position, read.size)), read.size, read.offset_count


def _collect(
    m: Managers, ctx: RequestContext, request: FetchRequest, replica_id: int, fctx: FetchContext, quota_bytes: float,
    first_pass: bool,
) -> tuple[list[tuple[str, list[PartitionEntry]]], int, list[Partition], dict[str, tuple[int, int]], int]:
    """One pass over the requested partitions: (per-topic partition entries, bytes gathered, partitions to wait
    on, bytes and messages per topic, bytes of leader-throttled partitions). `quota_bytes`: the most a
    consumer_byte_rate quota lets one fetch carry (Kafka's getMaxValueInQuotaWindow). A follower's positions
    are its progress report on the `first_pass` only: the passes after a parked fetch wakes repeat them."""
    read_committed = replica_id < 0 and request.isolation_level == 1
    remaining = max(request.max_bytes, 0)
    if quota_bytes < remaining:
        remaining = int(quota_bytes)
    total = throttled = 0
    leader_throttling = replica_id >= 0 and m.replicas.leader_throttling  # once per pass: nothing per partition
    waits: list[Partition] = []
    topics_out: list[tuple[str, list[PartitionEntry]]] = []
    sent: dict[str, tuple[int, int]] = {}
    for topic, partitions in fctx.topics():
        parts_out: list[PartitionEntry] = []
        allowed = (
            ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
            if replica_id >= 0
            else ctx.authorized(Operation.READ, ResourceType.TOPIC, topic)
        )
        for fp in partitions:
            # Kafka sends empty records for an error partition (librdkafka rejects a null record set)
            entry: PartitionEntry
            part, error = m.replicas.leader_partition(topic, fp.partition)
            if not allowed:
                entry = PartitionEntry(fp.partition, ErrorCode.topic_authorization_failed)
            elif part is None:
                entry = PartitionEntry(fp.partition, error)
            # KIP-320 (Partition.leader_epoch_error, a direct call from here): any negative epoch is unset
            # (FetchRequest.optionalEpoch), a set one must be the partition's
            elif (epoch := fp.current_leader_epoch) >= 0 and (err := part.leader_epoch_error(epoch)) is not None:
                entry = PartitionEntry(fp.partition, err)
            elif (
                fctx.incremental
                and fp.fetch_offset
                == (
                    part.log_end_offset
                    if replica_id >= 0
                    else part.last_stable_offset
                    if read_committed
                    else part.high_watermark
                )
                and fctx.unchanged(
                    topic, fp.partition, part.high_watermark, part.last_stable_offset, part.log_start_offset
                )
            ):
                # a caught-up consumer's or follower's partition with nothing new: left out without reading or
                # encoding it (with 1,000 partitions and data on a few, this is most of them); a follower's
                # position still counts as its progress report
                if replica_id >= 0 and first_pass:
                    m.replicas.follower_fetched(part, replica_id, fp.fetch_offset)
                waits.append(part)
                continue
            elif replica_id < 0 and not read_committed and fp.fetch_offset == (hw := part.high_watermark):
                # a consumer at the high watermark, where its read ends (ReplicaManager.read would find nothing
                # and read no file): the offsets alone, without a read result per partition (a caught-up
                # consumer's full fetch of 1,000 partitions is all this)
                entry = PartitionEntry(fp.partition, ErrorCode.none, hw, part.last_stable_offset, part.log_start_offset)
                waits.append(part)
            else:
                try:
                    read = m.replicas.read(
                        part,
                        fp.fetch_offset,
                        min(fp.partition_max_bytes, remaining),
                        replica_id=replica_id,
                        read_committed=read_committed,
                        min_one_batch=total == 0,
                        report_progress=first_pass,
                    )
                except Exception as exc:
                    entry = PartitionEntry(
                        fp.partition, error_code_for(exc), part.high_watermark, part.last_stable_offset,
                        part.log_start_offset,
                    )  # fmt: skip
                else:
                    data, size, count = _records(ctx, read.records)
                    aborted = read.aborted_transactions
                    entry = PartitionEntry(
                        fp.partition, ErrorCode.none, read.high_watermark, read.last_stable_offset,
                        read.log_start_offset,
                        None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted],
                        data,
                    )  # fmt: skip
                    total += size
                    if leader_throttling and size and m.replicas.leader_throttled(topic, fp.partition):
                        throttled += size  # Kafka's sizeOfThrottledPartitions, recorded once the response is done
                    remaining = max(remaining - size, 0)
                    if size:
                        nbytes, nmsgs = sent.get(topic, (0, 0))
                        sent[topic] = (nbytes + size, nmsgs + count)
                    waits.append(part)  # any healthy partition's next append may bring min_bytes closer
            if fctx.include(
                topic,
                fp.partition,
                error=entry.error_code,
                has_records=bool(entry.records),
                high_watermark=entry.high_watermark,
                last_stable_offset=entry.last_stable_offset,
                log_start_offset=entry.log_start_offset,
            ):
                parts_out.append(entry)
        if parts_out:
            topics_out.append((topic, parts_out))
    return topics_out, total, waits, sent, throttled


@api(1, 4, 12)
async def fetch(m: Managers, ctx: RequestContext, request: FetchRequest) -> EncodedBody:
    replica_id = request.replica_id
    max_wait = request.max_wait  # milliseconds (fetch_request_decode)
    deadline = time.monotonic() + max_wait / 1000
    min_bytes = request.min_bytes if max_wait > 0 else 0  # Kafka: max_wait <= 0 answers at once
    fctx = m.fetch_sessions.new_context(
        request.session_id,
        request.session_epoch,
        [(ft.topic, ft.partitions) for ft in request.topics],
        [(f.topic, f.partitions) for f in request.forgotten_topics_data],
        time.monotonic(),
        privileged=replica_id >= 0,
    )
    if isinstance(fctx, FetchSessionError):
        return encode_fetch_response(ctx.api_version, [], error_code=fctx.error_code, session_id=0)
    if fctx.incremental:
        METRICS.inc("kbus_incremental_fetches_total")
    # consumer_byte_rate: a follower's fetch is exempt (replication has its own quotas)
    ctx.quota_exempt = replica_id >= 0
    quota = m.quotas.fetch if replica_id < 0 and m.quotas.fetch.enabled else None
    quota_bytes = float("inf")
    if quota is not None:
        quota_bytes = quota.max_value_in_window(sanitized(ctx.principal.name), sanitized(ctx.client_id), now_ms())
    first_pass = True
    while True:
        if ctx.splicer is not None:
            ctx.splicer.regions.clear()  # a pass that waits again is thrown away with its placeholders
        fctx.reset_pass()
        topics_out, total, waits, sent, throttled = _collect(m, ctx, request, replica_id, fctx, quota_bytes, first_pass)
        first_pass = False
        timeout = deadline - time.monotonic()
        if total >= min_bytes or timeout <= 0 or not waits or m.replicas.stopping:
            break
        # Park on every empty partition; the first append to any of them (a follower's) or the first high-watermark
        # advance (a consumer's: it reads no further), or the deadline, ends the wait. The deadline is a timer on
        # the same future, not asyncio.wait_for (a second future, a callback hop before this coroutine resumes, and
        # a cancellation round at the deadline): an append resumes the parked follower fetch one step sooner.
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        for part in waits:
            part.add_waiter(fut, log_end=replica_id >= 0)
        parked = time.perf_counter()
        timer = loop.call_later(timeout, _end_wait, fut)
        try:
            await fut
        finally:
            timer.cancel()
            ctx.parked_s += time.perf_counter() - parked
            for part in waits:
                part.remove_waiter(fut)
    if quota is not None or m.quotas.request.enabled:
        throttled_response = _throttle(m, ctx, quota, fctx, total)
        if throttled_response is not None:
            return throttled_response
    fctx.commit()
    if throttled:
        m.replicas.record_leader_replication(throttled)
    if replica_id < 0:
        for topic, (nbytes, nmsgs) in sent.items():
            key = (("topic", topic),)  # labels_key(topic=topic), without its keyword dict and sort
            METRICS.inc_key("kbus_bytes_out_total", key, nbytes)
            METRICS.inc_key("kbus_messages_out_total", key, nmsgs)
    return encode_fetch_response(ctx.api_version, topics_out, session_id=fctx.session_id)


def _end_wait(fut: asyncio.Future[None]) -> None:
    """A parked fetch's max_wait_ms is up: it answers with what it has."""
    if not fut.done():
        fut.set_result(None)


def _throttle(
    m: Managers, ctx: RequestContext, quota: ClientQuotaManager | None, fctx: FetchContext, total: int
) -> EncodedBody | None:
    """Kafka's quota step of handleFetchRequest: record the bytes (consumer_byte_rate) and the request time
    (request_percentage); over either, the fetch is answered with no data and the larger throttle time, its
    bytes taken back from the sensor. The session learns nothing from it, so the next fetch reads the same
    offsets again. None: not throttled."""
    byte_throttle = 0
    if quota is not None:
        byte_throttle = quota.record_and_throttle(ctx.principal.name, ctx.client_id, total)
    throttle = max(byte_throttle, request_quota_throttle(m, ctx))
    if throttle <= 0:
        return None
    if quota is not None:
        quota.unrecord(sanitized(ctx.principal.name), sanitized(ctx.client_id), total, now_ms())
    ctx.throttle_time_ms = throttle
    if ctx.splicer is not None:
        ctx.splicer.regions.clear()
    if not fctx.incremental and fctx.session_id:
        m.fetch_sessions.discard(fctx.session_id)  # created for this fetch: the client starts it again
    session_id = fctx.session_id if fctx.incremental else 0
    return encode_fetch_response(ctx.api_version, [], throttle_time_ms=throttle, session_id=session_id)
