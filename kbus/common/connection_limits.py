"""Kafka's connection-limit keys (SocketServerConfigs, QuotaConfigs' IP quota) and their validation, as KafkaConfig
and ListenerConnectionQuota validate them: broker-wide `max.connections`, `max.connections.per.ip`,
`max.connections.per.ip.overrides`, `max.connection.creation.rate`, per listener `listener.name.<l>.max.connections`
and `listener.name.<l>.max.connection.creation.rate`, and an IP entity's `connection_creation_rate`. Pure: used
at start (server.properties), by AlterConfigs (dynamic) and by kbus.server.network.connection_quotas, which enforces
them."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

INT_MAX = 2**31 - 1
MAX_CONNECTIONS = "max.connections"
MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides"
MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
BROKER_KEYS = (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS_PER_IP_OVERRIDES, MAX_CONNECTION_CREATION_RATE)
LISTENER_KEYS = (MAX_CONNECTIONS, MAX_CONNECTION_CREATION_RATE)  # SocketServer.ListenerReconfigurableConfigs
IP_CONNECTION_RATE = "connection_creation_rate"  # QuotaConfigs.IP_CONNECTION_RATE_OVERRIDE_CONFIG (INT)
_LISTENER_PREFIX = "listener.name."
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Utils.VALID_HOST_CHARACTERS


class ConnectionLimitError(ValueError):
    """A connection-limit value Kafka refuses; the message names the key."""


def listener_key(key: str) -> tuple[str, str] | None:
    """(listener, key) of a per-listener connection limit (`listener.name.<l>.max.connections`), else None."""
    if not key.startswith(_LISTENER_PREFIX):
        return None
    listener, _, rest = key[len(_LISTENER_PREFIX) :].partition(".")
    return (listener.upper(), rest) if listener and rest in LISTENER_KEYS else None


def is_connection_limit_key(key: str) -> bool:
    return key in BROKER_KEYS or listener_key(key) is not None


def normalize_ip(host: str) -> str:
    """An address as Kafka's InetAddress compares it: IPv4-mapped IPv6 peers count as their IPv4 address."""
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def parse_csv_map(key: str, value: str) -> dict[str, str]:
    """Kafka's Csv.parseCsvMap: `k:v,k:v`, each split at its last ':' (so IPv6 keys work)."""
    out: dict[str, str] = {}
    if not value.strip():
        return out
    for item in re.split(r"\s*,\s*", value.strip()):
        k, sep, v = item.rpartition(":")
        if not sep:
            raise ConnectionLimitError(f"Error parsing configuration property '{key}': no ':' in {item!r}")
        out[k.strip()] = v.strip()
    return out


def _parse_int(key: str, value: str, at_least: int) -> int:
    try:
        parsed = int(value.strip())
    except ValueError:
        raise ConnectionLimitError(f"Invalid value {value} for configuration {key}: Not a number of type INT") from None
    if not -(2**31) <= parsed <= INT_MAX:
        raise ConnectionLimitError(f"Invalid value {value} for configuration {key}: Not a number of type INT")
    if parsed < at_least:
        raise ConnectionLimitError(f"Invalid value {value} for configuration {key}: Value must be at least {at_least}")
    return parsed


@dataclass(frozen=True)
class ConnectionLimits:
    """The connection limits in effect (Kafka's defaults: no limit)."""

    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # by normalized address
    max_connection_creation_rate: int = INT_MAX
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)  # by listener name
    listener_max_connection_creation_rate: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_layers(
        cls, layers: Iterable[Mapping[str, str]], resolve: Callable[[str], str] = normalize_ip
    ) -> ConnectionLimits:
        """The limits from config layers, later layers winning (server.properties, then /config/brokers/<default>,
        then /config/brokers/<id>); validated as KafkaConfig and ListenerConnectionQuota validate them. `resolve`
        turns an override's host into the address it stands for (Kafka: InetAddress.getByName)."""
        merged: dict[str, str] = {}
        for layer in layers:
            merged.update({k: v for k, v in layer.items() if is_connection_limit_key(k)})
        per_ip = _parse_int(MAX_CONNECTIONS_PER_IP, merged.get(MAX_CONNECTIONS_PER_IP, str(INT_MAX)), 0)
        raw_overrides = parse_csv_map(
            MAX_CONNECTIONS_PER_IP_OVERRIDES, merged.get(MAX_CONNECTIONS_PER_IP_OVERRIDES, "")
        )
        if per_ip == 0 and not raw_overrides:
            raise ConnectionLimitError(f"{MAX_CONNECTIONS_PER_IP} can be set to zero only if "
                                       f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set.")  # fmt: skip
        invalid = [host for host in raw_overrides if not _VALID_HOST.fullmatch(host)]
        if invalid:
            raise ConnectionLimitError(f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} contains invalid addresses : "
                                       f"{','.join(invalid)}")  # fmt: skip
        overrides: dict[str, int] = {}
        for host, count in raw_overrides.items():
            try:
                address = resolve(host)
            except OSError as exc:
                raise ConnectionLimitError(
                    f"{MAX_CONNECTIONS_PER_IP_OVERRIDES}: cannot resolve {host}: {exc}"
                ) from None
            try:
                overrides[address] = int(count)
            except ValueError:
                raise ConnectionLimitError(f"Error parsing configuration property '{MAX_CONNECTIONS_PER_IP_OVERRIDES}'"
                                           f": For input string: \"{count}\"") from None  # fmt: skip
        listener_max: dict[str, int] = {}
        listener_rate: dict[str, int] = {}
        for key, value in merged.items():
            parsed_key = listener_key(key)
            if parsed_key is None:
                continue
            listener, name = parsed_key
            # ListenerConnectionQuota.validateReconfiguration: "Invalid max.connections 0"
            parsed = _parse_int(key, value, 0)
            if parsed <= 0:
                raise ConnectionLimitError(f"Invalid {name} {parsed}")
            (listener_max if name == MAX_CONNECTIONS else listener_rate)[listener] = parsed
        return cls(
            max_connections=_parse_int(MAX_CONNECTIONS, merged.get(MAX_CONNECTIONS, str(INT_MAX)), 0),
            max_connections_per_ip=per_ip,
            max_connections_per_ip_overrides=overrides,
            max_connection_creation_rate=_parse_int(
                MAX_CONNECTION_CREATION_RATE, merged.get(MAX_CONNECTION_CREATION_RATE, str(INT_MAX)), 0
            ),
            listener_max_connections=listener_max,
            listener_max_connection_creation_rate=listener_rate,
        )


def parse_ip_connection_rate(value: str) -> int:
    """An IP entity's connection_creation_rate (QuotaConfigs: INT, at least 0)."""
    return _parse_int(IP_CONNECTION_RATE, value, 0)


