"""A real Spark standalone cluster on loopback for the tests: one master and N workers, each a JVM started with the
pyspark installation's own `bin/spark-class` (pip's pyspark ships no sbin/start-master.sh), on free ports, each
worker with its own work dir (executor logs) and so its own executors and Python worker processes.

Also what proves where tasks ran: Spark's event log (uncompressed JSON lines), read back as executors (id -> the
worker whose web UI serves its logs) and tasks (stage, executor, launch/finish time, end reason).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from kbus.spark.submit import CONF_DIR, pyspark_home
from tests.e2e.ecosystem import jvm_tmp
from tests.kbus_processes import free_port


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log: Path
    ui_port: int


@dataclass
class StandaloneCluster:
    root: Path
    master_port: int = 0
    master_ui_port: int = 0
    master: Daemon | None = None
    workers: list[Daemon] = field(default_factory=list)
    worker_hosts: dict[int, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
        env.update(SPARK_HOME=str(pyspark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(CONF_DIR))
        # the daemons' and (inherited from a worker) its executors' temporary files and Spark local dirs
        # (blockmgr-*) under the cluster's root, not /tmp: the executors of a killed worker leave theirs behind
        tmp = self.root / "tmp"
        env.update(JAVA_TOOL_OPTIONS=" ".join(jvm_tmp.options(tmp)), SPARK_LOCAL_DIRS=str(tmp))
        return env

    def _spark_class(self, name: str, args: list[str], ui_port: int, extra_env: dict[str, str]) -> Daemon:
        log = self.root / f"{name}.log"
        cmd = [str(pyspark_home() / "bin" / "spark-class"), *args]
        with log.open("wb") as out:
            # own process group: stopping (or killing) a worker takes its executors and Python workers with it
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env={**self.env(), **extra_env}, start_new_session=True
            )
        return Daemon(name, proc, log, ui_port)

    def start(self, workers: int = 2, timeout: float = 180, hosts: tuple[str, ...] = ()) -> None:
        """`hosts`: each worker's address (default 127.0.0.1 for all). Workers on different loopback addresses
        are different hosts to Spark, which runs a speculative copy of a task only on another host."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port, self.master_ui_port = free_port(), free_port()
        self.master = self._spark_class(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.master_port),
             "--webui-port", str(self.master_ui_port)],
            self.master_ui_port,
            {"SPARK_DAEMON_MEMORY": "256m"},
        )
        for i in range(workers):
            self.workers.append(self._worker(i, hosts[i] if i < len(hosts) else "127.0.0.1"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in [self.master, *self.workers]:
                if d.proc.poll() is not None:
                    raise RuntimeError(f"{d.name} exited {d.proc.returncode}: {d.log.read_text()[-2000:]}")
            state = self.state()
            if state is not None and state.get("aliveworkers") == workers:
                return
            time.sleep(0.25)
        raise TimeoutError(f"{workers} workers did not register with {self.url}: {self.state()}")

    def _worker(self, i: int, host: str) -> Daemon:
        port, ui = free_port(), free_port()
        work = self.root / f"worker{i}"
        work.mkdir(exist_ok=True)
        self.worker_hosts[i] = host
        return self._spark_class(
            f"worker{i}",
            ["org.apache.spark.deploy.worker.Worker", "--host", host, "--port", str(port),
             "--webui-port", str(ui), "--cores", "1", "--memory", "1g", "--work-dir", str(work), self.url],
            ui,
            {"SPARK_DAEMON_MEMORY": "256m", "SPARK_WORKER_DIR": str(work), "SPARK_LOCAL_IP": host},
        )

    def restart_worker(self, index: int, timeout: float = 120) -> None:
        """The machine comes back: a new worker JVM on the same host (new ports), registered with the master."""
        worker = self.workers[index] = self._worker(index, self.worker_hosts[index])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if worker.proc.poll() is not None:
                raise RuntimeError(f"{worker.name} exited {worker.proc.returncode}: {worker.log.read_text()[-2000:]}")
            state = self.state() or {}
            if any(w.get("state") == "ALIVE" and str(w.get("webuiaddress", "")).endswith(f":{worker.ui_port}")
                   for w in state.get("workers", [])):
                return
            time.sleep(0.5)
        raise TimeoutError(f"worker{index} did not register again with {self.url}: {self.state()}")

    def state(self) -> dict | None:
        """The master's /json view (workers, apps), or None while it is not answering."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=5) as resp:
                return json.load(resp)
        except OSError:
            return None

    def kill_worker(self, index: int) -> None:
        """The machine dies: SIGKILL to the worker JVM, its executor JVMs and their Python workers."""
        d = self.workers[index]
        os.killpg(d.proc.pid, signal.SIGKILL)
        d.proc.wait(30)

    def stop(self) -> None:
        for d in [*self.workers, *([self.master] if self.master else [])]:
            if d.proc.poll() is None:
                try:
                    os.killpg(d.proc.pid, signal.SIGTERM)
                    d.proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(d.proc.pid, signal.SIGKILL)
                    d.proc.wait(10)
                except ProcessLookupError:
                    pass


def python_without_kbus(root: Path) -> Path:
    """An interpreter for the executors like a cluster node's: this venv's dependencies (pyarrow, confluent-kafka),
    but not kbus, which must then come from `--py-files` (kbus spark-submit ships it). A wrapper runs the base
    interpreter (no venv site-packages, no editable-install hook) with the other installed packages on PYTHONPATH."""
    site = Path(sysconfig.get_paths()["purelib"])
    deps = root / "deps"
    deps.mkdir(parents=True, exist_ok=True)
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("kbus", "_kbus", "__editable__")) or name.endswith(".pth"):
            continue
        (deps / entry.name).symlink_to(entry)
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    wrapper = root / "python-without-kbus"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{deps}" exec {base} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@dataclass(frozen=True)
class TaskRun:
    stage: int
    index: int
    executor: str
    launch_ms: int
    finish_ms: int
    reason: str
    speculative: bool = False


@dataclass
class EventLog:
    executors: dict[str, int]  # executor id -> web UI port of the worker it ran on
    tasks: list[TaskRun]
    stage_tasks: dict[int, int]  # stage id -> number of tasks
    removed: dict[str, str]  # executor id -> why it was removed
    app: str = ""  # the application's id (app-...), the name of its executors' directories on the workers

    @classmethod
    def read(cls, directory: Path) -> EventLog:
        # rolling logs (Spark 4's default): eventlog_v2_<app>/events_<n>_<app>; single-file logs: <app>
        files = sorted([*directory.glob("eventlog_v2_*/events_*"), *directory.glob("app-*")])
        if not files:
            raise FileNotFoundError(f"no Spark event log in {directory}")
        executors: dict[str, int] = {}
        tasks: list[TaskRun] = []
        stage_tasks: dict[int, int] = {}
        removed: dict[str, str] = {}
        app = ""
        for path in files:
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line of a driver killed -9 mid-write
                kind = event["Event"]
                if kind == "SparkListenerApplicationStart":
                    app = event.get("App ID", "")
                elif kind == "SparkListenerExecutorAdded":
                    urls = event["Executor Info"].get("Log Urls", {})
                    port = urlparse(urls.get("stderr", "")).port
                    executors[event["Executor ID"]] = port or 0
                elif kind == "SparkListenerExecutorRemoved":
                    removed[event["Executor ID"]] = event.get("Removed Reason", "")
                elif kind == "SparkListenerStageSubmitted":
                    info = event["Stage Info"]
                    stage_tasks[info["Stage ID"]] = info["Number of Tasks"]
                elif kind == "SparkListenerTaskEnd":
                    info = event["Task Info"]
                    tasks.append(
                        TaskRun(event["Stage ID"], info["Index"], info["Executor ID"], info["Launch Time"],
                                info["Finish Time"], event["Task End Reason"]["Reason"],
                                bool(info.get("Speculative", False)))
                    )
        return cls(executors, tasks, stage_tasks, removed, app)
