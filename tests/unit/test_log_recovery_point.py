"""After a crash, recovery starts at the segment holding the recovery point, the active segment included."""

from __future__ import annotations

from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log.log import Log


def test_corruption_after_the_recovery_point_in_the_active_segment_is_cut(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, LogConfig())
    for _ in range(5):
        log.append_as_leader(build_batch([(None, b"before")]))
    recovery_point = log.log_end_offset  # what a clean restart would have checkpointed
    for _ in range(3):
        log.append_as_leader(build_batch([(None, b"after-the-checkpoint")]))
    log.flush()
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[-3] ^= 0xFF  # a bit flip inside the last batch's records (covered by its CRC)
    seg.write_bytes(bytes(data))
    reopened = Log.open(d, LogConfig(), recovery_point=recovery_point, clean_shutdown=False)
    assert reopened.log_end_offset == 7  # the corrupt 8th batch is gone, the rest is intact
    assert len(reopened.read(0, 1 << 20).to_bytes()) > 0
