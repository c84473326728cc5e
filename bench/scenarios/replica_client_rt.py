"""A replica fetcher's round trip: CPU of the client process per KafkaConnection.request (a Fetch v12 with
replica_id) against a server in a child process answering a canned Fetch response of SIZE bytes of records (best
of 5 blocks). Run from each tree, interleaved, with that tree's kbus first on the path:

    .venv/bin/python bench/scenarios/replica_client_rt.py [SIZE] [N]
    (cd OTHER_TREE && "$OLDPWD/.venv/bin/python" "$OLDPWD/bench/scenarios/replica_client_rt.py" 5000 3000)
"""
import asyncio, struct, sys, time
sys.path.insert(0, ".")
import uvloop
from kbus.protocol.client import KafkaConnection
from kbus.protocol.fetch_request import FetchRequestV12, FetchPartition
from kbus.protocol.fetch_response import encode_fetch_response, PartitionEntry
from kbus.protocol.record_batch import build_batch
from kbus.server.replication.fetcher import FetchResp
SIZE = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
N = int(sys.argv[2]) if len(sys.argv) > 2 else 3000

def response_body():
    recs = b""
    while len(recs) < SIZE:
        recs += build_batch([(None, b"x" * 100)] * 40)
    body = encode_fetch_response(12, [("t", [PartitionEntry(0, 0, 10, 10, 0, None, recs)])], session_id=7)
    return body

class Server(asyncio.Protocol):
    def __init__(self, body): self.buf = bytearray(); self.body = body
    def connection_made(self, t): self.t = t
    def data_received(self, d):
        self.buf += d
        while len(self.buf) >= 4:
            (n,) = struct.unpack_from(">i", self.buf)
            if len(self.buf) < 4 + n: return
            corr = struct.unpack_from(">i", self.buf, 8)[0]
            del self.buf[:4 + n]
            payload = struct.pack(">i", corr) + b"\0" + self.body
            self.t.write(struct.pack(">i", len(payload)) + payload)

def serve(q):
    async def run():
        body = response_body().data
        srv = await asyncio.get_running_loop().create_server(lambda: Server(body), "127.0.0.1", 0)
        q.put(srv.sockets[0].getsockname()[1])
        await asyncio.sleep(3600)
    uvloop.run(run())

async def main():
    import multiprocessing
    q = multiprocessing.Queue()
    proc = multiprocessing.Process(target=serve, args=(q,), daemon=True); proc.start()
    port = q.get()
    conn = KafkaConnection("127.0.0.1", port, "bench")
    await conn.connect()
    req = FetchRequestV12(replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=10 << 20,
                          topics=[("t", [FetchPartition(0, 1, 100, 0, 1 << 20)])], forgotten=[], session_id=7, session_epoch=3)
    for _ in range(300):
        await conn.request(req, FetchResp)
    best = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(N // 5):
            r = await conn.request(req, FetchResp)
        best.append((time.process_time() - t0) / (N // 5) * 1e6)
    assert len(r.responses[0].partitions[0].records) >= SIZE
    print(f"{SIZE} B records: {min(best):.1f} us CPU per round trip (min of 5 blocks; all {[round(x,1) for x in best]})")
    await conn.close(); proc.kill()
uvloop.run(main())
