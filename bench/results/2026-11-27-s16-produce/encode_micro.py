"""The Produce response of one topic and one partition encoded alone, v8 (the scale bench's connections axis) and
v9 (small_requests, a Java client's), best of 5 x 200,000 calls; run from each tree (its code first on the path):
    (cd TREE && /work/wt/h4-produce/.venv/bin/python /work/wt/h4-produce/bench/results/2026-11-27-s16-produce/encode_micro.py)
"""

from __future__ import annotations

import sys
import time

sys.path.insert(0, ".")

from kbus.protocol.produce_response import PartitionProduceResult, encode_produce_response

N = 200_000
for version in (8, 9):
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for i in range(N):
            p = PartitionProduceResult(3, 0, base_offset=12_345_678 + i, log_start_offset=0)
            encode_produce_response(version, [("scale", [p])], throttle_time_ms=0)
        best = min(best, time.process_time() - t0)
    print(f"v{version}: {best / N * 1e9:.0f} ns per response (with its PartitionProduceResult)")
