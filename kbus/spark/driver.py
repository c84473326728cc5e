"""The driver entry `kbus spark-submit` runs in client mode: the job file as `__main__`, unchanged, except that a
kbus data source that cannot reach its brokers ends the job with one line instead of Spark's and Python's
tracebacks (hundreds of lines for what every other kbus command says in one).

    spark-submit [options] kbus/spark/driver.py JOB.py [job args]
"""

from __future__ import annotations

import os
import runpy
import sys

from kbus.spark.metadata import CONNECTION_FAILURE


def connection_failure(exc: BaseException) -> str | None:
    """The one-line reason when `exc` (or what it wraps: Spark passes worker errors on as text) is a kbus data
    source that could not reach its brokers."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for line in str(current).splitlines():
            at = line.find(CONNECTION_FAILURE)
            if at >= 0:
                return line[at:].strip()
        current = current.__cause__ or current.__context__
    return None


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: driver.py JOB.py [job args]", file=sys.stderr)
        sys.exit(2)
    job = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(job))  # as if `python JOB.py` had been run
    try:
        runpy.run_path(job, run_name="__main__")
    except Exception as exc:
        line = connection_failure(exc)
        if line is None:
            raise
        print(line, file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
