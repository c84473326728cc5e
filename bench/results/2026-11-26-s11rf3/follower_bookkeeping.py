"""Per-call cost of a leader's bookkeeping for one idle, caught-up, in-sync follower partition (Partition.follower_fetched),
18 partitions per 'fetch' (the ~17 __consumer_offsets + 1 data partition of the RF=3 runs). Process time, best of 5."""
import sys, tempfile, time
from pathlib import Path
from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log.log import Log
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.partition import Partition

d = tempfile.mkdtemp()
parts = []
for i in range(18):
    p = Partition("t", i, Log.open(Path(d) / f"t-{i}", LogConfig()), PartitionState(1, 4, [1, 2, 3], [1, 2, 3]), 1)
    p.update_state(PartitionState(1, 4, [1, 2, 3], [1, 2, 3]))
    p.append_as_leader(build_batch([(None, b"x")]))
    for r in (2, 3):
        p.follower_fetched(r, p.log_end_offset)
    parts.append(p)
N = 20000
best = 1e9
for _ in range(5):
    t0 = time.process_time()
    for _ in range(N):
        for p in parts:
            p.follower_fetched(2, 1)
    best = min(best, (time.process_time() - t0) / N * 1e6)
print(f"{sys.argv[1]}: {best:.2f} us per follower fetch of 18 idle partitions ({best / 18 * 1000:.0f} ns each)")
