"""Transaction verification, the partition leader's side (KIP-890 part 1, Kafka's AddPartitionsToTxnManager).

Before a transaction's first write on a partition, the leader asks the transaction coordinator of the producer's
transactional id whether the partition was added to the ongoing transaction of that producer id and epoch:
AddPartitionsToTxn v4 with `verify_only`, broker to broker, over the inter-broker listener. Questions for the same
coordinator are batched: one request in flight per coordinator, and what arrives meanwhile goes in the next one.
When this broker is the coordinator it answers itself, without a request. The answers come back as the errors
Kafka 3.9 gives a producer (the Produce handler turns the retriable ones into NOT_ENOUGH_REPLICAS).

Transactions v2 (KIP-890 part 2): a client's Produce v12+ or TxnOffsetCommit v5+ does not add its partitions
first, so the question becomes an implicit add: AddPartitionsToTxn v5 without `verify_only` (Kafka's
addPartition TransactionSupportedOperation), which the coordinator writes as it would a client's add.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.add_partitions_to_txn import v4, v5
from kio.schema.errors import ErrorCode as E
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.common.topics import TRANSACTION_STATE_TOPIC
from kbus.protocol.client import ClientSecurity, KafkaConnection
from kbus.protocol.errors import ProtocolError
from kbus.server.transaction.coordinator import TopicPartition, TransactionCoordinator
from kbus.server.util.metrics import METRICS, labels_key

log = logging.getLogger(__name__)

# partitions verified (Kafka has VerificationTimeMs / VerificationFailureRate): local answers, remote ones, failures
_LOCAL, _REMOTE = labels_key(coordinator="local"), labels_key(coordinator="remote")
_FAILED = labels_key(coordinator="failed")


class VerificationHost(Protocol):
    """What verification needs from the broker: where the coordinators are, how to reach them."""

    config: KafkaConfig
    broker_id: int
    inter_broker_security: ClientSecurity

    def live_brokers(self) -> list[BrokerInfo]: ...
    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None: ...


@dataclass(slots=True)
class _Question:
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def answered(self, errors: dict[TopicPartition, int]) -> None:
        if not self.answer.done():  # the producer's request may be gone (connection closed)
            self.answer.set_result(errors)


_Queue = tuple[int, bool]  # (coordinator broker, implicit add): verify-only questions go as v4, adds as v5


class TransactionVerifier:
    def __init__(self, host: VerificationHost, coordinator: TransactionCoordinator, timeout_ms: int) -> None:
        self._host = host
        self._coordinator = coordinator
        self._timeout_s = timeout_ms / 1000
        self._waiting: dict[_Queue, dict[str, _Question]] = {}  # -> transactional id -> question
        self._senders: dict[_Queue, asyncio.Task[None]] = {}
        self._connections: dict[_Queue, KafkaConnection] = {}  # one request in flight on each

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition],
        abortable_known: bool, add: bool = False,
    ) -> dict[TopicPartition, int]:
        """The partitions that failed verification, with the error for the producer (none: all verified).
        `abortable_known`: the client's request version knows TRANSACTION_ABORTABLE (Kafka's genericError:
        Produce v11+, TxnOffsetCommit v4+); older ones get INVALID_TXN_STATE instead. `add`: add the partitions
        to the transaction rather than verify them (transactions v2: Produce v12+, TxnOffsetCommit v5+)."""
        coordinator = self._coordinator
        leader = self._host.partition_leader(TRANSACTION_STATE_TOPIC, coordinator.partition_for(transactional_id))
        if leader is None:
            raw = dict.fromkeys(partitions, int(E.coordinator_not_available))
        elif leader.broker_id == self._host.broker_id:
            METRICS.inc_key("kbus_transaction_verifications_total", _LOCAL, len(partitions))
            if add:
                error = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                         client_tv=2)
                raw = dict.fromkeys(partitions, error)
            else:
                raw = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        else:
            METRICS.inc_key("kbus_transaction_verifications_total", _REMOTE, len(partitions))
            raw = await self._ask((leader.broker_id, add), transactional_id,
                                  _Question(producer_id, producer_epoch, partitions))
        errors: dict[TopicPartition, int] = {}
        for tp, code in raw.items():
            if code == E.none:
                continue
            if code == E.producer_fenced:
                code = E.invalid_producer_epoch  # what producers expect here (Kafka does the same)
            elif code == E.transaction_abortable and not abortable_known:
                code = E.invalid_txn_state
            errors[tp] = int(code)
        if errors:
            METRICS.inc_key("kbus_transaction_verifications_total", _FAILED, len(errors))
        return errors

    async def _ask(self, queue: _Queue, transactional_id: str, question: _Question) -> dict[TopicPartition, int]:
        waiting = self._waiting.setdefault(queue, {})
        earlier = waiting.get(transactional_id)
        if earlier is not None:
            # Kafka's three cases: a newer epoch fences the earlier question, the same epoch is a retry (the
            # earlier one gets a retriable error), an older epoch is fenced itself
            if earlier.producer_epoch > question.producer_epoch:
                return dict.fromkeys(question.partitions, int(E.invalid_producer_epoch))
            fenced = earlier.producer_epoch < question.producer_epoch
            earlier.answered(dict.fromkeys(earlier.partitions, int(E.invalid_producer_epoch if fenced
                                                                   else E.network_exception)))
        waiting[transactional_id] = question
        if queue not in self._senders:
            task = asyncio.ensure_future(self._send_all(queue))
            self._senders[queue] = task
        return await question.answer

    async def _send_all(self, queue: _Queue) -> None:
        """One request in flight per coordinator (and kind); the questions that arrived meanwhile go in the
        next."""
        try:
            while batch := self._waiting.pop(queue, None):
                answers: dict[str, dict[TopicPartition, int]] = {}
                try:
                    answers = await self._send(queue, batch)
                except Exception:
                    log.exception("Transaction verification with broker %d failed", queue[0])
                finally:  # also when the broker shuts down: nobody waits forever
                    for tid, question in batch.items():
                        question.answered(
                            answers.get(tid, dict.fromkeys(question.partitions, int(E.network_exception))))
        finally:
            self._senders.pop(queue, None)

    async def _send(self, queue: _Queue, batch: dict[str, _Question]) -> dict[str, dict[TopicPartition, int]]:
        broker_id, add = queue
        response: v4.response.AddPartitionsToTxnResponse | v5.response.AddPartitionsToTxnResponse
        try:
            conn = self._connection(queue)
            if conn is None:
                return {tid: dict.fromkeys(q.partitions, int(E.coordinator_not_available)) for tid, q in batch.items()}
            if add:  # v5: the coordinator takes it as a transactions-v2 client's add (Kafka's TV_2)
                response = await conn.request(v5.request.AddPartitionsToTxnRequest(transactions=tuple(
                    v5.request.AddPartitionsToTxnTransaction(
                        transactional_id=TransactionalId(tid), producer_id=ProducerId(q.producer_id),
                        producer_epoch=i16(q.producer_epoch), verify_only=False,
                        topics=tuple(v5.request.AddPartitionsToTxnTopic(name=TopicName(t), partitions=ps)
                                     for t, ps in _topics(q.partitions)),
                    ) for tid, q in batch.items()
                )), v5.response.AddPartitionsToTxnResponse, timeout=self._timeout_s)
            else:
                response = await conn.request(v4.request.AddPartitionsToTxnRequest(transactions=tuple(
                    v4.request.AddPartitionsToTxnTransaction(
                        transactional_id=TransactionalId(tid), producer_id=ProducerId(q.producer_id),
                        producer_epoch=i16(q.producer_epoch), verify_only=True,
                        topics=tuple(v4.request.AddPartitionsToTxnTopic(name=TopicName(t), partitions=ps)
                                     for t, ps in _topics(q.partitions)),
                    ) for tid, q in batch.items()
                )), v4.response.AddPartitionsToTxnResponse, timeout=self._timeout_s)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, ProtocolError) as exc:
            # the connection's state is unknown (a timed out or mismatched answer may still come): a new one next
            log.info("AddPartitionsToTxn (verify) to broker %d failed: %s", broker_id, exc)
            conn = self._connections.pop(queue, None)
            if conn is not None:
                await conn.close()
            return {tid: dict.fromkeys(q.partitions, int(E.network_exception)) for tid, q in batch.items()}
        if response.error_code != E.none:
            # a broker refused as a client (no ClusterAction): the producer must not see that error
            error = response.error_code
            if error == E.cluster_authorization_failed:
                error = E.invalid_txn_state
            log.warning("AddPartitionsToTxn (verify) to broker %d answered %s", broker_id, response.error_code.name)
            return {tid: dict.fromkeys(q.partitions, int(error)) for tid, q in batch.items()}
        out: dict[str, dict[TopicPartition, int]] = {}
        for result in response.results_by_transaction:
            errors = out.setdefault(result.transactional_id, {})
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    errors[(topic.name, p.partition_index)] = int(p.partition_error_code)
        return out

    def _connection(self, queue: _Queue) -> KafkaConnection | None:
        broker_id = queue[0]
        conn = self._connections.get(queue)
        if conn is not None:
            return conn
        host = self._host
        info = next((b for b in host.live_brokers() if b.broker_id == broker_id), None)
        endpoint = None if info is None else info.endpoint(host.config.inter_broker_listener)
        if endpoint is None:
            return None
        conn = KafkaConnection(endpoint.host, endpoint.port, f"broker-{host.broker_id}-txn-verification",
                               host.inter_broker_security)
        self._connections[queue] = conn
        return conn

    async def close(self) -> None:
        for batch in self._waiting.values():
            for question in batch.values():
                question.answered(dict.fromkeys(question.partitions, int(E.network_exception)))
        self._waiting.clear()
        for task in list(self._senders.values()):
            task.cancel()
        for task in list(self._senders.values()):
            await asyncio.gather(task, return_exceptions=True)
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()


def _topics(partitions: list[TopicPartition]) -> list[tuple[str, tuple[i32, ...]]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return [(t, tuple(i32(p) for p in ps)) for t, ps in by_topic.items()]
