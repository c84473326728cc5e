"""`num.broker.processes=N` (kbus's own key): one server.properties, N broker processes on one host, one per core.

A kbus broker is one event loop on one core. Rather than split one broker id over cores (which would need every
request for a partition forwarded to the process that owns it), each process is a whole Kafka broker with its own
id, port and log directories; clients already send each partition's requests to the broker that leads it, so the
load spreads over the processes with no forwarding (docs/cores.md says why, and what it costs).

This module is the one place that derives process i's settings from the shared file (no I/O):

| key | process i (0-based) |
|---|---|
| `broker.id` | `broker.id + i` (so hosts' `broker.id` must be at least N apart) |
| `listeners`, `advertised.listeners` | every port `+ i` |
| `log.dirs` | every directory `/broker-<id>` |
| `metrics.port` | `+ i` when set (> 0) |
| `broker.rack` | the host name when not set, so rack-aware assignment puts a partition's replicas on other hosts |
| `num.broker.processes` | 1 (the process is a plain broker) |

What cannot work is refused at start with one line: no ZooKeeper (each process would be a separate one-broker
cluster), `broker.id` left to -1, a port 0 (nobody could find process i), ports of different processes colliding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbus.common.broker_config import ConfigError, KafkaConfig, Listener

KEY = "num.broker.processes"


@dataclass(frozen=True)
class BrokerProcessSpec:
    """Process `index` of the set: its broker id and the overrides that make it that broker."""

    index: int
    broker_id: int
    overrides: dict[str, str]

    def override_args(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.overrides.items()]


def _shift(listeners: list[Listener], by: int) -> str:
    def one(lst: Listener) -> str:
        host = f"[{lst.host}]" if ":" in lst.host else lst.host
        return f"{lst.name}://{host}:{lst.port + by}"

    return ",".join(one(lst) for lst in listeners)


def broker_process_specs(config: KafkaConfig, hostname: str) -> list[BrokerProcessSpec]:
    """The N processes `config` asks for, validated; [] when num.broker.processes is 1 (a plain broker)."""
    n = config.num_broker_processes
    if n == 1:
        return []
    if not config.zookeeper_connect:
        raise ConfigError(
            f"{KEY}={n} needs zookeeper.connect: the processes are brokers of one cluster, which ZooKeeper holds"
        )
    if config.broker_id < 0:
        raise ConfigError(f"{KEY}={n} needs broker.id set: process i is broker.id + i")
    listeners = config.listeners
    advertised = config.advertised_listeners if config.advertised_listeners_raw else []
    if any(lst.port == 0 for lst in (*listeners, *advertised)):
        raise ConfigError(f"{KEY}={n} needs fixed listener ports (not 0): process i listens on port + i")
    used: dict[int, str] = {}
    specs = []
    for i in range(n):
        broker_id = config.broker_id + i
        ports = [lst.port + i for lst in listeners]
        if config.metrics_port > 0:
            ports.append(config.metrics_port + i)
        for port in ports:
            if port > 65535:
                raise ConfigError(f"{KEY}={n}: process {i} would listen on port {port}, above 65535")
            if port in used:
                raise ConfigError(
                    f"{KEY}={n}: process {i} would take port {port}, which {used[port]} uses; "
                    f"space the listener and metrics ports at least {n} apart"
                )
            used[port] = f"process {i}"
        overrides = {
            "broker.id": str(broker_id),
            "listeners": _shift(listeners, i),
            "log.dirs": ",".join(str(Path(d) / f"broker-{broker_id}") for d in config.log_dirs),
            KEY: "1",
        }
        if advertised:
            overrides["advertised.listeners"] = _shift(advertised, i)
        if config.metrics_port > 0:
            overrides["metrics.port"] = str(config.metrics_port + i)
        if not config.broker_rack:
            overrides["broker.rack"] = hostname
        specs.append(BrokerProcessSpec(i, broker_id, overrides))
    return specs
