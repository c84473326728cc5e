"""Client quotas as Kafka keeps them in ZooKeeper mode (QuotaConfig, ClientQuotaEntity, ZkAdminManager's
describe/alterClientQuotas, ClientQuotaManager's DefaultQuotaCallback): the config keys and their types, entity
paths under /config (`users/<u>`, `clients/<c>`, `users/<u>/clients/<c>`, `<default>` for defaults, names
sanitized as Kafka's Sanitizer does), the validation of AlterClientQuotas, the DescribeClientQuotas filter, and the
precedence that picks the quota applying to a (user, client-id). Pure rules: no I/O, used by the broker and by
`kbus configs --zookeeper`."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kbus.common.sanitizer import desanitize, sanitize

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# QuotaConfig's user/client quota ConfigDef: key -> whether Kafka types it LONG (else DOUBLE)
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
CONNECTION_CREATION_RATE = "connection_creation_rate"
# DynamicConfig.Ip's keys (an IP entity has only these; a user or client entity none of them): key -> LONG-like
# (Kafka types it INT: a whole number)
IP_QUOTA_KEYS: dict[str, bool] = {CONNECTION_CREATION_RATE: True}

# ClientQuotaEntity's entity types
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT = "<default>"  # ZooKeeperInternals.DEFAULT_STRING: the znode name of a default entity

# DescribeClientQuotas filter match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class QuotaRequestError(ValueError):
    """Kafka's InvalidRequestException for a quota entity, filter or alteration (INVALID_REQUEST)."""


class QuotaUnsupportedError(ValueError):
    """Kafka's UnsupportedVersionException for a custom entity type (UNSUPPORTED_VERSION)."""


# ---- entities ----


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota entity as its znode names it: each part is None (not part of the entity), DEFAULT, or a sanitized
    name. users/<u>/clients/<c> has both parts, users/<u> only the user, clients/<c> only the client id."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None  # an IP entity (ips/<ip>, ips/<default>) has no user or client id

    @property
    def path(self) -> str:
        """The entity's path under /config (and the `entity_path` of its change notification)."""
        if self.ip is not None:
            return f"ips/{self.ip}"
        if self.user is not None and self.client_id is not None:
            return f"users/{self.user}/clients/{self.client_id}"
        if self.user is not None:
            return f"users/{self.user}"
        return f"clients/{self.client_id}"

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity | None:
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "users" and parts[1]:
            return cls(parts[1], None)
        if len(parts) == 2 and parts[0] == "clients" and parts[1]:
            return cls(None, parts[1])
        if len(parts) == 2 and parts[0] == "ips" and parts[1]:
            return cls(ip=parts[1])
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
            return cls(parts[1], parts[3])
        return None

    def components(self) -> list[tuple[str, str | None]]:
        """ClientQuotaEntity's entries: (entity type, desanitized name, None for a default)."""
        out: list[tuple[str, str | None]] = []
        if self.ip is not None:
            out.append((IP, None if self.ip == DEFAULT else desanitize(self.ip)))
        if self.user is not None:
            out.append((USER, None if self.user == DEFAULT else desanitize(self.user)))
        if self.client_id is not None:
            out.append((CLIENT_ID, None if self.client_id == DEFAULT else desanitize(self.client_id)))
        return out


def entity_from_components(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """ZkAdminManager.parseAndSanitizeQuotaEntity and alterEntityQuotas' checks for AlterClientQuotas."""
    user: str | None = None
    client: str | None = None
    ip: str | None = None
    seen = False
    for entity_type, name in components:
        seen = True
        zk_name = DEFAULT if name is None else sanitize(name)
        if entity_type == USER:
            user = zk_name
        elif entity_type == CLIENT_ID:
            client = zk_name
        elif entity_type == IP:
            ip = zk_name
        else:
            raise QuotaRequestError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise QuotaRequestError(f"Empty {entity_type} not supported")
    if not seen:
        raise QuotaRequestError("Invalid empty client quota entity")
    if ip is not None:
        if user is not None or client is not None:
            raise QuotaRequestError("Invalid quota entity combination, IP entity should not be used with user/client "
                                    "ID entity.")  # fmt: skip
        if ip != DEFAULT and not is_valid_ip(desanitize(ip)):
            raise QuotaRequestError(f"{desanitize(ip)} is not a valid IP or resolvable host.")
    return QuotaEntity(user, client, ip)


def is_valid_ip(name: str) -> bool:
    """DynamicConfig.Ip.isValidIpEntity, for addresses: kbus takes IP addresses only (Kafka also resolves a host
    name, which needs I/O here)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def entity_quota_keys(entity: QuotaEntity) -> dict[str, bool]:
    """The quota keys an entity may hold: connection_creation_rate for an IP, the client quotas otherwise."""
    return IP_QUOTA_KEYS if entity.ip is not None else QUOTA_KEYS


def quota_values(configs: Mapping[str, str], keys: Mapping[str, bool] = QUOTA_KEYS) -> dict[str, float]:
    """The quota keys of an entity's config (a user's znode also holds SCRAM credentials) as doubles."""
    out = {}
    for key, value in configs.items():
        if key in keys:
            try:
                out[key] = float(value)
            except ValueError:
                continue  # a hand-edited znode: ignored, as Kafka's config handler would refuse it
    return out


def apply_alterations(
    configs: Mapping[str, str], ops: Iterable[tuple[str, float | None]], keys: Mapping[str, bool] = QUOTA_KEYS
) -> dict[str, str]:
    """ZkAdminManager.alterEntityQuotas: each op sets (value) or removes (None) one key of the entity's config;
    other keys (SCRAM credentials) are kept. LONG keys must hold a whole number and are written as one."""
    props = dict(configs)
    for key, value in ops:
        if value is None:
            props.pop(key, None)
            continue
        is_long = keys.get(key)
        if is_long is None:
            raise QuotaRequestError(f"Invalid configuration key {key}")
        if not math.isfinite(value):
            raise QuotaRequestError(f"Configuration {key} must be a finite value")
        if keys is IP_QUOTA_KEYS and value < 0:
            raise QuotaRequestError(f"Invalid value {value} for configuration {key}: Value must be at least 0")
        if is_long:
            epsilon = 1e-6
            whole = int(value + epsilon)
            if abs(whole - value) > epsilon:
                raise QuotaRequestError(f"Configuration {key} must be a LONG value")
            props[key] = str(whole)
        else:
            props[key] = str(value)
    return props


# ---- DescribeClientQuotas ----


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """ClientQuotaFilterComponent: `match_type` exact (name), default, or any specified name."""

    entity_type: str
    match_type: int
    match: str | None = None


def describe_filter(
    components: Iterable[FilterComponent], strict: bool, configs: Mapping[QuotaEntity, Mapping[str, str]]
) -> dict[QuotaEntity, dict[str, float]]:
    """ZkAdminManager.describeClientQuotas over every user/client entity config: the entities matching the filter
    that hold at least one quota."""
    user_c: FilterComponent | None = None
    client_c: FilterComponent | None = None
    ip_c: FilterComponent | None = None
    for c in components:
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaRequestError(f"Unexpected match type: {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise QuotaRequestError(f"Exact match of {c.entity_type} without a name")
        if c.entity_type == USER:
            if user_c is not None:
                raise QuotaRequestError("Duplicate user filter component entity type")
            user_c = c
        elif c.entity_type == CLIENT_ID:
            if client_c is not None:
                raise QuotaRequestError("Duplicate client filter component entity type")
            client_c = c
        elif c.entity_type == IP:
            if ip_c is not None:
                raise QuotaRequestError("Duplicate ip filter component entity type")
            ip_c = c
        elif c.entity_type == "":
            raise QuotaRequestError("Unexpected empty filter component entity type")
        else:
            raise QuotaUnsupportedError(f"Custom entity type '{c.entity_type}' not supported")

    def matches(component: FilterComponent | None, part: str | None) -> bool:
        if component is None:
            return part is None or not strict
        if component.match_type == MATCH_SPECIFIED:
            return part is not None
        if component.match_type == MATCH_DEFAULT:
            return part == DEFAULT
        return part is not None and part != DEFAULT and desanitize(part) == component.match

    if (user_c is not None or client_c is not None) and ip_c is not None:
        raise QuotaRequestError("Invalid entity filter component combination, IP filter component should not be "
                                "used with user or clientId filter component.")  # fmt: skip
    out: dict[QuotaEntity, dict[str, float]] = {}
    for entity, props in configs.items():
        if entity.ip is not None:
            # handleDescribeIpQuotas: with an ip component, or with none at all when not strict
            if user_c is not None or client_c is not None or (ip_c is None and strict):
                continue
            if ip_c is not None and not matches(ip_c, entity.ip):
                continue
            values = quota_values(props, IP_QUOTA_KEYS)
            if values:
                out[entity] = values
            continue
        if ip_c is not None:
            continue
        values = quota_values(props)
        if values and matches(user_c, entity.user) and matches(client_c, entity.client_id):
            out[entity] = values
    return out


# ---- which quota applies (ClientQuotaManager.DefaultQuotaCallback) ----


def quota_metric_tags(user: str, client_id: str, quotas: Mapping[QuotaEntity, float]) -> tuple[str, str]:
    """The (user, client-id) sensor a request of sanitized `user` and `client_id` records into: its tags name
    the level whose quota applies, so clients sharing a user quota share one sensor. Kafka's precedence:
    users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>, users/<default>/clients/<c>,
    users/<default>/clients/<default>, users/<default>, clients/<c>, clients/<default>."""
    has_user = any(e.user is not None and e.client_id is None for e in quotas)
    has_client = any(e.user is None for e in quotas)
    has_both = any(e.user is not None and e.client_id is not None for e in quotas)
    if has_both + has_user + has_client <= 1:  # one level configured: Kafka's fast paths
        if has_user:
            return user, ""
        if has_both:
            return user, client_id
        return "", client_id
    c = client_id
    if QuotaEntity(user, c) in quotas or QuotaEntity(user, DEFAULT) in quotas:
        return user, c
    if QuotaEntity(user, None) in quotas:
        return user, ""
    if QuotaEntity(DEFAULT, c) in quotas or QuotaEntity(DEFAULT, DEFAULT) in quotas:
        return user, c
    if QuotaEntity(DEFAULT, None) in quotas:
        return user, ""
    return "", c


def quota_limit(user_tag: str, client_tag: str, quotas: Mapping[QuotaEntity, float]) -> float | None:
    """The quota of a sensor with these tags (None: unlimited), from the most specific entity that has one."""
    if user_tag and client_tag:
        order = [
            QuotaEntity(user_tag, client_tag),
            QuotaEntity(user_tag, DEFAULT),
            QuotaEntity(DEFAULT, client_tag),
            QuotaEntity(DEFAULT, DEFAULT),
        ]
    elif user_tag:
        order = [QuotaEntity(user_tag, None), QuotaEntity(DEFAULT, None)]
    elif client_tag:
        order = [QuotaEntity(None, client_tag), QuotaEntity(None, DEFAULT)]
    else:
        return None
    for entity in order:
        value = quotas.get(entity)
        if value is not None:
            return value
    return None


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def validate_entity_configs(entity_type: str, configs: Mapping[str, str]) -> None:
    """DynamicConfig.User / DynamicConfig.Client's validation of a config written straight to ZooKeeper: only
    their keys (quotas; users also SCRAM credentials), LONG quotas as whole numbers, DOUBLE ones as numbers."""
    keys = IP_QUOTA_KEYS if entity_type == "ips" else QUOTA_KEYS
    allowed = set(keys) | (set(SCRAM_MECHANISMS) if entity_type == "users" else set())
    for key, value in configs.items():
        if key not in allowed:
            raise QuotaRequestError(f"Unknown Dynamic Configuration '{key}'.")
        is_long = keys.get(key)
        if is_long is None:
            continue
        try:
            int(value.strip()) if is_long else float(value.strip())
        except ValueError:
            kind = "LONG" if is_long else "DOUBLE"
            raise QuotaRequestError(
                f"Invalid value {value} for configuration {key}: Not a number of type {kind}"
            ) from None
