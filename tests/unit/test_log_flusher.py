"""Kafka's log flusher (LogManager.flushDirtyLogs, every log.flush.scheduler.interval.ms): a log whose flush.ms has
passed since its last flush is flushed even when nothing more is appended to it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kbus.common.broker_config import KafkaConfig
from kbus.protocol import record_batch as rb
from kbus.server.broker import Broker
from kbus.server.log import LogConfig, LogManager


def batch(n: int = 2) -> bytes:
    return rb.build_batch([(f"k{i}".encode(), b"value") for i in range(n)], timestamp_ms=1_000)


def test_run_flush_flushes_the_logs_whose_flush_ms_has_passed(tmp_path: Path) -> None:
    now = [1_000_000]
    mgr = LogManager([tmp_path / "d"], LogConfig(), time_ms=lambda: now[0])
    mgr.startup()
    every_second = mgr.create_log("t", 0, LogConfig(flush_ms=1_000))
    never = mgr.create_log("t", 1, LogConfig())  # flush.ms's default, Long.MaxValue
    for lg in (every_second, never):
        lg.append_as_leader(batch(3))
        assert lg.recovery_point == 0 and lg.log_end_offset == 3  # the append itself flushed nothing
    assert mgr.run_flush(now[0] + 999) == 0
    assert every_second.recovery_point == 0
    assert mgr.run_flush(now[0] + 1_000) == 1
    assert every_second.recovery_point == 3 and never.recovery_point == 0
    assert mgr.run_flush(now[0] + 5_000) == 0  # nothing new since: no flush
    mgr.shutdown()


def test_the_broker_runs_the_flusher_when_its_interval_is_set(tmp_path: Path) -> None:
    async def main() -> None:
        config = KafkaConfig.load(None, [f"log.dirs={tmp_path}", "zookeeper.connect=",
                                         "listeners=PLAINTEXT://127.0.0.1:0",
                                         "log.flush.scheduler.interval.ms=100"])  # fmt: skip
        broker = Broker(config)
        await broker.start()
        try:
            await broker.ensure_topic("t", 1, 1, {"flush.ms": "300"})
            while ("t", 0) not in broker.replicas.partitions:
                await asyncio.sleep(0.01)
            part = broker.replicas.partitions[("t", 0)]
            lg = part.log
            # an append flushes a log whose flush.ms has passed: append until one leaves records unflushed
            for _ in range(10):
                broker.replicas.append_records(part, batch(), 1)
                if lg.recovery_point < lg.log_end_offset:
                    break
            assert lg.recovery_point < lg.log_end_offset
            for _ in range(100):  # the flusher, with no append since
                if lg.recovery_point == lg.log_end_offset:
                    break
                await asyncio.sleep(0.02)
            assert lg.recovery_point == lg.log_end_offset
        finally:
            await broker.stop()

    asyncio.run(main())
