"""`kbus configs`: kafka-configs.sh for topics, brokers and users — describe configs (with their synonyms) and
change them with IncrementalAlterConfigs, over the wire or, for topics, straight to ZooKeeper (--zookeeper); SCRAM
users (`--entity-type users --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`) with
Describe/AlterUserScramCredentials or in ZooKeeper's /config/users/<user>."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kbus.admin.broker_configs import alter_broker_configs, describe_broker_configs
from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin
from kbus.admin.models import ConfigEntry
from kbus.admin.wire import WireAdmin
from kbus.cli import quota_configs
from kbus.cli.app import app
from kbus.cli.client_config import translate, wire_security
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail, load_properties
from kbus.common.broker_config import ConfigError
from kbus.common.quotas import QUOTA_KEYS
from kbus.server.security.scram import MIN_ITERATIONS

_ENTITY_TYPES = {"topics": "topic", "brokers": "broker", "users": "user", "clients": "client", "ips": "ip"}


class ConfigsCommand(KafkaStyleCommand):
    """kafka-configs.sh pairs each --entity-name / --entity-default with the --entity-type before it, in order
    (`--entity-type users --entity-default --entity-type clients --entity-name app`): --entity-default becomes an
    empty --entity-name (Kafka's own representation of a default) so the pairing survives option parsing; the
    shortcuts --user/--client/--ip/--user-defaults/--client-defaults/--ip-defaults become the long forms."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        out: list[str] = []
        it = iter(args)
        for arg in it:
            if arg == "--entity-default":
                out += ["--entity-name", ""]
            elif arg in ("--user", "--client", "--ip"):
                out += ["--entity-type", arg[2:] + "s", "--entity-name", next(it, "")]
            elif arg in ("--user-defaults", "--client-defaults", "--ip-defaults"):
                out += ["--entity-type", arg[2:].split("-")[0] + "s", "--entity-name", ""]
            else:
                out.append(arg)
        return super().parse_args(ctx, out)
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_SCRAM_ITERATIONS = 4096  # Kafka's ConfigCommand default


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config 'k1=v1,k2=[v1,v2],k3=v3': commas inside brackets belong to the value."""
    items: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        current += ch
    if current:
        items.append(current)
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f'Invalid entity config: all configs to be added must be in the format "key=val": {item}')
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def format_entry(e: ConfigEntry) -> str:
    synonyms = ", ".join(f"{s.source}:{s.name}={s.value}" for s in e.synonyms)
    value = "null" if e.is_sensitive or e.value is None else e.value
    return f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}"


@app.command("configs", cls=ConfigsCommand)
def configs(
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
    ] = None,
    zookeeper: Annotated[
        str | None, typer.Option("--zookeeper", help="Topics only: change configs straight in ZooKeeper")
    ] = None,
    zk_tls_config_file: Annotated[
        str | None,
        typer.Option("--zk-tls-config-file", help="With --zookeeper: zookeeper.ssl.* keys for TLS to ZooKeeper"),
    ] = None,
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Admin client .properties file")
    ] = None,
    describe: Annotated[bool, typer.Option("--describe", help="List configs of the entity")] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Change configs of the entity")] = False,
    all_: Annotated[bool, typer.Option("--all", help="With --describe: every config, not only overrides")] = False,
    entity_type: Annotated[
        list[str] | None,
        typer.Option("--entity-type", help="topics, brokers, users, clients or ips (users and clients together: a "
                     "user's client)"),
    ] = None,
    entity_name: Annotated[
        list[str] | None, typer.Option("--entity-name", help="Topic name, broker id, user principal or client id")
    ] = None,
    topic: Annotated[
        str | None, typer.Option("--topic", help="Shorthand for --entity-type topics --entity-name")
    ] = None,
    broker: Annotated[
        str | None, typer.Option("--broker", help="Shorthand for --entity-type brokers --entity-name")
    ] = None,
    entity_default: Annotated[
        bool,
        typer.Option("--entity-default", help="The default entity: brokers' cluster-wide configs, the default user "
                     "or client-id quotas"),
    ] = False,
    user: Annotated[str | None, typer.Option("--user", help="Shorthand for --entity-type users --entity-name")] = None,
    client: Annotated[
        str | None, typer.Option("--client", help="Shorthand for --entity-type clients --entity-name")
    ] = None,
    user_defaults: Annotated[
        bool, typer.Option("--user-defaults", help="Shorthand for --entity-type users --entity-default")
    ] = False,
    client_defaults: Annotated[
        bool, typer.Option("--client-defaults", help="Shorthand for --entity-type clients --entity-default")
    ] = False,
    broker_defaults: Annotated[
        bool, typer.Option("--broker-defaults", help="Shorthand for --entity-type brokers --entity-default")
    ] = False,
    add_config: Annotated[str | None, typer.Option("--add-config", help="k1=v1,k2=[v1,v2],k3=v3 to set")] = None,
    add_config_file: Annotated[
        str | None, typer.Option("--add-config-file", help=".properties file of configs to set")
    ] = None,
    delete_config: Annotated[str | None, typer.Option("--delete-config", help="k1,k2 to remove")] = None,
) -> None:
    """Describe and change topic, broker, user and client configs and client quotas (kafka-configs.sh)."""
    del entity_default, user, client, user_defaults, client_defaults  # rewritten by ConfigsCommand.parse_args
    try:
        if describe == alter:
            raise UsageError("Command must include exactly one action: --describe, --alter")
        types, names = list(entity_type or []), list(entity_name or [])
        if broker_defaults:
            types, names = ["brokers"], [""]
        to_set = parse_add_config(add_config) if add_config else {}
        if add_config_file:
            to_set.update(load_properties(add_config_file))
        to_delete = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
        if alter and not (to_set or to_delete):
            raise UsageError(
                "At least one of --add-config, --add-config-file or --delete-config must be specified with --alter"
            )
        if bool(bootstrap_server) == bool(zookeeper):
            raise UsageError("Exactly one of --bootstrap-server or --zookeeper must be specified")
        if zk_tls_config_file:
            if not zookeeper:
                raise UsageError("--zk-tls-config-file is only used with --zookeeper")
            _use_zk_tls_config_file(zk_tls_config_file)
        if topic is None and broker is None and types and set(types) <= set(quota_configs.QUOTA_ENTITY_TYPES):
            scram_only = types == ["users"] and bool(to_set or to_delete) and not any(
                k in QUOTA_KEYS for k in [*to_set, *to_delete])  # fmt: skip
            if not scram_only:
                raise typer.Exit(_client_quotas(bootstrap_server, zookeeper, command_config, types, names, describe,
                                                to_set, to_delete))  # fmt: skip
        if len(types) > 1:
            raise UsageError("Only '[users, clients]' entity types may be specified together")
        if len(names) > 1:
            raise UsageError("Exactly one --entity-name or --entity-default may be given with --entity-type "
                             f"{types[0] if types else 'topics'}")  # fmt: skip
        kind, name = _entity(types[0] if types else None, names[0] if names else None, topic, broker)
        if name == "" and kind == "topic":
            raise UsageError("--entity-default is not allowed with --entity-type topics")
        if kind == "user" and name == "":
            raise UsageError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                             "Credentials")  # fmt: skip
        if kind == "user":
            code = _users(bootstrap_server, zookeeper, command_config, name, describe, to_set, to_delete)
        elif zookeeper:
            code = _via_zookeeper(zookeeper, kind, name, describe, to_set, to_delete)
        else:
            assert bootstrap_server is not None
            check_reachable(bootstrap_server)
            conf = translate(load_properties(command_config)) if command_config else {}
            admin = KafkaAdmin(bootstrap_server, conf)
            try:
                code = _via_wire(admin, WireAdmin(bootstrap_server), kind, name, describe, all_, to_set, to_delete)
            finally:
                admin.close()
    except UsageError as exc:
        fail(str(exc))
    except (AdminError, ConnectionError) as exc:
        fail(f"Error while executing config command with args: {exc}")
    raise typer.Exit(code)


def _client_quotas(
    bootstrap_server: str | None,
    zookeeper: str | None,
    command_config: str | None,
    types: list[str],
    names: list[str],
    describe: bool,
    to_set: dict[str, str],
    to_delete: list[str],
) -> int:
    """Users' and clients' quotas (and, described over the wire, users' SCRAM credentials as Kafka does)."""
    types, names = quota_configs.normalize(types, names, alter=not describe)
    if zookeeper:
        if describe:
            quota_configs.describe_in_zookeeper(zookeeper, types, names)
        else:
            quota_configs.alter_in_zookeeper(zookeeper, types, names, to_set, to_delete)
        return 0
    assert bootstrap_server is not None
    check_reachable(bootstrap_server)
    security = wire_security(command_config)
    if not describe:
        quota_configs.alter_over_wire(bootstrap_server, security, types, names, to_set, to_delete)
        return 0
    quota_configs.describe_over_wire(bootstrap_server, security, types, names)
    # Kafka describes SCRAM credentials too, unless clients, ips or a default are asked for
    if types == ["users"] and "" not in names:
        conf = translate(load_properties(command_config)) if command_config else {}
        admin = KafkaAdmin(bootstrap_server, conf)
        try:
            try:
                described = admin.describe_scram_users(names or None)
            except AdminError as exc:
                if exc.name != "RESOURCE_NOT_FOUND":
                    raise
                described = {}  # Kafka's result lists only users that have credentials
            for u, creds in described.items():
                listed = ", ".join(f"{m}=iterations={i}" for m, i in sorted(creds.items()))
                print(f"SCRAM credential configs for user-principal '{u}' are {listed}")
        finally:
            admin.close()
    return 0


def _entity(
    entity_type: str | None, entity_name: str | None, topic: str | None, broker: str | None
) -> tuple[str, str | None]:
    if topic is not None:
        return "topic", topic
    if broker is not None:
        return "broker", broker
    if entity_type is None:
        raise UsageError("--entity-type must be specified (topics, brokers or users)")
    if entity_type not in _ENTITY_TYPES:
        raise UsageError(
            f"Invalid entity type {entity_type}, the entity type must be one of topics, brokers, users, clients"
        )
    return _ENTITY_TYPES[entity_type], entity_name


def _via_wire(
    admin: KafkaAdmin,
    wire: WireAdmin,
    kind: str,
    name: str | None,
    describe: bool,
    all_: bool,
    to_set: dict[str, str],
    to_delete: list[str],
) -> int:
    if describe:
        if name is None:
            # Kafka's ConfigCommand: every broker, then the cluster-wide defaults ("")
            names = admin.list_topics() if kind == "topic" else [
                *(str(b.id) for b in admin.describe_cluster().brokers), ""]
        else:
            names = [name]
        for n in names:
            entries = describe_broker_configs(wire, n) if kind == "broker" else admin.describe_configs(kind, n)
            if not all_:
                wanted = {"topic": "DYNAMIC_TOPIC_CONFIG", "broker": "DYNAMIC_BROKER_CONFIG"}[kind]
                if kind == "broker" and n == "":
                    wanted = "DYNAMIC_DEFAULT_BROKER_CONFIG"
                entries = [e for e in entries if e.source == wanted]
            if kind == "broker" and n == "":
                print("Default configs for brokers in the cluster are:")
            else:
                print(f"{'All configs' if all_ else 'Dynamic configs'} for {kind} {n} are:")
            for e in entries:
                print(format_entry(e))
        return 0
    if name is None:
        raise UsageError(f"an entity name must be specified with --alter of {kind}s")
    if kind == "topic" and name not in admin.list_topics():
        raise AdminError(f"The topic '{name}' does not exist.", "UNKNOWN_TOPIC_OR_PARTITION")
    if kind == "broker":
        alter_broker_configs(wire, name, to_set, to_delete)
    else:
        admin.alter_configs(kind, name, to_set, to_delete)
    if name == "":
        print(f"Completed updating default config for {kind}s in the cluster.")
    else:
        print(f"Completed updating config for {kind} {name}.")
    return 0


def _use_zk_tls_config_file(path: str) -> None:
    from kbus.zk.security import use_tls_config_file  # kazoo, imported only where ZooKeeper is used

    try:
        use_tls_config_file(path, os.environ)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _via_zookeeper(
    connect: str, kind: str, name: str | None, describe: bool, to_set: dict[str, str], to_delete: list[str]
) -> int:
    if kind != "topic":
        raise UsageError("--zookeeper only manages topic configs; use --bootstrap-server for brokers")
    from kbus.admin.zookeeper import ZkTopicAdmin

    admin = ZkTopicAdmin(connect)
    try:
        if describe:
            names = [name] if name is not None else admin.list_topics()
            for t in admin.describe_topics(names):
                # Kafka 2.x's ZooKeeper-mode layout.
                print(f"Configs for topic '{t.name}' are {','.join(f'{k}={v}' for k, v in t.configs.items())}")
            return 0
        if name is None:
            raise UsageError("an entity name must be specified with --alter of topics")
        changes: dict[str, str | None] = {**to_set, **dict.fromkeys(to_delete)}
        admin.alter_topic_configs(name, changes)
        print(f"Completed updating config for entity: topic '{name}'.")
        return 0
    finally:
        admin.close()


def _scram_upserts(to_set: dict[str, str]) -> dict[str, tuple[int, str]]:
    """'SCRAM-SHA-256' -> 'iterations=8192,password=...' as (iterations, password)."""
    out = {}
    for key, value in to_set.items():
        if key not in SCRAM_MECHANISMS:
            raise UsageError(f"Invalid config(s): {key} (users take {', '.join(SCRAM_MECHANISMS)} here)")
        fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        if "password" not in fields:
            raise UsageError(f"{key}: a password must be given, e.g. {key}=[iterations=8192,password=alice-secret]")
        try:
            iterations = int(fields.get("iterations", DEFAULT_SCRAM_ITERATIONS))
        except ValueError:
            raise UsageError(f"{key}: iterations must be a number") from None
        if iterations < MIN_ITERATIONS:  # Kafka's ConfigCommand refuses it, --zookeeper or not
            raise UsageError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for {key}")
        out[key] = (iterations, fields["password"])
    return out


def _users(
    bootstrap_server: str | None,
    zookeeper: str | None,
    command_config: str | None,
    name: str | None,
    describe: bool,
    to_set: dict[str, str],
    to_delete: list[str],
) -> int:
    upserts = _scram_upserts(to_set)
    for key in to_delete:
        if key not in SCRAM_MECHANISMS:
            raise UsageError(f"Invalid config(s): {key} (users take {', '.join(SCRAM_MECHANISMS)} here)")
    if not describe and name is None:
        raise UsageError("an entity name must be specified with --alter of users")
    if zookeeper:
        from kbus.admin.zookeeper import ZkUserAdmin
        from kbus.server.security.scram import ScramCredential, from_password

        zk = ZkUserAdmin(zookeeper)
        try:
            if describe:
                for user, configs in zk.describe([name] if name else None).items():
                    # iterations only: kbus never prints stored keys (Kafka 2.x printed the whole credential)
                    listed = ",".join(
                        f"{m}=iterations={ScramCredential.decode(v).iterations}"
                        for m, v in sorted(configs.items())
                        if m in SCRAM_MECHANISMS
                    )
                    print(f"Configs for user-principal '{user}' are {listed}")
                return 0
            assert name is not None
            changes: dict[str, str | None] = {m: from_password(m, pw, it).encode() for m, (it, pw) in upserts.items()}
            changes.update(dict.fromkeys(to_delete))
            zk.alter(name, changes)
            print(f"Completed updating config for entity: user-principal '{name}'.")
            return 0
        finally:
            zk.close()
    assert bootstrap_server is not None
    check_reachable(bootstrap_server)
    conf = translate(load_properties(command_config)) if command_config else {}
    admin = KafkaAdmin(bootstrap_server, conf)
    try:
        if describe:
            for user, creds in admin.describe_scram_users([name] if name else None).items():
                listed = ", ".join(f"{m}=iterations={i}" for m, i in sorted(creds.items()))
                print(f"SCRAM credential configs for user-principal '{user}' are {listed}")
            return 0
        assert name is not None
        admin.alter_scram_user(name, upserts, to_delete)
        print(f"Completed updating config for user {name}.")
        return 0
    finally:
        admin.close()
