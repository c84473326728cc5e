"""The ZooKeeper side of creating an N-partition topic, in-process (no logs, no Kafka protocol): a ZooKeeper started
by tests/zk_server.py, one ZkMetadataStore (the controller), create_topic until every partition's state is in its
view; prints (mode, s until every state is in the view, process CPU s).
  usage: ROOT=<checkout> .venv/bin/python bench/scenarios/zk_create_states.py MODE N
  MODE: skipwatch (the checkout as it is), watchfirst (the controller watches new states for their creation first,
  as before c113fc3), base (an older checkout: nothing patched).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.environ.get("ROOT", str(Path(__file__).resolve().parents[2])))


def main() -> None:
    from kbus.server.metadata import zk_view
    from kbus.server.metadata.zk_store import ZkMetadataStore
    from tests.zk_server import ZooKeeperServer, free_port

    mode, n = sys.argv[1], int(sys.argv[2])
    if mode == "watchfirst":
        zk_view.ZkClusterView._writes_states_next = lambda self: False  # type: ignore[method-assign]
    base = Path(tempfile.mkdtemp())
    zk = ZooKeeperServer(base, free_port()).start()
    try:
        store = ZkMetadataStore(f"{zk.connect}/z{uuid.uuid4().hex[:6]}", 1, "127.0.0.1", 9999,
                                reconcile_interval_s=600)  # fmt: skip
        store.start()
        name = f"t{uuid.uuid4().hex[:6]}"
        c0, t0 = time.process_time(), time.monotonic()
        store.create_topic(name, n, 1, {})
        store._wait(lambda: store._has_all_states(name, n), 300)
        print((mode, round(time.monotonic() - t0, 2), round(time.process_time() - c0, 2)), flush=True)
        store.stop()
    finally:
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
