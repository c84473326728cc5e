"""AclCache: reloads run one at a time in request order, and alter_acls returns with its change applied."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kbus.common.acl import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from kbus.server.security.acl_cache import AclCache


def _acl(topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:alice", "*", Operation.READ,
                      Permission.ALLOW)


class SlowFirstReadStore:
    """A store whose second read (the first reload) blocks until released, as a slow ZooKeeper read would."""

    def __init__(self) -> None:
        self.current: set[AclBinding] = set()
        self.reads = 0
        self.reading = threading.Event()
        self.release = threading.Event()
        self.watchers: list[Callable[[], None]] = []

    def acls(self) -> list[AclBinding]:
        self.reads += 1
        snapshot = sorted(self.current)
        if self.reads == 2:
            self.reading.set()
            self.release.wait(10)
        return snapshot

    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None:
        self.current = (self.current | set(add)) - set(remove)
        for watcher in self.watchers:
            watcher()

    def watch_acls(self, on_change: Callable[[], None]) -> None:
        self.watchers.append(on_change)


def test_an_older_reload_never_overwrites_a_newer_change() -> None:
    store, authorizer = SlowFirstReadStore(), Authorizer()
    cache = AclCache(store, authorizer)
    cache.start()
    try:
        first = threading.Thread(target=cache.alter_acls, args=([_acl("a")], []))
        first.start()
        assert store.reading.wait(5)  # the reload after adding "a" has read {a} and is stuck
        second = threading.Thread(target=cache.alter_acls, args=([], [_acl("a")]))
        second.start()
        second.join(0.3)
        assert second.is_alive()  # removing "a" waits for a reload that reads after it, not the stuck one
        store.release.set()
        first.join(5)
        second.join(5)
        assert not second.is_alive()
        assert authorizer.acls == frozenset()
    finally:
        store.release.set()
        cache.stop()
