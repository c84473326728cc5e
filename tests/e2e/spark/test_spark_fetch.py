"""The executors' range reads (kbus.spark.fetch.read_range) against a real kbus broker, without Spark: a Python
worker's cached consumer serves one task after another (each micro-batch's new offsets, other partitions, records
produced in between), read_committed through a reused consumer skips aborted records, and the data-loss checks
that now run only when a read meets a missing offset."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.e2e.spark.helpers import create_topic, delete_records_before, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]

fetch = pytest.importorskip("kbus.spark.fetch")


@pytest.fixture
def cache() -> Iterator[object]:
    fetch.consumers.clear()
    yield fetch.consumers
    fetch.consumers.clear()


def _read(bootstrap: str, topic: str, partition: int, start: int, end: int, *, fail_on_data_loss: bool = True,
          **config: str) -> list[tuple[int, bytes]]:
    part = fetch.KafkaInputPartition(
        topic=topic, partition=partition, start=start, end=end, fail_on_data_loss=fail_on_data_loss,
        client_config={"bootstrap.servers": bootstrap, "group.id": f"kbus-spark-test-{topic}", **config},
        poll_timeout_ms=20_000,
    )
    rows: list[tuple[int, bytes]] = []
    for batch in fetch.read_range(part):
        assert set(batch.column("partition").to_pylist()) == {partition}
        rows.extend(zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True))
    return rows


def test_one_cached_consumer_reads_each_tasks_range(broker, cache) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-fetch-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    for p in (0, 1):
        produce(broker.bootstrap, topic, [(None, f"p{p}-{i}") for i in range(150)], partition=p)

    def expect(p: int, start: int, end: int) -> list[tuple[int, bytes]]:
        return [(o, f"p{p}-{o}".encode()) for o in range(start, end)]

    created = cache.created
    # micro-batch after micro-batch, partitions interleaved as tasks land on one executor
    for p, start, end in [(0, 0, 50), (1, 0, 50), (0, 50, 120), (1, 50, 150), (0, 120, 150), (0, 10, 12)]:
        assert _read(broker.bootstrap, topic, p, start, end) == expect(p, start, end)
    # records produced between two micro-batches: the next range reads them
    produce(broker.bootstrap, topic, [(None, f"p0-{i}") for i in range(150, 200)], partition=0)
    assert _read(broker.bootstrap, topic, 0, 150, 200) == expect(0, 150, 200)
    assert cache.created - created == 1  # every range above went through the same consumer

    # a task that stops reading early (a limit) gives its consumer back, which then reads another range whole
    first = next(fetch.read_range(fetch.KafkaInputPartition(
        topic=topic, partition=1, start=0, end=150,
        client_config={"bootstrap.servers": broker.bootstrap, "group.id": f"kbus-spark-test-{topic}"})))
    assert first.num_rows > 0
    del first
    assert _read(broker.bootstrap, topic, 1, 100, 150) == expect(1, 100, 150)


def test_read_committed_through_a_reused_consumer_skips_aborted_records(broker, cache) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-fetch-rc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for i in range(6):  # v0 committed, v1 aborted, v2 committed, ...; each followed by its marker
        p.begin_transaction()
        p.produce(topic, f"v{i}".encode(), partition=0)
        if i % 2 == 0:
            p.commit_transaction(30)
        else:
            p.flush()
            p.abort_transaction(30)
    # offsets: v0 0, marker 1, v1 2, marker 3, ... v5 10, marker 11
    created = cache.created
    committed = [v for half in ((0, 6), (6, 12)) for _, v in
                 _read(broker.bootstrap, topic, 0, *half, **{"isolation.level": "read_committed"})]
    assert committed == [b"v0", b"v2", b"v4"]
    again = _read(broker.bootstrap, topic, 0, 0, 12, **{"isolation.level": "read_committed"})
    assert [v for _, v in again] == [b"v0", b"v2", b"v4"]
    assert cache.created - created == 1
    everything = _read(broker.bootstrap, topic, 0, 0, 12)  # read_uncommitted: another config, another consumer
    assert [v for _, v in everything] == [f"v{i}".encode() for i in range(6)]
    assert cache.created - created == 2


def test_missing_offsets_follow_fail_on_data_loss(broker, cache) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-fetch-loss-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(None, f"v{i}") for i in range(20)])

    # the range runs past the end of the partition (truncated, recreated)
    with pytest.raises(fetch.KbusDataLossError, match="ends at 20"):
        _read(broker.bootstrap, topic, 0, 10, 30)
    assert [o for o, _ in _read(broker.bootstrap, topic, 0, 10, 30, fail_on_data_loss=False)] == list(range(10, 20))

    # the start was deleted
    delete_records_before(broker.bootstrap, topic, 0, 5)
    with pytest.raises(fetch.KbusDataLossError, match="no longer on the broker"):
        _read(broker.bootstrap, topic, 0, 0, 10)
    assert [o for o, _ in _read(broker.bootstrap, topic, 0, 0, 10, fail_on_data_loss=False)] == list(range(5, 10))
    assert [o for o, _ in _read(broker.bootstrap, topic, 0, 0, 3, fail_on_data_loss=False)] == []
    # a failed read closes its consumer; the cache goes on with a new one
    assert _read(broker.bootstrap, topic, 0, 15, 20) == [(o, f"v{o}".encode()) for o in range(15, 20)]


def test_a_task_of_several_small_ranges_reads_each(broker, cache) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-fetch-group-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 3)
    for p in range(3):
        produce(broker.bootstrap, topic, [(None, f"p{p}-{i}") for i in range(40)], partition=p)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": f"kbus-spark-test-{topic}"}
    spans = [(2, 5, 25), (0, 0, 40), (1, 39, 40)]
    group = fetch.KafkaInputPartitions([
        fetch.KafkaInputPartition(topic=topic, partition=p, start=s, end=e, client_config=config) for p, s, e in spans
    ])
    got = [(p, o, v) for b in fetch.read_ranges(group) for p, o, v in
           zip(*(b.column(c).to_pylist() for c in ("partition", "offset", "value")), strict=True)]
    assert got == [(p, o, f"p{p}-{o}".encode()) for p, s, e in spans for o in range(s, e)]
