"""ShareFetch (78) and ShareAcknowledge (79) of KIP-932, answered by the partitions' leader: the share session
(`share.manager`), acknowledgements piggy-backed on ShareFetch or sent alone, then records acquired for the member
under acquisition locks (`share.partition`). One log read per partition per request; the acquired offsets go back
as ranges (AcquiredRecords), the records as the log's own batches.

ACLs as Kafka's KafkaApis: READ on the group, READ on each topic.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode as E
from kio.schema.share_acknowledge.v2 import response as sa
from kio.schema.share_acknowledge.v2.request import AcknowledgementBatch as AcknowledgeRequestBatch
from kio.schema.share_acknowledge.v2.request import ShareAcknowledgeRequest
from kio.schema.share_fetch.v2 import response as sf
from kio.schema.share_fetch.v2.request import AcknowledgementBatch, ShareFetchRequest
from kio.static.primitive import i32Timedelta

from kbus.common.acl import Operation, ResourceType
from kbus.protocol.codec import ms
from kbus.protocol.kio_types import NO_TIME, broker, i16_, i32_, i64_, ms32, records
from kbus.protocol.record_batch import iter_complete_batches
from kbus.server.apis.registry import RequestContext, api
from kbus.server.share.manager import PersisterError, SessionError, SharePartitionManager
from kbus.server.share.partition import AckType, Acquired, InvalidRecordState, SharePartition

if TYPE_CHECKING:
    from kbus.protocol.record_batch import BatchHeader
    from kbus.server.apis.managers import Managers
    from kbus.server.log.txn_index import AbortedTxn
    from kbus.server.partition.partition import Partition

log = logging.getLogger("kbus.share")
RENEW = int(AckType.RENEW)
TopicPartition = tuple[str, int]
# what one partition's answer carries: error, acknowledge error, records, acquired ranges
_Answer = tuple[int, int, bytes, list[Acquired]]


def _names_by_id(m: Managers) -> Mapping[uuid.UUID, str]:
    if m.groups is not None:
        return m.groups.topic_image.names_by_id
    return {t.topic_id: name for name, t in m.cluster.topics().items()}


def _ids_by_name(m: Managers) -> Mapping[str, uuid.UUID]:
    if m.groups is not None:
        return m.groups.topic_image.ids
    return {name: t.topic_id for name, t in m.cluster.topics().items()}


async def _acknowledge(m: Managers, share: SharePartitionManager, group_id: str, member_id: str, topic: str,
                       partition: int, batches: Iterable[AcknowledgementBatch | AcknowledgeRequestBatch], *,
                       renew: bool) -> int:
    """`renew`: RENEW (4) is allowed (v2 with IsRenewAck, KIP-1222); before v2 it is not an acknowledge type."""
    batches = list(batches)
    if not renew and any(RENEW in b.acknowledge_types for b in batches):
        return int(E.invalid_request)
    part, error = m.replicas.leader_partition(topic, partition)
    if part is None:
        return int(error)
    topic_id = _ids_by_name(m).get(topic)
    if topic_id is None:
        return int(E.unknown_topic_or_partition)
    try:
        sp = await share.load(group_id, topic, topic_id, partition, part.leader_epoch, part.log_start_offset,
                              part.high_watermark)
    except PersisterError as exc:
        return exc.code
    now = share.now()
    sp.expire_locks(now)
    code = int(E.none)
    try:
        for b in batches:
            sp.acknowledge(member_id, b.first_offset, b.last_offset, tuple(int(t) for t in b.acknowledge_types), now)
    except InvalidRecordState:
        code = int(E.invalid_record_state)
    try:
        await share.persist(sp)  # answered only once durable: an ACCEPT survives the leader's failover
    except PersisterError as exc:
        return exc.code
    return code


def _aborted_batches(headers: list[BatchHeader], aborted: list[AbortedTxn]) -> list[tuple[int, int]]:
    """The offset ranges of the data batches that belong to an aborted transaction: a transactional batch of the
    transaction's producer between its first offset and its abort marker (what a read_committed consumer drops
    with the Fetch's AbortedTransactions list)."""
    out = []
    for h in headers:
        if h.is_transactional and not h.is_control and any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset for a in aborted):
            out.append((h.base_offset, h.last_offset))
    return out


async def _acquire(m: Managers, share: SharePartitionManager, group_id: str, member_id: str, part: Partition,
                   topic: str, partition: int, max_records: int, max_bytes: int, *,
                   batch_optimized: bool) -> tuple[bytes, list[Acquired]]:
    topic_id = _ids_by_name(m).get(topic)
    if topic_id is None:
        return b"", []
    sp: SharePartition = await share.load(group_id, topic, topic_id, partition, part.leader_epoch,
                                          part.log_start_offset, part.high_watermark)
    now = share.now()
    expired = sp.expire_locks(now)
    if sp.start_offset < part.log_start_offset:
        sp.skip_to(part.log_start_offset)
    first = sp.first_available()
    start = sp.next_offset if first is None else first
    data, acquired = b"", []
    # share.isolation.level=read_committed: nothing past the last stable offset is acquired
    bound = part.last_stable_offset if sp.read_committed else part.high_watermark
    if not (sp.in_flight() >= sp.max_in_flight and first is None) and start < bound:
        read = m.replicas.read(part, start, max_bytes, read_committed=sp.read_committed, min_one_batch=True)
        raw = read.records.to_bytes()
        headers = list(iter_complete_batches(raw))
        if headers:
            data_first = max(headers[0].base_offset, start)
            data_last = min(headers[-1].last_offset, bound - 1)
            if batch_optimized:
                # ShareAcquireMode 0 (KIP-1206, the default): MaxRecords is rounded up to the end of the batch it
                # falls in, so no batch is split; record-limit (1) stops at MaxRecords exactly
                limit = start + max_records - 1
                end = next((h.last_offset for h in headers if h.last_offset >= limit), headers[-1].last_offset)
                max_records = max(max_records, end - start + 1)
            acquired = sp.acquire(member_id, data_first, data_last, max_records, now)
            if acquired and read.aborted_transactions:
                acquired = sp.archive_acquired(acquired, _aborted_batches(headers, read.aborted_transactions))
            if acquired:
                # only the batches holding acquired records go back
                lo, hi = acquired[0].first, acquired[-1].last
                keep = [h for h in headers if h.last_offset >= lo and h.base_offset <= hi]
                data = raw[keep[0].position: keep[-1].position + keep[-1].size]
    if acquired or expired:
        try:
            await share.persist(sp)  # delivery counts are durable before the records go out
        except PersisterError as exc:
            if exc.code in (E.fenced_state_epoch, E.fenced_leader_epoch):
                return b"", []  # the state was reset or moved on: nothing stale goes out, the next fetch reloads
            log.warning("Could not write the state of share-partition %s-%d of group %s", topic, partition, group_id)
    return data, acquired


@api(78, 1, 2, request=ShareFetchRequest)
async def share_fetch(m: Managers, ctx: RequestContext, req: ShareFetchRequest) -> sf.ShareFetchResponse:
    share = m.share
    lock_timeout = ms32(share.config.lock_duration_ms)

    def top_error(code: int, message: str | None = None) -> sf.ShareFetchResponse:
        return sf.ShareFetchResponse(throttle_time=NO_TIME, error_code=E(code), error_message=message,
                                     acquisition_lock_timeout=lock_timeout, responses=(), node_endpoints=())

    group_id, member_id = req.group_id or "", req.member_id or ""
    if not group_id or not member_id:
        return top_error(E.invalid_request, "GroupId and MemberId are required.")
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, group_id):
        return top_error(E.group_authorization_failed)
    names = _names_by_id(m)
    requested: list[TopicPartition] = []
    acks: dict[TopicPartition, tuple[AcknowledgementBatch, ...]] = {}
    unknown: list[tuple[uuid.UUID | None, int]] = []  # kio reads the zero topic id as None: never known
    for t in req.topics:
        name = None if t.topic_id is None else names.get(t.topic_id)
        for p in t.partitions:
            if name is None:
                unknown.append((t.topic_id, p.partition_index))
                continue
            requested.append((name, p.partition_index))
            if p.acknowledgement_batches:
                acks[(name, p.partition_index)] = p.acknowledgement_batches
    forget = {(names[f.topic_id], int(p)) for f in req.forgotten_topics_data
              if f.topic_id is not None and f.topic_id in names for p in f.partitions}
    try:
        session = share.session(group_id, member_id, req.share_session_epoch, set(requested), forget,
                                acknowledging=bool(acks), connection_id=ctx.connection_id)
    except SessionError as exc:
        return top_error(exc.code, exc.message)

    renew = ctx.api_version >= 2 and bool(req.is_renew_ack)
    answers: dict[TopicPartition, _Answer] = {}
    for (topic, partition), batches in acks.items():
        allowed = ctx.authorized(Operation.READ, ResourceType.TOPIC, topic)
        code = await _acknowledge(m, share, group_id, member_id, topic, partition, batches,
                                  renew=renew) if allowed else int(E.topic_authorization_failed)
        answers[(topic, partition)] = (0, code, b"", [])
    if renew and session is not None:
        # KIP-1222: a fetch carrying renew acknowledgements acquires nothing, it only extends the locks
        return _fetch_response(ctx, m, answers, unknown, lock_timeout)
    if session is None:  # the final request: acknowledgements only, then the session and its locks go
        share.close_session(group_id, member_id)
        return _fetch_response(ctx, m, answers, unknown, lock_timeout)

    fetching = sorted(session.partitions)
    deadline = time.monotonic() + ms(req.max_wait) / 1000
    max_records = req.max_records if req.max_records > 0 else 500
    batch_optimized = ctx.api_version < 2 or req.share_acquire_mode == 0
    while True:
        got_records = False
        remaining = max(req.max_bytes, 1)
        waits: list[Partition] = []
        for topic, partition in fetching:
            prior = answers.get((topic, partition), (0, 0, b"", []))
            if not ctx.authorized(Operation.READ, ResourceType.TOPIC, topic):
                answers[(topic, partition)] = (int(E.topic_authorization_failed), prior[1], b"", [])
                continue
            part, error = m.replicas.leader_partition(topic, partition)
            if part is None:
                answers[(topic, partition)] = (int(error), prior[1], b"", [])
                continue
            waits.append(part)
            if got_records and remaining <= 0:
                continue
            try:
                data, acquired = await _acquire(m, share, group_id, member_id, part, topic, partition, max_records,
                                                remaining, batch_optimized=batch_optimized)
            except PersisterError as exc:
                answers[(topic, partition)] = (exc.code, prior[1], b"", [])
                continue
            except Exception:
                log.exception("ShareFetch of %s-%d for group %s failed", topic, partition, group_id)
                answers[(topic, partition)] = (int(E.unknown_server_error), prior[1], b"", [])
                continue
            if acquired:
                got_records = True
                remaining -= len(data)
                max_records = max(max_records - sum(a.last - a.first + 1 for a in acquired), 1)
            answers[(topic, partition)] = (0, prior[1], data, acquired)
        timeout = deadline - time.monotonic()
        if got_records or acks or timeout <= 0 or not waits or m.replicas.stopping:
            break
        # nothing to give: wait for new records (the high watermark) or the earliest lock to expire
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for part in waits:
            part.add_waiter(fut, log_end=False)
        lock_deadlines = [d for (g, _, _), sp in share.partitions.items() if g == group_id
                          if (d := sp.earliest_deadline()) is not None]
        if lock_deadlines:
            timeout = min(timeout, max(min(lock_deadlines) - share.now(), 0.01))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for part in waits:
                part.remove_waiter(fut)
    if req.share_session_epoch != 0:
        # an incremental answer names only the partitions with something to say
        answers = {tp: a for tp, a in answers.items() if a[0] or a[1] or a[3] or tp in acks}
    else:
        for tp in fetching:
            answers.setdefault(tp, (0, 0, b"", []))
    return _fetch_response(ctx, m, answers, unknown, lock_timeout)


def _fetch_response(ctx: RequestContext, m: Managers, answers: dict[TopicPartition, _Answer],
                    unknown: list[tuple[uuid.UUID | None, int]], lock_timeout: i32Timedelta,
                    ) -> sf.ShareFetchResponse:  # fmt: skip
    ids = _ids_by_name(m)
    by_topic: dict[uuid.UUID | None, list[sf.PartitionData]] = {}
    for (topic, partition), (error, ack_error, data, acquired) in sorted(answers.items()):
        by_topic.setdefault(ids.get(topic, uuid.UUID(int=0)), []).append(_partition_data(
            m, topic, partition, error, ack_error, data, acquired))
    for topic_id, partition in unknown:
        by_topic.setdefault(topic_id, []).append(_partition_data(
            m, "", partition, int(E.unknown_topic_id), 0, b"", []))
    return sf.ShareFetchResponse(
        throttle_time=NO_TIME, error_code=E.none, error_message=None, acquisition_lock_timeout=lock_timeout,
        responses=tuple(sf.ShareFetchableTopicResponse(topic_id=tid, partitions=tuple(parts))
                        for tid, parts in by_topic.items()),
        node_endpoints=tuple(
            sf.NodeEndpoint(node_id=broker(node), host=host, port=i32_(port), rack=rack)
            for node, host, port, rack in _node_endpoints(ctx, m, _moved(((tp, a[0]) for tp, a in answers.items()), m))
        ),
    )


def _leader(m: Managers, topic: str, partition: int) -> tuple[int, int]:
    """The partition's current leader and its epoch as this broker knows them (a NOT_LEADER_OR_FOLLOWER answer tells
    the client where to go, with the leader's endpoint in NodeEndpoints); -1, -1 when unknown."""
    part = m.replicas.leader_partition(topic, partition)[0] if topic else None
    if part is not None:
        return m.broker_id, part.leader_epoch
    t = m.cluster.topic(topic) if topic else None
    state = t.partitions.get(partition) if t is not None else None
    if state is None:
        return -1, -1
    return state.leader, state.leader_epoch


def _node_endpoints(ctx: RequestContext, m: Managers, leaders: Iterable[int]) -> list[tuple[int, str, int, str | None]]:
    """(node id, host, port, rack) of each leader on the request's listener."""
    out = []
    for broker_id in sorted(set(leaders)):
        info = next((b for b in m.cluster.brokers() if b.broker_id == broker_id), None)
        endpoint = None if info is None else info.endpoint(ctx.listener.name)
        if info is not None and endpoint is not None:
            out.append((broker_id, endpoint.host, endpoint.port, info.rack))
    return out


def _moved(answers: Iterable[tuple[TopicPartition, int]], m: Managers) -> list[int]:
    """The leaders of the partitions answered NOT_LEADER_OR_FOLLOWER."""
    out = []
    for (topic, partition), error in answers:
        if error == E.not_leader_or_follower:
            t = m.cluster.topic(topic)
            state = t.partitions.get(partition) if t is not None else None
            if state is not None and state.leader >= 0:
                out.append(state.leader)
    return out


def _partition_data(m: Managers, topic: str, partition: int, error: int, ack_error: int,
                    data: bytes, acquired: list[Acquired]) -> sf.PartitionData:
    leader, epoch = _leader(m, topic, partition)
    return sf.PartitionData(
        partition_index=i32_(partition),
        error_code=E(error),
        error_message=None,
        acknowledge_error_code=i16_(ack_error),
        acknowledge_error_message=None,
        current_leader=sf.LeaderIdAndEpoch(leader_id=i32_(leader), leader_epoch=i32_(epoch)),
        records=records(data),
        acquired_records=tuple(sf.AcquiredRecords(first_offset=i64_(a.first), last_offset=i64_(a.last),
                                                  delivery_count=i16_(a.delivery_count)) for a in acquired),
    )


@api(79, 1, 2, request=ShareAcknowledgeRequest)
async def share_acknowledge(
    m: Managers, ctx: RequestContext, req: ShareAcknowledgeRequest
) -> sa.ShareAcknowledgeResponse:
    share = m.share

    lock_timeout = ms32(share.config.lock_duration_ms)  # v2's AcquisitionLockTimeoutMs

    def top_error(code: int, message: str | None = None) -> sa.ShareAcknowledgeResponse:
        return sa.ShareAcknowledgeResponse(throttle_time=NO_TIME, error_code=E(code), error_message=message,
                                           responses=(), node_endpoints=(), acquisition_lock_timeout=lock_timeout)

    group_id, member_id = req.group_id or "", req.member_id or ""
    if not group_id or not member_id:
        return top_error(E.invalid_request, "GroupId and MemberId are required.")
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, group_id):
        return top_error(E.group_authorization_failed)
    if req.share_session_epoch == 0:
        return top_error(E.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session.")
    try:
        session = share.session(group_id, member_id, req.share_session_epoch, set(), set(), acknowledging=True)
    except SessionError as exc:
        return top_error(exc.code, exc.message)
    names = _names_by_id(m)
    by_topic: list[sa.ShareAcknowledgeTopicResponse] = []
    codes: list[tuple[TopicPartition, int]] = []
    for t in req.topics:
        name = None if t.topic_id is None else names.get(t.topic_id)
        parts: list[sa.PartitionData] = []
        for p in t.partitions:
            if name is None:
                code = int(E.unknown_topic_id)
            elif not ctx.authorized(Operation.READ, ResourceType.TOPIC, name):
                code = int(E.topic_authorization_failed)
            else:
                code = await _acknowledge(m, share, group_id, member_id, name, p.partition_index,
                                          p.acknowledgement_batches,
                                          renew=ctx.api_version >= 2 and bool(req.is_renew_ack))
            if name is not None:
                codes.append(((name, p.partition_index), code))
            leader, epoch = _leader(m, name or "", p.partition_index)
            parts.append(sa.PartitionData(
                partition_index=p.partition_index, error_code=E(code), error_message=None,
                current_leader=sa.LeaderIdAndEpoch(leader_id=i32_(leader), leader_epoch=i32_(epoch))))
        by_topic.append(sa.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=tuple(parts)))
    if session is None:
        share.close_session(group_id, member_id)
    return sa.ShareAcknowledgeResponse(
        throttle_time=NO_TIME, error_code=E.none, error_message=None, responses=tuple(by_topic),
        node_endpoints=tuple(sa.NodeEndpoint(node_id=broker(node), host=host, port=i32_(port), rack=rack)
                             for node, host, port, rack in _node_endpoints(ctx, m, _moved(codes, m))),
        acquisition_lock_timeout=lock_timeout)
