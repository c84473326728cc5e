"""Client quotas for `kbus configs` (kafka-configs.sh's ConfigCommand): over the wire with DescribeClientQuotas and
AlterClientQuotas (--bootstrap-server), or straight in ZooKeeper's /config/users and /config/clients znodes with a
change notification (--zookeeper, as Kafka 2.x's tool did). Results come back in the order Kafka's tool prints
them (its Java HashMap/Hashtable iteration order), so the output matches line for line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.exceptions import KazooException, NoNodeError

from kbus.admin.errors import AdminError
from kbus.admin.java_order import hashmap_order, hashtable_order, string_hash
from kbus.admin.wire import AdminSession, WireAdmin, build, nested
from kbus.common import quotas as q
from kbus.common.errors import KafkaError

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49

# a quota entity as ClientQuotaEntity holds it: (entity type, name; None for the default), users first
Entity = tuple[tuple[str, str | None], ...]


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _entity_hash(entity: Entity) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(entries), entries' hash being a HashMap<String, String>'s (the sum
    of key hash ^ value hash, null as 0)."""
    return _int32(31 + sum(string_hash(t) ^ (string_hash(n) if n is not None else 0) for t, n in entity))


def describe_client_quotas(
    admin: WireAdmin, components: Sequence[q.FilterComponent], strict: bool = True
) -> list[tuple[Entity, list[tuple[str, float]]]]:
    """DescribeClientQuotas (ClientQuotaFilter.containsOnly when strict): each entity and its quotas, in the
    order KafkaAdminClient's result map iterates."""

    async def work(session: AdminSession) -> list[tuple[Entity, list[tuple[str, float]]]]:
        host, port = admin.bootstrap[0]

        def make(cls: type, version: int) -> object:
            comp = nested(cls, "ComponentData")
            return build(cls, strict=strict, components=[
                build(comp, entity_type=c.entity_type, match_type=c.match_type, match=c.match) for c in components
            ])  # fmt: skip

        resp, _ = await session.send(host, port, DESCRIBE_CLIENT_QUOTAS, (0, 1), make)
        if int(resp.error_code):
            name = resp.error_code.name.upper()
            raise AdminError(resp.error_message or name, name)
        out: list[tuple[Entity, list[tuple[str, float]]]] = []
        for entry in resp.entries or ():
            entity = tuple(sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=_entity_order))
            values = [(v.key, float(v.value)) for v in entry.values]
            values = hashmap_order(values, lambda kv: string_hash(kv[0]), max(len(values), 1))
            out.append((entity, values))
        return hashmap_order(out, lambda ev: _entity_hash(ev[0]), max(len(out), 1))

    return admin.run(work)


def _entity_order(component: tuple[str, str | None]) -> int:
    return {q.USER: 0, q.CLIENT_ID: 1}.get(component[0], 2)


def alter_client_quotas(admin: WireAdmin, entity: Entity, ops: Sequence[tuple[str, float | None]]) -> None:
    """AlterClientQuotas of one entity: set (value) or remove (None) each key."""

    async def work(session: AdminSession) -> None:
        host, port = admin.bootstrap[0]

        def make(cls: type, version: int) -> object:
            entry_cls, entity_cls, op_cls = nested(cls, "EntryData"), nested(cls, "EntityData"), nested(cls, "OpData")
            entry = build(
                entry_cls,
                entity=[build(entity_cls, entity_type=t, entity_name=n) for t, n in entity],
                ops=[build(op_cls, key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops],
            )
            return build(cls, entries=[entry], validate_only=False)

        resp, _ = await session.send(host, port, ALTER_CLIENT_QUOTAS, (0, 1), make)
        for entry in resp.entries:
            if int(entry.error_code):
                name = entry.error_code.name.upper()
                raise AdminError(entry.error_message or name, name)

    admin.run(work)


# ---- straight to ZooKeeper (Kafka 2.x's ConfigCommand --zookeeper) ----


@dataclass(frozen=True)
class ZkEntity:
    """ConfigCommand's ConfigEntity: a root (users or clients) and for users+clients a child; names sanitized,
    `<default>` for a default, None for 'every one' (describe only)."""

    root_type: str
    root_name: str | None
    child_type: str | None = None
    child_name: str | None = None

    def __str__(self) -> str:
        text = _entity_text(self.root_type, self.root_name)
        if self.child_type is not None:
            text += ", " + _entity_text(self.child_type, self.child_name)
        return text

    @property
    def quota_entity(self) -> q.QuotaEntity:
        if self.root_type == "users":
            return q.QuotaEntity(self.root_name, self.child_name if self.child_type else None)
        if self.root_type == "ips":
            return q.QuotaEntity(ip=self.root_name)
        return q.QuotaEntity(None, self.root_name)


def _entity_text(entity_type: str, name: str | None) -> str:
    type_name = {"users": "user-principal", "clients": "client-id", "ips": "ip"}[entity_type]
    if name == q.DEFAULT:
        return f"default {type_name}"
    if name is None:
        return entity_type
    return f"{type_name} '{q.desanitize(name)}'"


class ZkQuotaAdmin:
    """Quota (and other) configs of users and clients entities in ZooKeeper."""

    def __init__(self, connect: str, timeout_s: float = 10.0) -> None:
        from kbus.admin.zookeeper import _quiet
        from kbus.zk.client import KafkaZkClient

        try:
            self._zk = KafkaZkClient.connect(connect, 30.0, timeout_s, logger=_quiet)
        except KafkaError as e:
            raise AdminError(str(e), "_TIMED_OUT") from None

    def close(self) -> None:
        self._zk.close()

    def entities(self, entity: ZkEntity) -> list[ZkEntity]:
        """ConfigEntity.getAllEntities: a named entity itself; None names expanded to every entity with a
        config znode (for users+clients, every client of every user), in ZooKeeper's order of children as Kafka
        lists them."""
        try:
            if entity.root_name is None:
                roots = [ZkEntity(entity.root_type, n, entity.child_type, entity.child_name)
                         for n in self._children(entity.root_type)]  # fmt: skip
                if entity.child_type is None:
                    return roots
                return [e for r in roots for e in self.entities(ZkEntity(r.root_type, r.root_name, r.child_type))]
            if entity.child_type is not None and entity.child_name is None:
                children = self._children(f"{entity.root_type}/{entity.root_name}/{entity.child_type}")
                return [ZkEntity(entity.root_type, entity.root_name, entity.child_type, c) for c in children]
            return [entity]
        except KazooException as exc:
            raise AdminError(f"ZooKeeper: {exc}", "_TRANSPORT") from None

    def _children(self, path: str) -> list[str]:
        try:
            children: list[str] = self._zk.zk.get_children(f"/config/{path}")
        except NoNodeError:
            return []
        return children

    def config(self, entity: ZkEntity) -> list[tuple[str, str]]:
        """The entity's config in the order Kafka's tool prints it (a java.util.Properties)."""
        try:
            configs = self._zk.get_quota_entity_config(entity.quota_entity)
        except KazooException as exc:
            raise AdminError(f"ZooKeeper: {exc}", "_TRANSPORT") from None
        return hashtable_order(list(configs.items()), lambda kv: string_hash(kv[0]))

    def alter(self, entity: ZkEntity, to_set: dict[str, str], to_delete: Sequence[str]) -> None:
        """AdminZkClient.changeConfigs: the whole config written back, then the change notification."""
        target = entity.quota_entity
        try:
            configs = self._zk.get_quota_entity_config(target)
            missing = [k for k in to_delete if k not in configs]
            if missing:
                raise AdminError(f"Invalid config(s): {','.join(missing)}", "INVALID_CONFIG")
            configs.update(to_set)
            for key in to_delete:
                configs.pop(key, None)
            self._zk.change_quota_entity_config(target, configs)
        except KazooException as exc:
            raise AdminError(f"ZooKeeper: {exc}", "_TRANSPORT") from None
