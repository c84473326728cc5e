"""``kill -9`` of a process appending to a log loses no acknowledged record and leaves a log that reopens.

A real child process (not a broker) appends through LogManager and prints each acknowledged offset; it is
SIGKILLed at a random moment, and the parent reopens the log dirs as an unclean startup.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kbus.protocol import record_batch as rb
from kbus.server.log import LogConfig, LogManager

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kbus.protocol import record_batch as rb
    from kbus.server.log import LogConfig, LogManager
    mgr = LogManager([Path(sys.argv[1])], LogConfig(segment_bytes=500_000, file_delete_delay_ms=0))
    mgr.startup()
    lg = mgr.get_log("crash", 0) or mgr.create_log("crash", 0)
    n = lg.log_end_offset
    while True:
        r = lg.append_as_leader(rb.build_batch([(b"k%d" % (n + j), b"v" * 200) for j in range(50)]))
        n = r.last_offset + 1
        print(r.last_offset, flush=True)
""")


@pytest.mark.integration
def test_kill_9_loses_no_acknowledged_record(tmp_path: Path) -> None:
    acked = -1
    rng = random.Random(7)
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        try:
            # the kill comes at a random moment after the first acknowledgement, however long start-up took
            assert child.stdout is not None
            first = child.stdout.readline()
            time.sleep(0.3 + rng.random())
        finally:
            os.kill(child.pid, signal.SIGKILL)
            out, _ = child.communicate(timeout=30)
        lines = (first + out).split()
        assert lines, "the child acknowledged nothing"
        acked = int(lines[-1])
        mgr = LogManager([tmp_path], LogConfig(segment_bytes=500_000, file_delete_delay_ms=0))
        mgr.startup()
        try:
            assert mgr.had_clean_shutdown == {tmp_path: False}
            lg = mgr.get_log("crash", 0)
            assert lg is not None and lg.log_end_offset > acked
            offset = 0
            while offset < lg.log_end_offset:
                data = lg.read(offset, 1 << 20).to_bytes()
                for h in rb.iter_batches(data, verify_crc=True):
                    keys = [r.key for r in rb.decode_records(data, h)]
                    assert keys == [b"k%d" % o for o in range(h.base_offset, h.next_offset)]
                    assert h.base_offset == offset
                    offset = h.next_offset
        finally:
            mgr.shutdown()
        (tmp_path / ".kafka_cleanshutdown").unlink()  # keep every round an unclean start
