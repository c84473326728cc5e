"""Micro-benchmark of the log layer alone: ``python -m kbus.server.log.bench [--mb 500] [--records 1000]``.

Appends 1 MB produce requests of 100-byte records (several batches each, as a batching client sends them),
reads them back in 1 MB fetches, and times recovery; the raw ``os.write`` of the same bytes in the same run is
the ceiling the append path is compared with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from kbus.common.topic_config import LogConfig
from kbus.protocol import record_batch as rb
from kbus.server.log.log import Log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=500, help="megabytes to append")
    ap.add_argument("--records", type=int, default=1000, help="records per batch")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        batches = []
        size = 0
        while size < 1_000_000:
            b = rb.build_batch([(None, os.urandom(args.record_size))] * args.records)
            batches.append(b)
            size += len(b)
        request = b"".join(batches)
        per_request = len(batches) * args.records
        n = max(1, args.mb * 1_000_000 // len(request))
        mb = n * len(request) / 1e6
        print(f"request: {len(request)} bytes = {len(batches)} batches x {args.records} records of "
              f"{args.record_size} B; {n} requests, {mb:.0f} MB")

        fd = os.open(root / "raw", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, request)
        raw = time.perf_counter() - t0
        os.close(fd)
        os.unlink(root / "raw")
        print(f"raw os.write:   {mb / raw:7.0f} MB/s")

        lg = Log.open(root / "bench-0", LogConfig())
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            lg.append_as_leader(request)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"append:         {mb / wall:7.0f} MB/s, {n * per_request / wall / 1e6:.2f} M records/s, "
              f"{wall / n * 1e3:.2f} ms/request, CPU {cpu / (n * per_request) * 1e9:.0f} ns/record")

        t0 = time.perf_counter()
        offset, got = 0, 0
        while offset < lg.log_end_offset:
            data = lg.read(offset, 1 << 20).to_bytes()
            got += len(data)
            *_, last = rb.iter_batches(data, verify_crc=False)
            offset = last.next_offset
        wall = time.perf_counter() - t0
        print(f"read+copy:      {got / 1e6 / wall:7.0f} MB/s (1 MB fetches, pread into bytes)")

        lg.close()
        t0 = time.perf_counter()
        lg = Log.open(root / "bench-0", LogConfig(), recovery_point=0)
        wall = time.perf_counter() - t0
        print(f"crash recovery: {lg.size_bytes / 1e6 / wall:7.0f} MB/s (CRC of every batch, indexes rebuilt)")
        end = lg.log_end_offset
        lg.close()
        t0 = time.perf_counter()
        lg = Log.open(root / "bench-0", LogConfig(), recovery_point=end, clean_shutdown=True)
        print(f"clean reopen:   {(time.perf_counter() - t0) * 1e3:7.1f} ms")
        lg.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
