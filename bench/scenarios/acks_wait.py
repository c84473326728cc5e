"""The acks=all completion path in-process: a leader append, its wait for the high watermark (what a Produce with
acks=all awaits per partition) and the follower fetch that answers it, on a Partition with a real log and a
follower that is in the ISR. Prints the CPU time (process time: other processes' load barely moves it) of the
least disturbed block of 500. Run it from each tree with that tree's code first on the path, interleaved:

    (cd OTHER_TREE && "$OLDPWD/.venv/bin/python" "$OLDPWD/bench/scenarios/acks_wait.py")
    .venv/bin/python bench/scenarios/acks_wait.py [BLOCKS]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, ".")  # the tree it is run from, before any installed kbus

from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log.log import Log
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.partition import Partition

LEADER, FOLLOWER, BLOCK = 1, 2, 500


async def alter_isr(topic: str, index: int, isr: list[int], based_on: PartitionState) -> PartitionState:
    return PartitionState(based_on.leader, based_on.leader_epoch, list(based_on.replicas), list(isr))


async def main(blocks: int) -> None:
    log = Log.open(Path(tempfile.mkdtemp()) / "t-0", LogConfig())
    state = PartitionState(LEADER, 4, [LEADER, FOLLOWER], [LEADER, FOLLOWER])
    part = Partition("t", 0, log, state, LEADER, alter_isr=alter_isr)
    batch = build_batch([(None, b"x" * 100)])
    times = []
    for _ in range(blocks):
        t0 = time.process_time()
        for _ in range(BLOCK):
            part.append_as_leader(batch)
            waiter = asyncio.ensure_future(part.wait_for_high_watermark(part.log_end_offset, 30))
            await asyncio.sleep(0)  # the waiter parks, as a Produce handler does
            part.follower_fetched(FOLLOWER, part.log_end_offset)
            assert await waiter
        times.append((time.process_time() - t0) / BLOCK)
    log.close()
    print(f"{min(times) * 1e6:.1f} us per append + acks=all wait (least disturbed of {blocks} blocks of {BLOCK}; "
          f"median {sorted(times)[len(times) // 2] * 1e6:.1f})")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
