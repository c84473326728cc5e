"""The ZooKeeper view's reconciliation pass in process (the metadata thread's periodic backstop, zk_view), on the
tree it runs from: one ZkMetadataStore (broker 1, the controller) with topics of 10,000, 1,000, 100, 10 and 1
partitions (11,111 states) on a real ZooKeeper; before each pass a znode is created elsewhere (the zxid moves, no
state changes, as another cluster's or a topic creation's writes do). Per pass: the calling thread's CPU (the
metadata thread's share), the whole process's (kazoo's connection thread too) and the wall time.

cd TREE && .venv/bin/python reconcile_cost.py ZK_HOSTS CHROOT LABEL PASSES OUT.jsonl"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from kazoo.client import KazooClient

from kbus.server.metadata.zk_store import ZkMetadataStore

SIZES = (10000, 1000, 100, 10, 1)


def main() -> None:
    hosts, chroot, label, passes, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    store = ZkMetadataStore(f"{hosts}/{chroot}", 1, "127.0.0.1", 9999, reconcile_interval_s=3600)
    store.start()
    raw = KazooClient(hosts=hosts)
    raw.start(timeout=30)
    try:
        t0 = time.monotonic()
        for n in SIZES:
            store.create_topic(f"p{n}", n, 1, {})
        deadline = time.monotonic() + 900
        while sum(store.partition_state(f"p{n}", p) is not None for n in SIZES for p in range(n)) < sum(SIZES):
            if time.monotonic() > deadline:
                raise TimeoutError("states")
            time.sleep(1)
        created = time.monotonic() - t0
        time.sleep(3)
        for _ in range(40):  # settle: the sweeps the store's own writes started (kbus-pre: one pass)
            store._reconcile()
            if getattr(store, "_sweep", None) is None:  # bench only: kbus-pre has no sweep
                break
        rows = []
        for i in range(passes):
            raw.create(f"/elsewhere-{chroot}-{i}-{time.time_ns()}")
            w0, c0, p0 = time.monotonic(), time.thread_time(), time.process_time()
            store._reconcile()
            rows.append((time.thread_time() - c0, time.process_time() - p0, time.monotonic() - w0))
        # one complete sweep after one write (kbus: passes until done; kbus-pre: one pass)
        raw.create(f"/elsewhere-{chroot}-sweep-{time.time_ns()}")
        sweep_thread = sweep_proc = 0.0
        sweep_passes = 0
        while True:
            c0, p0 = time.thread_time(), time.process_time()
            store._reconcile()
            sweep_thread += time.thread_time() - c0
            sweep_proc += time.process_time() - p0
            sweep_passes += 1
            if getattr(store, "_sweep", None) is None:
                break
        med = [statistics.median(r[k] for r in rows) * 1000 for k in range(3)]
        row = {"label": label, "states": sum(SIZES), "created_s": round(created, 1), "passes": passes,
               "pass_thread_ms_median": round(med[0], 2), "pass_process_ms_median": round(med[1], 2),
               "pass_wall_ms_median": round(med[2], 2),
               "pass_thread_ms": [round(r[0] * 1000, 2) for r in rows],
               "sweep_passes": sweep_passes, "sweep_thread_ms": round(sweep_thread * 1000, 2),
               "sweep_process_ms": round(sweep_proc * 1000, 2), "load": os.getloadavg()[0]}
        print(json.dumps(row))
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
    finally:
        raw.stop()
        raw.close()
        store.stop()


if __name__ == "__main__":
    main()
