"""A consumer's Fetch request through one kbus source tree, in process, for counting its instructions under callgrind
(bench/scenarios/fetch_handler_cost.sh runs it for two trees): the body decoded from its bytes as the broker does
(decode_body), the Fetch handler over a real ReplicaManager and real logs, the response framed (encode_response) and
cut at its file regions (RecordSplicer.splice, as the processor does on a plaintext connection). No socket: the
writer's system calls are not in it. The logs are written and 3 requests warm the path first; with CALLGRIND_SHIM
(a library whose cg_on / cg_off start and stop callgrind's instrumentation: fetch_handler_cost.sh builds it, and runs
valgrind with --instr-atstart=no) only the N measured requests are counted, not the interpreter's start.

Shapes (the cells of the shape table this path is in):
  full1000   a full sessionless Fetch v12 of 1,000 partitions at their high watermark, nothing new (scale.py's
             fetch_cpu_us_per_request at 1,000 partitions)
  onerec     a Fetch v12 of one partition from offset 0, one 100 B record in it (small_requests.py --api fetch)
  regions100 a Fetch v12 of 100 partitions from offset 0, each holding 10 batches of 100 x 100 B records, sent as
             file regions (scale.py's same-log consume over 100 partitions: one region per partition)

    python bench/scenarios/fetch_handler_cost.py TREE full1000|onerec|regions100 N
"""

from __future__ import annotations

import ctypes
import io
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SHAPES = {"full1000": (1000, 1, 1), "onerec": (1, 1, 1), "regions100": (100, 10, 100)}  # partitions, batches, records


def main() -> None:
    tree, shape, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, tree)
    from kio.serial import entity_writer

    import kbus.server.apis  # noqa: F401 - fills the dispatch table
    from kbus.common.broker_config import KafkaConfig
    from kbus.common.topic_config import LogConfig
    from kbus.protocol.codec import RequestHeader, build, encode_response, nested, request_type
    from kbus.protocol.record_batch import build_batch
    from kbus.protocol.request_body import decode_body
    from kbus.protocol.splice import RecordSplicer
    from kbus.server.apis.managers import Managers
    from kbus.server.apis.registry import API_TABLE, RequestContext
    from kbus.server.log.log import Log
    from kbus.server.metadata.types import PartitionState
    from kbus.server.partition.partition import Partition
    from kbus.server.replication.replica_manager import ReplicaManager

    assert Path(sys.modules["kbus"].__file__ or "").is_relative_to(Path(tree).resolve())
    partitions, batches, records = SHAPES[shape]
    at_end = shape == "full1000"
    version = 12
    with tempfile.TemporaryDirectory() as tmp:
        # the reads use neither the metadata store nor the log manager (only its failure channel is kept)
        rm = ReplicaManager(KafkaConfig(), 1, None, SimpleNamespace(failure_channel=None))  # type: ignore[arg-type]
        offsets: dict[int, int] = {}
        for p in range(partitions):
            log = Log.open(Path(tmp) / f"t-{p}", LogConfig())
            for b in range(batches):
                log.append_as_follower(build_batch([(None, b"x" * 100)] * records, base_offset=b * records))
            rm.partitions[("t", p)] = Partition("t", p, log, PartitionState(1, 0, [1], [1]), 1)
            offsets[p] = batches * records if at_end else 0
        cls = request_type(1, version)
        assert cls is not None
        body = build(cls, replica_id=-1, max_wait=0 if at_end else 500, min_bytes=0 if at_end else 1,
                     max_bytes=52428800, isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
                     rack_id="", topics=(build(nested(cls, "FetchTopic"), topic="t", partitions=tuple(
                         build(nested(cls, "FetchPartition"), partition=p, current_leader_epoch=-1, fetch_offset=o,
                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1048576)
                         for p, o in offsets.items())),))  # fmt: skip
        buf = io.BytesIO()
        entity_writer(cls)(buf, body)
        frame = buf.getvalue()
        header = RequestHeader(1, version, 7, "bench", True)
        m = Managers(KafkaConfig(), 1, None, rm, None, groups=None)  # type: ignore[arg-type]  # Fetch reads neither
        handler = API_TABLE[1].handler

        def one() -> Any:
            ctx = RequestContext(header, "127.0.0.1", 50000, "c1", splicer=RecordSplicer(True), size=len(frame))
            coro = handler(m, ctx, decode_body(frame, header, 0))
            try:
                coro.send(None)  # none of these shapes waits: the handler returns at its first step
            except StopIteration as done:
                response = done.value
            else:
                raise RuntimeError("the Fetch handler waited")
            return ctx.splicer.splice(encode_response(header, response))  # type: ignore[union-attr]

        for _ in range(3):
            out = one()
        regions = len(getattr(out, "parts", ())) // 2
        assert (regions == partitions) if shape == "regions100" else isinstance(out, bytes), (shape, out)
        shim = os.environ.get("CALLGRIND_SHIM")
        cg = ctypes.CDLL(shim) if shim else None
        if cg is not None:
            cg.cg_on()
        for _ in range(n):
            one()
        if cg is not None:
            cg.cg_off()
        for part in rm.partitions.values():
            part.log.close()


if __name__ == "__main__":
    main()
