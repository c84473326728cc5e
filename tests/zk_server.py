"""A real Apache ZooKeeper for tests, started and stopped through `kbus zookeeper-start --daemon` /
`kbus zookeeper-stop` (so the launcher is exercised by every ZooKeeper test run)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import free_port as free_port  # re-exported: the tests import it from here

KBUS = str(Path(sys.executable).with_name("kbus"))


def write_config(base: Path, port: int, tick_ms: int = 1000, extra: tuple[str, ...] = ()) -> Path:
    config = base / "zookeeper.properties"
    config.write_text(
        "\n".join(
            [
                f"dataDir={base / 'data'}",
                *([f"clientPort={port}", "clientPortAddress=127.0.0.1"] if port else []),
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,isro",
                # 1 s ticks: sessions may be 2-20 s, so tests can use short session timeouts
                f"tickTime={tick_ms}",
                *extra,
                "",
            ]
        )
    )
    return config


@dataclass
class ZooKeeperServer:
    base: Path
    port: int  # 0: no plain clientPort (a TLS-only server, see `extra_config`)
    extra_config: tuple[str, ...] = ()  # more zookeeper.properties lines (secureClientPort, authProvider.*, ...)
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. KAFKA_OPTS naming the server's JAAS file

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.base / "zookeeper.properties"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KBUS_LOG_DIR": str(self.base / "logs"),
            "KBUS_ZK_HEAP_OPTS": "-Xms32m -Xmx192m",
            **self.extra_env,
        }

    def kbus(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KBUS, *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.base
        )

    def start(self) -> ZooKeeperServer:
        write_config(self.base, self.port, extra=self.extra_config)
        done = self.kbus("zookeeper-start", str(self.config), "--daemon")
        if done.returncode != 0:
            raise RuntimeError(f"kbus zookeeper-start failed ({done.returncode}): {done.stderr.strip()}")
        return self

    def stop(self) -> None:
        done = self.kbus("zookeeper-stop")
        if done.returncode != 0:
            self.kill()
            raise RuntimeError(f"kbus zookeeper-stop failed ({done.returncode}): {done.stderr.strip()}")

    @property
    def pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.base / "logs" / "zookeeper.pid").read_text())
        return None

    def kill(self) -> None:
        pid = self.pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # a paused (SIGSTOP) server too
            # the daemon is not our child (nothing to wait() for): poll until the pid is gone, so a restart on the
            # same port and dataDir does not race the dying server
            for _ in range(200):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.02)

    def pause(self) -> None:
        """SIGSTOP: ZooKeeper stops answering while its connections stay open (a GC pause, a frozen VM)."""
        if self.pid is not None:
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGCONT)

    def connections(self) -> int:
        """How many client connections the server has (its `srvr` four-letter word); -1 when it does not answer."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"srvr")
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
        except OSError:
            return -1
        for line in reply.decode(errors="replace").splitlines():
            if line.startswith("Connections: "):
                return int(line.split(": ", 1)[1]) - 1  # not counting this one
        return -1
