"""Shared by the bench Python scripts (bench/lib/lib.sh is the shell side): where results go, a broker's CPU time,
a free port. A scenario script imports it after putting bench/lib on its path:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    from benchlib import results_file
"""

import datetime
import os
import socket
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TICK = os.sysconf("SC_CLK_TCK")


def results_dir() -> Path:
    """$RESULTS (bench/run and lib.sh set it), else bench/results/<UTC date>-<short host name>: lib.sh's rule."""
    if os.environ.get("RESULTS"):
        return Path(os.environ["RESULTS"])
    day = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return Path("bench/results") / f"{day}-{socket.gethostname().split('.')[0]}"


def results_file(name: str) -> str:
    """The default output (or input) file NAME of today's results folder."""
    return str(results_dir() / name)


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far, from /proc/PID/stat (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
