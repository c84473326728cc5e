"""The supervisor of `num.broker.processes=N`: starts the N broker processes of one server.properties, stops them
together, restarts one that crashes, and tells systemd (or `server-start --daemon`) READY=1 once all N serve.

Each child is `python -m kbus.server.broker_process <config> --override ...` (kbus.common.broker_processes derives
the overrides), in the supervisor's working directory, with its stdout/stderr. Policy, as systemd's
`Restart=on-failure` with `RestartSec=5` would apply it to one broker:
- start-up: a child that exits before it is ready (bad config, port taken, ZooKeeper unreachable) stops the set,
  and server-start exits 1;
- running: a child that dies (kill -9, crash, exit != 0) is started again after RESTART_DELAY_S; it waits for its
  old ZooKeeper session to expire as any restarted broker does. After MAX_FAILED_RESTARTS restarts in a row that
  never got ready, the set stops. A child that exits 0 on its own (someone sent it SIGTERM) stays stopped;
- SIGTERM/SIGINT to the supervisor: SIGTERM to every child (a controlled shutdown each), wait for all, exit 0;
- the supervisor killed -9: each child gets SIGTERM from the kernel (PR_SET_PDEATHSIG), so none is orphaned.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbus.common.broker_processes import BrokerProcessSpec

log = logging.getLogger("kbus.server.broker_set")

RESTART_DELAY_S = 5.0
MAX_FAILED_RESTARTS = 5
PROCESS_ENV = "KBUS_BROKER_PROCESS"  # set in each child: its broker id (log lines carry it)
_PR_SET_PDEATHSIG = 1


def log_dirs_layout_error(log_dirs: list[Path], processes: int) -> str | None:
    """Data left by the other mode, which this start would silently not see (an empty log where ZooKeeper says the
    broker holds replicas: lost data with RF 1). A set keeps each process's data in `<dir>/broker-<id>`; a lone
    broker keeps it in `<dir>` itself. Moving it is the operator's call, so this refuses and says how."""
    for d in log_dirs:
        if processes > 1 and (d / "meta.properties").exists():
            return (
                f"log.dirs {d} holds a single broker's data (meta.properties), but with num.broker.processes="
                f"{processes} each process keeps its data in {d}/broker-<broker.id>: move it into "
                f"{d}/broker-<that broker's id> first (kbus server-stop, then mv), or leave num.broker.processes=1"
            )
        sets = sorted(p.name for p in d.glob("broker-*") if (p / "meta.properties").exists())
        if processes == 1 and sets and not (d / "meta.properties").exists():
            return (
                f"log.dirs {d} holds the data of num.broker.processes brokers ({', '.join(sets)}), which a single "
                f"broker would not see: set num.broker.processes back, or move one broker's data up into {d}"
            )
    return None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervisor dies, whatever killed it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class _Child:
    spec: BrokerProcessSpec
    notify: socket.socket
    proc: subprocess.Popen[bytes] | None = None
    ready: bool = False
    ever_ready: bool = False
    failed_restarts: int = 0
    restart_at: float | None = None
    done: bool = False  # not to be started again (clean exit, or the set is stopping)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class BrokerSet:
    def __init__(
        self,
        config_path: str,
        overrides: list[str],
        specs: list[BrokerProcessSpec],
        notify: Callable[[str], None],
    ) -> None:
        self._config_path = config_path
        self._overrides = overrides
        self._notify_parent = notify
        self._children = [_Child(spec, self._notify_socket()) for spec in specs]
        self._stopping = False
        self._signalled = False
        self._exit_code = 0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    @staticmethod
    def _notify_socket() -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(f"\0kbus-broker-set-{os.getpid()}-{uuid.uuid4().hex}")
        s.setblocking(False)
        return s

    def _spawn(self, child: _Child) -> None:
        name = child.notify.getsockname()
        address = name.decode() if isinstance(name, bytes) else name
        env = {
            **os.environ,
            "NOTIFY_SOCKET": "@" + address.lstrip("\0"),
            PROCESS_ENV: str(child.spec.broker_id),
        }
        argv = [sys.executable, "-m", "kbus.server.broker_process", self._config_path]
        for item in (*self._overrides, *child.spec.override_args()):
            argv += ["--override", item]
        child.ready = False
        child.restart_at = None
        child.proc = subprocess.Popen(argv, env=env, preexec_fn=_die_with_parent)  # the supervisor runs no threads
        log.info(
            "broker process %d (broker.id=%d) started: pid %d", child.spec.index, child.spec.broker_id, child.proc.pid
        )

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        old_wakeup = signal.set_wakeup_fd(self._wake_w.fileno())
        try:
            log.info(
                "starting %d broker processes (num.broker.processes) from %s: broker.id %s",
                len(self._children),
                self._config_path,
                ", ".join(str(c.spec.broker_id) for c in self._children),
            )
            for child in self._children:
                self._spawn(child)
            announced = False
            while any(c.alive or not c.done for c in self._children):
                self._wait(1.0)
                self._read_notifications()
                if not announced and all(c.ready for c in self._children) and not self._stopping:
                    announced = True
                    log.info("all %d broker processes started", len(self._children))
                    self._notify_parent("READY=1")
                if self._stopping and not self._signalled:
                    self._signalled = True
                    self._notify_parent("STOPPING=1")
                    for c in self._children:
                        c.done = True
                        if c.alive and c.proc is not None:
                            c.proc.send_signal(signal.SIGTERM)
                self._reap()
                self._restart_due()
            return self._exit_code
        finally:
            for child in self._children:  # only reached with every child reaped, unless run() itself failed
                if child.alive and child.proc is not None:
                    child.proc.send_signal(signal.SIGTERM)
                    child.proc.wait()
                child.notify.close()
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _wait(self, timeout: float) -> None:
        fds = [self._wake_r, *(c.notify for c in self._children)]
        with contextlib.suppress(InterruptedError):
            select.select(fds, [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(64):
                pass

    def _read_notifications(self) -> None:
        for child in self._children:
            while True:
                try:
                    msg = child.notify.recv(4096).decode(errors="replace")
                except BlockingIOError:
                    break
                if "READY=1" in msg.split("\n") and child.alive:
                    child.ready = child.ever_ready = True
                    child.failed_restarts = 0
                    log.info("broker process %d (broker.id=%d) ready", child.spec.index, child.spec.broker_id)

    def _stop_set(self, code: int) -> None:
        self._exit_code = self._exit_code or code
        self._stopping = True

    def _reap(self) -> None:
        for child in self._children:
            if child.proc is None or child.proc.poll() is None or child.restart_at is not None:
                continue
            code = child.proc.returncode
            what = f"broker process {child.spec.index} (broker.id={child.spec.broker_id}, pid {child.proc.pid})"
            was_ready, child.ready = child.ready, False
            if child.done:
                if code != 0 and not self._signalled:
                    self._exit_code = self._exit_code or 1
                continue
            how = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
            if code == 0:
                log.warning("%s %s on its own: not restarted (a clean stop)", what, how)
                child.done = True
            elif not child.ever_ready:
                log.error("%s %s before it was ready: stopping all broker processes", what, how)
                child.done = True
                self._stop_set(1)
            elif not was_ready and child.failed_restarts >= MAX_FAILED_RESTARTS:
                log.error(
                    "%s %s; %d restarts in a row failed: stopping all broker processes",
                    what,
                    how,
                    child.failed_restarts,
                )
                child.done = True
                self._stop_set(1)
            else:
                if not was_ready:
                    child.failed_restarts += 1
                log.warning("%s %s: restarting it in %.0f s", what, how, RESTART_DELAY_S)
                child.restart_at = time.monotonic() + RESTART_DELAY_S

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self._children:
            if child.restart_at is not None and now >= child.restart_at and not self._stopping:
                self._spawn(child)
            elif child.restart_at is not None and self._stopping:
                child.restart_at = None
                child.done = True
