"""Fetch (1): long-poll that wakes as soon as data arrives; record bytes come straight from the segment files
(on plaintext connections with sendfile, never copied through Python: kbus.protocol.splice)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final

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
from kbus.server.replication.replica_manager import ReplicaManager
from kbus.server.util.metrics import METRICS

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.log.log import FetchData
    from kbus.server.partition.partition import Partition


# Record sets smaller than this are copied: one pread costs what one sendfile does, and small fetches (the
# latency path) then keep the transport's single write.
ZERO_COPY_MIN_BYTES = 16384

# read per partition or per request: Final, so compiled code holds them in C statics (any other module global is a
# dict lookup, an enum member a class attribute lookup, at every use)
_NONE: Final = ErrorCode.none
_TOPIC_AUTHORIZATION_FAILED: Final = ErrorCode.topic_authorization_failed
_READ: Final = Operation.READ
_TOPIC: Final = ResourceType.TOPIC
_CLUSTER_ACTION: Final = Operation.CLUSTER_ACTION
_CLUSTER: Final = ResourceType.CLUSTER
_UNLIMITED: Final = float("inf")  # no consumer_byte_rate quota: no bound on a fetch's bytes from it
# the two kbus_*_out_total series dicts (Metrics never replaces one once made), written by _count_out
_BYTES_OUT: Final = METRICS.counters["kbus_bytes_out_total"]
_MESSAGES_OUT: Final = METRICS.counters["kbus_messages_out_total"]


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
) -> tuple[list[tuple[str, list[PartitionEntry]]], int, list[Partition], list[tuple[Partition, int, int]], int]:
    """One pass over the requested partitions: (per-topic partition entries, bytes gathered, partitions to wait
    on, (partition, bytes, messages) of each partition with records, bytes of leader-throttled partitions).
    `quota_bytes`: the most a consumer_byte_rate quota lets one fetch carry (Kafka's getMaxValueInQuotaWindow). A
    follower's positions are its progress report on the `first_pass` only: the passes after a parked fetch wakes
    repeat them."""
    read_committed = replica_id < 0 and request.isolation_level == 1
    remaining = max(request.max_bytes, 0)
    if quota_bytes < remaining:
        remaining = int(quota_bytes)
    total = throttled = 0
    replicas = m.replicas
    # the broker's own replica manager, compiled: its methods are called directly (C calls with the arguments
    # matched at compile time), not through the Replicas protocol (a Python-level call per partition; tests' fakes
    # still go that way)
    native = replicas if isinstance(replicas, ReplicaManager) else None
    leader_throttling = replica_id >= 0 and replicas.leader_throttling  # once per pass: nothing per partition
    # a sessionless fetch (librdkafka's, every one) answers every partition: include() is not asked
    in_session = fctx.session is not None
    incremental = fctx.incremental
    waits: list[Partition] = []
    topics_out: list[tuple[str, list[PartitionEntry]]] = []
    sent: list[tuple[Partition, int, int]] = []
    for topic, partitions in fctx.topics():
        parts_out: list[PartitionEntry] = []
        allowed = ctx.authorized(_CLUSTER_ACTION, _CLUSTER) if replica_id >= 0 else ctx.authorized(_READ, _TOPIC, topic)
        for fp in partitions:
            # Kafka sends empty records for an error partition (librdkafka rejects a null record set)
            entry: PartitionEntry
            index = fp.partition
            if native is not None:
                part, error = native.leader_partition(topic, index)
            else:
                part, error = replicas.leader_partition(topic, index)
            if not allowed:
                entry = PartitionEntry(index, _TOPIC_AUTHORIZATION_FAILED)
            elif part is None:
                entry = PartitionEntry(index, error)
            # KIP-320 (Partition.leader_epoch_error, a direct call from here): any negative epoch is unset
            # (FetchRequest.optionalEpoch), a set one must be the partition's
            elif (epoch := fp.current_leader_epoch) >= 0 and (err := part.leader_epoch_error(epoch)) is not None:
                entry = PartitionEntry(index, err)
            elif (
                incremental
                and fp.fetch_offset
                == (
                    part.log_end_offset
                    if replica_id >= 0
                    else part.last_stable_offset
                    if read_committed
                    else part.high_watermark
                )
                and fctx.unchanged(topic, index, part.high_watermark, part.last_stable_offset, part.log_start_offset)
            ):
                # a caught-up consumer's or follower's partition with nothing new: left out without reading or
                # encoding it (with 1,000 partitions and data on a few, this is most of them); a follower's
                # position still counts as its progress report
                if replica_id >= 0 and first_pass:
                    replicas.follower_fetched(part, replica_id, fp.fetch_offset)
                waits.append(part)
                continue
            elif replica_id < 0 and not read_committed and fp.fetch_offset == (hw := part.high_watermark):
                # a consumer at the high watermark, where its read ends (ReplicaManager.read would find nothing
                # and read no file): the offsets alone, without a read result per partition (a caught-up
                # consumer's full fetch of 1,000 partitions is all this)
                entry = PartitionEntry(index, _NONE, hw, part.last_stable_offset, part.log_start_offset)
                waits.append(part)
            else:
                max_bytes = min(fp.partition_max_bytes, remaining)
                try:
                    if native is not None:
                        read = native.read(part, fp.fetch_offset, max_bytes, replica_id=replica_id,
                                           read_committed=read_committed, min_one_batch=total == 0,
                                           report_progress=first_pass)  # fmt: skip
                    else:
                        read = replicas.read(part, fp.fetch_offset, max_bytes, replica_id=replica_id,
                                             read_committed=read_committed, min_one_batch=total == 0,
                                             report_progress=first_pass)  # fmt: skip
                except Exception as exc:
                    entry = PartitionEntry(
                        index, error_code_for(exc), part.high_watermark, part.last_stable_offset,
                        part.log_start_offset,
                    )  # fmt: skip
                else:
                    data, size, count = _records(ctx, read.records)
                    aborted = read.aborted_transactions
                    entry = PartitionEntry(
                        index, _NONE, read.high_watermark, read.last_stable_offset, read.log_start_offset,
                        None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted],
                        data,
                    )  # fmt: skip
                    total += size
                    if leader_throttling and size and replicas.leader_throttled(topic, index):
                        throttled += size  # Kafka's sizeOfThrottledPartitions, recorded once the response is done
                    remaining = max(remaining - size, 0)
                    if size:
                        sent.append((part, size, count))
                    waits.append(part)  # any healthy partition's next append may bring min_bytes closer
            if not in_session or fctx.include(
                topic,
                index,
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
    now = time.monotonic()
    deadline = now + max_wait / 1000
    min_bytes = request.min_bytes if max_wait > 0 else 0  # Kafka: max_wait <= 0 answers at once
    fctx = m.fetch_sessions.new_context(
        request.session_id,
        request.session_epoch,
        [(ft.topic, ft.partitions) for ft in request.topics],
        [(f.topic, f.partitions) for f in request.forgotten_topics_data],
        now,
        privileged=replica_id >= 0,
    )
    if isinstance(fctx, FetchSessionError):
        return encode_fetch_response(ctx.api_version, [], error_code=fctx.error_code, session_id=0)
    if fctx.incremental:
        METRICS.inc("kbus_incremental_fetches_total")
    # consumer_byte_rate: a follower's fetch is exempt (replication has its own quotas)
    ctx.quota_exempt = replica_id >= 0
    quotas = m.quotas  # interpreted objects: each attribute read is a dictionary lookup, so each is read once
    fetch_quota = quotas.fetch
    quota = fetch_quota if replica_id < 0 and fetch_quota.enabled else None
    quota_bytes = _UNLIMITED
    if quota is not None:
        quota_bytes = quota.max_value_in_window(sanitized(ctx.principal.name), sanitized(ctx.client_id), now_ms())
    first_pass = True
    while True:
        if ctx.splicer is not None:
            ctx.splicer.regions.clear()  # a pass that waits again is thrown away with its placeholders
        fctx.reset_pass()
        topics_out, total, waits, sent, throttled = _collect(m, ctx, request, replica_id, fctx, quota_bytes, first_pass)
        first_pass = False
        if total >= min_bytes or not waits:  # the clock is read only for a fetch that may wait
            break
        timeout = deadline - time.monotonic()
        if timeout <= 0 or m.replicas.stopping:
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
    if quota is not None or quotas.request.enabled:
        throttled_response = _throttle(m, ctx, quota, fctx, total)
        if throttled_response is not None:
            return throttled_response
    fctx.commit()
    if throttled:
        m.replicas.record_leader_replication(throttled)
    if replica_id < 0 and sent:
        _count_out(sent)
    return encode_fetch_response(ctx.api_version, topics_out, session_id=fctx.session_id)


def _count_out(sent: list[tuple[Partition, int, int]]) -> None:
    """kbus_bytes_out_total and kbus_messages_out_total of a consumer's Fetch, by topic: here in compiled code, into
    the two series dicts (Metrics never replaces them), under each partition's label key made once
    (Partition.topic_labels), not two interpreted Metrics.inc_key calls and a new key per topic and Fetch."""
    bytes_out, messages_out = _BYTES_OUT, _MESSAGES_OUT
    for part, nbytes, nmsgs in sent:
        key = part.topic_labels
        bytes_out[key] = bytes_out.get(key, 0.0) + nbytes
        messages_out[key] = messages_out.get(key, 0.0) + nmsgs


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
