"""The authorizer's copy of the ACLs, kept in step with their store (Kafka's AclAuthorizer cache and its
ZkNodeChangeNotificationListener).

Every change notification (`/kafka-acl-changes`, by any broker or Kafka's tools) asks for a reload; one thread runs
the reloads one after another, each reading every ACL afresh, so a reload never overwrites what a newer one applied
(several notifications that arrive while one runs cost one more reload, not one each). A change made through this
broker (CreateAcls/DeleteAcls) returns only once a reload that started after the write has been applied: the broker
answers with its own change already in force, as Kafka's AclAuthorizer updates its cache before it answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from kbus.common.acl import AclBinding, Authorizer

log = logging.getLogger("kbus.server.security.acl_cache")

# How long CreateAcls/DeleteAcls wait for their change to be read back (ZooKeeper away: they answer anyway; the
# next notification retries the reload).
APPLY_TIMEOUT_S = 30.0


class WatchedAclStore(Protocol):
    def acls(self) -> list[AclBinding]: ...
    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None: ...
    def watch_acls(self, on_change: Callable[[], None]) -> None: ...


class AclCache:
    """An AclStore for the API handlers (reads and writes go to the store) that keeps `authorizer` current."""

    def __init__(self, store: WatchedAclStore, authorizer: Authorizer) -> None:
        self._store, self._authorizer = store, authorizer
        self._cond = threading.Condition()
        self._requested = 0  # reloads asked for so far
        self._started = 0  # the request count when the running (or last) reload began reading
        self._finished = 0  # the request count the last finished reload covers
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Load every ACL (blocking), then follow the store's change notifications."""
        self._authorizer.set_acls(self._store.acls())
        self._thread = threading.Thread(target=self._run, name="acl-reload", daemon=True)
        self._thread.start()
        self._store.watch_acls(self.changed)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def changed(self) -> None:
        """A change was announced (any thread, kazoo's included): reload soon, never here."""
        self.request_reload()

    def request_reload(self) -> int:
        with self._cond:
            self._requested += 1
            self._cond.notify_all()
            return self._requested

    def acls(self) -> list[AclBinding]:
        return self._store.acls()

    def alter_acls(self, add: list[AclBinding], remove: list[AclBinding]) -> None:
        """Write, then wait (blocking) until a reload that read the store after the write is applied."""
        self._store.alter_acls(add, remove)
        wanted = self.request_reload()
        with self._cond:
            if not self._cond.wait_for(lambda: self._finished >= wanted or self._stopped, APPLY_TIMEOUT_S):
                log.warning("ACL change written but not yet applied on this broker after %.0f s", APPLY_TIMEOUT_S)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requested > self._started or self._stopped)
                if self._stopped:
                    return
                self._started = covered = self._requested
            try:
                self._authorizer.set_acls(self._store.acls())
            except Exception as exc:  # ZooKeeper away: the next change notification retries
                log.warning("Could not reload ACLs: %s", exc)
            with self._cond:
                self._finished = covered
                self._cond.notify_all()
