"""Brokers as a client sees them: through the listener its request came in on (Kafka's Metadata rule)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode as E

from kbus.common.cluster import BrokerEndpoint, BrokerInfo
from kbus.server.apis.registry import RequestContext

if TYPE_CHECKING:
    from kbus.server.apis.managers import Managers

NO_COORDINATOR = (int(E.coordinator_not_available), -1, "", -1)


def on_listener(ctx: RequestContext, brokers: Iterable[BrokerInfo]) -> list[tuple[BrokerInfo, BrokerEndpoint]]:
    """Each broker with its endpoint on the client's listener; brokers without that listener are left out (a
    client on an INTERNAL listener must not be sent to an EXTERNAL address, and vice versa)."""
    out = []
    for b in brokers:
        ep = b.endpoint(ctx.listener.name)
        if ep is not None:
            out.append((b, ep))
    return out


def coordinator_endpoint(
    m: Managers, topic: str, partition: int, listener: str, coordinates_here: Callable[[int], bool]
) -> tuple[int, int, str, int]:
    """FindCoordinator's answer, (error, node_id, host, port) on the client's listener: the leader of the key's
    partition of the coordinator's state topic. COORDINATOR_NOT_AVAILABLE while the partition has no leader, and
    also while the metadata already names this broker but its coordinator has not taken the partition yet (the
    replica manager is still applying the leadership, e.g. of a state topic created a moment ago by another
    request): naming ourselves then sent the client's next request (OffsetFetch, InitProducerId) into
    NOT_COORDINATOR. Once taken, a load in progress answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's does."""
    leader = m.cluster.partition_leader(topic, partition)
    endpoint = None if leader is None else leader.endpoint(listener)
    if leader is None or endpoint is None:
        return NO_COORDINATOR
    if leader.broker_id == m.broker_id and not coordinates_here(partition):
        return NO_COORDINATOR
    return int(E.none), leader.broker_id, endpoint.host, endpoint.port
