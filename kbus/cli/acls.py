"""`kbus acls`: kafka-acls.sh — add, remove and list ACLs over the wire (Create/Describe/DeleteAcls), with
kafka-acls.sh's flags (--producer/--consumer shortcuts, --resource-pattern-type, --force) and its output."""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Annotated

import typer

from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin
from kbus.cli.app import app
from kbus.cli.client_config import translate
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail, load_properties
from kbus.common.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

_OPERATIONS: dict[str, Operation] = {o.title.lower(): o for o in Operation if o not in (Operation.ANY,)}
_PATTERNS = {
    "literal": PatternType.LITERAL,
    "prefixed": PatternType.PREFIXED,
    "any": PatternType.ANY,
    "match": PatternType.MATCH,
}
Resource = tuple[ResourceType, str]


def pattern_text(resource_type: ResourceType, name: str, pattern: PatternType) -> str:
    """Kafka's ResourcePattern.toString."""
    kind = "CLUSTER" if resource_type == ResourceType.CLUSTER else resource_type.name
    return f"ResourcePattern(resourceType={kind}, name={name}, patternType={pattern.name})"


def entry_text(acl: AclBinding) -> str:
    """Kafka's AccessControlEntry.toString."""
    return (
        f"(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
        f"permissionType={acl.permission.name})"
    )


def print_block(title: str, resource: str, acls: list[AclBinding]) -> None:
    # kafka-acls.sh: s"$title `$resource`: $Newline ${acls.map("\t" + _).mkString(Newline)} $Newline"
    print(f"{title} `{resource}`: \n " + "\n".join("\t" + entry_text(a) for a in acls) + " \n")


@app.command("acls", cls=KafkaStyleCommand)
def acls(
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to")
    ] = None,
    command_config: Annotated[str | None, typer.Option("--command-config", help="Admin client .properties")] = None,
    add: Annotated[bool, typer.Option("--add", help="Add ACLs")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove ACLs")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List ACLs")] = False,
    allow_principal: Annotated[list[str] | None, typer.Option("--allow-principal", help="e.g. User:alice")] = None,
    deny_principal: Annotated[list[str] | None, typer.Option("--deny-principal", help="e.g. User:bob")] = None,
    allow_host: Annotated[list[str] | None, typer.Option("--allow-host", help="Host (default *)")] = None,
    deny_host: Annotated[list[str] | None, typer.Option("--deny-host", help="Host (default *)")] = None,
    principal: Annotated[str | None, typer.Option("--principal", help="With --list: only this principal")] = None,
    operation: Annotated[list[str] | None, typer.Option("--operation", help="Read, Write, Describe, All, ...")] = None,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="Topic name (or prefix, or *)")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="Consumer group")] = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster resource")] = False,
    transactional_id: Annotated[list[str] | None, typer.Option("--transactional-id", help="Transactional id")] = None,
    resource_pattern_type: Annotated[
        str | None, typer.Option("--resource-pattern-type", help="literal, prefixed (add/remove); any, match (list)")
    ] = None,
    producer: Annotated[bool, typer.Option("--producer", help="Write, Describe, Create on topics")] = False,
    consumer: Annotated[bool, typer.Option("--consumer", help="Read, Describe on topics, Read on groups")] = False,
    idempotent: Annotated[bool, typer.Option("--idempotent", help="With --producer: IdempotentWrite")] = False,
    force: Annotated[bool, typer.Option("--force", help="Do not ask before removing")] = False,
) -> None:
    """Manage ACLs (kafka-acls.sh)."""
    try:
        if [add, remove, list_].count(True) != 1:
            raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
        if bootstrap_server is None:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        resources: list[Resource] = [(ResourceType.TOPIC, t) for t in topic or []]
        resources += [(ResourceType.GROUP, g) for g in group or []]
        resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_id or []]
        if cluster:
            resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
        pattern = _pattern(resource_pattern_type, list_)
        check_reachable(bootstrap_server)
        conf = translate(load_properties(command_config)) if command_config else {}
        admin = KafkaAdmin(bootstrap_server, conf)
        try:
            if list_:
                _list(admin, resources, pattern, principal)
            else:
                bindings = _bindings(
                    resources,
                    pattern,
                    allow_principal or [],
                    deny_principal or [],
                    allow_host or [],
                    deny_host or [],
                    operation or [],
                    producer,
                    consumer,
                    idempotent,
                )
                if add:
                    _add(admin, bindings)
                else:
                    _remove(admin, bindings, resources, pattern, force)
        finally:
            admin.close()
    except UsageError as exc:
        fail(str(exc))
    except (AdminError, ConnectionError) as exc:
        fail(f"Error while executing ACL command: {exc}")


def _pattern(text: str | None, listing: bool) -> PatternType:
    if text is None:
        return PatternType.ANY if listing else PatternType.LITERAL
    pattern = _PATTERNS.get(text.lower())
    if pattern is None or (not listing and pattern in (PatternType.ANY, PatternType.MATCH)):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{text}' is not valid when adding or removing acls."
            if pattern is not None
            else f"Unknown resource pattern type: {text}"
        )
    return pattern


def _bindings(
    resources: list[Resource],
    pattern: PatternType,
    allow: list[str],
    deny: list[str],
    allow_hosts: list[str],
    deny_hosts: list[str],
    operations: list[str],
    producer: bool,
    consumer: bool,
    idempotent: bool,
) -> list[AclBinding]:
    if not allow and not deny:
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    for p in allow + deny:
        if ":" not in p:
            raise UsageError(f"Invalid principal {p}: expected principalType:name, e.g. User:alice")
    ops: dict[ResourceType, set[Operation]] = defaultdict(set)
    if producer or consumer:
        topics = [r for r in resources if r[0] == ResourceType.TOPIC]
        if not topics:
            raise UsageError("With --producer or --consumer you must specify a --topic")
        if producer:
            ops[ResourceType.TOPIC] |= {Operation.WRITE, Operation.DESCRIBE, Operation.CREATE}
            ops[ResourceType.TRANSACTIONAL_ID] |= {Operation.WRITE, Operation.DESCRIBE}
            if idempotent:
                ops[ResourceType.CLUSTER] |= {Operation.IDEMPOTENT_WRITE}
                resources = [*resources, (ResourceType.CLUSTER, CLUSTER_NAME)]
        if consumer:
            if not any(r[0] == ResourceType.GROUP for r in resources):
                raise UsageError("With --consumer you must specify a --group")
            ops[ResourceType.TOPIC] |= {Operation.READ, Operation.DESCRIBE}
            ops[ResourceType.GROUP] |= {Operation.READ}
    else:
        if not resources:
            raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")
        chosen: set[Operation] = set()
        for o in operations or ["All"]:
            op = _OPERATIONS.get(o.lower().replace("_", "").replace("-", ""))
            if op is None:
                raise UsageError(f"Invalid operation: {o}")
            chosen.add(op)
        for rtype, _ in resources:
            ops[rtype] |= chosen
    out = []
    for rtype, name in resources:
        for acl_op in sorted(ops.get(rtype, ())):
            for p in allow:
                out += [
                    AclBinding(rtype, name, pattern, p, h, acl_op, Permission.ALLOW) for h in allow_hosts or [WILDCARD]
                ]
            for p in deny:
                out += [
                    AclBinding(rtype, name, pattern, p, h, acl_op, Permission.DENY) for h in deny_hosts or [WILDCARD]
                ]
    return out


def _by_resource(bindings: list[AclBinding]) -> dict[tuple[ResourceType, str, PatternType], list[AclBinding]]:
    grouped: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = defaultdict(list)
    for b in bindings:
        grouped[(b.resource_type, b.name, b.pattern)].append(b)
    return grouped


def _add(admin: KafkaAdmin, bindings: list[AclBinding]) -> None:
    grouped = _by_resource(bindings)
    for (rtype, name, pattern), acls in grouped.items():
        print_block("Adding ACLs for resource", pattern_text(rtype, name, pattern), acls)
    admin.create_acls(bindings)
    for rtype, name, pattern in grouped:
        current = admin.describe_acls(AclFilter(rtype, name, pattern))
        print_block("Current ACLs for resource", pattern_text(rtype, name, pattern), current)


def _remove(
    admin: KafkaAdmin, bindings: list[AclBinding], resources: list[Resource], pattern: PatternType, force: bool
) -> None:
    for rtype, name in resources:
        text = pattern_text(rtype, name, pattern)
        if not force:
            sys.stdout.write(
                "Are you sure you want to remove ACLs: \n "
                + "\n".join("\t" + entry_text(b) for b in bindings if (b.resource_type, b.name) == (rtype, name))
                + f" \n from resource filter `{text}`? (y/n)\n"
            )
            sys.stdout.flush()
            if sys.stdin.readline().strip().lower() != "y":
                continue
    filters = [
        AclFilter(b.resource_type, b.name, b.pattern, b.principal, b.host, b.operation, b.permission) for b in bindings
    ]
    admin.delete_acls(filters)
    for rtype, name, pat in _by_resource(bindings):
        current = admin.describe_acls(AclFilter(rtype, name, pat))
        print_block("Current ACLs for resource", pattern_text(rtype, name, pat), current)


def _list(admin: KafkaAdmin, resources: list[Resource], pattern: PatternType, principal: str | None) -> None:
    if resources:
        found: list[AclBinding] = []
        for rtype, name in resources:
            found += admin.describe_acls(AclFilter(rtype, name, pattern, principal))
    else:
        found = admin.describe_acls(AclFilter(principal=principal))
    for (rtype, name, pat), acls in sorted(_by_resource(found).items()):
        print_block("Current ACLs for resource", pattern_text(rtype, name, pat), acls)
