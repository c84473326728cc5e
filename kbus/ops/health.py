"""Is a broker healthy? It answers, and every partition it hosts is fully in sync.

Two views of the same rule: `evaluate` reads a live Broker object (the /health endpoint), `check_over_wire`
asks a running broker over the Kafka protocol (`kbus broker-health`), so it also works on brokers without a
metrics port.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbus.ops.broker_metrics import BrokerView


@dataclass
class HealthReport:
    broker_id: int
    partitions: int = 0
    under_replicated: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not (self.under_replicated or self.offline or self.problems)

    def summary(self) -> str:
        if self.healthy:
            return f"broker {self.broker_id} is healthy: {self.partitions} partitions, all in sync"
        issues = list(self.problems)
        if self.offline:
            issues.append(f"{len(self.offline)} offline partitions ({_names(self.offline)})")
        if self.under_replicated:
            issues.append(f"{len(self.under_replicated)} under-replicated partitions ({_names(self.under_replicated)})")
        return f"broker {self.broker_id} is not healthy: " + "; ".join(issues)

    def as_dict(self) -> dict[str, object]:
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "broker_id": self.broker_id,
            "partitions": self.partitions,
            "under_replicated_partitions": self.under_replicated,
            "offline_partitions": self.offline,
            "problems": self.problems,
        }


def _names(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... {len(items) - limit} more" if len(items) > limit else "")


def evaluate(broker: BrokerView) -> HealthReport:
    """Health from inside the broker process."""
    report = HealthReport(broker.broker_id)
    if broker.stopping:
        report.problems.append("shutting down")
    for (topic, index), part in sorted(broker.partitions.items()):
        report.partitions += 1
        if part.state.leader < 0:
            report.offline.append(f"{topic}-{index}")
        elif part.is_leader and len(part.state.isr) < len(part.state.replicas):
            report.under_replicated.append(f"{topic}-{index}")
    return report


@dataclass(frozen=True)
class PartitionView:
    """What a Metadata response says about one partition (the wire view)."""

    topic: str
    index: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def evaluate_metadata(broker_id: int, partitions: Iterable[PartitionView]) -> HealthReport:
    """Health of `broker_id` from cluster metadata: the partitions it is a replica of must have a leader, and the
    ones it leads must have their whole replica set in sync. broker_id -1 (unknown) checks every partition."""
    report = HealthReport(broker_id)
    for p in sorted(partitions, key=lambda v: (v.topic, v.index)):
        if broker_id >= 0 and broker_id not in p.replicas:
            continue
        report.partitions += 1
        if p.leader < 0:
            report.offline.append(f"{p.topic}-{p.index}")
        elif (broker_id < 0 or p.leader == broker_id) and len(p.isr) < len(p.replicas):
            report.under_replicated.append(f"{p.topic}-{p.index}")
    return report


class BrokerUnreachable(Exception):
    """No answer from the broker; the message says why in one line."""


def check_over_wire(bootstrap: str, timeout: float = 10.0, client_config: dict[str, Any] | None = None) -> HealthReport:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kbus.common.bootstrap import check_reachable

    try:
        check_reachable(bootstrap)
    except ConnectionError as exc:
        raise BrokerUnreachable(str(exc)) from None
    # client_config: a secured listener's settings (security.protocol, sasl.*, ssl.*), from --command-config
    admin = AdminClient(
        {**(client_config or {}), "bootstrap.servers": bootstrap, "log_level": 0, "logger": _quiet_logger()}
    )
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerUnreachable(f"no metadata from {bootstrap} within {timeout:g} s: {exc.args[0].str()}") from None
    views = [
        PartitionView(t.topic or "", p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
        for t in md.topics.values()
        for p in t.partitions.values()
    ]
    report = evaluate_metadata(answering_broker(bootstrap, md.orig_broker_id, md.brokers.values()), views)
    for t in md.topics.values():
        if t.error is not None:
            report.problems.append(f"topic {t.topic}: {t.error.str()}")
    return report


def answering_broker(bootstrap: str, orig_broker_id: int, brokers: Iterable[Any]) -> int:
    """The id of the broker behind `bootstrap`. librdkafka reports metadata from a bootstrap connection as broker
    -1, so match the address against the advertised brokers: host and port, else a unique port, else the only
    broker; -1 when that is still ambiguous."""
    if orig_broker_id >= 0:
        return orig_broker_id
    from kbus.common.bootstrap import validate_bootstrap

    host, port = validate_bootstrap(bootstrap)[0]
    known = list(brokers)
    for matches in (
        [b.id for b in known if b.port == port and b.host == host],
        [b.id for b in known if b.port == port],
        [b.id for b in known],
    ):
        if len(matches) == 1:
            return int(matches[0])
    return -1


def _quiet_logger() -> Any:
    """librdkafka logs connection failures to stderr by default; the one-line verdict is all we want to print."""
    import logging

    quiet = logging.getLogger("kbus.ops.health.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    return quiet
