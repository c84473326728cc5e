"""Kafka Connect workers started with `kbus connect-standalone` / `kbus connect-distributed` (Kafka's own runtime
from scripts/kafka-jars.sh --connect) for the tests, and a small client of their REST API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.kafka_jars import REPO, fetch
from tests.kbus_processes import wait_for

KBUS = str(Path(sys.executable).parent / "kbus")


# Kafka 3.9's newest and the newest 4.x whose connect-file / connect-mirror Maven Central serves here
# (4.4.0's are not there, as Kafka Streams 4.x is not)
CONNECT_VERSIONS = ("3.9.2", "4.1.1")


def fetch_connect(version: str = CONNECT_VERSIONS[0]) -> Path:
    """Connect's jars in <repo>/.cache/kafka-connect/VERSION/libs (a no-op once fetched)."""
    return fetch("--connect", version)


def worker_env(log_dir: Path, version: str = CONNECT_VERSIONS[0]) -> dict[str, str]:
    return {
        **os.environ,
        "KBUS_CONNECT_VERSION": version,
        # the cache scripts/kafka-jars.sh --connect filled, so `kbus connect-*` fetches nothing
        "KBUS_CACHE_DIR": str(REPO / ".cache"),
        "LOG_DIR": str(log_dir),
        "KAFKA_HEAP_OPTS": "-Xmx256m",
        # a test worker lives seconds: C1 and the serial collector start a JVM fastest on a busy machine
        "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        # the worker's temporary files (lz4-java's native library, ...) beside its logs, not in /tmp
        "KAFKA_OPTS": " ".join([*jvm_tmp.options(log_dir / "tmp"), os.environ.get("KAFKA_OPTS", "")]).strip(),
    }


def props(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def shipped(name: str, **overrides: str) -> dict[str, str]:
    """config/NAME as kbus ships it (Kafka's settings), with overrides."""
    out: dict[str, str] = {}
    for line in (REPO / "config" / name).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return {**out, **overrides}


def rest(url: str, method: str, path: str, body: object | None = None) -> tuple[int, object]:
    """One call to a worker's REST API: (HTTP status, JSON body or error text); OSError when nothing listens."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read().decode()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@dataclass
class Worker:
    """One Connect worker process: `kbus connect-*` execs the JVM, so the pid is the JVM's."""

    proc: subprocess.Popen[bytes]
    rest_port: int
    log: Path

    @classmethod
    def start(
        cls, command: str, args: list[str], rest_port: int, workdir: Path, version: str = CONNECT_VERSIONS[0]
    ) -> Worker:
        log = workdir / f"worker-{rest_port}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [KBUS, command, *args], stdout=out, stderr=subprocess.STDOUT, env=worker_env(workdir / "logs", version),
                cwd=workdir, start_new_session=True,
            )  # fmt: skip
        return cls(proc, rest_port, log)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def rest(self, method: str, path: str, body: object | None = None) -> tuple[int, object]:
        return rest(self.url, method, path, body)

    def ready(self) -> bool:
        """The REST API answers /connectors (it answers 404 there until the herder has joined its group)."""
        if self.proc.poll() is not None:
            raise AssertionError(f"worker exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        try:
            return self.rest("GET", "/connectors")[0] == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float = 90) -> None:
        wait_for(self.ready, timeout, f"Connect worker {self.url} to answer /connectors")

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (Connect stops its tasks cleanly), kill -9 if that takes too long."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()
