"""The replication fetch path of one kbus source tree, for counting its instructions under callgrind (bench/
fetch_path_cost.sh runs it for two trees): N follower reads on a leader (ReplicaManager.read with a replica id,
what each partition of a follower's Fetch costs the leader) or N fetched partitions applied on a follower
(ReplicaFetcher._apply: append, high watermark, caught-up state). With 0 as the last argument only the set-up
runs (the same N batches built and, on the leader, written), so (instructions with 1 - with 0) / N is the path.

    python bench/scenarios/fetch_path_cost.py TREE leader|follower N 1|0
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace


def main() -> None:
    tree, phase, n, run = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    sys.path.insert(0, tree)
    from kio.schema.errors import ErrorCode

    from kbus.common.broker_config import KafkaConfig
    from kbus.common.topic_config import LogConfig
    from kbus.protocol.record_batch import build_batch
    from kbus.server.log.log import Log
    from kbus.server.metadata.types import PartitionState
    from kbus.server.partition.partition import Partition
    from kbus.server.replication.fetcher import ReplicaFetcher
    from kbus.server.replication.replica_manager import ReplicaManager

    assert Path(sys.modules["kbus"].__file__ or "").is_relative_to(Path(tree).resolve())
    batches = [build_batch([(None, b"x" * 100)] * 50, base_offset=i * 50) for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        if phase == "leader":
            log = Log.open(Path(tmp) / "t-0", LogConfig())
            for b in batches:
                log.append_as_follower(b)
            part = Partition("t", 0, log, PartitionState(1, 0, [1, 2], [1, 2]), 1)
            rm = ReplicaManager(KafkaConfig(), 1, None, None)  # type: ignore[arg-type]  # read() uses neither
            for i in range(n if run else 0):
                rm.read(part, i * 50, 8192, replica_id=2)  # one batch, as a caught-up follower fetches
        else:
            log = Log.open(Path(tmp) / "t-0", LogConfig())
            part = Partition("t", 0, log, PartitionState(1, 0, [1, 2], [1, 2]), 2)
            fetcher = ReplicaFetcher(host=None, leader_id=1)  # type: ignore[arg-type]  # _apply uses no host
            for i in range(n if run else 0):
                p = SimpleNamespace(error_code=ErrorCode.none, records=batches[i], high_watermark=(i + 1) * 50,
                                    log_start_offset=0)
                fetcher._apply(part, ("t", 0), p)  # type: ignore[arg-type]
            assert log.log_end_offset == (n * 50 if run else 0)
        log.close()


if __name__ == "__main__":
    main()
