"""What a broker registers about itself (Kafka's /brokers/ids/<id> in ZooKeeper, the Metadata response's
brokers): read by the broker's metadata stores, the ZooKeeper codec and the tools."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerEndpoint:
    """One advertised listener of a broker (Kafka's EndPoint)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


# The feature levels this kbus supports (Kafka's BrokerIdZNode "features", KIP-584): transaction.version 2 is
# transactions v2 (KIP-890 part 2). Name, lowest and highest supported level.
SUPPORTED_FEATURES: tuple[tuple[str, int, int], ...] = (("transaction.version", 0, 2),)
# ... as registered in /brokers/ids/<id>: from level 1, since Kafka 2.7-3.x's parser of the field refuses level 0
# (KIP-1022 allowed it in 4.0) and Kafka 2.8's --zookeeper tools read the registrations
REGISTERED_FEATURES = tuple((name, max(low, 1), high) for name, low, high in SUPPORTED_FEATURES)


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str  # host/port: the broker's first advertised endpoint (or its PLAINTEXT one)
    port: int
    rack: str | None = None
    endpoints: tuple[BrokerEndpoint, ...] = ()  # every advertised listener
    # the feature levels it registered (name, min, max); a kbus from before features were registered has none
    supported_features: tuple[tuple[str, int, int], ...] = REGISTERED_FEATURES
    # the ZooKeeper transaction that created its /brokers/ids/<id> (czxid): a later registration has a higher one,
    # whatever the brokers' clocks say; the finalized features' epoch is the newest one's
    registration_zxid: int = field(default=0, compare=False)

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        """Where a client that reached some broker on `listener` finds this one (Kafka: Metadata answers with
        the endpoints of the listener the request came in on); None when this broker has no such listener."""
        if not self.endpoints:  # registered without listener names: one endpoint serves every listener
            return BrokerEndpoint(listener, self.host, self.port)
        return next((e for e in self.endpoints if e.listener == listener), None)
