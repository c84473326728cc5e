"""`kbus spark-submit JOB.py [job args]`: pyspark's bundled spark-submit, ready for kbus topics.

Local defaults (master local[*], no UI, quiet logs, 127.0.0.1), the `kbus` data source registered automatically,
and every spark-submit option passed through unchanged (so `--help` reaches spark-submit too), but for
`--packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION`, Spark's own Kafka connector, which comes from a
local jar cache (kbus.spark.connector).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from kbus.cli.app import app
from kbus.cli.common import fail
from kbus.spark.connector import cache_root, connector_jars, take_connector, with_connector_jars
from kbus.spark.submit import (
    SubmitError,
    build_kbus_zip,
    find_java,
    is_local_master,
    pyspark_home,
    submit_command,
    submit_environment,
)


def _cache_dir() -> Path:
    # Rebuilt on every submit (cheap), in one place rather than a new temp dir each time.
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kbus" / "spark"


@app.command(
    "spark-submit",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
    help="Run a PySpark job with the kbus data source (format 'kbus'); all spark-submit options pass through.",
)
def spark_submit(ctx: typer.Context) -> None:
    args = list(ctx.args)
    try:
        spark_home = pyspark_home()
        find_java(os.environ)
    except SubmitError as e:
        fail(f"kbus spark-submit: {e}", code=2)
    # Spark's own Kafka connector (format "kafka") from the local jar cache rather than Spark's Ivy
    args, connector_version = take_connector(args)
    if connector_version is not None:
        try:
            args = with_connector_jars(args, connector_jars(connector_version, cache_root(os.environ)))
        except SubmitError as e:
            fail(f"kbus spark-submit: {e}", code=2)
    py_files: Path | None = None
    if not is_local_master(args, os.environ):
        # Executors elsewhere do not share this environment: ship kbus with the job.
        py_files = build_kbus_zip(_cache_dir())
    env = submit_environment(os.environ, spark_home, kbus_zip=py_files)
    cmd = submit_command(spark_home, args, py_files)
    # exec, not subprocess: signals go straight to the JVM and no orphaned Python driver is left behind.
    os.execve(cmd[0], cmd, env)
