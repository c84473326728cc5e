"""The Fetch handler over the broker's own (compiled) ReplicaManager and real logs, not test_api_handlers' fakes: the
handler calls a ReplicaManager directly rather than through the Replicas protocol, so this path needs its own
checks: offsets, records and errors per partition, a topic listed twice in a row answered once, an incremental
session answering only what changed, and kbus_bytes_out_total / kbus_messages_out_total by topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.common.broker_config import KafkaConfig
from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch, iter_batches
from kbus.server.apis.managers import Managers
from kbus.server.log.log import Log
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.partition import Partition
from kbus.server.replication.replica_manager import ReplicaManager
from kbus.server.util.metrics import METRICS
from tests.unit.test_api_handlers import call, part

ME = 1
TOPIC = "fetched"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[Managers, ReplicaManager]]:
    """`fetched` 0-2 led here: partition 0 holds 3 one-record batches, 1 and 2 one each."""
    # a metadata store that knows no topic (a partition not led here is then unknown) and a log manager of which only
    # the failure channel is kept: the reads use nothing else of either
    metadata, log_manager = SimpleNamespace(topics=dict), SimpleNamespace(failure_channel=None)
    rm = ReplicaManager(KafkaConfig(), ME, metadata, log_manager)  # type: ignore[arg-type]
    for p, batches in ((0, 3), (1, 1), (2, 1)):
        log = Log.open(tmp_path / f"{TOPIC}-{p}", LogConfig())
        for b in range(batches):
            log.append_as_leader(build_batch([(None, b"r%d" % b)]), leader_epoch=0)
        rm.partitions[(TOPIC, p)] = Partition(TOPIC, p, log, PartitionState(ME, 0, [ME], [ME]), ME)
    m = Managers(KafkaConfig(), ME, None, rm, None, groups=None)  # type: ignore[arg-type]  # Fetch reads neither
    yield m, rm
    for partition in rm.partitions.values():
        partition.log.close()


def fetch(m: Managers, topics: list[tuple[str, list[tuple[int, int]]]], *, session_id: int = 0, epoch: int = -1,
          **fields: Any) -> Any:
    return call(m, 1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                session_id=session_id, session_epoch=epoch, forgotten_topics_data=(), rack_id="", topics=tuple(
                    part(1, 12, "FetchTopic", topic=t, partitions=tuple(
                        part(1, 12, "FetchPartition", partition=p, fetch_offset=o, partition_max_bytes=1 << 20,
                             current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)
                        for p, o in ps))
                    for t, ps in topics), **fields)  # fmt: skip


def answered(response: Any) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, error, high watermark, records) of each partition, in response order."""
    return [(t.topic, p.partition_index, p.error_code, p.high_watermark,
             sum(h.records_count for h in iter_batches(bytes(p.records))) if p.records else 0)
            for t in response.responses for p in t.partitions]  # fmt: skip


def test_a_full_fetch_reads_each_partition_and_answers_the_others(broker: tuple[Managers, ReplicaManager]) -> None:
    m, _ = broker
    r = fetch(m, [(TOPIC, [(0, 1), (1, 1), (2, 0), (7, 0)])])
    assert answered(r) == [
        (TOPIC, 0, E.none, 3, 2),  # from offset 1: the last two batches
        (TOPIC, 1, E.none, 1, 0),  # at the high watermark: nothing to read
        (TOPIC, 2, E.none, 1, 1),
        (TOPIC, 7, E.unknown_topic_or_partition, -1, 0),
    ]


def test_a_topic_listed_twice_in_a_row_is_answered_once(broker: tuple[Managers, ReplicaManager]) -> None:
    m, _ = broker
    r = fetch(m, [(TOPIC, [(0, 2)]), (TOPIC, [(2, 0)])])
    assert [t.topic for t in r.responses] == [TOPIC]
    assert answered(r) == [(TOPIC, 0, E.none, 3, 1), (TOPIC, 2, E.none, 1, 1)]


def test_an_incremental_fetch_answers_only_what_changed(broker: tuple[Managers, ReplicaManager]) -> None:
    m, rm = broker
    first = fetch(m, [(TOPIC, [(0, 3), (1, 1), (2, 1)])], epoch=0)  # caught up everywhere: opens a session
    assert first.session_id != 0 and [p[1] for p in answered(first)] == [0, 1, 2]
    assert answered(fetch(m, [], session_id=first.session_id, epoch=1)) == []  # nothing new
    rm.partitions[(TOPIC, 1)].append_as_leader(build_batch([(None, b"new")]))
    # partition 1's high watermark moved; the client still fetches it from offset 1 (its position is unchanged)
    assert answered(fetch(m, [], session_id=first.session_id, epoch=2)) == [(TOPIC, 1, E.none, 2, 1)]


def test_bytes_and_messages_out_are_counted_by_topic(broker: tuple[Managers, ReplicaManager]) -> None:
    m, _ = broker
    before = (METRICS.counter_value("kbus_bytes_out_total", topic=TOPIC),
              METRICS.counter_value("kbus_messages_out_total", topic=TOPIC))
    r = fetch(m, [(TOPIC, [(0, 0), (1, 0), (2, 1)])])
    sent = sum(len(bytes(p.records)) for t in r.responses for p in t.partitions)
    assert sent > 0
    assert METRICS.counter_value("kbus_bytes_out_total", topic=TOPIC) == before[0] + sent
    assert METRICS.counter_value("kbus_messages_out_total", topic=TOPIC) == before[1] + 4  # 3 + 1, none from 2
