"""Kafka's ZkSecurityMigrator (`zookeeper-security-migration.sh --zookeeper.acl=secure|unsecure`): re-set the ACL
of the chroot and of every znode under Kafka's secure root paths to what default_acls gives it, so a cluster that
ran without zookeeper.set.acl can turn it on (secure) or off (unsecure). The creator-all ACL of `secure` goes to
the identity this tool authenticated as (SASL user, TLS certificate), so run it as the brokers' identity."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kbus.zk import paths
from kbus.zk.znode_acls import SECURE_ROOT_PATHS, default_acls


def migrate(zk: KazooClient, secure: bool) -> int:
    """The number of znodes whose ACL was set. Missing root paths are created first (with the new ACL), except
    /controller, as Kafka does; a znode deleted meanwhile is skipped."""
    roots = []
    for root in SECURE_ROOT_PATHS:
        if root == paths.CONTROLLER and zk.exists(root) is None:
            continue
        zk.ensure_path(root)
        roots.append(root)
    count = _set(zk, ["/"], secure)
    level = roots
    while level:
        # one level at a time, pipelined: a cluster with many partitions has tens of thousands of znodes
        count += _set(zk, level, secure)
        pending = [(path, zk.get_children_async(path)) for path in level]
        level = []
        for path, result in pending:
            try:
                level += [f"{path.rstrip('/')}/{child}" for child in result.get()]
            except NoNodeError:
                continue
    return count


def _set(zk: KazooClient, level: list[str], secure: bool) -> int:
    done = 0
    for result in [zk.set_acls_async(path, default_acls(secure, path)) for path in level]:
        try:
            result.get()
            done += 1
        except NoNodeError:
            continue
    return done
