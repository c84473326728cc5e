"""How a share-partition leader reads and writes its durable state (Kafka's DefaultStatePersister): through the
share coordinator of the share-partition's key, in this broker when it leads that key's partition of
`__share_group_state`, else with ReadShareGroupState/WriteShareGroupState v0 over the inter-broker listener.
`__share_group_state` is created on first use, as FindCoordinator creates the other state topics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData
from kio.schema.read_share_group_state.v0.response import ReadShareGroupStateResponse
from kio.schema.write_share_group_state.v0.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v0.request import StateBatch, WriteShareGroupStateRequest, WriteStateData
from kio.schema.write_share_group_state.v0.response import WriteShareGroupStateResponse
from kio.static.primitive import i8, i16, i32, i64

from kbus.common.topics import SHARE_GROUP_STATE_TOPIC
from kbus.protocol.client import ClientSecurity, KafkaConnection
from kbus.server.share.coordinator import ShareCoordinator, ShareCoordinatorError
from kbus.server.share.manager import PersisterError
from kbus.server.share.state import ShareState, ShareStateKey

if TYPE_CHECKING:
    from kbus.common.broker_config import KafkaConfig
    from kbus.common.cluster import BrokerInfo

log = logging.getLogger("kbus.share")
T = TypeVar("T")
R = TypeVar("R")
RETRIABLE = {E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress,
             E.not_leader_or_follower, E.unknown_topic_or_partition}


class StateTopicCluster(Protocol):
    def brokers(self) -> list[BrokerInfo]: ...
    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None: ...


class StateTopicAdmin(Protocol):
    async def ensure_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> object: ...


class PersisterHost(Protocol):
    """What the persister uses of the handlers' Managers (kbus.server.apis.managers, a layer above this one): the
    broker's id and config, the cluster view, and ensure_topic for __share_group_state."""

    @property
    def config(self) -> KafkaConfig: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def cluster(self) -> StateTopicCluster: ...
    @property
    def admin(self) -> StateTopicAdmin: ...


class SharePersister:
    def __init__(self, m: PersisterHost, coordinator: ShareCoordinator, security: ClientSecurity,
                 timeout_ms: int) -> None:
        self._m = m
        self._coordinator = coordinator
        self._security = security
        self._timeout_s = timeout_ms / 1000
        self._connections: dict[int, KafkaConnection] = {}
        self._topic_ready = False

    async def _ensure_topic(self) -> None:
        if self._topic_ready:
            return
        topic = self._coordinator.state_topic()
        await self._m.admin.ensure_topic(topic.name, topic.num_partitions, topic.replication_factor, topic.configs)
        self._topic_ready = True

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        return await self._retrying(lambda: self._read_once(key, leader_epoch))

    async def write(self, key: ShareStateKey, state: ShareState) -> None:
        await self._retrying(lambda: self._write_once(key, state))

    async def _retrying(self, op: Callable[[], Awaitable[T]]) -> T:
        """A coordinator moving (its partition's leader changing, or loading) is waited out within the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        while True:
            try:
                await self._ensure_topic()
                return await op()
            except PersisterError as exc:
                if exc.code not in RETRIABLE or loop.time() >= deadline:
                    raise
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
                if loop.time() >= deadline:
                    raise PersisterError(E.coordinator_not_available, str(exc)) from exc
            await asyncio.sleep(0.1)

    def _coordinator_broker(self, key: ShareStateKey) -> int | None:
        partition = self._coordinator.partition_for(key.coordinator_key())
        if self._coordinator.coordinates(partition):
            return self._m.broker_id
        leader = self._m.cluster.partition_leader(SHARE_GROUP_STATE_TOPIC, partition)
        return None if leader is None else leader.broker_id

    async def _read_once(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        broker = self._coordinator_broker(key)
        if broker is None:
            raise PersisterError(E.coordinator_not_available)
        if broker == self._m.broker_id:
            try:
                return self._coordinator.read(key, leader_epoch)
            except ShareCoordinatorError as exc:
                raise PersisterError(exc.code) from exc
        request = ReadShareGroupStateRequest(group_id=key.group_id, topics=(ReadStateData(
            topic_id=key.topic_id, partitions=(ReadPartition(partition=i32(key.partition),
                                                             leader_epoch=i32(leader_epoch)),)),))
        resp = await self._send(broker, request, ReadShareGroupStateResponse)
        result = resp.results[0].partitions[0]
        if result.error_code != E.none:
            raise PersisterError(int(result.error_code), result.error_message or "")
        if result.start_offset < 0 and result.state_epoch == 0:
            return None
        return ShareState(result.state_epoch, leader_epoch, result.start_offset, tuple(
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches))

    async def _write_once(self, key: ShareStateKey, state: ShareState) -> None:
        broker = self._coordinator_broker(key)
        if broker is None:
            raise PersisterError(E.coordinator_not_available)
        if broker == self._m.broker_id:
            try:
                await self._coordinator.write(key, state)
                return
            except ShareCoordinatorError as exc:
                raise PersisterError(exc.code) from exc
        request = WriteShareGroupStateRequest(group_id=key.group_id, topics=(WriteStateData(
            topic_id=key.topic_id, partitions=(WritePartition(
                partition=i32(key.partition), state_epoch=i32(state.state_epoch),
                leader_epoch=i32(state.leader_epoch), start_offset=i64(state.start_offset),
                state_batches=tuple(StateBatch(first_offset=i64(f), last_offset=i64(la), delivery_state=i8(s),
                                               delivery_count=i16(c)) for f, la, s, c in state.batches)),)),))
        resp = await self._send(broker, request, WriteShareGroupStateResponse)
        result = resp.results[0].partitions[0]
        if result.error_code != E.none:
            raise PersisterError(int(result.error_code), result.error_message or "")

    async def _send(self, broker_id: int, request: object, response_type: type[R]) -> R:
        conn = self._connections.get(broker_id)
        if conn is None:
            info = next((b for b in self._m.cluster.brokers() if b.broker_id == broker_id), None)
            endpoint = None if info is None else info.endpoint(self._m.config.inter_broker_listener)
            if endpoint is None:
                raise PersisterError(E.coordinator_not_available)
            conn = KafkaConnection(endpoint.host, endpoint.port, f"broker-{self._m.broker_id}-share-persister",
                                   self._security)
            self._connections[broker_id] = conn
        try:
            response: R = await conn.request(request, response_type, timeout=self._timeout_s)
            return response
        except BaseException:
            self._connections.pop(broker_id, None)
            await conn.close()
            raise

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
