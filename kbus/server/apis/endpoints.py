"""Brokers as a client sees them: through the listener its request came in on (Kafka's Metadata rule)."""

from __future__ import annotations

from collections.abc import Iterable

from kbus.common.cluster import BrokerEndpoint, BrokerInfo
from kbus.server.apis.registry import RequestContext


def on_listener(ctx: RequestContext, brokers: Iterable[BrokerInfo]) -> list[tuple[BrokerInfo, BrokerEndpoint]]:
    """Each broker with its endpoint on the client's listener; brokers without that listener are left out (a
    client on an INTERNAL listener must not be sent to an EXTERNAL address, and vice versa)."""
    out = []
    for b in brokers:
        ep = b.endpoint(ctx.listener.name)
        if ep is not None:
            out.append((b, ep))
    return out
