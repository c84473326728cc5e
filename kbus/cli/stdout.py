"""The tools' standard output when its reader goes away (`kbus topics --describe | head`).

Kafka's scripts print through Java's System.out, a PrintStream that swallows write errors: a closed pipe ends the
output quietly and the tool finishes with its usual exit code. Python raises BrokenPipeError from whichever print
hits it, which each command's error handling then reported as a failure ("Error while executing config command
with args: [Errno 32] Broken pipe"). Text output goes through this wrapper instead: the first closed-pipe error
points fd 1 at /dev/null (so the interpreter's final flush stays quiet too) and later writes vanish.

The binary layer (`sys.stdout.buffer`) still raises: the console consumer writes records there and stops on a
closed pipe with Kafka's own message, as kafka-console-consumer.sh does after `System.out.checkError()`.
"""

from __future__ import annotations

import io
import os
import sys


def _point_stdout_at_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    finally:
        os.close(devnull)


class PipeTolerantStdout(io.TextIOWrapper):
    """A text stdout whose writes and flushes never raise BrokenPipeError."""

    def write(self, s: str) -> int:
        try:
            return super().write(s)
        except BrokenPipeError:
            _point_stdout_at_devnull()
            return len(s)

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            _point_stdout_at_devnull()
            super().flush()  # what was buffered now goes to /dev/null


def install() -> None:
    """Replace sys.stdout (a text wrapper over fd 1) with a pipe-tolerant one over the same buffer."""
    current = sys.stdout
    if isinstance(current, PipeTolerantStdout) or not isinstance(current, io.TextIOWrapper):
        return  # already installed, or captured by a test harness: leave it alone
    sys.stdout = PipeTolerantStdout(
        current.buffer,
        encoding=current.encoding,
        errors=current.errors,
        line_buffering=current.line_buffering,
        write_through=current.write_through,
    )
