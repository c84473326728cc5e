# In-process reconciliation cost (bench/notes/msgsize-2026-11-27-s12.md): one ZkMetadataStore with N partitions against its own
# ZooKeeper, a write in another chroot before each pass. Run from a checkout: .venv/bin/python THIS [N]
import sys, time, tempfile, uuid, os
sys.path.insert(0, os.getcwd())
from pathlib import Path
from tests.zk_server import ZooKeeperServer
from tests.zk_server import free_port
from kazoo.client import KazooClient
from kbus.server.metadata.zk_store import ZkMetadataStore
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1150
zk = ZooKeeperServer(Path(tempfile.mkdtemp(prefix="zkb")), free_port()).start()
try:
    connect = f"{zk.connect}/kbus-b-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zk.connect); root.start(10); root.ensure_path(connect.split("/",1)[1] and "/"+connect.split("/",1)[1])
    store = ZkMetadataStore(connect, 1, "127.0.0.1", 9091, session_timeout_ms=6000, reconcile_interval_s=3600)
    store.start()
    store.create_topic("big", N, 1, {})
    t0=time.time()
    while store.partition_state("big", N-1) is None and time.time()-t0 < 120: time.sleep(0.2)
    time.sleep(1)
    for i in range(6):
        root.create(f"/bump-{uuid.uuid4().hex}")  # another chroot's write: the ensemble's zxid moves
        c0=time.process_time(); w0=time.perf_counter()
        store._reconcile()
        print(f"reconcile of {N} partitions: cpu {1000*(time.process_time()-c0):.1f} ms wall {1000*(time.perf_counter()-w0):.1f} ms", flush=True)
    c0=time.process_time(); store._reconcile(); print(f"unchanged zxid: cpu {1000*(time.process_time()-c0):.2f} ms")
    store.stop(); root.stop()
finally:
    zk.stop()
