"""`kbus server-start` / `kbus server-stop`: kafka-server-start.sh and kafka-server-stop.sh."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Annotated

import typer

from kbus.cli.app import app
from kbus.cli.common import KafkaStyleCommand, fail

_SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "KILL": signal.SIGKILL}


@app.command("server-start", cls=KafkaStyleCommand)
def server_start(
    config: Annotated[str | None, typer.Argument(help="server.properties (Kafka's format)")] = None,
    override: Annotated[
        list[str] | None, typer.Option("--override", help="property=value, overriding the file (repeatable)")
    ] = None,
    daemon: Annotated[
        bool, typer.Option("--daemon", "-daemon", help="Run in the background (pid and log file under logs/)")
    ] = False,
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            min=1,
            help="Run N broker processes from this config, one per core (kbus only: same as --override "
            "num.broker.processes=N; docs/cores.md)",
        ),
    ] = None,
) -> None:
    """Start a kbus broker in the foreground; SIGTERM or Ctrl-C shuts it down cleanly (kafka-server-start.sh)."""
    if config is None:
        from kbus.server.main import USAGE

        print(USAGE)
        raise typer.Exit(1)
    if not Path(config).is_file():
        fail(f"ERROR Cannot read config file {config}: no such file")
    overrides = list(override or [])
    if processes is not None:
        overrides.append(f"num.broker.processes={processes}")
    if daemon:
        # Daemon mode (pid file + logs/kbusServer.out) lives with the service tooling (issue 6).
        from kbus.ops.daemon import DaemonError, start_daemon

        try:
            raise typer.Exit(start_daemon("server", config, overrides))
        except DaemonError as exc:
            fail(str(exc))
    # Imported here so the rest of the CLI loads even where the broker cannot.
    from kbus.server.main import run

    raise typer.Exit(run(config, overrides))


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _is_server(argv: list[str]) -> int | None:
    """Index of the config argument's position (len(argv) if none) when argv runs a kbus broker, else None."""
    for i, arg in enumerate(argv):
        launcher = argv[i - 1] if i > 0 else ""
        if arg == "server-start" and (Path(launcher).name == "kbus" or launcher.endswith("kbus.cli.main")):
            return i + 1
        if arg == "-m" and i + 1 < len(argv) and argv[i + 1] in ("kbus.server", "kbus.server.main"):
            return i + 2
    return None


def _config_of(pid: int, argv: list[str], start: int) -> Path | None:
    """The config file a broker was started with, resolved against its working directory."""
    for arg in argv[start:]:
        if arg.startswith("-"):
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            return None
        return (cwd / arg).resolve()
    return None


def find_servers(config: str | None = None) -> list[int]:
    """PIDs of running kbus brokers (any user-visible process), optionally only those started with `config`."""
    wanted = Path(config).resolve() if config else None
    me = os.getpid()
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        argv = _cmdline(pid)
        start = _is_server(argv)
        if start is None:
            continue
        if wanted is not None and _config_of(pid, argv, start) != wanted:
            continue
        pids.append(pid)
    return sorted(pids)


@app.command("server-stop", cls=KafkaStyleCommand)
def server_stop(
    config: Annotated[
        str | None,
        typer.Argument(help="Stop only brokers started with this config file (default: every kbus broker)"),
    ] = None,
) -> None:
    """Send SIGTERM (or $SIGNAL: TERM, INT, KILL) to running kbus brokers (kafka-server-stop.sh)."""
    sig = _SIGNALS.get(os.environ.get("SIGNAL", "TERM").upper().removeprefix("SIG"), signal.SIGTERM)
    # First the broker `server-start --daemon` recorded in $KBUS_LOG_DIR/kbusServer.pid (waits for it to exit).
    from kbus.ops.daemon import DaemonError, stop_from_pid_file

    try:
        if stop_from_pid_file(sig, config) is not None:
            return
    except DaemonError as exc:
        fail(str(exc))
    pids = find_servers(config)
    # `kbus server-start` execs nothing: its broker is the same process, so one signal per pid suffices.
    stopped = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            stopped += 1
        except ProcessLookupError:
            continue
        except PermissionError:
            print(f"Not allowed to stop kbus server {pid}")
    if stopped == 0:
        fail("No kbus server to stop")


def _overrides(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--override"]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _describe(pid: int, config: Path | None, argv: list[str]) -> tuple[str, bool]:
    """`broker.id=N pid P LISTENER accepting|not accepting` for a broker process, from its config and overrides."""
    from kbus.common.broker_config import ConfigError, KafkaConfig

    try:
        cfg = KafkaConfig.load(config, _overrides(argv))
        first = cfg.listeners[0]
    except (ConfigError, OSError) as exc:
        return f"pid {pid} (config unreadable: {exc})", False
    try:
        with socket.create_connection((first.host or "127.0.0.1", first.port), timeout=1.0):
            accepting = True
    except OSError:
        accepting = False
    state = "accepting connections" if accepting else "not accepting connections"
    return f"broker.id={cfg.broker_id} pid {pid} {first} {state}", accepting


@app.command("server-status", cls=KafkaStyleCommand)
def server_status(
    config: Annotated[
        str | None, typer.Argument(help="Only brokers started with this config file (default: every kbus broker)")
    ] = None,
) -> None:
    """List the kbus brokers running here (kbus only): each server-start, the processes of a num.broker.processes
    set, their broker.id and whether their first listener accepts connections; exit 1 if none runs or one does not
    accept."""
    pids = find_servers(config)
    if not pids:
        fail("No kbus server running")
    healthy = True
    for pid in pids:
        argv = _cmdline(pid)
        cfg = _config_of(pid, argv, _is_server(argv) or len(argv))
        members = [k for k in _children(pid) if "kbus.server.broker_process" in _cmdline(k)]
        if not members:
            line, ok = _describe(pid, cfg, argv)
            print(f"kbus server {pid} ({cfg}): {line}")
            healthy &= ok
            continue
        print(f"kbus server {pid} ({cfg}): {len(members)} broker processes")
        for k in members:
            kargv = _cmdline(k)
            line, ok = _describe(k, _config_of(k, kargv, kargv.index("kbus.server.broker_process") + 1), kargv)
            print(f"  {line}")
            healthy &= ok
    if not healthy:
        raise typer.Exit(1)
