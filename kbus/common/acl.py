"""ACLs and the authorizer, sans I/O: Kafka's AclAuthorizer rules (kafka.security.authorizer.AclAuthorizer).

A request is allowed when the principal is a super user, or no ACL matches the resource and
allow.everyone.if.no.acl.found=true, or an ALLOW ACL matches and no DENY ACL does (deny beats allow). An ACL matches
a resource by literal name, the wildcard `*`, or a prefix (PREFIXED patterns); a principal by name or `User:*`; a
host by address or `*`; an operation by itself or ALL. DESCRIBE is implied by READ, WRITE, DELETE and ALTER;
DESCRIBE_CONFIGS by ALTER_CONFIGS.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass

from kbus.common.security import KafkaPrincipal


class ResourceType(enum.IntEnum):
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def znode(self) -> str:
        """Kafka's name in ZooKeeper paths and tools' output: Topic, Group, Cluster, TransactionalId."""
        return {5: "TransactionalId", 6: "DelegationToken"}.get(self.value, self.name.capitalize())


class PatternType(enum.IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    @property
    def title(self) -> str:
        """Kafka's spelling in JSON and tools: Read, ClusterAction, IdempotentWrite."""
        return "".join(p.capitalize() for p in self.name.split("_"))


# Kafka's AclEntry.supportedOperations: what an authorized-operations field (KIP-430) can hold per resource type;
# all of them when no authorizer is configured (AuthHelper.authorizedOperations)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
}  # fmt: skip


def operations_field(ops: Iterable[Operation]) -> int:
    """Kafka's Utils.to32BitField: bit `code` set for each operation."""
    bits = 0
    for op in ops:
        bits |= 1 << op.value
    return bits


class Permission(enum.IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def title(self) -> str:
        return self.name.capitalize()


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
_IMPLIED = {
    Operation.DESCRIBE: {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},
}


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str  # "User:alice", "User:*"
    host: str
    operation: Operation
    permission: Permission

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls / DeleteAcls select (None: any)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern == PatternType.MATCH:
            # every pattern that would apply to a resource of that name: literal, wildcard, matching prefixes
            if self.name is not None and not (
                acl.name in (self.name, WILDCARD)
                if acl.pattern == PatternType.LITERAL
                else self.name.startswith(acl.name)
            ):
                return False
        else:
            if self.pattern != PatternType.ANY and acl.pattern != self.pattern:
                return False
            if self.name is not None and acl.name != self.name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: frozenset[AclBinding] = frozenset()

    @classmethod
    def from_props(cls, raw: dict[str, str]) -> Authorizer:
        supers = [p.strip() for p in raw.get("super.users", "").split(";") if p.strip()]
        allow = raw.get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true"
        return cls(supers, allow)

    def set_acls(self, acls: Iterable[AclBinding]) -> None:
        self._acls = frozenset(acls)

    @property
    def acls(self) -> frozenset[AclBinding]:
        return self._acls

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        matching = [a for a in self._acls if a.matches_resource(resource_type, name)]
        if not matching:
            return self.allow_if_no_acl
        wildcard = f"{principal.principal_type}:*"

        def applies(acl: AclBinding) -> bool:
            return acl.principal in (who, wildcard) and acl.host in (host, WILDCARD)

        if any(
            a.permission == Permission.DENY and applies(a) and a.operation in (operation, Operation.ALL)
            for a in matching
        ):
            return False
        allowed_by = _IMPLIED.get(operation, {operation})
        return any(
            a.permission == Permission.ALLOW
            and applies(a)
            and (a.operation in allowed_by or a.operation == Operation.ALL)
            for a in matching
        )

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """KIP-430's bit field of the operations the principal may perform on the resource."""
        ops = SUPPORTED_OPERATIONS.get(resource_type, ())
        return operations_field(op for op in ops if self.authorize(principal, host, op, resource_type, name))


# ---- Kafka's ZooKeeper layout: /kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name>


def encode_znode(acls: Iterable[AclBinding]) -> bytes:
    body = {
        "version": 1,
        "acls": [
            {
                "principal": a.principal,
                "permissionType": a.permission.title,
                "operation": a.operation.title,
                "host": a.host,
            }
            for a in sorted(acls)
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode_znode(resource_type: ResourceType, name: str, pattern: PatternType, data: bytes) -> list[AclBinding]:
    body = json.loads(data.decode() or "{}")
    ops = {o.title: o for o in Operation}
    perms = {p.title: p for p in Permission}
    return [
        AclBinding(
            resource_type, name, pattern, a["principal"], a["host"], ops[a["operation"]], perms[a["permissionType"]]
        )
        for a in body.get("acls", [])
    ]


RESOURCE_BY_ZNODE = {t.znode: t for t in ResourceType if t not in (ResourceType.ANY,)}


def znode_path(acl: AclBinding) -> str:
    if acl.pattern == PatternType.PREFIXED:
        return f"/kafka-acl-extended/prefixed/{acl.resource_type.znode}/{acl.name}"
    return f"/kafka-acl/{acl.resource_type.znode}/{acl.name}"
