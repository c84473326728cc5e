"""CPU of one Controller.act over a settled cluster view (every partition led by a live broker, its ISR live): what
the ZooKeeper controller's event thread spends per event batch at N partitions, in process (no ZooKeeper: a stub
view and client; nothing is written because nothing needs to be).

    .venv/bin/python bench/results/2026-11-27-s15-spikes/controller_act.py [PARTITIONS] [ROUNDS]
"""

from __future__ import annotations

import sys
import time
import uuid

from kbus.server.metadata.controller import ClusterSnapshot, Controller, ControllerSettings
from kbus.zk.codec import LeaderAndIsr, TopicAssignment

n = int(sys.argv[1]) if len(sys.argv) > 1 else 11_111
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
topics = {"big": n - 111, "p100": 100, "p10": 10, "p1": 1}
snap = ClusterSnapshot(
    live=frozenset({0}),
    assignments={t: (TopicAssignment({p: [0] for p in range(k)}, uuid.uuid4()), 0) for t, k in topics.items()},
    states={t: {p: LeaderAndIsr(0, 0, (0,), 1, 0, 5) for p in range(k)} for t, k in topics.items()},
    configs={t: {} for t in topics},
    deleting=frozenset(),
)


class View:
    def snapshot(self) -> ClusterSnapshot:
        return snap


controller = Controller(0, lambda: None, View(), ControllerSettings())  # type: ignore[arg-type,return-value]
times = []
for _ in range(rounds):
    t0 = time.thread_time()
    assert controller.act((1, 0)) is False
    times.append((time.thread_time() - t0) * 1000)
times.sort()
print(f"{n} partitions: Controller.act {times[len(times) // 2]:.1f} ms CPU median of {rounds} "
      f"(min {times[0]:.1f}, max {times[-1]:.1f})")
