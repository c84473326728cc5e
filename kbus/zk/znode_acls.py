"""The ZooKeeper ACL every znode kbus creates gets: Kafka's ZkData.defaultAcls, the one home of this rule.

Secure (a broker with zookeeper.set.acl=true, or a tool that authenticated to ZooKeeper with SASL or a TLS client
certificate): the creator may do everything and the world may read, except under the sensitive roots, which only
the creator may read (SCRAM credentials in /config/users, dynamic broker configs that may hold passwords,
delegation tokens). /consumers stays open, as in Kafka (old consumers of any identity write under it). Not secure:
open to everyone, ZooKeeper's and Kafka's default.

The paths are relative to the chroot, as Kafka's are.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from kbus.zk import paths

# ZkData.SensitiveRootPaths: prefixes, as Kafka compares them (path.startsWith)
SENSITIVE_ROOT_PATHS = (f"{paths.CONFIG}/users", paths.CONFIG_BROKERS, "/delegation_token/tokens")
CONSUMERS_PATH = "/consumers"
# ZkData.SecureRootPaths (with ZkAclStore.securePaths): what zookeeper-security-migration re-sets, recursively
SECURE_ROOT_PATHS = (
    "/admin", "/brokers", "/cluster", paths.CONFIG, paths.CONTROLLER, paths.CONTROLLER_EPOCH,
    paths.ISR_CHANGE_NOTIFICATION, paths.LATEST_PRODUCER_ID_BLOCK, paths.LOG_DIR_EVENT_NOTIFICATION,
    "/delegation_token", "/kafka-acl-extended", "/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended/prefixed",
    "/kafka-acl-extended-changes",
)  # fmt: skip


def is_sensitive(path: str) -> bool:
    return path.startswith(SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    """ZkData.defaultAcls(isSecure, path)."""
    if not secure or path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    if is_sensitive(path):
        return list(CREATOR_ALL_ACL)
    return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


class KafkaKazooClient(KazooClient):
    """kazoo applying default_acls to every znode it creates: plain creates, makepath/ensure_path parents (each
    parent gets its own path's ACL, as Kafka's createRecursive gives it) and creates inside transactions. kbus
    never passes an ACL of its own, so there is exactly one rule."""

    def __init__(self, *, secure_acls: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.secure_acls = secure_acls

    # kazoo's single funnel for create, create_async and ensure_path (kazoo 2.10/2.11); the path is chroot-relative
    def _create_async_inner(
        self, path: str, value: bytes, acl: Any, flags: int, trailing: bool = False, include_data: bool = False
    ) -> Any:
        return super()._create_async_inner(
            path, value, default_acls(self.secure_acls, path), flags, trailing=trailing, include_data=include_data
        )

    def transaction(self) -> TransactionRequest:
        return _AclTransaction(self)


class _AclTransaction(TransactionRequest):
    client: KafkaKazooClient

    def create(
        self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False, sequence: bool = False
    ) -> None:
        super().create(path, value, default_acls(self.client.secure_acls, path), ephemeral, sequence)
