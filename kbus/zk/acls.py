"""ACLs in ZooKeeper as Kafka's AclAuthorizer keeps them: /kafka-acl/<Type>/<name> (literal), /kafka-acl-extended/
prefixed/<Type>/<name> (prefixed), each change announced under /kafka-acl-changes or /kafka-acl-extended-changes so
every broker (and Kafka's own tools) reloads."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kbus.common.acl import (
    RESOURCE_BY_ZNODE,
    AclBinding,
    PatternType,
    decode_znode,
    encode_znode,
    znode_path,
)

LITERAL_ROOT, PREFIXED_ROOT = "/kafka-acl", "/kafka-acl-extended/prefixed"
LITERAL_CHANGES, EXTENDED_CHANGES = "/kafka-acl-changes", "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def read_all(zk: KazooClient) -> list[AclBinding]:
    out: list[AclBinding] = []
    for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
        for type_name in _children(zk, root):
            resource_type = RESOURCE_BY_ZNODE.get(type_name)
            if resource_type is None:
                continue
            for name in _children(zk, f"{root}/{type_name}"):
                try:
                    data, _ = zk.get(f"{root}/{type_name}/{name}")
                except NoNodeError:
                    continue
                out.extend(decode_znode(resource_type, name, pattern, data))
    return out


def alter(zk: KazooClient, add: Iterable[AclBinding], remove: Iterable[AclBinding]) -> None:
    changes: dict[str, tuple[set[AclBinding], set[AclBinding]]] = defaultdict(lambda: (set(), set()))
    for acl in add:
        changes[znode_path(acl)][0].add(acl)
    for acl in remove:
        changes[znode_path(acl)][1].add(acl)
    for path, (adds, removes) in changes.items():
        sample = next(iter(adds or removes))
        try:
            data, stat = zk.get(path)
            current = set(decode_znode(sample.resource_type, sample.name, sample.pattern, data))
        except NoNodeError:
            current, stat = set(), None
        wanted = (current | adds) - removes
        if wanted == current:
            continue
        if not wanted:
            if stat is not None:
                zk.delete(path, version=stat.version)
        elif stat is None:
            zk.create(path, encode_znode(wanted), makepath=True)
        else:
            zk.set(path, encode_znode(wanted), version=stat.version)
        if sample.pattern == PatternType.LITERAL:  # Kafka's v0 change record: "<Type>:<name>"
            note = f"{sample.resource_type.znode}:{sample.name}".encode()
            zk.create(f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", note, sequence=True, makepath=True)
        else:
            note = json.dumps(
                {
                    "version": 1,
                    "resourceType": sample.resource_type.znode,
                    "name": sample.name,
                    "patternType": "Prefixed",
                }
            ).encode()
            zk.create(f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", note, sequence=True, makepath=True)


def watch(zk: KazooClient, on_change: Callable[[], None]) -> None:
    """Call on_change (on kazoo's thread) whenever any broker or tool announces an ACL change."""
    for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
        zk.ensure_path(path)
        zk.ChildrenWatch(path, lambda _children: on_change())
