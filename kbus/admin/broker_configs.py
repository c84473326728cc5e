"""Broker configs over the wire with kbus's own client: librdkafka refuses the cluster-wide default entity (a
BROKER resource named "") and keys synonyms by name, so a broker's DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
and STATIC_BROKER_CONFIG values of one key collapse into one. A request for broker N goes to broker N (as Kafka's
admin client routes it); the default entity goes to any broker."""

from __future__ import annotations

from kbus.admin.errors import AdminError
from kbus.admin.models import ConfigEntry, ConfigSynonym
from kbus.admin.wire import AdminSession, Node, WireAdmin, build, nested

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
BROKER = 4
SET, DELETE = 0, 1
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}  # fmt: skip


async def _target(admin: WireAdmin, session: AdminSession, name: str) -> Node:
    nodes, _ = await admin.cluster(session)
    if name == "":
        return nodes[0]
    node = next((n for n in nodes if str(n.node_id) == name), None)
    if node is None:
        raise AdminError(f"Broker {name} is not in the cluster", "BROKER_NOT_AVAILABLE")
    return node


def _check(code: int, name: str, message: str | None, what: str) -> None:
    if code:
        raise AdminError(message or f"{what} failed: {name.upper()}", name.upper())


def describe_broker_configs(admin: WireAdmin, name: str) -> list[ConfigEntry]:
    async def work(session: AdminSession) -> list[ConfigEntry]:
        node = await _target(admin, session, name)

        def make(cls: type, version: int) -> object:
            res = build(nested(cls, "DescribeConfigsResource"), resource_type=BROKER, resource_name=name,
                        configuration_keys=None)  # fmt: skip
            return build(cls, resources=[res], include_synonyms=True, include_documentation=False)

        resp, _ = await session.send(node.host, node.port, DESCRIBE_CONFIGS, (1, 4), make)
        result = resp.results[0]
        _check(int(result.error_code), result.error_code.name, result.error_message, "DescribeConfigs")
        out = []
        for c in result.configs:
            synonyms = [ConfigSynonym(SOURCES.get(int(s.source), str(s.source)), s.name, s.value) for s in c.synonyms]
            source = SOURCES.get(int(c.config_source), "UNKNOWN")
            out.append(ConfigEntry(c.name, c.value, source == "DEFAULT_CONFIG", bool(c.is_sensitive),
                                   bool(c.read_only), source, synonyms))  # fmt: skip
        return sorted(out, key=lambda e: e.name)

    return admin.run(work)


def alter_broker_configs(admin: WireAdmin, name: str, to_set: dict[str, str], to_delete: list[str]) -> None:
    async def work(session: AdminSession) -> None:
        node = await _target(admin, session, name)

        def make(cls: type, version: int) -> object:
            res_cls = nested(cls, "AlterConfigsResource")
            cfg_cls = nested(cls, "AlterableConfig")
            configs = [build(cfg_cls, name=k, config_operation=SET, value=v) for k, v in to_set.items()]
            configs += [build(cfg_cls, name=k, config_operation=DELETE, value=None) for k in to_delete]
            res = build(res_cls, resource_type=BROKER, resource_name=name, configs=configs)
            return build(cls, resources=[res], validate_only=False)

        resp, _ = await session.send(node.host, node.port, INCREMENTAL_ALTER_CONFIGS, (0, 1), make)
        r = resp.responses[0]
        _check(int(r.error_code), r.error_code.name, r.error_message, "IncrementalAlterConfigs")

    admin.run(work)
