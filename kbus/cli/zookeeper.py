"""`kbus zookeeper-start`, `zookeeper-stop`, `zookeeper-shell`: Kafka's zookeeper-server-start.sh & co.,
running the real Apache ZooKeeper with the system Java."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import typer

from kbus.cli.app import app
from kbus.common.broker_config import ConfigError
from kbus.zk import launcher
from kbus.zk.launcher import ZooKeeperSetupError

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# heap and extra JVM flags, like Kafka's KAFKA_HEAP_OPTS / KAFKA_OPTS
HEAP_ENV = "KBUS_ZK_HEAP_OPTS"
OPTS_ENV = "KBUS_ZK_OPTS"
KAFKA_OPTS_ENV = "KAFKA_OPTS"
LOG_DIR_ENV = "KBUS_LOG_DIR"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(1)


def _log_dir() -> Path:
    return Path(os.environ.get(LOG_DIR_ENV) or "logs").absolute()


def _default_config() -> Path:
    local = Path("config/zookeeper.properties")
    if local.is_file():
        return local
    # an editable/source install keeps config/ beside the package
    shipped = Path(__file__).resolve().parents[2] / "config" / "zookeeper.properties"
    return shipped if shipped.is_file() else local


@app.command("zookeeper-start")
def zookeeper_start(
    config: Path = typer.Argument(None, help="zookeeper.properties (default: config/zookeeper.properties)"),
    daemon: bool = typer.Option(False, "--daemon", help="Run in the background; pid and logs go to logs/."),
) -> None:
    """Start Apache ZooKeeper (QuorumPeerMain) with Kafka's zookeeper.properties keys."""
    try:
        code = _start((config or _default_config()).absolute(), daemon)
    except ZooKeeperSetupError as e:
        raise _fail(str(e)) from None
    raise typer.Exit(code)


def _start(config_path: Path, daemon: bool) -> int:
    props = launcher.read_config(config_path)
    install = launcher.find_install()
    endpoint = launcher.client_endpoint(props)
    log_dir = _log_dir()
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        probe = log_dir / ".kbus-write-test"
        probe.touch()
        probe.unlink()
    except OSError as e:
        raise ZooKeeperSetupError(
            f"cannot write the log/pid directory {log_dir} ({e.strerror}); set {LOG_DIR_ENV}"
        ) from None
    pid_path = launcher.pid_file(log_dir)
    running = launcher.live_server_pid(pid_path)
    if running:
        raise ZooKeeperSetupError(f"ZooKeeper is already running (pid {running}, pid file {pid_path})")
    if launcher.is_listening(endpoint.host, endpoint.port):
        raise ZooKeeperSetupError(
            f"{endpoint.host}:{endpoint.port} is already in use (another ZooKeeper?); change clientPort"
        )
    cmd = launcher.server_command(
        install,
        config_path,
        log_dir,
        daemon=daemon,
        heap_opts=os.environ.get(HEAP_ENV, launcher.DEFAULT_HEAP_OPTS),
        # Kafka's script passes KAFKA_OPTS (e.g. -Djava.security.auth.login.config=zk_server_jaas.conf)
        extra_opts=" ".join(os.environ.get(name, "") for name in (KAFKA_OPTS_ENV, OPTS_ENV)).strip(),
    )
    if daemon:
        return _run_daemon(cmd, log_dir, pid_path, endpoint, launcher.is_ensemble(props))
    return _run_foreground(cmd, pid_path)


def _run_foreground(cmd: list[str], pid_path: Path) -> int:
    proc = subprocess.Popen(cmd)
    pid_path.write_text(f"{proc.pid}\n")
    forwarded: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        forwarded.append(signum)
        proc.send_signal(signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    try:
        rc = proc.wait()
    finally:
        if launcher.live_server_pid(pid_path) is None:
            pid_path.unlink(missing_ok=True)
    # the JVM exits 143 (128+SIGTERM) when asked to stop: that is a clean stop, not a failure
    stopped = rc in (-signal.SIGTERM, 128 + signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGINT, 130)
    return 0 if forwarded and stopped else rc


def _run_daemon(
    cmd: list[str], log_dir: Path, pid_path: Path, endpoint: launcher.ClientEndpoint, ensemble: bool
) -> int:
    out_path = log_dir / "zookeeper.out"
    with open(out_path, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    pid_path.write_text(f"{proc.pid}\n")
    # an ensemble member cannot serve before a quorum of its peers is up, so only wait for it to answer
    if endpoint.tls_only:
        ready = launcher.wait_until_listening(endpoint.host, endpoint.port, 60.0, alive=lambda: proc.poll() is None)
    else:
        ready = launcher.wait_until_serving(
            endpoint.host, endpoint.port, timeout=60.0, alive=lambda: proc.poll() is None, quorum=not ensemble
        )
    if not ready:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        pid_path.unlink(missing_ok=True)
        raise ZooKeeperSetupError(f"ZooKeeper did not start: {_last_error(log_dir)} (see {log_dir})")
    member = " as an ensemble member (serving once a quorum is up)" if ensemble else ""
    tls = " (TLS)" if endpoint.tls_only else ""
    typer.echo(f"ZooKeeper started (pid {proc.pid}) on {endpoint.host}:{endpoint.port}{tls}{member}; logs in {log_dir}")
    return 0


def _last_error(log_dir: Path) -> str:
    lines: list[str] = []
    for name in ("zookeeper.log", "zookeeper.out"):
        try:
            lines += (log_dir / name).read_text(errors="replace").splitlines()[-200:]
        except OSError:
            continue
    errors = [ln.strip() for ln in lines if "ERROR" in ln or "Exception" in ln]
    return (errors[-1] if errors else (lines[-1].strip() if lines else "no output"))[:300]


def _server_to_stop(config: Path | None) -> tuple[int, Path | None] | None:
    """(pid, pid file to clean up) of the ZooKeeper to stop. With a config file: the kbus-started server
    running it. Without: the one in this directory's pid file; failing that (and with no KBUS_LOG_DIR naming
    the place to look), the only kbus-started server on the machine, as Kafka's zookeeper-server-stop.sh finds
    QuorumPeerMain wherever it was started."""
    pid_path = launcher.pid_file(_log_dir())
    if config is not None:
        wanted = config.absolute()
        for server in launcher.running_servers():
            if server.config == wanted:
                return server.pid, launcher.pid_file(server.log_dir) if server.log_dir else None
        return None
    pid = launcher.live_server_pid(pid_path)
    if pid is not None:
        return pid, pid_path
    if os.environ.get(LOG_DIR_ENV):
        return None
    servers = launcher.running_servers()
    if len(servers) > 1:
        listed = ", ".join(f"pid {s.pid} ({s.config})" for s in servers)
        raise _fail(f"{len(servers)} ZooKeeper servers are running: {listed}; say which: kbus zookeeper-stop CONFIG")
    if not servers:
        return None
    only = servers[0]
    return only.pid, launcher.pid_file(only.log_dir) if only.log_dir else None


def _alive(pid: int) -> bool:
    try:
        return launcher.SERVER_MAIN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@app.command("zookeeper-stop")
def zookeeper_stop(
    config: Path = typer.Argument(None, help="Stop the server started with this zookeeper.properties"),
) -> None:
    """Stop a ZooKeeper server started by `kbus zookeeper-start` (this directory's logs/zookeeper.pid, or the
    one running CONFIG, or the only one running)."""
    found = _server_to_stop(config)
    if found is None:
        typer.echo("No zookeeper server to stop", err=True)
        raise typer.Exit(1)
    pid, pid_path = found
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        raise _fail(f"ZooKeeper (pid {pid}) did not stop within 30 s")
    if pid_path is not None and launcher.live_server_pid(pid_path) is None:
        pid_path.unlink(missing_ok=True)


@app.command(
    "zookeeper-shell",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def zookeeper_shell(
    ctx: typer.Context,
    server: str = typer.Argument(..., help="host:port[/chroot], e.g. localhost:2181"),
) -> None:
    """ZooKeeper's own CLI against SERVER; extra arguments run one command (`ls /brokers/ids`) and exit.
    `-zk-tls-config-file FILE` (zookeeper-shell.sh's option) connects with TLS."""
    args = list(ctx.args)
    jvm_opts = os.environ.get(KAFKA_OPTS_ENV, "")
    if "-zk-tls-config-file" in args:
        from kbus.zk import security  # kazoo, imported only where ZooKeeper is used

        at = args.index("-zk-tls-config-file")
        if at + 1 >= len(args):
            raise _fail("-zk-tls-config-file needs a file name")
        try:
            tls = security.as_system_properties(security.tls_config_file(args[at + 1]))
        except ConfigError as e:
            raise _fail(str(e)) from None
        jvm_opts = " ".join([jvm_opts, *map(shlex.quote, tls)]).strip()
        del args[at : at + 2]
    try:
        install = launcher.find_install()
    except ZooKeeperSetupError as e:
        raise _fail(str(e)) from None
    cmd = launcher.shell_command(install, server, args, jvm_opts)
    sys.stdout.flush()
    raise typer.Exit(subprocess.call(cmd))

