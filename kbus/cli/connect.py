"""`kbus connect-standalone`, `kbus connect-distributed`, `kbus connect-mirror-maker`: Apache Kafka's own Connect
runtime (and MirrorMaker 2) against kbus, as Kafka's bin/connect-*.sh run it (`connect-standalone.sh` works too).

Arguments after the optional `-daemon` go to Kafka's main class unchanged: a worker config, then (standalone)
connector configs, or (mirror maker) mm2.properties with --clusters. The jars come from a local cache
(kbus.connect.runtime), fetched from Maven Central the first time.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import typer

from kbus.cli.app import app
from kbus.cli.common import fail
from kbus.connect.runtime import SCRIPTS, ConnectError, Script, connect_libs, java_command, version
from kbus.spark.connector import cache_root
from kbus.spark.submit import SubmitError, find_java

_USAGE = {
    "connect-standalone": "[-daemon] connect-standalone.properties [connector1.properties connector2.json ...]",
    "connect-distributed": "[-daemon] connect-distributed.properties",
    "connect-mirror-maker": "[-daemon] mm2.properties [--clusters A B ...]",
}


def _run(name: str, args: list[str]) -> None:
    script: Script = SCRIPTS[name]
    daemon = bool(args) and args[0] == "-daemon"
    if daemon:
        args = args[1:]
    if not args:
        # Kafka's scripts print their usage and exit 1 when the worker config is missing
        fail(f"USAGE: kbus {name} {_USAGE[name]}", code=1)
    env = dict(os.environ)
    try:
        java = find_java(env)
        ver = version(env)
        libs = connect_libs(ver, cache_root(env))
    except (SubmitError, ConnectError) as e:
        fail(f"kbus {name}: {e}", code=2)
    cmd = java_command(java, script, libs, args, env, ver)
    if not daemon:
        # exec: signals (Ctrl-C, SIGTERM from a supervisor) reach the JVM, which stops its connectors cleanly
        os.execve(cmd[0], cmd, env)
    # -daemon, as kafka-run-class.sh: detached, console output to $LOG_DIR/<name>.out
    log_dir = Path(env.get("LOG_DIR") or Path.cwd() / "logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{script.daemon_name}.out", "ab") as out:
        subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         start_new_session=True)  # fmt: skip


def _command(name: str, summary: str) -> None:
    @app.command(
        name,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
        help=f"{summary} Usage: kbus {name} {_USAGE[name]}",
    )
    def run(ctx: typer.Context) -> None:
        _run(name, list(ctx.args))


_command("connect-standalone", "Run a Kafka Connect standalone worker (Kafka's own runtime) with connectors.")
_command("connect-distributed", "Run a Kafka Connect distributed worker (Kafka's own runtime, REST API on 8083).")
_command("connect-mirror-maker", "Run MirrorMaker 2 (Kafka's connect-mirror) between the clusters of mm2.properties.")
