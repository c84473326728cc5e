"""`kbus server-start --daemon` and the pid-file half of `kbus server-stop` (kafka-server-start.sh -daemon).

The broker runs as `python -m kbus.server` in its own session with stdout/stderr in $KBUS_LOG_DIR/kbusServer.out
(Kafka: logs/kafkaServer.out) and its pid in $KBUS_LOG_DIR/kbusServer.pid. Readiness is the broker's own
systemd-style READY=1 datagram on a private NOTIFY_SOCKET: it is sent only once the listeners accept
connections, so start_daemon returns exactly when clients can connect, whatever the listener address is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

LOG_DIR_ENV = "KBUS_LOG_DIR"
START_TIMEOUT_ENV = "KBUS_DAEMON_START_TIMEOUT"
DEFAULT_START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
NAMES = {"server": "kbusServer"}


class DaemonError(Exception):
    """A one-line reason the daemon could not be started or stopped."""


@dataclass(frozen=True)
class DaemonFiles:
    pid: Path
    out: Path

    @classmethod
    def for_name(cls, name: str, log_dir: Path | None = None) -> DaemonFiles:
        base = log_dir or default_log_dir()
        stem = NAMES.get(name, name)
        return cls(base / f"{stem}.pid", base / f"{stem}.out")


def default_log_dir() -> Path:
    return Path(os.environ.get(LOG_DIR_ENV) or "logs").absolute()


def is_kbus_server(argv: list[str]) -> bool:
    """argv of `python -m kbus.server ...` or `kbus server-start ...` (guards a recycled pid)."""
    return any(a in ("kbus.server", "kbus.server.main") for a in argv) or (
        "server-start" in argv and any(Path(a).name == "kbus" or a.endswith("kbus.cli.main") for a in argv)
    )


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); it is gone for our purposes
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def live_pid(pid_file: Path) -> int | None:
    """The pid in `pid_file` when that process is still a kbus broker; None for a missing or stale file."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) and is_kbus_server(_argv(pid)) else None


def config_of(pid: int) -> Path | None:
    """The server.properties a broker was started with, resolved against its working directory."""
    argv = _argv(pid)
    try:
        start = next(i for i, a in enumerate(argv) if a in ("kbus.server", "kbus.server.main", "server-start")) + 1
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except (StopIteration, OSError):
        return None
    args = iter(argv[start:])
    for arg in args:
        if arg == "--override":
            next(args, None)
        elif not arg.startswith("-"):
            return (cwd / arg).resolve()
    return None


class _ReadinessSocket:
    """An abstract-namespace datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self) -> None:
        self.name = f"@kbus-daemon-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.1)

    def ready(self) -> bool:
        with contextlib.suppress(TimeoutError, BlockingIOError):
            while True:
                if b"READY=1" in self.sock.recv(4096).split(b"\n"):
                    return True
        return False

    def close(self) -> None:
        self.sock.close()


def _last_error(out: Path, since: int) -> str:
    try:
        with open(out, "rb") as f:
            f.seek(since)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return "no output"
    errors = [ln.strip() for ln in lines if "ERROR" in ln or "Error" in ln or "Exception" in ln]
    return (errors[-1] if errors else (lines[-1].strip() if lines else "no output"))[:300]


def start_daemon(name: str, config: str | None, overrides: list[str], log_dir: Path | None = None) -> int:
    """Start the broker in the background and return once it accepts connections. Prints one status line;
    raises DaemonError (one line) when it cannot."""
    from kbus.common.broker_config import ConfigError, KafkaConfig

    try:
        cfg = KafkaConfig.load(config, overrides)
    except ConfigError as exc:
        raise DaemonError(f"ERROR {exc}") from None
    files = DaemonFiles.for_name(name, log_dir)
    try:
        files.pid.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DaemonError(f"ERROR cannot create log directory {files.pid.parent}: {exc.strerror}") from None
    running = live_pid(files.pid)
    if running:
        raise DaemonError(
            f"ERROR kbus server is already running (pid {running}, pid file {files.pid}); to run several brokers "
            f"on this machine give each its own server.properties (broker.id, listeners, log.dirs) and its own "
            f"{LOG_DIR_ENV} (or start each from its own directory)"
        )
    cmd = [sys.executable, "-m", "kbus.server"]
    if config is not None:
        cmd.append(str(Path(config).absolute()))
    for item in overrides:
        cmd += ["--override", item]
    notify = _ReadinessSocket()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NOTIFY_SOCKET": notify.name, LOG_DIR_ENV: str(files.pid.parent)}
    timeout = float(os.environ.get(START_TIMEOUT_ENV) or DEFAULT_START_TIMEOUT_S)
    try:
        out = open(files.out, "ab")  # noqa: SIM115 - handed to the child, closed right after the spawn
    except OSError as exc:
        notify.close()
        raise DaemonError(f"ERROR cannot write {files.out}: {exc.strerror}") from None
    try:
        with out:
            since = out.tell()
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        files.pid.write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while not notify.ready():
            if proc.poll() is not None:
                files.pid.unlink(missing_ok=True)
                raise DaemonError(
                    f"ERROR kbus server exited with code {proc.returncode} while starting: "
                    f"{_last_error(files.out, since)} (log: {files.out})"
                )
            if time.monotonic() > deadline:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(STOP_TIMEOUT_S)
                files.pid.unlink(missing_ok=True)
                raise DaemonError(f"ERROR kbus server not ready after {timeout:g} s; stopped it (log: {files.out})")
    finally:
        notify.close()
    print(f"kbus server started (pid {proc.pid}) on {cfg.listeners_raw}; log: {files.out}", flush=True)
    return 0


def stop_from_pid_file(
    sig: int = signal.SIGTERM, config: str | None = None, log_dir: Path | None = None, wait: float = STOP_TIMEOUT_S
) -> int | None:
    """Stop the daemon named in kbusServer.pid (when it is one and matches `config`), waiting up to `wait`
    seconds for it to exit. Returns its pid, or None when the pid file names no running broker."""
    files = DaemonFiles.for_name("server", log_dir)
    pid = live_pid(files.pid)
    if pid is None:
        files.pid.unlink(missing_ok=True)  # stale: the broker died or the pid was recycled
        return None
    if config is not None and config_of(pid) != Path(config).resolve():
        return None
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        files.pid.unlink(missing_ok=True)
        return None
    except PermissionError:
        raise DaemonError(f"ERROR not allowed to stop kbus server {pid} (pid file {files.pid})") from None
    deadline = time.monotonic() + wait
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        raise DaemonError(f"ERROR kbus server (pid {pid}) did not stop within {wait:g} s")
    files.pid.unlink(missing_ok=True)
    return pid
