"""How `kbus spark-submit` launches pyspark's bundled spark-submit: environment, arguments, preconditions.

Kept apart from the CLI so the decisions (which Python, which conf dir, what to ship to a cluster) are testable
without starting a JVM. Nothing here imports pyspark.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

SPARK_DIR = Path(__file__).resolve().parent
CONF_DIR = SPARK_DIR / "conf"  # spark-defaults.conf (local[*], no UI, 4 shuffle partitions, UTC) + quiet log4j2
DRIVER_ENTRY = SPARK_DIR / "driver.py"  # runs the job; an unreachable broker becomes one line
AUTOREGISTER_DIR = SPARK_DIR / "autoregister"  # holds pyspark_kbus.py, Spark's data source auto-registration hook


class SubmitError(RuntimeError):
    """A precondition is missing; the message says what to install or change."""


def pyspark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SubmitError("pyspark is not installed: pip install 'kbus[spark]'  (pyspark 4.x and pyarrow)")
    if importlib.util.find_spec("pyarrow") is None:
        raise SubmitError("pyarrow is not installed (Python data sources need it): pip install 'kbus[spark]'")
    return Path(spec.origin).parent


def find_java(env: Mapping[str, str]) -> str:
    java_home = env.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return str(java)
        raise SubmitError(f"JAVA_HOME={java_home} has no bin/java: fix JAVA_HOME or unset it")
    found = shutil.which("java", path=env.get("PATH"))
    if found is None:
        raise SubmitError("no Java runtime found (Spark needs Java 17+): apt-get install -y openjdk-17-jre-headless")
    return found


_FLAGS = {"--verbose", "-v", "--version", "--help", "-h", "--supervise"}


def submit_options_length(args: Sequence[str]) -> int:
    """How many leading args are spark-submit's own options; the job file and the job's arguments follow."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            return i
        i += 1 if arg in _FLAGS or "=" in arg else 2
    return len(args)


def option_value(args: Sequence[str], name: str) -> str | None:
    """The value of a spark-submit option given as `--name value` or `--name=value` (last one wins);
    the job's own arguments are not looked at."""
    value = None
    args = args[: submit_options_length(args)]
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def is_local_master(args: Sequence[str], env: Mapping[str, str]) -> bool:
    master = option_value(args, "--master") or env.get("MASTER") or "local"
    return master.startswith("local")


def submit_environment(
    env: Mapping[str, str], spark_home: Path, python: str = sys.executable, kbus_zip: Path | None = None
) -> dict[str, str]:
    out = dict(env)
    # Always the bundled Spark: a stray SPARK_HOME of another version breaks pyspark's Python side.
    out["SPARK_HOME"] = str(spark_home)
    # Driver and every Python worker must run this interpreter, or pyarrow and kbus are missing in them.
    out.setdefault("PYSPARK_PYTHON", python)
    out.setdefault("PYSPARK_DRIVER_PYTHON", python)
    out.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    out.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    # The auto-registration hook must be a top-level module on the workers' path; putting its directory on
    # PYTHONPATH reaches every Python process Spark starts locally, including the streaming source runner.
    paths = [str(AUTOREGISTER_DIR)] + [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    if kbus_zip is not None:
        # Cluster masters: the Python processes the driver's JVM starts itself (the data source planner, the
        # streaming source runner) run spark.pyspark.python, the executors' Python, which need not have kbus;
        # --py-files does not reach them, this PYTHONPATH does.
        paths.insert(0, str(kbus_zip))
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return out


def build_kbus_zip(dest_dir: Path) -> Path:
    """kbus as a zip for --py-files: the package plus the top-level auto-registration module."""
    import kbus

    package = Path(kbus.__file__).resolve().parent
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"kbus-{kbus.__version__}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("kbus") / path.relative_to(package))
        zf.write(AUTOREGISTER_DIR / "pyspark_kbus.py", "pyspark_kbus.py")
    return target


def submit_command(spark_home: Path, args: Sequence[str], py_files: Path | None = None) -> list[str]:
    cmd = [str(spark_home / "bin" / "spark-submit")]
    args = list(args)
    if py_files is not None:
        existing = option_value(args, "--py-files")
        if existing is None:
            cmd += ["--py-files", str(py_files)]
        else:
            # Merge into the user's own --py-files (spark-submit keeps only the last occurrence).
            merged = f"{existing},{py_files}"
            for i, arg in enumerate(args[: submit_options_length(args)]):
                if arg == "--py-files" and i + 1 < len(args):
                    args[i + 1] = merged
                elif arg.startswith("--py-files="):
                    args[i] = f"--py-files={merged}"
    # A local run (no --py-files to ship) goes through the driver entry; a cluster gets the job file as is.
    return cmd + (with_driver_entry(args) if py_files is None else args)


def with_driver_entry(args: Sequence[str]) -> list[str]:
    """Run a Python job through kbus/spark/driver.py (the job stays `__main__`; only an unreachable broker is
    reported differently, in one line)."""
    args = list(args)
    at = submit_options_length(args)
    if at >= len(args) or not args[at].endswith(".py"):
        return args
    return [*args[:at], str(DRIVER_ENTRY), *args[at:]]
