"""Shared by the bench Python scripts (bench/lib/lib.sh is the shell side): where results go, a broker's CPU time,
a free port. A scenario script imports it after putting bench/lib on its path:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    from benchlib import results_file
"""

import datetime
import os
import socket
import time
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
    """A process's CPU seconds so far (all its threads, exited ones too), to the nanosecond: Linux's process CPU
    clock of `pid` (what clock_getcpuclockid(3) returns: ~pid << 3 | CPUCLOCK_SCHED). /proc/PID/stat's utime +
    stime, the fallback, counts in 10 ms ticks: a point that costs the broker 30 ms (300,000 consumed 10 B
    messages) was 3 ticks, so one tick more or less moved its ratio to Kafka by a third."""
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError:
        return proc_stat_cpu_seconds(pid)


def proc_stat_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds from /proc/PID/stat (fields 14 and 15), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
