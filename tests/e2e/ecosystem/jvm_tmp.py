"""Where the JVMs the tests start keep their temporary files: a directory of the test's own instead of /tmp.

A JVM writes to java.io.tmpdir (/tmp by default) and leaves there what it does not get to delete: lz4-java's and
RocksDB's native libraries (liblz4-java-*.so with a .lck that is never deleted, librocksdbjni*.so), the Kafka
Streams state dirs of the WordCount app (kbus-streams*), Spark's artifacts-* and blockmgr-* of a driver killed -9.
HotSpot's perf-data file (hsperfdata_<user>/<pid>) is always under /tmp: -XX:-UsePerfData turns it off.

Tests pass `options(their tmp_path / ...)` to each JVM they start; builders shared by a whole session (Kafka's
tools, the Java checks) use `session_dir()`, a directory under pytest's base temp dir (which pytest removes with
its old runs) set by the `jvm_tmp_dir` session fixture, and otherwise a private one removed when the process exits.
Each pytest process (an xdist worker too) has its own.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

_session: Path | None = None


def options(directory: Path) -> list[str]:
    """JVM options: temporary files in `directory` (created), no perf-data file in /tmp."""
    directory.mkdir(parents=True, exist_ok=True)
    return [f"-Djava.io.tmpdir={directory}", "-XX:-UsePerfData"]


def use_session_dir(directory: Path) -> None:
    global _session
    if _session is None:
        directory.mkdir(parents=True, exist_ok=True)
        _session = directory


def session_dir() -> Path:
    global _session
    if _session is None:
        _session = Path(tempfile.mkdtemp(prefix="kbus-jvm-tmp-"))
        atexit.register(shutil.rmtree, _session, True)
    return _session


def session_options() -> list[str]:
    return options(session_dir())
