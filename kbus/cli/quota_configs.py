"""`kbus configs --entity-type users|clients`: client quotas as kafka-configs.sh handles them — one entity
(`--entity-type users --entity-name alice`), a default (`--entity-default`), or a user's client
(`--entity-type users --entity-name alice --entity-type clients --entity-name app`). Over --bootstrap-server with
DescribeClientQuotas/AlterClientQuotas, printed as Kafka 3.9's ConfigCommand prints them; over --zookeeper
straight in the znodes, printed as Kafka 2.x's did."""

from __future__ import annotations

from kbus.admin.errors import AdminError
from kbus.admin.java_order import java_double
from kbus.admin.quotas import Entity, ZkEntity, ZkQuotaAdmin, alter_client_quotas, describe_client_quotas
from kbus.admin.wire import WireAdmin
from kbus.cli.common import UsageError
from kbus.common import quotas as q
from kbus.protocol.client import ClientSecurity

QUOTA_ENTITY_TYPES = ("users", "clients", "ips")
_COMPONENT = {"users": q.USER, "clients": q.CLIENT_ID, "ips": q.IP}
_TYPE_TEXT = {q.USER: "user-principal", q.CLIENT_ID: "client-id", q.IP: "ip"}


def normalize(types: list[str], names: list[str], alter: bool) -> tuple[list[str], list[str]]:
    """ConfigCommand's checks and order: users before clients, each --entity-name/--entity-default paired with
    its --entity-type in the order given ("" is a default)."""
    if len(types) > 2 or len(set(types)) != len(types) or not set(types) <= set(QUOTA_ENTITY_TYPES) or (
        "ips" in types and len(types) > 1
    ):
        raise UsageError("Only '[users, clients]' entity types may be specified together")
    if types == ["ips"]:
        for name in names:
            if name and not q.is_valid_ip(name):
                raise UsageError(f"The entity name for ips must be a valid IP or resolvable host, but it is: {name}")
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    if alter and len(names) != len(types):
        raise UsageError("--entity-name or --entity-default must be specified with each --entity-type for --alter")
    if types == ["clients", "users"]:
        types = ["users", "clients"]
        if len(names) == 2:
            names = [names[1], names[0]]
    return types, names


def quota_changes(to_set: dict[str, str], to_delete: list[str]) -> list[tuple[str, float | None]]:
    ops: list[tuple[str, float | None]] = []
    for key, value in to_set.items():
        try:
            ops.append((key, float(value)))
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
    ops.extend((key, None) for key in to_delete)
    return ops


def describe_text(entity: Entity, values: list[tuple[str, float]]) -> str:
    """ConfigCommand.describeQuotaConfigs' line."""
    parts = [f"{_TYPE_TEXT[t]} '{n}'" if n is not None else f"the default {_TYPE_TEXT[t]}" for t, n in entity]
    listed = ", ".join(f"{k}={java_double(v)}" for k, v in values)
    return f"Quota configs for {', '.join(parts)} are {listed}"


# ---- --bootstrap-server ----


def describe_over_wire(bootstrap: str, security: ClientSecurity, types: list[str], names: list[str]) -> None:
    components = []
    for i, entity_type in enumerate(types):
        component = _COMPONENT[entity_type]
        if i >= len(names):
            components.append(q.FilterComponent(component, q.MATCH_SPECIFIED))
        elif names[i] == "":
            components.append(q.FilterComponent(component, q.MATCH_DEFAULT))
        else:
            components.append(q.FilterComponent(component, q.MATCH_EXACT, names[i]))
    for entity, values in describe_client_quotas(WireAdmin(bootstrap, security=security), components):
        print(describe_text(entity, values))


def alter_over_wire(
    bootstrap: str, security: ClientSecurity, types: list[str], names: list[str], to_set: dict[str, str],
    to_delete: list[str],
) -> None:  # fmt: skip
    """ConfigCommand.alterQuotaConfigs: keys to delete must be set; then one AlterClientQuotas."""
    if types == ["ips"]:
        unknown = [k for k in [*to_set, *to_delete] if k not in q.IP_QUOTA_KEYS]
        if unknown:
            raise UsageError("Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                             f"Unexpected config names: {','.join(unknown)}")  # fmt: skip
    unknown = [k for k in [*to_set, *to_delete]
               if k not in q.QUOTA_KEYS and k not in q.SCRAM_MECHANISMS and k not in q.IP_QUOTA_KEYS]  # fmt: skip
    if unknown:
        what = "quota" if "clients" in types else "quota and SCRAM credential"
        raise UsageError(f"Only {what} configs can be altered for '{types[-1]}' using --bootstrap-server. "
                         f"Unexpected config names: {', '.join(unknown)}")  # fmt: skip
    if any(k in q.SCRAM_MECHANISMS for k in [*to_set, *to_delete]):
        if "clients" in types:
            raise UsageError("Only quota configs can be added for 'clients' using --bootstrap-server. "
                             "Unexpected config names: " + ", ".join(k for k in to_set if k in q.SCRAM_MECHANISMS))
        raise UsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                         "--bootstrap-server.")  # fmt: skip
    ops = quota_changes(to_set, to_delete)
    admin = WireAdmin(bootstrap, security=security)
    entity: Entity = tuple((_COMPONENT[t], n or None) for t, n in zip(types, names, strict=True))
    if to_delete:
        current = describe_client_quotas(
            admin,
            [q.FilterComponent(c, q.MATCH_DEFAULT) if n is None else q.FilterComponent(c, q.MATCH_EXACT, n)
             for c, n in entity],
        )  # fmt: skip
        present = {k for _, values in current[:1] for k, _ in values}
        missing = [k for k in to_delete if k not in present]
        if missing:
            raise AdminError(f"Invalid config(s): {','.join(missing)}", "INVALID_CONFIG")
    alter_client_quotas(admin, entity, ops)
    if names[0]:
        print(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.")


# ---- --zookeeper ----


def _zk_entity(types: list[str], names: list[str]) -> ZkEntity:
    def zk_name(i: int) -> str | None:
        if i >= len(names):
            return None
        return q.DEFAULT if names[i] == "" else q.sanitize(names[i])

    if len(types) == 2:
        return ZkEntity(types[0], zk_name(0), types[1], zk_name(1))
    return ZkEntity(types[0], zk_name(0))


def _shown(key: str, value: str) -> str:
    """A SCRAM credential shows its iterations only (Kafka 2.x printed the stored salt and keys)."""
    if key in q.SCRAM_MECHANISMS:
        fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        return f"iterations={fields.get('iterations', '?')}"
    return value


def describe_in_zookeeper(connect: str, types: list[str], names: list[str]) -> None:
    """ConfigCommand.describeConfigWithZk: every matching entity's whole config; when listing all users, the
    user znodes that only hold their clients' quotas are left out."""
    admin = ZkQuotaAdmin(connect)
    try:
        root = _zk_entity(types, names)
        all_users = types == ["users"] and not names
        for entity in admin.entities(root):
            configs = admin.config(entity)
            if configs or not all_users:
                listed = ",".join(f"{k}={_shown(k, v)}" for k, v in configs)
                print(f"Configs for {entity} are {listed}")
    finally:
        admin.close()


def alter_in_zookeeper(
    connect: str, types: list[str], names: list[str], to_set: dict[str, str], to_delete: list[str]
) -> None:
    entity = _zk_entity(types, names)
    try:
        q.validate_entity_configs(types[-1] if len(types) == 1 else "clients", to_set)
        if types == ["ips"] and names[0] and not q.is_valid_ip(names[0]):
            raise q.QuotaRequestError(f"The entity name for ips must be a valid IP or resolvable host, but it is: "
                                      f"{names[0]}")  # fmt: skip
    except q.QuotaRequestError as exc:
        raise UsageError(str(exc)) from None
    admin = ZkQuotaAdmin(connect)
    try:
        admin.alter(entity, to_set, to_delete)
    finally:
        admin.close()
    print(f"Completed updating config for entity: {entity}.")
