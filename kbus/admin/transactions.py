"""The admin calls behind `kbus transactions` (Kafka's Admin.listTransactions, describeTransactions,
describeProducers, abortTransaction), spoken on the wire: librdkafka's AdminClient has none of them.

Cluster metadata (brokers, partition leaders) comes from librdkafka; each transaction API goes straight to the
broker that answers it: ListTransactions to every broker, DescribeTransactions to the id's coordinator,
DescribeProducers and WriteTxnMarkers (an abort) to the partition's leader."""

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_producers.v0.response import DescribeProducersResponse
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.list_transactions.v1.response import ListTransactionsResponse
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from kbus.admin.errors import AdminError
from kbus.protocol.client import PLAINTEXT, ClientSecurity, KafkaConnection

TRANSACTION_KEY_TYPE = i8(1)


# DescribeTransactions v0 as kio defines it, except the start time: Kafka sends -1 when no transaction is under way
# (Empty state, unknown id) and kio's datetime reader refuses negative timestamps, so it is read as a plain int64.
@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class _TransactionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: str = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: i32 = field(metadata={"kafka_type": "int32"})
    transaction_start_time: i64 = field(metadata={"kafka_type": "int64"})
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[_TopicData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _DescribeTransactionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32 = field(metadata={"kafka_type": "int32"})
    transaction_states: tuple[_TransactionState, ...]


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: no transaction under way
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int  # -1: none


def _error(code: Any, what: str) -> AdminError:
    name = ErrorCode(int(code)).name.upper()
    return AdminError(f"{what} failed: {name}", name)


class TransactionsAdmin:
    def __init__(
        self,
        bootstrap: str,
        config: dict[str, str] | None = None,
        timeout_s: float = 10.0,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.security = security  # for the requests kbus sends itself (TLS/SASL of the listener)
        conf: dict[str, Any] = {"client.id": "kbus-transactions", "log_level": 0, **(config or {})}
        conf["bootstrap.servers"] = bootstrap
        self._client = AdminClient(conf)

    # --- plumbing -------------------------------------------------------------------------------

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self._client.list_topics(topic=topic, timeout=self.timeout_s)
        except KafkaException as exc:
            raise AdminError(
                f"Timed out waiting for a broker at {self.bootstrap}: {exc.args[0].str()}", "_TIMED_OUT"
            ) from None

    def _brokers(self) -> dict[int, tuple[str, int]]:
        return {b.id: (b.host, b.port) for b in self._metadata().brokers.values()}

    def leader_of(self, topic: str, partition: int) -> int:
        t = self._metadata().topics.get(topic)  # never topic=: that would auto-create it
        if t is None or t.error is not None or partition not in t.partitions:
            raise AdminError(f"Topic partition {topic}-{partition} does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
        leader = t.partitions[partition].leader
        if leader < 0:
            raise AdminError(f"{topic}-{partition} has no leader", "LEADER_NOT_AVAILABLE")
        return int(leader)

    def partitions_of(self, topic: str | None = None, broker_id: int | None = None) -> list[tuple[str, int]]:
        md = self._metadata()
        out = []
        for name, t in md.topics.items():
            if t.error is not None or (topic is not None and name != topic):
                continue
            for p in t.partitions.values():
                if broker_id is None or broker_id in p.replicas:
                    out.append((name, p.id))
        return sorted(out)

    def _call(self, broker_id: int, request: Any, response_type: type) -> Any:
        host, port = self._brokers().get(broker_id, ("", 0))
        if not host:
            raise AdminError(f"Broker {broker_id} is not in the cluster's metadata", "BROKER_NOT_AVAILABLE")

        async def go() -> Any:
            conn = KafkaConnection(host, port, "kbus-transactions", self.security)
            try:
                await conn.connect(self.timeout_s)
                return await conn.request(request, response_type, timeout=self.timeout_s)
            finally:
                await conn.close()

        try:
            return asyncio.run(go())
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise AdminError(f"Could not reach broker {broker_id} at {host}:{port}: {exc}", "_TRANSPORT") from None

    # --- the calls ------------------------------------------------------------------------------

    def find_coordinator(self, transactional_id: str) -> int:
        any_broker = min(self._brokers())
        resp = self._call(
            any_broker,
            FindCoordinatorRequest(key_type=TRANSACTION_KEY_TYPE, coordinator_keys=(transactional_id,)),
            FindCoordinatorResponse,
        )
        c = resp.coordinators[0]
        if c.error_code != ErrorCode.none:
            raise _error(c.error_code, f"Finding the coordinator of transactional-id `{transactional_id}`")
        return int(c.node_id)

    def list_transactions(
        self, states: tuple[str, ...] = (), producer_ids: tuple[int, ...] = (), duration_ms: int = -1
    ) -> list[TransactionListing]:
        out = []
        for broker_id in sorted(self._brokers()):
            resp = self._call(
                broker_id,
                ListTransactionsRequest(
                    state_filters=states,
                    producer_id_filters=tuple(ProducerId(p) for p in producer_ids),
                    duration_filter=i64(duration_ms),
                ),
                ListTransactionsResponse,
            )
            if resp.error_code != ErrorCode.none:
                raise _error(resp.error_code, f"ListTransactions on broker {broker_id}")
            for t in resp.transaction_states:
                out.append(TransactionListing(t.transactional_id, broker_id, int(t.producer_id), t.transaction_state))
        return out

    def describe(self, transactional_id: str) -> TransactionDescription:
        coordinator = self.find_coordinator(transactional_id)
        resp = self._call(
            coordinator,
            DescribeTransactionsRequest(transactional_ids=(TransactionalId(transactional_id),)),
            _DescribeTransactionsResponse,
        )
        s = resp.transaction_states[0]
        if s.error_code == ErrorCode.transactional_id_not_found:
            raise AdminError(
                f"DescribeTransactions request for transactionalId `{transactional_id}` failed because "
                "the ID could not be found",
                "TRANSACTIONAL_ID_NOT_FOUND",
            )
        if s.error_code != ErrorCode.none:
            raise _error(s.error_code, f"DescribeTransactions for transactionalId `{transactional_id}`")
        return TransactionDescription(
            coordinator,
            s.transactional_id,
            int(s.producer_id),
            int(s.producer_epoch),
            s.transaction_state,
            int(s.transaction_timeout),
            int(s.transaction_start_time),
            tuple((t.topic, int(p)) for t in s.topics for p in t.partitions),
        )

    def describe_producers(self, topic: str, partition: int, broker_id: int | None = None) -> list[ProducerState]:
        target = broker_id if broker_id is not None else self.leader_of(topic, partition)
        resp = self._call(
            target,
            DescribeProducersRequest(
                topics=(TopicRequest(name=TopicName(topic), partition_indexes=(i32(partition),)),)
            ),
            DescribeProducersResponse,
        )
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.none:
            raise _error(p.error_code, f"DescribeProducers for {topic}-{partition}")
        return [
            ProducerState(
                int(s.producer_id),
                int(s.producer_epoch),
                int(s.coordinator_epoch),
                int(s.last_sequence),
                int(s.last_timestamp),
                int(s.current_txn_start_offset),
            )
            for s in p.active_producers
        ]

    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Kafka's Admin.abortTransaction: an ABORT marker written on the partition's leader."""
        leader = self.leader_of(topic, partition)
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=ProducerId(producer_id),
                    producer_epoch=i16(producer_epoch),
                    transaction_result=False,
                    coordinator_epoch=i32(coordinator_epoch),
                    topics=(WritableTxnMarkerTopic(name=TopicName(topic), partition_indexes=(i32(partition),)),),
                ),
            )
        )
        resp = self._call(leader, request, WriteTxnMarkersResponse)
        code = resp.markers[0].topics[0].partitions[0].error_code
        if code != ErrorCode.none:
            raise _error(code, f"Aborting the transaction of producer {producer_id} on {topic}-{partition}")


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int


def hanging_transactions(
    admin: TransactionsAdmin, partitions: list[tuple[str, int]], max_timeout_ms: int, now_ms: int,
    broker_id: int | None = None,
) -> list[HangingTransaction]:
    """Kafka's FindHangingTransactionsCommand: an open transaction on a partition, silent for longer than the
    maximum transaction timeout, that its coordinator no longer has Ongoing with this partition."""
    out: list[HangingTransaction] = []
    for t, p in partitions:
        for prod in admin.describe_producers(t, p, broker_id):
            if prod.current_txn_start_offset < 0 or now_ms - prod.last_timestamp <= max_timeout_ms:
                continue
            if _still_open_on_coordinator(admin, prod.producer_id, prod.producer_epoch, (t, p)):
                continue
            out.append(HangingTransaction(t, p, prod.producer_id, prod.producer_epoch, prod.coordinator_epoch,
                                          prod.current_txn_start_offset, prod.last_timestamp))
    return out


def _still_open_on_coordinator(admin: TransactionsAdmin, producer_id: int, epoch: int, tp: tuple[str, int]) -> bool:
    """A candidate is not hanging if its coordinator still has it Ongoing with this partition in it."""
    for listing in admin.list_transactions(producer_ids=(producer_id,)):
        try:
            d = admin.describe(listing.transactional_id)
        except AdminError:
            continue
        if d.producer_id == producer_id and d.producer_epoch == epoch and d.state == "Ongoing" and tp in d.partitions:
            return True
    return False
