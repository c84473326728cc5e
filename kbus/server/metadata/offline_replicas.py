"""How the controller learns which replicas a broker lost with a failed log dir.

Kafka's controller answers a log dir event by sending LeaderAndIsr for every replica on the broker; the broker
answers KAFKA_STORAGE_ERROR for those in an offline dir. kbus brokers follow ZooKeeper, not LeaderAndIsr, so the
controller asks the broker the question Kafka's tools ask (DescribeLogDirs over the inter-broker listener): a
replica assigned to the broker that no online dir of the broker holds is offline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from kbus.common.cluster import BrokerInfo
from kbus.protocol.client import ClientSecurity, KafkaConnection
from kbus.protocol.codec import build

log = logging.getLogger("kbus.server.metadata.zk_store")

TopicPartition = tuple[str, int]
# (broker, the replicas assigned to it) -> those it cannot serve, or None when the broker did not answer
OfflineReplicaProbe = Callable[[BrokerInfo, Collection[TopicPartition]], set[TopicPartition] | None]

_VERSION = 1
_Request, _Response = load_request_schema(35, _VERSION), load_response_schema(35, _VERSION)


def describe_log_dirs_probe(security: ClientSecurity, timeout_s: float = 5.0) -> OfflineReplicaProbe:
    """The probe the controller uses: blocking (it runs on the ZooKeeper event thread, as Kafka's controller
    waits on its channel), bounded by `timeout_s`."""

    def probe(broker: BrokerInfo, assigned: Collection[TopicPartition]) -> set[TopicPartition] | None:
        try:
            hosted = asyncio.run(asyncio.wait_for(_hosted_replicas(broker, security, timeout_s), timeout_s))
        except Exception as e:
            log.warning("Could not ask broker %d for its offline replicas: %s", broker.broker_id, e)
            return None
        return {tp for tp in assigned if tp not in hosted}

    return probe


async def _hosted_replicas(broker: BrokerInfo, security: ClientSecurity, timeout_s: float) -> set[TopicPartition]:
    conn = KafkaConnection(broker.host, broker.port, "kbus-controller", security)
    await conn.connect(timeout_s)
    try:
        response = await conn.request(build(_Request, topics=None), _Response, timeout_s)
    finally:
        await conn.close()
    return {
        (topic.name, int(p.partition_index))
        for result in response.results
        if result.error_code == ErrorCode.none
        for topic in result.topics
        for p in topic.partitions
        if not p.is_future_key
    }
