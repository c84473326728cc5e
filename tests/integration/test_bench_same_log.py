"""bench/scenarios/scale.py's consume cells: the same log for every broker (produce_fixed: batches of exactly N
records, whatever the broker's speed), the records per batch a consume read from the segment files (log_shape),
and the same-log consume cell (same_log), against a real kbus broker."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType

from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


def _scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench/scenarios/scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    spec.loader.exec_module(module)
    return module


scale = _scale()


def _topic(broker: BrokerProcess, partitions: int) -> str:
    topic = f"same-log-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: a dropped client cancels the request
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    asyncio.run(scale.wait_leaders(broker.bootstrap, topic, partitions, 30))
    return topic


def test_the_fixed_log_has_exactly_n_records_in_every_batch(broker: BrokerProcess) -> None:
    topic = _topic(broker, 3)
    # 70 messages in batches of 7 over 3 partitions: 4 requests of 21 (whole batches in every partition: 84)
    out = asyncio.run(scale.produce_fixed(broker.bootstrap, topic, 3, 70, 10, 7, in_flight=2))
    assert out == {"same_log_msgs": 84, "same_log_batch_records": 7}
    shape = scale.log_shape(str(broker.log_dirs), topic, 3)
    assert shape["log_batches"] == 12 and shape["log_records"] == 84 and shape["records_per_batch"] == 7
    assert shape["log_bytes"] > 84 * 10
    # what a consume of the first 14 messages of each partition reads: offsets 0-13, two batches a partition
    first = scale.log_shape(str(broker.log_dirs), topic, 3, per_partition=14)
    assert first["log_batches"] == 6 and first["log_records"] == 42
    assert scale.log_shape(str(broker.log_dirs), "no-such-topic", 3)["log_batches"] == 0


def test_the_same_log_is_written_once_and_consumed_every_round(broker: BrokerProcess) -> None:
    topic = f"scale-same-{uuid.uuid4().hex[:6]}"
    args = argparse.Namespace(bootstrap=broker.bootstrap, broker_pid=broker.proc.pid, same_log_batch=50,
                              log_dir=str(broker.log_dirs))
    first = scale.same_log(args, topic, 2, 1000, 100)
    assert first["same_log_msgs"] == 1000 and first["same_log_batch_records"] == 50
    assert first["same_log_records_per_batch"] == 50
    assert first["same_log_consume_msg_s"] > 0 and first["same_log_consume_cpu_us_per_msg"] >= 0
    again = scale.same_log(args, topic, 2, 1000, 100)  # the topic exists: consumed, not written again
    assert scale.log_shape(str(broker.log_dirs), topic, 2)["log_records"] == 1000
    assert again["same_log_records_per_batch"] == 50


def test_big_messages_go_fewer_to_a_fixed_batch() -> None:
    assert scale.same_log_batch_records(100, 100) == 100
    assert scale.same_log_batch_records(100, 10_000) == 89  # 100 x 10 KB would pass message.max.bytes (1 MB)
    assert scale.same_log_batch_records(100, 100_000) == 8
    assert scale.same_log_batch_records(100, 2_000_000) == 1
