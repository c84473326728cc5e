"""Kafka's LogDirFailureChannel: where an I/O error on a log dir is reported, once per dir.

Whoever hits an `OSError` on a segment, index or checkpoint (an append on the event loop, a flush or retention
on a worker thread, a follower's fetch) reports the dir here and answers KAFKA_STORAGE_ERROR; the listeners (the
replica manager) then take the dir offline: its replicas stop, the controller is told, and the broker halts when
no dir is left. The error paths cost nothing until an error happens: callers wrap existing calls in try/except.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kbus.server.log.errors import KafkaStorageError

log = logging.getLogger("kbus.server.log")

LogDirFailureListener = Callable[[Path], None]


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: set[Path] = set()
        self._listeners: list[LogDirFailureListener] = []

    def add_listener(self, listener: LogDirFailureListener) -> None:
        self._listeners.append(listener)

    def has_failed(self, log_dir: Path) -> bool:
        with self._lock:
            return log_dir in self._offline

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, error: BaseException) -> None:
        """Report an I/O error in `log_dir`; listeners hear about each dir once (Kafka logs every report)."""
        log.error("%s: %s", message, error)
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline.add(log_dir)
        for listener in list(self._listeners):
            try:
                listener(log_dir)
            except Exception:
                log.exception("log dir failure listener failed for %s", log_dir)

    def storage_error(self, log_dir: Path, message: str, error: OSError) -> KafkaStorageError:
        """Report, and give the KafkaStorageError the caller raises (KAFKA_STORAGE_ERROR to the client)."""
        self.maybe_add_offline_log_dir(log_dir, message, error)
        return KafkaStorageError(f"{message}: {error}")
