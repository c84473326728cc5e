"""Finding and launching the real Apache ZooKeeper server (and its CLI) with the system Java.

Kafka's zookeeper-server-start.sh runs QuorumPeerMain on Kafka's bundled jars; kbus has no bundled jars, so it
discovers an installed ZooKeeper: ZOOKEEPER_HOME (an Apache tarball: lib/*.jar) or Debian's `zookeeper` package
(/usr/share/java/zookeeper.jar, whose manifest Class-Path already names every runtime dependency).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kbus.common.properties import PropertiesError, load_properties

SERVER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# On every server kbus starts, so `zookeeper-stop` run elsewhere finds kbus's servers and no one else's.
KBUS_MARKER = "-Dkbus.launcher=zookeeper-start"
SHELL_MAIN = "org.apache.zookeeper.ZooKeeperMain"
DEBIAN_JAVA_DIR = "/usr/share/java"
INSTALL_HINT = "install it with `apt-get install -y zookeeper` (Debian/Ubuntu)"
# Kafka's script uses -Xmx512M -Xms512M; a small initial heap matters more here than on a dedicated host
DEFAULT_HEAP_OPTS = "-Xms64m -Xmx512m"
DEBIAN_NETTY_EXTRAS = ("netty-codec", "netty-resolver", "netty-transport-native-unix-common")


class ZooKeeperSetupError(Exception):
    """Something the user must fix (install, path, port); the message is one line saying what."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    java: str
    # jars/dirs for the server; `binding` is the slf4j binding that decides how the server logs
    classpath: tuple[str, ...]
    binding: str  # "log4j" | "simple" | "bundled" (tarball's own logback) | "none"
    # quiet classpath for the CLI shell (slf4j-nop when available)
    shell_classpath: tuple[str, ...]


@dataclass(frozen=True)
class ClientEndpoint:
    """Where the server will accept clients, read from the config (what readiness probes connect to)."""

    host: str
    port: int
    # only a secureClientPort (TLS, usually with client certificates): readiness is "listening", as the
    # four-letter words need a TLS client of their own there
    tls_only: bool = False


def find_java(env: Mapping[str, str]) -> str:
    java_home = env.get("JAVA_HOME")
    if java_home:
        java = Path(java_home, "bin", "java")
        if os.access(java, os.X_OK):
            return str(java)
        raise ZooKeeperSetupError(
            f"JAVA_HOME={java_home} has no bin/java: fix JAVA_HOME or unset it; to get Java, {INSTALL_HINT}"
        )
    java_path = shutil.which("java", path=env.get("PATH"))
    if not java_path:
        raise ZooKeeperSetupError(f"Java not found (no `java` on PATH, JAVA_HOME unset): {INSTALL_HINT}")
    return java_path


def find_install(env: Mapping[str, str] | None = None, java_dir: str = DEBIAN_JAVA_DIR) -> ZooKeeperInstall:
    env = os.environ if env is None else env
    home = env.get("ZOOKEEPER_HOME")
    if home:
        lib = Path(home, "lib")
        jars = sorted(lib.glob("zookeeper-*.jar")) + sorted(Path(home).glob("zookeeper-*.jar"))
        if not any(j.name.startswith("zookeeper-3") or j.name == "zookeeper.jar" for j in jars):
            raise ZooKeeperSetupError(
                f"ZOOKEEPER_HOME={home} holds no ZooKeeper jars (lib/zookeeper-*.jar): "
                f"fix ZOOKEEPER_HOME or unset it and {INSTALL_HINT}"
            )
        # the tarball ships its own logging (logback + conf/logback.xml); `lib/*` is a JVM classpath wildcard
        cp = (f"{home}/lib/*", f"{home}/conf", *(str(j) for j in Path(home).glob("zookeeper-*.jar")))
        java = find_java(env)
        return ZooKeeperInstall(java, cp, "bundled", cp)

    base = Path(java_dir)
    server_jar = base / "zookeeper.jar"
    if not server_jar.is_file():
        raise ZooKeeperSetupError(f"Apache ZooKeeper not found (no {server_jar}, ZOOKEEPER_HOME unset): {INSTALL_HINT}")
    java = find_java(env)
    # the package's manifest has no slf4j binding: without one the server silently logs nothing
    if (base / "slf4j-log4j12.jar").is_file() and (base / "log4j-1.2.jar").is_file():
        binding, extra = "log4j", [base / "slf4j-log4j12.jar", base / "log4j-1.2.jar"]
    elif (base / "slf4j-simple.jar").is_file():
        binding, extra = "simple", [base / "slf4j-simple.jar"]
    else:
        binding, extra = "none", []
    # Debian's manifest leaves out Netty's codec, resolver and native-unix jars, which the TLS port
    # (NettyServerCnxnFactory, secureClientPort) and the shell's TLS client (ClientCnxnSocketNetty) need
    netty = [base / f"{name}.jar" for name in DEBIAN_NETTY_EXTRAS if (base / f"{name}.jar").is_file()]
    nop = base / "slf4j-nop.jar"
    shell_cp = (str(server_jar), *map(str, netty), *map(str, [nop] if nop.is_file() else extra))
    return ZooKeeperInstall(java, (str(server_jar), *map(str, netty), *map(str, extra)), binding, shell_cp)


def client_endpoint(props: Mapping[str, str]) -> ClientEndpoint:
    """The plain clientPort; the secureClientPort when it is the only one."""
    tls_only = "clientPort" not in props and "secureClientPort" in props
    key = "secureClientPort" if tls_only else "clientPort"
    try:
        port = int(props.get(key, "2181"))
    except ValueError as e:
        raise ZooKeeperSetupError(f"{key} must be a number, got {props.get(key)!r}") from e
    host = props.get("secureClientPortAddress" if tls_only else "clientPortAddress", "").strip() or "127.0.0.1"
    if host in ("0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return ClientEndpoint(host, port, tls_only)


def log4j_properties(to_file: bool) -> str:
    appender = "FILE" if to_file else "CONSOLE"
    return "\n".join(
        [
            f"log4j.rootLogger=INFO, {appender}",
            "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender",
            "log4j.appender.CONSOLE.Target=System.out",
            "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.CONSOLE.layout.ConversionPattern=[%d] %p %m (%c)%n",
            "log4j.appender.FILE=org.apache.log4j.RollingFileAppender",
            "log4j.appender.FILE.File=${zookeeper.log.dir}/zookeeper.log",
            "log4j.appender.FILE.MaxFileSize=10MB",
            "log4j.appender.FILE.MaxBackupIndex=5",
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.FILE.layout.ConversionPattern=[%d] %p %m (%c)%n",
            "",
        ]
    )


def server_command(
    install: ZooKeeperInstall,
    config_path: Path,
    log_dir: Path,
    *,
    daemon: bool,
    heap_opts: str = DEFAULT_HEAP_OPTS,
    extra_opts: str = "",
) -> list[str]:
    """The java command line; writes the log4j config it refers to into log_dir when log4j is the binding."""
    cmd = [install.java, *heap_opts.split(), *extra_opts.split(), f"-Dzookeeper.log.dir={log_dir}", KBUS_MARKER]
    if install.binding == "log4j":
        log4j = log_dir / "zookeeper-log4j.properties"
        log4j.write_text(log4j_properties(to_file=daemon), encoding="utf-8")
        cmd.append(f"-Dlog4j.configuration=file:{log4j}")
    elif install.binding == "simple":
        cmd += [
            "-Dorg.slf4j.simpleLogger.logFile=System.out",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
        ]
    cmd += ["-cp", os.pathsep.join(install.classpath), SERVER_MAIN, str(config_path)]
    return cmd


def shell_command(install: ZooKeeperInstall, server: str, args: list[str], jvm_opts: str = "") -> list[str]:
    """ZooKeeperMain; `jvm_opts` (KAFKA_OPTS) carries the JAAS file and the zookeeper.ssl.* system properties."""
    return [
        install.java,
        "-Xmx128m",
        *shlex.split(jvm_opts),
        "-cp",
        os.pathsep.join(install.shell_classpath),
        SHELL_MAIN,
        "-server",
        server,
        *args,
    ]


def read_config(config_path: Path) -> dict[str, str]:
    if not config_path.is_file():
        raise ZooKeeperSetupError(f"ZooKeeper config file {config_path} does not exist")
    try:
        # ZooKeeper's QuorumPeerConfig trims every value
        props = {k: v.strip() for k, v in load_properties(config_path).items()}
    except (OSError, PropertiesError) as exc:
        raise ZooKeeperSetupError(f"Cannot read ZooKeeper config file {config_path}: {exc}") from None
    if not props.get("dataDir"):
        raise ZooKeeperSetupError(f"{config_path}: dataDir is not set")
    if is_ensemble(props):
        myid = Path(props["dataDir"]) / "myid"
        if not myid.is_file():
            ids = ", ".join(sorted(k.split(".", 1)[1] for k in props if _SERVER_KEY.match(k)))
            raise ZooKeeperSetupError(
                f"{config_path} lists an ensemble (server.N), so {myid} must hold this member's N (one of {ids})"
            )
    return props


_SERVER_KEY = re.compile(r"^server\.\d+$")


def is_ensemble(props: Mapping[str, str]) -> bool:
    return any(_SERVER_KEY.match(key) for key in props)


# ---- probing a running server -------------------------------------------------------------------------------


def four_letter(command: str, host: str, port: int, timeout: float = 2.0) -> str:
    """Send a four-letter word; the server answers and closes the socket."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def is_listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def is_serving(host: str, port: int) -> bool:
    """True once the server accepts sessions. `ruok` says imok even without quorum, so ask `srvr` for a mode."""
    try:
        reply = four_letter("srvr", host, port, timeout=1.0)
    except OSError:
        return False
    if "Mode: " in reply:
        return "not currently serving" not in reply
    if "not in the whitelist" in reply:
        return _kazoo_connects(host, port)
    return False


def _kazoo_connects(host: str, port: int) -> bool:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    zk = KazooClient(hosts=f"{host}:{port}", timeout=4.0)
    try:
        zk.start(timeout=1.0)
        return True
    except KazooTimeoutError:
        return False
    finally:
        zk.stop()
        zk.close()


def wait_until_serving(
    host: str, port: int, timeout: float, alive: Callable[[], bool] = lambda: True, quorum: bool = True
) -> bool:
    """Wait until the server serves sessions; with quorum=False (an ensemble member starting before its
    peers) it is enough that it is up and answering."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return False
        if is_serving(host, port) if quorum else _answers(host, port):
            return True
        time.sleep(0.1)
    return False


def wait_until_listening(host: str, port: int, timeout: float, alive: Callable[[], bool] = lambda: True) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return False
        if is_listening(host, port):
            return True
        time.sleep(0.1)
    return False


def _answers(host: str, port: int) -> bool:
    try:
        reply = four_letter("ruok", host, port, timeout=1.0)
    except OSError:
        return False
    return reply == "imok" or "not in the whitelist" in reply


# ---- pid files (how zookeeper-stop finds the server this machine's kbus started) -----------------------------


def pid_file(log_dir: Path) -> Path:
    return log_dir / "zookeeper.pid"


def live_server_pid(path: Path) -> int | None:
    """The pid in `path` if that process is still a ZooKeeper server (guards against pid reuse)."""
    try:
        pid = int(path.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if SERVER_MAIN.encode() in cmdline else None


@dataclass(frozen=True)
class RunningServer:
    pid: int
    config: Path
    log_dir: Path | None  # where its pid file is


def server_of(pid: int, argv: list[str]) -> RunningServer | None:
    """A kbus-started ZooKeeper from its command line (the config path is the last argument, made absolute
    by zookeeper-start)."""
    if KBUS_MARKER not in argv or SERVER_MAIN not in argv or argv[-1] == SERVER_MAIN:
        return None
    prefix = "-Dzookeeper.log.dir="
    log_dir = next((Path(a.removeprefix(prefix)) for a in argv if a.startswith(prefix)), None)
    return RunningServer(pid, Path(argv[-1]), log_dir)


def running_servers(proc: Path = Path("/proc")) -> list[RunningServer]:
    """Every ZooKeeper `kbus zookeeper-start` started on this machine that is still running."""
    found: list[RunningServer] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        server = server_of(int(entry.name), [a.decode(errors="replace") for a in raw.split(b"\0") if a])
        if server is not None:
            found.append(server)
    return sorted(found, key=lambda s: s.pid)
