"""Produce (0): each partition's batch is validated as Kafka's LogValidator does (kbus.protocol.validation: one
compiled pass over its records), then goes to the log as bytes; the response is encoded by hand
(kbus.protocol.produce_response), as it is paid once per request. The request is the connection's hand-decoded
ProduceRequest (kbus.protocol.produce_request_decode) or kio's (tests); each partition's answer is one
PartitionProduceResult, filled in as the request proceeds and encoded as it is."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import TYPE_CHECKING, Final

from kio.schema.errors import ErrorCode

from kbus.common.acl import Operation, ResourceType
from kbus.common.topics import is_internal
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.produce_request_decode import ProduceRequest
from kbus.protocol.produce_response import (
    LEADER_HINTS_VERSION,
    NodeEndpoint,
    PartitionProduceResult,
    encode_produce_response,
)
from kbus.protocol.validation import RecordValidationError, ValidationPolicy, validate_produce_batch
from kbus.server.apis.errors import error_code_for, error_message
from kbus.server.apis.registry import AppendOrder, RequestContext, api
from kbus.server.apis.throttling import request_quota_throttle
from kbus.server.replication.replica_manager import ReplicaManager
from kbus.server.util.metrics import METRICS, Labels

if TYPE_CHECKING:
    from kbus.protocol.record_batch import BatchHeader
    from kbus.server.apis.managers import Managers, Replicas
    from kbus.server.log.log import AppendResult
    from kbus.server.log.producer_state import VerificationGuard
    from kbus.server.partition.partition import Partition


@api(0, 3, 12, pipelined=True)
async def produce(m: Managers, ctx: RequestContext, request: ProduceRequest) -> EncodedBody | None:
    """Every partition is appended before anything is awaited: with pipelined requests (network.py) that keeps
    appends in the order requests arrived; the acks=all waits then run together. The exception is a
    transaction's first write on a partition, which waits for the coordinator's verification (KIP-890): that
    request, and every later one on the connection, appends once it is answered (`AppendOrder`)."""
    acks = request.acks
    timeout_ms = request.timeout  # milliseconds (the hand decoder gives an int)
    responses: list[tuple[str, list[PartitionProduceResult]]] = []
    transactional_id: str | None = request.transactional_id
    if _has_transactional(request) and (
        transactional_id is None
        or not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    ):
        # Kafka: transactional records need the request's transactional id and Write on it; nothing is appended
        return _whole_request_error(m, ctx, request, acks, ErrorCode.transactional_id_authorization_failed)
    ready: list[_Ready] = []
    version = ctx.api_version
    replicas = m.replicas  # Managers is an interpreted object: each field read is a generic lookup
    valid_acks = acks in (0, 1, -1)
    now_ms = int(time.time() * 1000)  # once per request: a request spread over 10,000 partitions pays it once
    for topic_data in request.topic_data:
        name = topic_data.name
        parts: list[PartitionProduceResult] = []
        # per topic, not per partition: the ACL check and whether it is internal
        writable = ctx.authorized(_WRITE, _TOPIC, name)
        internal = is_internal(name)
        for pd in topic_data.partition_data:
            out = PartitionProduceResult(pd.index)
            parts.append(out)
            part, error = _leader_partition(replicas, name, pd.index)
            if not valid_acks:
                out.error_code = ErrorCode.invalid_required_acks
            elif not writable:
                out.error_code = ErrorCode.topic_authorization_failed
            elif part is None:
                out.error_code = error
            elif internal:  # only the broker writes __consumer_offsets, as in Kafka
                out.error_code = ErrorCode.invalid_topic_exception
                out.error_message = f"Cannot append to internal topic {name}"
            elif not pd.records:
                out.error_code = ErrorCode.corrupt_message
            else:
                try:
                    records, header = validate_produce_batch(pd.records, _policy(part), now_ms, version)
                except RecordValidationError as refused:  # its own name: mypyc types a name once per function
                    out.error_code = refused.error_code
                    out.error_message = str(refused)
                    out.record_errors = [(e.batch_index, e.message) for e in refused.record_errors]
                else:
                    ready.append(_Ready(out, part, records, name, header))
        responses.append((name, parts))
    producers = _producer_count(ready)
    if producers > 1:
        # Kafka's InvalidPidMappingException for the whole request
        return _whole_request_error(m, ctx, request, acks, ErrorCode.invalid_producer_id_mapping)
    # transactions v2 (Produce v12+): the partitions are added to the transaction here, whatever the
    # verification setting (the client sends no AddPartitionsToTxn). The transaction service is read only for a
    # transactional request (nearly every request has no transactional id).
    verify = (transactional_id is not None and producers > 0 and m.transactions is not None
              and m.transactions.verifier is not None
              and (m.config.transaction_partition_verification_enable
                   or version >= _FIRST_PRODUCE_VERSION_WITH_IMPLICIT_ADD))
    order = ctx.append_order
    waits = order is not None and order.must_wait()
    # None (no list per request) unless this request's transactional partitions are verified now
    to_verify = None if waits or not verify else _start_verification(
        ready, version >= _FIRST_PRODUCE_VERSION_WITH_IMPLICIT_ADD)
    if waits or to_verify:
        assert order is not None or not waits
        await _append_in_order(m, ctx, order, ready, acks, verify, transactional_id, waits)
        appended = [r for r in ready if r.result is not None]
    else:
        appended = [r for r in ready if r.out.error_code == _NONE and _append(replicas, r, acks, verify)]
    if appended and acks != -1:
        # nothing to wait for (wait_for_acks returns at once): no coroutine, task or outcome list per partition
        for r in appended:
            assert r.result is not None
            _appended(r.out, r.result, r.part.topic_labels)
    elif len(appended) == 1:  # acks=-1, one partition (nearly every request): its wait directly, no task or gather
        # ctx.parked_s: the time spent waiting for the replicas (not request time for the request quota), measured
        # only around an actual wait (followers to catch up): a request the leader alone acknowledges reads no
        # clock here
        one = appended[0]
        assert one.result is not None
        try:
            # acknowledged at once (the leader alone in the ISR): no coroutine at all
            if not _acks_satisfied(replicas, one.part, one.result, acks):
                parked = time.perf_counter()
                try:
                    await replicas.wait_for_acks(one.part, one.result, acks, timeout_ms)
                finally:
                    ctx.parked_s += time.perf_counter() - parked
        except Exception as exc:
            _failed(one.out, exc)
        else:
            _appended(one.out, one.result, one.part.topic_labels)
    elif appended:
        parked = time.perf_counter()
        outcomes = await asyncio.gather(
            *(replicas.wait_for_acks(r.part, r.result, acks, timeout_ms) for r in appended if r.result),
            return_exceptions=True,
        )
        ctx.parked_s += time.perf_counter() - parked
        for i, r in enumerate(appended):  # an index, not zip(strict=True): a generic call in compiled code
            outcome = outcomes[i]
            assert r.result is not None
            if isinstance(outcome, BaseException):
                _failed(r.out, outcome)
            else:
                _appended(r.out, r.result, r.part.topic_labels)
    quotas = m.quotas
    if quotas.produce.enabled:
        # Kafka records the whole request's size once the appends are answered; the throttle goes in the
        # response and the network mutes the connection for it (for acks=0 too, with no response)
        ctx.throttle_time_ms = quotas.produce.record_and_throttle(ctx.principal.name, ctx.client_id, ctx.size)
    if acks == 0:
        # Kafka's handleProduceRequest: the request quota is not enforced for acks=0 (nothing answers it)
        ctx.quota_exempt = True
        return None
    if quotas.request.enabled:
        ctx.throttle_time_ms = max(ctx.throttle_time_ms, request_quota_throttle(m, ctx))
    endpoints: dict[int, NodeEndpoint] | None = None  # made for the first NOT_LEADER_OR_FOLLOWER only
    if version >= LEADER_HINTS_VERSION:
        for name, parts in responses:
            for o in parts:
                if o.error_code == _NOT_LEADER:
                    if endpoints is None:
                        endpoints = {}
                    _leader_hint(m, ctx, name, o, endpoints)
    return encode_produce_response(version, responses, throttle_time_ms=ctx.throttle_time_ms,
                                   node_endpoints=() if endpoints is None else list(endpoints.values()))


def _leader_hint(m: Managers, ctx: RequestContext, topic: str, out: PartitionProduceResult,
                 endpoints: dict[int, NodeEndpoint]) -> None:
    """KIP-951 (Produce v10+, Kafka's getCurrentLeader): the partition's current leader and epoch as this broker
    knows them, and the leader's endpoint on the client's listener, so the client need not refresh its metadata."""
    meta = m.cluster.topic(topic)
    state = meta.partitions.get(out.index) if meta is not None else None
    if state is None or state.leader < 0:
        return
    out.current_leader = (state.leader, state.leader_epoch)
    leader = m.cluster.partition_leader(topic, out.index)
    ep = leader.endpoint(ctx.listener.name) if leader is not None else None
    if leader is not None and ep is not None:
        endpoints[leader.broker_id] = NodeEndpoint(leader.broker_id, ep.host, ep.port, leader.rack)


class _Ready:
    """One validated partition of the request, to append."""

    __slots__ = ("guard", "header", "name", "out", "part", "producer", "records", "result", "sequence")

    def __init__(self, out: PartitionProduceResult, part: Partition, records: bytes | memoryview, name: str,
                 header: BatchHeader) -> None:
        self.out, self.part, self.records, self.name = out, part, records, name
        self.header = header  # validation's parse of the records' one batch: the log's append takes it as it is
        self.result: AppendResult | None = None
        self.guard: VerificationGuard | None = None
        # (producer id, epoch) of a transactional batch, and its first sequence
        self.producer: tuple[int, int] | None = None
        self.sequence = -1
        if _transactional(records):
            producer_id, epoch, self.sequence = _PRODUCER.unpack_from(records, 43)
            self.producer = (producer_id, epoch)


def _append(replicas: Replicas, r: _Ready, acks: int, verify: bool) -> bool:
    try:
        if isinstance(replicas, ReplicaManager):  # the broker's: a native call (see _leader_partition)
            r.result = replicas.append_records(r.part, r.records, acks, verify_transactions=verify,
                                               verification_guard=r.guard, validated=r.header)
        else:
            r.result = replicas.append_records(r.part, r.records, acks, verify_transactions=verify,
                                               verification_guard=r.guard, validated=r.header)
    except Exception as exc:
        _failed(r.out, exc)
        return False
    return True


# `Replicas` is a Protocol (tests hand the handlers fakes): a call through it is a Python-level call (a method
# lookup, boxed arguments, keywords matched by name, a boxed tuple back). The broker's ReplicaManager is a compiled
# class: narrowed by isinstance, the same call is a direct C call.
def _leader_partition(replicas: Replicas, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
    if isinstance(replicas, ReplicaManager):
        return replicas.leader_partition(topic, index)
    return replicas.leader_partition(topic, index)


def _acks_satisfied(replicas: Replicas, part: Partition, result: AppendResult, acks: int) -> bool:
    if isinstance(replicas, ReplicaManager):
        return replicas.acks_satisfied(part, result, acks)
    return replicas.acks_satisfied(part, result, acks)


def _producer_count(ready: list[_Ready]) -> int:
    """How many different (producer id, epoch) the request's transactional batches carry: 0, 1, or 2 for more than
    one (refused). No set per request."""
    first: tuple[int, int] | None = None
    for r in ready:
        producer = r.producer
        if producer is not None:
            if first is None:
                first = producer
            elif producer != first:
                return 2
    return 0 if first is None else 1


def _has_transactional(request: ProduceRequest) -> bool:
    """Does any partition's first batch carry the transactional attribute (a loop, not a generator per request)?"""
    for td in request.topic_data:
        for pd in td.partition_data:
            if _transactional(pd.records):
                return True
    return False


def _start_verification(ready: list[_Ready], supports_epoch_bump: bool) -> list[_Ready]:
    """Kafka's maybeStartTransactionVerification per partition: the transactional partitions whose producer has
    no ongoing transaction there yet, each given the guard its append must present. `supports_epoch_bump`: a
    transactions-v2 client's request (Produce v12+)."""
    to_verify = []
    for r in ready:
        if r.producer is None:
            continue
        try:
            r.guard = r.part.log.maybe_start_transaction_verification(r.producer[0], r.sequence, r.producer[1],
                                                                      supports_epoch_bump)
        except Exception as exc:
            _failed(r.out, exc)
            continue
        if r.guard is not None:
            to_verify.append(r)
    return to_verify


def _still_leader(m: Managers, ready: list[_Ready]) -> list[_Ready]:
    """After an await: the partitions this broker still leads, each with its current Partition (a re-created
    one after a log dir move); the others answer NOT_LEADER_OR_FOLLOWER (or what the lookup says)."""
    current = []
    for r in ready:
        if r.out.error_code != _NONE:
            continue
        part, error = m.replicas.leader_partition(r.name, r.out.index)
        if part is None:
            r.out.error_code = error
        else:
            r.part = part
            current.append(r)
    return current


async def _append_in_order(
    m: Managers, ctx: RequestContext, order: AppendOrder | None, ready: list[_Ready], acks: int, verify: bool,
    transactional_id: str | None, waits: bool,
) -> None:
    """Append after the connection's earlier Produce requests (if one still waits) and after the coordinator
    verified this request's new transactional partitions."""
    previous = order.tail if order is not None else None
    mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if order is not None:
        order.tail = mine
    try:
        if waits and previous is not None:
            await asyncio.wait((previous,))  # never cancels it (our own cancellation stays ours)
            # leadership may have moved meanwhile, and the earlier request may have opened the transaction
            ready = _still_leader(m, ready)
            to_verify = _start_verification(
                ready, ctx.api_version >= _FIRST_PRODUCE_VERSION_WITH_IMPLICIT_ADD) if verify else []
        else:
            to_verify = [r for r in ready if r.guard is not None]
        failed: set[int] = set()
        if to_verify:
            assert transactional_id is not None and m.transactions is not None
            producer_id, epoch = to_verify[0].producer or (-1, -1)
            errors = await m.transactions.verifier.verify(
                transactional_id, producer_id, epoch, [(r.name, r.out.index) for r in to_verify],
                abortable_known=ctx.api_version >= _FIRST_PRODUCE_VERSION_WITH_ABORTABLE,
                add=ctx.api_version >= _FIRST_PRODUCE_VERSION_WITH_IMPLICIT_ADD,
            )
            for r in to_verify:
                code = errors.get((r.name, r.out.index))
                if code is not None:
                    _verification_failed(r.out, code)
                    failed.add(id(r))
            # the coordinator's answer took up to request.timeout.ms: leadership may have moved meanwhile
            ready = _still_leader(m, ready)
        for r in ready:
            if id(r) not in failed and r.out.error_code == _NONE:
                _append(m.replicas, r, acks, verify)
    finally:
        mine.set_result(None)
        if order is not None and order.tail is mine:
            order.tail = None


# Produce v11 is the first version whose clients know TRANSACTION_ABORTABLE (Kafka's genericError support)
_FIRST_PRODUCE_VERSION_WITH_ABORTABLE: Final = 11
# Produce v12 is a transactions-v2 client's (KIP-890 part 2): its new partitions are added, not verified
_FIRST_PRODUCE_VERSION_WITH_IMPLICIT_ADD: Final = 12
# what a producer is told when the coordinator could not answer: NOT_ENOUGH_REPLICAS makes every client retry
# the Produce without refreshing its metadata (Kafka's postVerificationCallback)
_RETRIABLE_VERIFICATION_ERRORS = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.network_exception, ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
})  # fmt: skip


def _verification_failed(out: PartitionProduceResult, code: int) -> None:
    error = ErrorCode(code)
    if error == ErrorCode.invalid_txn_state:
        out.error_code, out.error_message = error, "Partition was not added to the transaction"
    elif error in _RETRIABLE_VERIFICATION_ERRORS:
        out.error_code = ErrorCode.not_enough_replicas
        out.error_message = ("Unable to verify the partition has been added to the transaction. Underlying error: "
                             f"{error.name.upper()}")
    else:
        out.error_code = error


def _transactional(records: bytes | memoryview | None) -> bool:
    """Is the first batch a v2 batch with the transactional attribute (Kafka's RequestUtils.hasTransactionalRecords)?
    Bytes 16 and 21-22 of a batch are its magic and attributes."""
    return records is not None and len(records) >= _BATCH_HEADER and records[16] == 2 and bool(records[22] & 0x10)


_BATCH_HEADER: Final = 61
# read per request: Final, so compiled code holds them in C statics instead of two dict/attribute lookups a use
_NONE: Final = ErrorCode.none
_WRITE: Final = Operation.WRITE
_TOPIC: Final = ResourceType.TOPIC
_PRODUCER: Final = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at offset 43 of a v2 batch
_NOT_LEADER: Final = ErrorCode.not_leader_or_follower
# the series of the two per-append counters (Metrics never replaces a counter's dict, it only drops series from it)
_MESSAGES_IN: Final = METRICS.counters["kbus_messages_in_total"]
_BYTES_IN: Final = METRICS.counters["kbus_bytes_in_total"]


def _whole_request_error(
    m: Managers, ctx: RequestContext, request: ProduceRequest, acks: int, error: ErrorCode
) -> EncodedBody | None:
    """Kafka's error response for a whole Produce request: every partition gets the error, and the request
    quota's throttle time (sendErrorResponseMaybeThrottle; the network layer cannot write it into these bytes)."""
    if acks == 0:
        ctx.quota_exempt = True
        return None
    results = [(td.name, [PartitionProduceResult(pd.index, error) for pd in td.partition_data])
               for td in request.topic_data]
    ctx.throttle_time_ms = max(ctx.throttle_time_ms, request_quota_throttle(m, ctx))
    return encode_produce_response(ctx.api_version, results, throttle_time_ms=ctx.throttle_time_ms)


def _failed(out: PartitionProduceResult, exc: BaseException) -> None:
    out.error_code = error_code_for(exc)
    out.error_message = error_message(exc)


def _appended(out: PartitionProduceResult, result: AppendResult, key: Labels) -> None:
    """Counts the append in kbus_messages_in_total and kbus_bytes_in_total, here in compiled code (two interpreted
    Metrics.inc_key calls per request cost ~0.5 us), under `key`, its partition's labels_key(topic=...), made once
    (Partition.topic_labels: a new nested tuple per request was hashed and compared in full in both dicts)."""
    if not result.duplicate:
        messages_in, bytes_in = _MESSAGES_IN, _BYTES_IN
        messages_in[key] = messages_in.get(key, 0.0) + result.num_records
        bytes_in[key] = bytes_in.get(key, 0.0) + result.size_bytes
    out.error_code = _NONE
    out.base_offset = result.first_offset
    out.log_append_time_ms = result.log_append_time_ms
    out.log_start_offset = result.log_start_offset


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
