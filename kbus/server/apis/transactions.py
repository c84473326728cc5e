"""Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27),
DescribeProducers (61), DescribeTransactions (65), ListTransactions (66). InitProducerId with a transactional id
and FindCoordinator(TRANSACTION) call `find_transaction_coordinator` / `init_transactional_producer` below.

Request in, response out: the state lives in the broker's TransactionService (kbus.server.transaction)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse
from kio.schema.add_partitions_to_txn.v3 import response as apt3
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV3
from kio.schema.add_partitions_to_txn.v5 import response as apt
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest
from kio.schema.describe_producers.v0 import response as dp
from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_transactions.v0 import response as dt
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.errors import ErrorCode as E
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_transactions.v1 import response as lt
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.txn_offset_commit.v5 import response as toc
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest
from kio.schema.write_txn_markers.v2 import response as wtm
from kio.schema.write_txn_markers.v2.request import WriteTxnMarkersRequest

from kbus.common.acl import Operation, ResourceType
from kbus.common.topics import OFFSETS_TOPIC
from kbus.protocol.codec import ms
from kbus.protocol.control import build_marker_batch
from kbus.protocol.kio_types import NO_TIME, i16_, i32_, i32s, i64_, ms32, producer, time_ms, topic, transactional
from kbus.server.apis.endpoints import NO_COORDINATOR, coordinator_endpoint
from kbus.server.apis.errors import error_code_for
from kbus.server.apis.registry import RequestContext, api
from kbus.server.coordinator.records import OffsetAndMetadata
from kbus.server.transaction.coordinator import TopicPartition, TransactionCoordinator
from kbus.server.transaction.service import MarkerListener

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers
    from kbus.server.transaction.service import MarkerReplicas


def _coordinator(m: Managers) -> TransactionCoordinator | None:
    return m.transactions.coordinator if m.transactions is not None else None


def _fenced(ctx: RequestContext, error: int) -> int:
    # PRODUCER_FENCED (KIP-588) reaches only clients new enough to know it; older ones get INVALID_PRODUCER_EPOCH
    if error == E.producer_fenced and ctx.api_version < 2:
        return E.invalid_producer_epoch
    return error


async def find_transaction_coordinator(m: Managers, key: str, listener: str) -> tuple[int, int, str, int]:
    """(error, node_id, host, port) as reached on the client's listener; creates __transaction_state on first
    use, as Kafka does."""
    service = m.transactions
    if service is None or not key:
        return NO_COORDINATOR
    try:
        await service.ensure_state_topic()
    except Exception:
        return NO_COORDINATOR
    topic, partition = service.state_partition_for(key)
    return coordinator_endpoint(m, topic, partition, listener, service.coordinator.coordinates)


async def init_transactional_producer(
    m: Managers, ctx: RequestContext, transactional_id: str, request: InitProducerIdRequest
) -> tuple[int, int, int]:
    coordinator = _coordinator(m)
    if coordinator is None:
        return E.coordinator_not_available, -1, -1
    error, pid, epoch = await coordinator.init_producer_id(
        transactional_id, ms(request.transaction_timeout),
        request.producer_id, request.producer_epoch,  # v0-v2 have none: their schema default, -1
    )
    if error == E.producer_fenced and ctx.api_version < 4:
        error = E.invalid_producer_epoch
    return error, pid, epoch


async def append_markers(
    broker: MarkerReplicas, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
    partitions: set[TopicPartition], timeout_ms: int, listeners: list[MarkerListener], transaction_version: int = 0,
) -> dict[TopicPartition, int]:
    """Write one marker on each partition this broker leads (WriteTxnMarkers, acks=all); error code per
    partition. `transaction_version` 2: the marker ends a transactions-v2 transaction (its epoch bumped), which
    the partition checks strictly (kbus.server.log.producer_state check_marker)."""
    batch = build_marker_batch(producer_id, producer_epoch, committed, coordinator_epoch)
    results: dict[TopicPartition, int] = {}
    written = []
    for tp in partitions:  # append them all before waiting on any (one replica round trip for all)
        part, error = broker.leader_partition(*tp)
        if part is None:
            results[tp] = error
            continue
        try:
            result = broker.append_records(part, batch, -1, from_coordinator=True,
                                           transaction_version=transaction_version)
            written.append((tp, part, result))
        except Exception as exc:
            results[tp] = error_code_for(exc)
    for tp, part, result in written:
        try:
            await broker.wait_for_acks(part, result, -1, timeout_ms)
        except Exception as exc:
            results[tp] = error_code_for(exc)
            continue
        results[tp] = E.none
        for listener in listeners:
            listener(tp, producer_id, committed)
    return results


def _txn_id(ctx: RequestContext, transactional_id: str | None) -> bool:
    """Kafka: the transactional APIs need Write on the transactional id."""
    return transactional_id is None or ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


@api(24, 0, 5, request=(AddPartitionsToTxnRequestV3, AddPartitionsToTxnRequest))  # v4: a batch of transactions
async def add_partitions_to_txn(
    m: Managers, ctx: RequestContext, req: AddPartitionsToTxnRequestV3 | AddPartitionsToTxnRequest
) -> apt3.AddPartitionsToTxnResponse | apt.AddPartitionsToTxnResponse:
    """v0-3 from producers (one transaction, Write on its transactional id and topics); v4-5 from brokers only
    (ClusterAction): a batch of transactions, `verify_only` ones asking whether partitions are in the ongoing
    transaction (KIP-890, kbus.server.transaction.verification) without adding them. The others are the
    implicit adds of transactions v2 (a client's Produce v12+ / TxnOffsetCommit v5+); with v5 (Kafka's
    transactionVersionForAddPartitionsToTxn) the transaction is a v2 one, its epoch bumped when it ends."""
    if isinstance(req, AddPartitionsToTxnRequest):  # v4+
        if not ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return apt.AddPartitionsToTxnResponse(throttle_time=NO_TIME, error_code=E.cluster_authorization_failed,
                                                  results_by_transaction=())
        results: list[apt.AddPartitionsToTxnResult] = []
        for txn in req.transactions:
            wanted: list[tuple[str, int]] = [(t.name, p) for t in txn.topics for p in t.partitions]
            errors = await _add_or_verify(m, ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted,
                                          verify_only=txn.verify_only, client_tv=2 if ctx.api_version >= 5 else 0)
            results.append(apt.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                        topic_results=_topic_results(errors)))
        return apt.AddPartitionsToTxnResponse(throttle_time=NO_TIME, error_code=E.none,
                                              results_by_transaction=tuple(results))
    tid = req.v3_and_below_transactional_id
    wanted_v3: list[tuple[str, int]] = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    if not _txn_id(ctx, tid):
        errors = dict.fromkeys(wanted_v3, int(E.transactional_id_authorization_failed))
    else:
        errors = await _add_or_verify(m, ctx, tid, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                                      wanted_v3, verify_only=False)
    # v3's class: Kafka removed results_by_topic_v3_and_below at v4
    return apt3.AddPartitionsToTxnResponse(throttle_time=NO_TIME, results_by_topic_v3_and_below=tuple(
        apt3.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=tuple(
            apt3.AddPartitionsToTxnPartitionResult(partition_index=r.partition_index,
                                                   partition_error_code=r.partition_error_code)
            for r in t.results_by_partition))
        for t in _topic_results(errors)))  # fmt: skip


async def _add_or_verify(
    m: Managers, ctx: RequestContext, tid: str, producer_id: int, producer_epoch: int,
    wanted: list[tuple[str, int]], *, verify_only: bool, client_tv: int = 0,
) -> dict[tuple[str, int], int]:
    """One transaction of AddPartitionsToTxn: an error per partition."""
    unknown = set()
    for name, p in wanted:
        meta = m.cluster.topics().get(name)
        if meta is None or p not in meta.partitions:
            unknown.add((name, p))
    # brokers (v4) need no Write on the topics: they ask for their producers, already authorized
    from_client = ctx.api_version < 4
    if from_client and (denied := {(t, p) for t, p in wanted
                                   if not ctx.authorized(Operation.WRITE, ResourceType.TOPIC, t)}):
        return {tp: E.topic_authorization_failed if tp in denied else E.operation_not_attempted for tp in wanted}
    if unknown:
        # Kafka adds nothing when any partition is unknown; the others were not attempted
        return {tp: E.unknown_topic_or_partition if tp in unknown else E.operation_not_attempted for tp in wanted}
    coordinator = _coordinator(m)
    if coordinator is None:
        return dict.fromkeys(wanted, int(E.coordinator_not_available))
    if verify_only:
        return coordinator.verify_partitions(tid, producer_id, producer_epoch, wanted)
    error = await coordinator.add_partitions(tid, producer_id, producer_epoch, wanted, client_tv=client_tv)
    return dict.fromkeys(wanted, _fenced(ctx, error))


def _topic_results(errors: dict[tuple[str, int], int]) -> tuple[apt.AddPartitionsToTxnTopicResult, ...]:
    by_topic: dict[str, list[int]] = {}
    for name, p in errors:
        by_topic.setdefault(name, []).append(p)
    return tuple(
        apt.AddPartitionsToTxnTopicResult(name=topic(name), results_by_partition=tuple(
            apt.AddPartitionsToTxnPartitionResult(partition_index=i32_(p),
                                                  partition_error_code=E(errors[(name, p)]))
            for p in partitions
        ))
        for name, partitions in by_topic.items()
    )  # fmt: skip


@api(25, 0, 3, request=AddOffsetsToTxnRequest)
async def add_offsets_to_txn(m: Managers, ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    coordinator = _coordinator(m)
    groups = m.groups
    if not _txn_id(ctx, req.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time=NO_TIME, error_code=E.transactional_id_authorization_failed)
    if not ctx.authorized(Operation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(throttle_time=NO_TIME, error_code=E.group_authorization_failed)
    if coordinator is None or groups is None:
        return AddOffsetsToTxnResponse(throttle_time=NO_TIME, error_code=E.coordinator_not_available)
    partition = (OFFSETS_TOPIC, groups.partition_for(req.group_id))
    error = await coordinator.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, [partition])
    return AddOffsetsToTxnResponse(throttle_time=NO_TIME, error_code=E(_fenced(ctx, error)))


@api(26, 0, 5, request=EndTxnRequest)
async def end_txn(m: Managers, ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    """v5 is transactions v2's (KIP-890 part 2, Kafka's transactionVersionForEndTxn): the epoch is bumped as the
    transaction ends, and the producer id and epoch to go on with are in the response."""
    coordinator = _coordinator(m)
    if not _txn_id(ctx, req.transactional_id):
        return EndTxnResponse(throttle_time=NO_TIME, error_code=E.transactional_id_authorization_failed,
                              producer_id=producer(-1), producer_epoch=i16_(-1))
    if coordinator is None:
        return EndTxnResponse(throttle_time=NO_TIME, error_code=E.coordinator_not_available, producer_id=producer(-1),
                              producer_epoch=i16_(-1))
    error, producer_id, epoch = await coordinator.end_transaction_bumping(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed, 2 if ctx.api_version >= 5 else 0)
    return EndTxnResponse(throttle_time=NO_TIME, error_code=E(_fenced(ctx, error)), producer_id=producer(producer_id),
                          producer_epoch=i16_(epoch))


@api(27, 1, 2, request=WriteTxnMarkersRequest)
async def write_txn_markers(
    m: Managers, ctx: RequestContext, req: WriteTxnMarkersRequest
) -> wtm.WriteTxnMarkersResponse:
    """From another broker's transaction coordinator: write the markers on the partitions this broker leads. v2
    (KIP-1228) gives each marker its transaction version; before it, 0 (the legacy epoch check)."""
    service = m.transactions
    results: list[wtm.WritableTxnMarkerResult] = []
    # only brokers write markers (Kafka: ClusterAction on the cluster), never a client
    may = ctx.authorized(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for marker in req.markers:
        wanted: set[tuple[str, int]] = {(t.name, p) for t in marker.topics for p in t.partition_indexes}
        if not may:
            errors = dict.fromkeys(wanted, int(E.cluster_authorization_failed))
        elif service is None:
            errors = dict.fromkeys(wanted, int(E.coordinator_not_available))
        else:
            errors = await append_markers(m.replicas, marker.producer_id, marker.producer_epoch,
                                          marker.transaction_result, marker.coordinator_epoch, wanted,
                                          service.request_timeout_ms, service.marker_listeners,
                                          marker.transaction_version)  # v1 has none: its schema default, 0
        results.append(wtm.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=tuple(
            wtm.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(
                wtm.WritableTxnMarkerPartitionResult(partition_index=p, error_code=E(errors[(t.name, p)]))
                for p in t.partition_indexes
            ))
            for t in marker.topics
        )))
    return wtm.WriteTxnMarkersResponse(markers=tuple(results))


@api(28, 0, 5, request=TxnOffsetCommitRequest)
async def txn_offset_commit(
    m: Managers, ctx: RequestContext, req: TxnOffsetCommitRequest
) -> toc.TxnOffsetCommitResponse:
    groups = m.groups
    now = groups.clock() if groups is not None else 0
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {
        (t.name, p.partition_index): OffsetAndMetadata(
            offset=p.committed_offset, leader_epoch=p.committed_leader_epoch,  # v0-v1: its schema default, -1
            metadata=p.committed_metadata or "", commit_timestamp=now,
        )
        for t in req.topics for p in t.partitions
    }
    if not _txn_id(ctx, req.transactional_id):
        errors = dict.fromkeys(offsets, int(E.transactional_id_authorization_failed))
    elif not ctx.authorized(Operation.READ, ResourceType.GROUP, req.group_id):
        errors = dict.fromkeys(offsets, int(E.group_authorization_failed))
    elif groups is None:
        errors = dict.fromkeys(offsets, int(E.coordinator_not_available))
    elif (refused := await _verify_txn_offsets(m, ctx, req, groups.partition_for(req.group_id))) is not None:
        errors = dict.fromkeys(offsets, refused)
    else:
        errors = await groups.commit_txn_offsets(
            # v0-v2 name no member: the schema defaults ("", null, -1), which the coordinator does not check
            req.group_id, req.producer_id, req.producer_epoch, req.member_id, req.group_instance_id,
            req.generation_id, offsets,
        )
    by_topic: dict[str, list[toc.TxnOffsetCommitResponsePartition]] = {}
    for (name, partition), error in errors.items():
        by_topic.setdefault(name, []).append(
            toc.TxnOffsetCommitResponsePartition(partition_index=i32_(partition), error_code=E(error)))
    return toc.TxnOffsetCommitResponse(throttle_time=NO_TIME, topics=tuple(
        toc.TxnOffsetCommitResponseTopic(name=topic(name), partitions=tuple(parts))
        for name, parts in by_topic.items()
    ))


async def _verify_txn_offsets(
    m: Managers, ctx: RequestContext, req: TxnOffsetCommitRequest, offsets_partition: int
) -> int | None:
    """Transaction verification of TxnOffsetCommit (Kafka 3.9's GroupCoordinator.handleTxnCommitOffsets): the
    producer's first transactional offsets on this __consumer_offsets partition need the coordinator's word that
    the partition (AddOffsetsToTxn) is in its ongoing transaction. From v5 (transactions v2, which sends no
    AddOffsetsToTxn) the partition is added to the transaction instead, whatever the verification setting.
    None: go ahead; else the error for every partition of the request (Kafka's maybeConvertOffsetCommitError)."""
    service = m.transactions
    add = ctx.api_version >= 5
    if service is None or not (add or m.config.transaction_partition_verification_enable):
        return None
    tp = (OFFSETS_TOPIC, offsets_partition)
    part, _ = m.replicas.leader_partition(*tp)
    if part is None:
        return None  # not the group's coordinator here: the group coordinator answers that itself
    try:
        guard = part.log.maybe_start_transaction_verification(req.producer_id, -1, req.producer_epoch)
    except Exception as exc:
        return _offset_commit_error(error_code_for(exc))
    if guard is None:
        return None  # its transaction is already ongoing on the partition
    errors = await service.verifier.verify(req.transactional_id, req.producer_id, req.producer_epoch, [tp],
                                           abortable_known=ctx.api_version >= 4, add=add)
    code = errors.get(tp)
    return None if code is None else _offset_commit_error(code)


def _offset_commit_error(code: int) -> int:
    """Kafka's GroupMetadataManager.maybeConvertOffsetCommitError."""
    if code == E.network_exception:
        return int(E.coordinator_load_in_progress)
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append):
        return int(E.coordinator_not_available)
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return int(E.not_coordinator)
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return int(E.invalid_commit_offset_size)
    return code


@api(61, 0, 0, request=DescribeProducersRequest)
async def describe_producers(
    m: Managers, ctx: RequestContext, req: DescribeProducersRequest
) -> dp.DescribeProducersResponse:
    topics: list[dp.TopicResponse] = []
    for t in req.topics:
        parts: list[dp.PartitionResponse] = []
        readable = ctx.authorized(Operation.READ, ResourceType.TOPIC, t.name)  # Kafka: Read on the topic
        for p in t.partition_indexes:
            part, error = m.replicas.leader_partition(t.name, p) if readable else (None, E.topic_authorization_failed)
            producers: list[dp.ProducerState] = []
            if part is not None:
                for entry in part.log.producer_state.producers.values():
                    producers.append(dp.ProducerState(
                        producer_id=producer(entry.producer_id), producer_epoch=i32_(entry.producer_epoch),
                        last_sequence=i32_(entry.last_seq), last_timestamp=i64_(entry.last_timestamp),
                        coordinator_epoch=i32_(entry.coordinator_epoch),
                        current_txn_start_offset=i64_(entry.current_txn_first_offset
                                                      if entry.current_txn_first_offset is not None else -1),
                    ))
            parts.append(dp.PartitionResponse(partition_index=p, error_code=error, error_message=None,
                                              active_producers=tuple(producers)))
        topics.append(dp.TopicResponse(name=t.name, partitions=tuple(parts)))
    return dp.DescribeProducersResponse(throttle_time=NO_TIME, topics=tuple(topics))


@api(65, 0, 0, request=DescribeTransactionsRequest)
async def describe_transactions(
    m: Managers, ctx: RequestContext, req: DescribeTransactionsRequest
) -> dt.DescribeTransactionsResponse:
    coordinator = _coordinator(m)
    states: list[dt.TransactionState] = []
    for tid in req.transactional_ids:
        if not ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            error, meta = int(E.transactional_id_authorization_failed), None
        elif coordinator is None:
            error, meta = int(E.coordinator_not_available), None
        else:
            error, meta = coordinator.describe(tid)
        if meta is None:
            states.append(dt.TransactionState(
                error_code=E(error), transactional_id=tid, transaction_state="", transaction_timeout=NO_TIME,
                transaction_start_time=time_ms(-1), producer_id=producer(-1), producer_epoch=i16_(-1), topics=()))
            continue
        states.append(dt.TransactionState(
            error_code=E.none, transactional_id=tid, transaction_state=meta.state.kafka_name,
            transaction_timeout=ms32(meta.timeout_ms), transaction_start_time=time_ms(meta.start_ms),
            producer_id=producer(meta.producer_id),
            producer_epoch=i16_(meta.producer_epoch),
            topics=tuple(dt.TopicData(topic=topic(t), partitions=i32s(sorted(ps)))
                         for t, ps in sorted(meta.partitions.items())),
        ))
    return dt.DescribeTransactionsResponse(throttle_time=NO_TIME, transaction_states=tuple(states))


_STATE_NAMES = {"empty", "ongoing", "preparecommit", "prepareabort", "completecommit", "completeabort", "dead",
                "prepareepochfence"}


@api(66, 0, 1, request=ListTransactionsRequest)
async def list_transactions(
    m: Managers, ctx: RequestContext, req: ListTransactionsRequest
) -> lt.ListTransactionsResponse:
    coordinator = _coordinator(m)
    filters = list(req.state_filters)
    unknown = [s for s in filters if s.lower() not in _STATE_NAMES]
    known = [s for s in filters if s not in unknown]
    listings = [] if coordinator is None or (filters and not known) else coordinator.list_transactions(
        known, req.producer_id_filters, req.duration_filter)  # v0 has none: its schema default, -1
    # Kafka lists only the transactional ids the principal may Describe
    states = tuple(lt.TransactionState(transactional_id=transactional(t.transactional_id),
                                       producer_id=producer(t.producer_id), transaction_state=t.state.kafka_name)
                   for t in listings
                   if ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id))
    error = E.coordinator_not_available if coordinator is None else E.none
    return lt.ListTransactionsResponse(throttle_time=NO_TIME, error_code=error, unknown_state_filters=tuple(unknown),
                                       transaction_states=states)
