"""The transaction coordinator wired to a broker: `__transaction_state` through the broker's partitions, markers
through local appends or WriteTxnMarkers to the leaders, and the periodic timeout/expiration sweeps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.errors import ErrorCode as E
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers import v1, v2
from kio.static.primitive import i8, i16, i32

from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol.client import ClientSecurity, KafkaConnection
from kbus.protocol.errors import ProtocolError
from kbus.server.coordinator.state_topic import InternalTopicLog, StateReplicas, follow_leadership
from kbus.server.log.log import AppendResult
from kbus.server.metadata.types import TopicMetadata
from kbus.server.partition.partition import Partition
from kbus.server.transaction.coordinator import TopicPartition, TransactionConfig, TransactionCoordinator
from kbus.server.transaction.records import TRANSACTION_STATE_TOPIC
from kbus.server.transaction.verification import TransactionVerifier

log = logging.getLogger(__name__)

MarkerListener = Callable[[TopicPartition, int, bool], None]  # (partition, producer id, committed)
_WRITE_TXN_MARKERS = 27


class MarkerReplicas(Protocol):
    """What writing markers on local partitions needs: the replica manager's leader appends."""

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]: ...
    def append_records(
        self, part: Partition, records: bytes | bytearray, acks: int, *, from_coordinator: bool = False,
        transaction_version: int = 0,
    ) -> AppendResult: ...
    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None: ...


class TransactionHost(StateReplicas, Protocol):
    """What the transaction coordinator needs from the broker it runs in."""

    config: KafkaConfig
    broker_id: int
    inter_broker_security: ClientSecurity  # how markers reach other brokers

    def topics(self) -> dict[str, TopicMetadata]: ...
    def live_brokers(self) -> list[BrokerInfo]: ...
    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None: ...
    def allocate_producer_id(self) -> int: ...
    async def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None: ...


class LocalMarkerAppender(Protocol):
    """Writes markers on the partitions this broker leads (the WriteTxnMarkers handler's work)."""

    async def __call__(
        self, broker: MarkerReplicas, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
        partitions: set[TopicPartition], timeout_ms: int, listeners: list[MarkerListener], transaction_version: int,
    ) -> dict[TopicPartition, int]: ...


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class BrokerTransactionLog(InternalTopicLog):
    """`TransactionLog` over this broker's partitions of `__transaction_state` (acks=all appends)."""

    def __init__(self, broker: TransactionHost, timeout_ms: int) -> None:
        super().__init__(TRANSACTION_STATE_TOPIC, broker, timeout_ms)
        self._broker = broker

    def coordinator_epoch(self, partition: int) -> int:
        part = self._broker.get_partition(TRANSACTION_STATE_TOPIC, partition)
        return part.leader_epoch if part is not None else -1


class BrokerMarkerWriter:
    """`MarkerWriter`: local partitions are appended here; the others get WriteTxnMarkers on their leader."""

    def __init__(self, broker: TransactionHost, timeout_ms: int, listeners: list[MarkerListener],
                 append_local: LocalMarkerAppender) -> None:
        self._broker = broker
        self._append_local = append_local
        self._timeout_ms = timeout_ms
        self._listeners = listeners
        self._connections: dict[int, KafkaConnection] = {}
        self._marker_versions: dict[int, int] = {}  # the WriteTxnMarkers version each connected broker speaks
        # a KafkaConnection carries one request at a time, and transactions complete concurrently (each in its own
        # task): two sends to one broker queue here, as Kafka's TransactionMarkerChannelManager queues them per
        # broker. Without it the second raised "a request is already in flight" and left its transaction in
        # PrepareCommit/PrepareAbort for good.
        self._sending: dict[int, asyncio.Lock] = {}

    async def write_markers(
        self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
        partitions: set[TopicPartition], transaction_version: int,
    ) -> dict[TopicPartition, int]:
        broker = self._broker
        local: set[TopicPartition] = set()
        remote: dict[int, set[TopicPartition]] = {}
        results: dict[TopicPartition, int] = {}
        for tp in partitions:
            leader = broker.partition_leader(*tp)
            if leader is None:
                part, error = broker.leader_partition(*tp)
                results[tp] = error if part is None else E.none
                if part is not None:
                    local.add(tp)
            elif leader.broker_id == broker.broker_id:
                local.add(tp)
            else:
                remote.setdefault(leader.broker_id, set()).add(tp)
        if local:
            results.update(await self._append_local(broker, producer_id, producer_epoch, committed, coordinator_epoch,
                                                local, self._timeout_ms, self._listeners, transaction_version))
        sends = [self._send(b, tps, producer_id, producer_epoch, committed, coordinator_epoch, transaction_version)
                 for b, tps in remote.items()]
        for answer in await asyncio.gather(*sends):
            results.update(answer)
        return results

    async def _send(self, broker_id: int, tps: set[TopicPartition], producer_id: int, producer_epoch: int,
                    committed: bool, coordinator_epoch: int, transaction_version: int) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        timeout = self._timeout_ms / 1000 + 5
        lock = self._sending.get(broker_id)
        if lock is None:
            lock = self._sending[broker_id] = asyncio.Lock()
        async with lock:
            return await self._send_one(broker_id, tps, by_topic, producer_id, producer_epoch, committed,
                                        coordinator_epoch, transaction_version, timeout)

    async def _send_one(self, broker_id: int, tps: set[TopicPartition], by_topic: dict[str, list[int]],
                        producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                        transaction_version: int, timeout: float) -> dict[TopicPartition, int]:
        """One WriteTxnMarkers to the leader BROKER_ID, under its connection's lock (_send)."""
        response: v1.response.WriteTxnMarkersResponse | v2.response.WriteTxnMarkersResponse
        try:
            conn = self._connection(broker_id)
            if conn is None:
                return dict.fromkeys(tps, E.not_leader_or_follower)
            if transaction_version >= 2 and await self._marker_version(broker_id, conn, timeout) >= 2:
                response = await conn.request(v2.request.WriteTxnMarkersRequest(markers=(v2.request.WritableTxnMarker(
                    producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                    transaction_result=committed, coordinator_epoch=i32(coordinator_epoch),
                    transaction_version=i8(transaction_version),
                    topics=tuple(v2.request.WritableTxnMarkerTopic(name=TopicName(t),
                                                                   partition_indexes=tuple(i32(p) for p in ps))
                                 for t, ps in by_topic.items()),
                ),)), v2.response.WriteTxnMarkersResponse, timeout=timeout)
            else:
                # v1 (or a broker without v2: Kafka's version negotiation drops the ignorable field the same
                # way, and that broker checks the marker's epoch the legacy way)
                response = await conn.request(v1.request.WriteTxnMarkersRequest(markers=(v1.request.WritableTxnMarker(
                    producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                    transaction_result=committed, coordinator_epoch=i32(coordinator_epoch),
                    topics=tuple(v1.request.WritableTxnMarkerTopic(name=TopicName(t),
                                                                   partition_indexes=tuple(i32(p) for p in ps))
                                 for t, ps in by_topic.items()),
                ),)), v1.response.WriteTxnMarkersResponse, timeout=timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, ProtocolError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", broker_id, exc)
            conn = self._connections.pop(broker_id, None)
            self._marker_versions.pop(broker_id, None)  # it may come back another version
            if conn is not None:
                await conn.close()
            return dict.fromkeys(tps, E.not_leader_or_follower)
        out: dict[TopicPartition, int] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for result in topic.partitions:
                    out[(topic.name, result.partition_index)] = int(result.error_code)
        for tp in tps:
            out.setdefault(tp, E.unknown_server_error)
        return out

    async def _marker_version(self, broker_id: int, conn: KafkaConnection, timeout: float) -> int:
        """The highest WriteTxnMarkers version (up to 2) the broker speaks, asked once per connection
        (ApiVersions), as Kafka's NetworkClient negotiates: a kbus from before v2 closes the connection on it."""
        version = self._marker_versions.get(broker_id)
        if version is None:
            answer = await conn.request(ApiVersionsRequest(), ApiVersionsResponse, timeout=timeout)
            top = next((int(k.max_version) for k in answer.api_keys if k.api_key == _WRITE_TXN_MARKERS), 1)
            version = self._marker_versions[broker_id] = min(top, 2)
        return version

    def _connection(self, broker_id: int) -> KafkaConnection | None:
        conn = self._connections.get(broker_id)
        if conn is not None:
            return conn
        info = next((b for b in self._broker.live_brokers() if b.broker_id == broker_id), None)
        # markers go over the inter-broker listener (Kafka's inter.broker.listener.name)
        endpoint = None if info is None else info.endpoint(self._broker.config.inter_broker_listener)
        if endpoint is None:
            return None
        conn = KafkaConnection(
            endpoint.host,
            endpoint.port,
            f"broker-{self._broker.broker_id}-txn-markers",
            self._broker.inter_broker_security,  # TLS/SASL of the inter-broker listener
        )
        self._connections[broker_id] = conn
        return conn

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
        self._marker_versions.clear()


class TransactionService:
    """Owns the coordinator, its ports and its sweeps for one broker."""

    def __init__(self, broker: TransactionHost, append_local: LocalMarkerAppender) -> None:
        cfg = broker.config
        self.broker = broker
        self.config = TransactionConfig(
            num_partitions=cfg.transaction_state_log_num_partitions,
            max_timeout_ms=cfg.transaction_max_timeout_ms,
            abort_check_interval_ms=cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            id_expiration_ms=cfg.transactional_id_expiration_ms,
            remove_expired_interval_ms=cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
        )
        self.marker_listeners: list[MarkerListener] = []
        timeout_ms = cfg.request_timeout_ms
        self.request_timeout_ms = timeout_ms
        self.markers = BrokerMarkerWriter(broker, timeout_ms, self.marker_listeners, append_local)

        def state_partitions() -> int | None:
            t = broker.topics().get(TRANSACTION_STATE_TOPIC)
            return len(t.partitions) if t is not None else None

        self.coordinator = TransactionCoordinator(
            self.config, BrokerTransactionLog(broker, timeout_ms), self.markers, broker.allocate_producer_id,
            wall_clock_ms, state_partitions=state_partitions,
        )
        self.verifier = TransactionVerifier(broker, self.coordinator, timeout_ms)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        follow_leadership(self.broker, TRANSACTION_STATE_TOPIC, self.coordinator)
        self._tasks = [
            asyncio.ensure_future(self._every(self.config.abort_check_interval_ms, self.coordinator.abort_timed_out)),
            asyncio.ensure_future(self._every(self.config.remove_expired_interval_ms,
                                              self.coordinator.remove_expired)),
        ]

    async def _every(self, interval_ms: int, sweep: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                result = sweep()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("transaction coordinator sweep failed")

    def state_partition_for(self, transactional_id: str) -> TopicPartition:
        return TRANSACTION_STATE_TOPIC, self.coordinator.partition_for(transactional_id)

    async def ensure_state_topic(self) -> None:
        cfg = self.broker.config
        # never more in-sync replicas than a small (or standalone) cluster can give the topic
        min_isr = max(1, min(cfg.transaction_state_log_min_isr, cfg.transaction_state_log_replication_factor,
                             len(self.broker.live_brokers())))
        await self.broker.ensure_topic(
            TRANSACTION_STATE_TOPIC,
            cfg.transaction_state_log_num_partitions,
            cfg.transaction_state_log_replication_factor,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(min_isr),
                "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
                "unclean.leader.election.enable": "false",
            },
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.coordinator.shutdown()
        await self.markers.close()
        await self.verifier.close()
