"""Kafka's ZkNodeChangeNotificationListener over /config/changes: every config change writes a sequential
`config_change_<seq>` znode naming the entity ({"version":2,"entity_path":"users/alice/clients/app"}); each broker
watches the children, hands every notification newer than the last it processed to its handler (which re-reads
that entity's config), and deletes notifications older than 15 minutes, as Kafka's brokers do."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from kbus.zk import paths

log = logging.getLogger(__name__)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs


def entity_path(data: bytes) -> str | None:
    """The entity a notification names: version 2's entity_path, or version 1's entity_type/entity_name."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict):
        return None
    if body.get("version") == 2 and isinstance(body.get("entity_path"), str):
        return str(body["entity_path"])
    if body.get("version") == 1 and isinstance(body.get("entity_type"), str):
        return f"{body['entity_type']}/{body.get('entity_name', '')}"
    return None


def sequence_number(name: str) -> int:
    return int(name[len(paths.CONFIG_CHANGE_PREFIX):])


class ConfigChangeListener:
    """Follows /config/changes; `handler(entity_path)` runs on kazoo's callback thread, once per notification."""

    def __init__(self, zk: KazooClient, handler: Callable[[str], None]) -> None:
        self._zk = zk
        self._handler = handler
        self._last = -1
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        self._zk.ensure_path(paths.CONFIG_CHANGES)
        self._zk.ChildrenWatch(paths.CONFIG_CHANGES, self._on_children)

    def stop(self) -> None:
        self._stopped = True

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False  # kazoo drops the watch
        try:
            self.process(children)
        except KazooException as exc:  # the session is going; the watch fires again once it is back
            log.warning("Could not process config change notifications: %s", exc)
        return True

    def process(self, children: list[str]) -> None:
        now_ms = int(time.time() * 1000)
        names = sorted(c for c in children if c.startswith(paths.CONFIG_CHANGE_PREFIX))
        with self._lock:
            for name in names:
                seq = sequence_number(name)
                path = f"{paths.CONFIG_CHANGES}/{name}"
                if seq > self._last:
                    try:
                        data, _ = self._zk.get(path)
                    except NoNodeError:
                        data = b""
                    target = entity_path(data) if data else None
                    if target is not None:
                        try:
                            self._handler(target)
                        except Exception:
                            log.exception("Config change handler failed for %s", target)
                    self._last = seq
            self._purge(names, now_ms)

    def _purge(self, names: list[str], now_ms: int) -> None:
        for name in names:
            path = f"{paths.CONFIG_CHANGES}/{name}"
            try:
                stat = self._zk.exists(path)
                if stat is not None and stat.ctime < now_ms - CHANGE_EXPIRATION_MS:
                    self._zk.delete(path)
            except NoNodeError:
                continue  # another broker purged it first
