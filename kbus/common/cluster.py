"""What a broker registers about itself (Kafka's /brokers/ids/<id> in ZooKeeper, the Metadata response's
brokers): read by the broker's metadata stores, the ZooKeeper codec and the tools."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerEndpoint:
    """One advertised listener of a broker (Kafka's EndPoint)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str  # host/port: the broker's first advertised endpoint (or its PLAINTEXT one)
    port: int
    rack: str | None = None
    endpoints: tuple[BrokerEndpoint, ...] = ()  # every advertised listener

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        """Where a client that reached some broker on `listener` finds this one (Kafka: Metadata answers with
        the endpoints of the listener the request came in on); None when this broker has no such listener."""
        if not self.endpoints:  # registered without listener names: one endpoint serves every listener
            return BrokerEndpoint(listener, self.host, self.port)
        return next((e for e in self.endpoints if e.listener == listener), None)
