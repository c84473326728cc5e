"""Produce, Fetch, Metadata and the admin APIs, handler by handler, against fake managers (no sockets, no
processes): each handler is called with a kio-decoded request and its response is encoded and decoded again, so a
field a version cannot carry fails here, not in a client."""

from __future__ import annotations

import asyncio
import io
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader, entity_writer

import kbus.server.apis  # noqa: F401 - fills the dispatch table
from kbus.common.broker_config import KafkaConfig
from kbus.common.clock import now_ms
from kbus.common.errors import TopicExistsError
from kbus.common.topic_config import LogConfig
from kbus.protocol.codec import RequestHeader, build, encode_response, nested, request_type, response_type
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.record_batch import build_batch
from kbus.protocol.request_body import decode_body
from kbus.server.apis.managers import Managers
from kbus.server.apis.registry import API_TABLE, RequestContext
from kbus.server.log.log import EMPTY_FETCH, AppendResult, FetchData, Log
from kbus.server.metadata.types import BrokerInfo, PartitionState, TopicMetadata
from kbus.server.partition.errors import NotEnoughReplicasError, RequestTimedOutError
from kbus.server.partition.partition import Partition
from kbus.server.replication.replica_manager import PartitionRead

ME, OTHER = 0, 1


# ------------------------------------------------------------------------------------------------- fakes
def fake_partition(topic: str, index: int) -> Partition:
    """A real Partition (the compiled Produce/Fetch handlers take nothing else, and a compiled class cannot be
    subclassed here) led by this broker at epoch 3, over a Log that is never opened: no directory, no file, no fd.
    The handlers' reads and appends go to FakeReplicas; only the offsets are set, the high watermark at 10."""
    log = Log(Path("/nonexistent-kbus-test-log") / f"{topic}-{index}", LogConfig(), now_ms)
    part = Partition(topic, index, log, PartitionState(ME, 3, [ME], [ME]), ME)
    part.high_watermark = 10  # the LSO follows it (no transaction), the log start stays 0
    return part


class FakeReplicas:
    """Leads t-0 and t-1; `__consumer_offsets`-0 too; 'other' is led by another broker."""

    def __init__(self, records_file: Path | None = None) -> None:
        self.leader_throttling = False
        self.partitions = {
            ("t", 0): fake_partition("t", 0),
            ("t", 1): fake_partition("t", 1),
            ("__consumer_offsets", 0): fake_partition("__consumer_offsets", 0),
        }
        self.stopping = False
        self.appended: list[tuple[str, int, bytes, int]] = []
        self.reads: list[dict[str, Any]] = []
        self.ack_error: dict[tuple[str, int], Exception] = {}
        self.append_error: dict[tuple[str, int], Exception] = {}
        self.records_fd = os.open(records_file, os.O_RDONLY) if records_file is not None else -1
        self.records_size = records_file.stat().st_size if records_file is not None else 0
        self.next_offset = 100

    def leader_partition(self, topic: str, index: int) -> tuple[Any, E]:
        part = self.partitions.get((topic, index))
        if part is not None:
            return part, E.none
        if topic == "other":
            return None, E.not_leader_or_follower
        return None, E.unknown_topic_or_partition

    def append_records(self, part: Any, records: bytes, acks: int, *, from_coordinator: bool = False,
                       **verification: Any) -> AppendResult:
        key = (part.topic, part.index)
        if key in self.append_error:
            raise self.append_error[key]
        self.appended.append((part.topic, part.index, bytes(records), acks))
        first = self.next_offset
        self.next_offset += 1
        return AppendResult(first, first, -1, 0, num_batches=1, size_bytes=len(records), num_records=1)

    def acks_satisfied(self, part: Any, result: AppendResult, acks: int) -> bool:
        return acks != -1 or (part.topic, part.index) not in self.ack_error

    async def wait_for_acks(self, part: Any, result: AppendResult, acks: int, timeout_ms: int) -> None:
        error = self.ack_error.get((part.topic, part.index))
        if error is not None and acks == -1:
            raise error

    def read(self, part: Any, fetch_offset: int, max_bytes: int, **kw: Any) -> PartitionRead:
        self.reads.append({"topic": part.topic, "offset": fetch_offset, "max_bytes": max_bytes, **kw})
        if fetch_offset >= part.high_watermark or self.records_fd < 0:
            data = EMPTY_FETCH
        else:
            data = FetchData(self.records_fd, 0, self.records_size, fetch_offset, next_offset=part.high_watermark)
        aborted = [] if kw.get("read_committed") else None
        return PartitionRead(part.high_watermark, part.last_stable_offset, part.log_start_offset, data, aborted)


class FakeCluster:
    def __init__(self) -> None:
        self.cluster_id = "test-cluster"
        self.live = [BrokerInfo(ME, "127.0.0.1", 9092), BrokerInfo(OTHER, "127.0.0.1", 9093)]
        self._topics: dict[str, TopicMetadata] = {}
        self.add("t", 2, leader=ME)
        self.add("other", 1, leader=OTHER)

    def add(self, name: str, partitions: int, leader: int, configs: dict[str, str] | None = None) -> TopicMetadata:
        topic = TopicMetadata(
            name,
            uuid.uuid4(),
            {p: PartitionState(leader, 3, [ME, OTHER], [ME, OTHER]) for p in range(partitions)},
            dict(configs or {}),
        )
        self._topics[name] = topic
        return topic

    def brokers(self) -> list[BrokerInfo]:
        return list(self.live)

    def topics(self) -> dict[str, TopicMetadata]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def controller_id(self) -> int:
        return OTHER

    def partition_leader(self, topic: str, index: int) -> BrokerInfo | None:
        t = self._topics.get(topic)
        if t is None or index not in t.partitions:
            return None
        return next((b for b in self.live if b.broker_id == t.partitions[index].leader), None)


class FakeAdmin:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.calls: list[tuple[Any, ...]] = []

    def default_log_config(self) -> LogConfig:
        return LogConfig()

    def log_config_for(self, topic: TopicMetadata) -> LogConfig:
        return LogConfig().with_overrides(topic.configs)

    @property
    def static_config(self) -> KafkaConfig:
        return KafkaConfig()

    def dynamic_broker_configs(self) -> dict[str, dict[str, str]]:
        return {}

    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:  # fmt: skip
        self.calls.append(("create", name, num_partitions, replication_factor, configs, assignment))
        if self.cluster.topic(name) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        return self.cluster.add(name, num_partitions, ME, configs)

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        self.calls.append(("auto", name))
        return self.cluster.add(name, 1, ME)

    async def ensure_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str]) -> TopicMetadata:
        raise AssertionError("not used here")

    async def delete_topic(self, name: str) -> None:
        self.calls.append(("delete", name))

    async def create_partitions(
        self, name: str, total_count: int, assignment: dict[int, list[int]] | None = None
    ) -> None:
        self.calls.append(("partitions", name, total_count))

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> None:
        self.calls.append(("alter", name, changes))

    def allocate_producer_id(self) -> int:
        return 4242


def managers(tmp_path: Path | None = None, **config: Any) -> tuple[Managers, FakeReplicas, FakeCluster, FakeAdmin]:
    records_file = None
    if tmp_path is not None:
        records_file = tmp_path / "records"
        records_file.write_bytes(build_batch([(b"k", b"v")], base_offset=5, timestamp_ms=1000))
    replicas, cluster = FakeReplicas(records_file), FakeCluster()
    admin = FakeAdmin(cluster)
    m = Managers(KafkaConfig(**config), ME, cluster, replicas, admin, groups=None)
    return m, replicas, cluster, admin


# ------------------------------------------------------------------------------------------------- calling
def call(m: Managers, api_key: int, version: int, /, **fields: Any) -> Any:
    cls = request_type(api_key, version)
    assert cls is not None
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, **fields))
    header = RequestHeader(api_key, version, 7, "client", bool(cls.__flexible__))
    req = decode_body(buf.getvalue(), header, 0)  # exactly what a client would send, decoded as the broker does
    ctx = RequestContext(header, "127.0.0.1", 50000, "c1", size=len(buf.getvalue()))
    response = asyncio.run(API_TABLE[api_key].handler(m, ctx, req))
    if response is None:
        return None
    frame = encode_response(header, response)
    body_at = 4 + 4 + (1 if header.flexible and api_key != 18 else 0)
    decoded, _ = entity_reader(response_type(api_key, version))(frame, body_at)
    assert encode_response(header, decoded) == frame  # (kio reads a zero UUID back as None: compare bytes)
    return decoded if isinstance(response, EncodedBody) else response  # Fetch and Produce encode their own bodies


def part(api_key: int, version: int, name: str, /, **fields: Any) -> Any:
    return build(nested(request_type(api_key, version), name), **fields)


def versions(key: int) -> range:
    spec = API_TABLE[key]
    return range(spec.min_version, spec.max_version + 1)


# ------------------------------------------------------------------------------------------------- Produce
def produce(m: Managers, version: int, acks: int, targets: list[tuple[str, int]]) -> Any:
    batch = build_batch([(b"k", b"v")])
    by_topic: dict[str, list[int]] = {}
    for t, p in targets:
        by_topic.setdefault(t, []).append(p)
    topics = tuple(
        part(0, version, "TopicProduceData", name=t, partition_data=tuple(
            part(0, version, "PartitionProduceData", index=p, records=batch) for p in ps
        ))
        for t, ps in by_topic.items()
    )  # fmt: skip
    return call(m, 0, version, acks=acks, timeout=5000, topic_data=topics)


def produce_errors(response: Any) -> dict[tuple[str, int], tuple[E, int]]:
    return {
        (t.name, p.index): (p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses
    }


@pytest.mark.parametrize("version", versions(0))
def test_produce_appends_each_led_partition_and_answers_its_offset(version: int) -> None:
    m, replicas, _, _ = managers()
    r = produce(m, version, 1, [("t", 0), ("t", 1), ("other", 0), ("missing", 0)])
    assert produce_errors(r) == {
        ("t", 0): (E.none, 100),
        ("t", 1): (E.none, 101),
        ("other", 0): (E.not_leader_or_follower, -1),
        ("missing", 0): (E.unknown_topic_or_partition, -1),
    }
    assert [(t, p, acks) for t, p, _, acks in replicas.appended] == [("t", 0, 1), ("t", 1, 1)]


def test_produce_refuses_internal_topics_and_bad_acks() -> None:
    m, replicas, _, _ = managers()
    r = produce(m, 9, 1, [("__consumer_offsets", 0)])
    assert produce_errors(r)[("__consumer_offsets", 0)][0] == E.invalid_topic_exception
    r = produce(m, 9, 2, [("t", 0)])
    assert produce_errors(r)[("t", 0)][0] == E.invalid_required_acks
    assert replicas.appended == []


def test_produce_acks_zero_sends_no_response() -> None:
    m, replicas, _, _ = managers()
    assert produce(m, 9, 0, [("t", 0)]) is None
    assert len(replicas.appended) == 1


def test_produce_acks_all_errors_stay_on_their_partition() -> None:
    m, replicas, _, _ = managers()
    replicas.append_error[("t", 0)] = NotEnoughReplicasError("isr too small")
    replicas.ack_error[("t", 1)] = RequestTimedOutError("replicas too slow")
    r = produce(m, 9, -1, [("t", 0), ("t", 1)])
    errors = produce_errors(r)
    assert errors[("t", 0)] == (E.not_enough_replicas, -1)
    assert errors[("t", 1)][0] == E.request_timed_out


@pytest.mark.parametrize("version", [3, 5, 8, 9, 12])
@pytest.mark.parametrize("acks", [1, -1])
def test_produce_answers_each_appended_partition_once_its_acks_are_met(acks: int, version: int) -> None:
    """acks=1 answers every append at once; acks=-1 waits for one partition directly and for several together,
    and a partition whose wait fails answers its error while the others answer their offsets. One partition's
    response is one pack in every version (produce_response), several the general encoder's."""
    m, replicas, _, _ = managers()
    assert produce_errors(produce(m, version, acks, [("t", 0)])) == {("t", 0): (E.none, 100)}
    replicas.ack_error[("t", 1)] = RequestTimedOutError("replicas too slow")
    assert produce_errors(produce(m, version, acks, [("t", 1)])) == {
        ("t", 1): (E.none, 101) if acks == 1 else (E.request_timed_out, -1)}
    assert produce_errors(produce(m, version, acks, [("t", 0), ("t", 1)])) == {
        ("t", 0): (E.none, 102), ("t", 1): (E.none, 103) if acks == 1 else (E.request_timed_out, -1)}
    assert [acked for _, _, _, acked in replicas.appended] == [acks] * 4


def test_produce_refuses_an_invalid_batch_without_appending() -> None:
    m, replicas, _, _ = managers()
    bad = bytearray(build_batch([(b"k", b"v")]))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    topics = (part(0, 9, "TopicProduceData", name="t", partition_data=(
        part(0, 9, "PartitionProduceData", index=0, records=bytes(bad)),
    )),)  # fmt: skip
    r = call(m, 0, 9, acks=1, timeout=5000, topic_data=topics)
    assert produce_errors(r)[("t", 0)][0] == E.corrupt_message
    assert replicas.appended == []


# ------------------------------------------------------------------------------------------------- Fetch
def fetch(m: Managers, version: int, targets: list[tuple[str, int, int]], **fields: Any) -> Any:
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for t, p, offset in targets:
        by_topic.setdefault(t, []).append((p, offset))
    topics = tuple(
        part(1, version, "FetchTopic", topic=t, partitions=tuple(
            part(1, version, "FetchPartition", partition=p, fetch_offset=o, partition_max_bytes=1 << 20,
                 current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)
            for p, o in ps
        ))
        for t, ps in by_topic.items()
    )  # fmt: skip
    fields.setdefault("max_wait", 0)
    fields.setdefault("replica_id", -1)
    return call(m, 1, version, max_bytes=1 << 20, min_bytes=1, topics=topics, **fields)


def fetched(response: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


@pytest.mark.parametrize("version", versions(1))
def test_fetch_returns_record_bytes_and_partition_offsets(version: int, tmp_path: Path) -> None:
    m, replicas, _, _ = managers(tmp_path)
    r = fetch(m, version, [("t", 0, 5), ("t", 1, 10), ("other", 0, 0)])
    parts = fetched(r)
    stored = (tmp_path / "records").read_bytes()
    assert parts[("t", 0)].error_code == E.none and bytes(parts[("t", 0)].records) == stored
    assert parts[("t", 0)].high_watermark == 10
    assert parts[("t", 1)].error_code == E.none and not parts[("t", 1)].records  # at the high watermark
    assert parts[("other", 0)].error_code == E.not_leader_or_follower
    assert parts[("other", 0)].records == b""  # never null: librdkafka rejects a null record set
    # t-1 sits at the high watermark, where a consumer's read ends: answered from its offsets, not read
    assert [(x["offset"], x["replica_id"]) for x in replicas.reads] == [(5, -1)]
    assert (parts[("t", 1)].high_watermark, parts[("t", 1)].last_stable_offset) == (10, 10)


def test_fetch_passes_follower_and_isolation_to_the_replica_manager(tmp_path: Path) -> None:
    m, replicas, _, _ = managers(tmp_path)
    fetch(m, 12, [("t", 0, 5)], replica_id=OTHER)
    fetch(m, 12, [("t", 0, 5)], isolation_level=1)
    assert [(x["replica_id"], x["read_committed"]) for x in replicas.reads] == [(OTHER, False), (-1, True)]


def test_fetch_rejects_a_stale_leader_epoch(tmp_path: Path) -> None:
    m, replicas, _, _ = managers(tmp_path)
    topics = (part(1, 12, "FetchTopic", topic="t", partitions=(
        part(1, 12, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=100, current_leader_epoch=2,
             log_start_offset=-1, last_fetched_epoch=-1),
    )),)  # fmt: skip
    r = call(m, 1, 12, max_wait=0, min_bytes=1, max_bytes=100, replica_id=-1, topics=topics)
    assert fetched(r)[("t", 0)].error_code == E.fenced_leader_epoch
    assert replicas.reads == []


@pytest.mark.parametrize(("epoch", "error"), [(4, E.unknown_leader_epoch), (3, E.none), (-2, E.none)])
def test_fetch_compares_a_set_leader_epoch_with_the_partitions(tmp_path: Path, epoch: int, error: E) -> None:
    # KIP-320 for Fetch (the partitions here are led at epoch 3): a newer epoch than the leader's is
    # UNKNOWN_LEADER_EPOCH, the leader's own is read, and any negative one is unset (FetchRequest.optionalEpoch)
    m, replicas, _, _ = managers(tmp_path)
    topics = (part(1, 12, "FetchTopic", topic="t", partitions=(
        part(1, 12, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=100,
             current_leader_epoch=epoch, log_start_offset=-1, last_fetched_epoch=-1),
    )),)  # fmt: skip
    r = call(m, 1, 12, max_wait=0, min_bytes=1, max_bytes=100, replica_id=-1, topics=topics)
    assert fetched(r)[("t", 0)].error_code == error
    assert len(replicas.reads) == (0 if error else 1)


def test_fetch_long_poll_ends_when_the_broker_stops(tmp_path: Path) -> None:
    m, replicas, _, _ = managers(tmp_path)
    replicas.stopping = True
    r = fetch(m, 12, [("t", 1, 10)], max_wait=60_000)  # nothing to read, but no 60 s wait
    assert fetched(r)[("t", 1)].error_code == E.none


# ------------------------------------------------------------------------------------------------- Metadata
@pytest.mark.parametrize("version", versions(3))
def test_metadata_lists_brokers_topics_and_controller(version: int) -> None:
    m, _, _, _ = managers()
    r = call(m, 3, version, topics=None if version >= 1 else (), allow_auto_topic_creation=False)
    assert sorted(b.node_id for b in r.brokers) == [ME, OTHER]
    if version >= 1:
        assert r.controller_id == OTHER
    if version >= 2:
        assert r.cluster_id == "test-cluster"
    topics = {t.name: t for t in r.topics}
    assert set(topics) == {"t", "other"}
    assert [p.leader_id for p in topics["t"].partitions] == [ME, ME]


def test_metadata_auto_creates_an_unknown_topic_but_not_an_internal_one() -> None:
    m, _, _, admin = managers()
    topics = (part(3, 12, "MetadataRequestTopic", name="fresh"), part(3, 12, "MetadataRequestTopic",
                                                                      name="__consumer_offsets"))
    r = call(m, 3, 12, topics=topics, allow_auto_topic_creation=True)
    errors = {t.name: t.error_code for t in r.topics}
    assert errors == {"fresh": E.none, "__consumer_offsets": E.unknown_topic_or_partition}
    assert admin.calls == [("auto", "fresh")]


def test_metadata_by_topic_id_with_the_java_clients_empty_name() -> None:
    # Kafka 4's Java consumer asks for the topics of a KIP-848 assignment by id, its name left at "" (not null)
    m, _, _, _ = managers()
    r = call(m, 3, 12, topics=None, allow_auto_topic_creation=False)
    tid = {t.name: t.topic_id for t in r.topics}["t"]
    topics = (part(3, 12, "MetadataRequestTopic", name="", topic_id=tid),)
    r = call(m, 3, 12, topics=topics, allow_auto_topic_creation=False)
    assert [(t.name, t.topic_id, t.error_code) for t in r.topics] == [("t", tid, E.none)]


def test_metadata_reports_a_dead_leader_and_refuses_bad_names() -> None:
    m, _, cluster, admin = managers(auto_create_topics_enable=False)
    cluster.live = [b for b in cluster.live if b.broker_id != OTHER]
    topics = (part(3, 12, "MetadataRequestTopic", name="other"), part(3, 12, "MetadataRequestTopic", name="a b"),
              part(3, 12, "MetadataRequestTopic", name="nope"))  # fmt: skip
    r = call(m, 3, 12, topics=topics, allow_auto_topic_creation=True)
    by_name = {t.name: t for t in r.topics}
    other = by_name["other"].partitions[0]
    assert (other.error_code, other.leader_id, list(other.offline_replicas)) == (E.leader_not_available, -1, [OTHER])
    assert by_name["a b"].error_code == E.invalid_topic_exception
    assert by_name["nope"].error_code == E.unknown_topic_or_partition  # auto.create.topics.enable=false
    assert admin.calls == []


def test_metadata_broker_list_follows_registrations_controller_and_cluster_id() -> None:
    # the broker list is encoded once and reused (apis/metadata.py _HEAD_CACHE): every change must show at once
    m, _, cluster, _ = managers()

    def head() -> tuple[dict[int, int], int, str]:
        r = call(m, 3, 12, topics=(part(3, 12, "MetadataRequestTopic", name="t"),), allow_auto_topic_creation=False)
        return {b.node_id: b.port for b in r.brokers}, r.controller_id, r.cluster_id

    assert head() == head() == ({ME: 9092, OTHER: 9093}, OTHER, "test-cluster")
    cluster.live = [cluster.live[0], BrokerInfo(OTHER, "127.0.0.1", 9999)]  # re-registered on another port
    assert head() == ({ME: 9092, OTHER: 9999}, OTHER, "test-cluster")
    cluster.live = cluster.live[:1]
    assert head() == ({ME: 9092}, OTHER, "test-cluster")
    cluster.controller_id = lambda: ME  # type: ignore[method-assign]
    cluster.cluster_id = "renamed"
    assert head() == ({ME: 9092}, ME, "renamed")
    for version in versions(3):  # every version's head from the same brokers: its own bytes
        r = call(m, 3, version, topics=None if version >= 1 else (), allow_auto_topic_creation=False)
        assert [b.node_id for b in r.brokers] == [ME]


def test_metadata_topic_entries_follow_the_topic_and_the_brokers() -> None:
    # a topic's entry is encoded once and reused while the topic object, its partition count and the live brokers
    # stay (apis/metadata.py _ENTRY_CACHE); authorized operations, when asked for, are never taken from it
    m, _, cluster, _ = managers()

    def entry(ops: bool = False) -> tuple[list[tuple[int, int, int]], int]:
        r = call(m, 3, 12, topics=(part(3, 12, "MetadataRequestTopic", name="t"),), allow_auto_topic_creation=False,
                 include_topic_authorized_operations=ops)  # fmt: skip
        (t,) = r.topics
        return [(p.partition_index, p.leader_id, p.leader_epoch) for p in t.partitions], t.topic_authorized_operations

    assert entry() == entry() == ([(0, ME, 3), (1, ME, 3)], -2147483648)
    assert entry(ops=True)[1] != -2147483648  # every operation a topic supports: no authorizer
    topic = cluster.topic("t")
    assert topic is not None
    topic.partitions[2] = PartitionState(OTHER, 5, [OTHER], [OTHER])  # the standalone store adds partitions in place
    assert entry()[0] == [(0, ME, 3), (1, ME, 3), (2, OTHER, 5)]
    cluster.live = cluster.live[:1]  # OTHER died: its partition has no leader
    assert entry()[0] == [(0, ME, 3), (1, ME, 3), (2, -1, 5)]
    moved = cluster.add("t", 1, leader=OTHER)  # ZooKeeper: a new object on every change
    moved.partitions[0] = PartitionState(ME, 9, [ME], [ME])
    assert entry()[0] == [(0, ME, 9)]


# ------------------------------------------------------------------------------------------------- admin
def creatable(version: int, name: str, partitions: int = 1, rf: int = 1, **configs: str) -> Any:
    return part(19, version, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=rf,
                assignments=(), configs=tuple(part(19, version, "CreatableTopicConfig", name=k, value=v)
                                              for k, v in configs.items()))  # fmt: skip


@pytest.mark.parametrize("version", versions(19))
def test_create_topics(version: int) -> None:
    m, _, _, admin = managers()
    topics = (creatable(version, "new", 3, 2, **{"cleanup.policy": "compact"}), creatable(version, "t"),
              creatable(version, "wide", 1, 3), creatable(version, "new"))  # fmt: skip
    r = call(m, 19, version, topics=topics, timeout=1000, validate_only=False)
    errors = [(t.name, t.error_code) for t in r.topics]
    assert errors == [
        ("new", E.none),
        ("t", E.topic_already_exists),
        ("wide", E.invalid_replication_factor),  # 3 replicas, 2 live brokers
        ("new", E.invalid_request),  # the same name twice in one request
    ]
    assert admin.calls == [("create", "new", 3, 2, {"cleanup.policy": "compact"}, None)]
    if version >= 5:
        assert r.topics[0].num_partitions == 3
        assert {c.name: c.value for c in r.topics[0].configs}["cleanup.policy"] == "compact"


def test_create_topics_validate_only_and_bad_configs_change_nothing() -> None:
    m, _, _, admin = managers()
    r = call(m, 19, 7, topics=(creatable(7, "dry", 2),), timeout=1000, validate_only=True)
    assert r.topics[0].error_code == E.none and r.topics[0].num_partitions == 2
    r = call(m, 19, 7, topics=(creatable(7, "bad", **{"min.insync.replicas": "0"}),), timeout=1000)
    assert r.topics[0].error_code == E.invalid_config
    assert admin.calls == []


def test_delete_topics_and_create_partitions() -> None:
    m, _, _, admin = managers()
    r = call(m, 20, 5, topic_names=("t", "missing"), timeout=1000)
    assert [(x.name, x.error_code) for x in r.responses] == [("t", E.none), ("missing", E.unknown_topic_or_partition)]
    r = call(m, 37, 3, topics=(
        part(37, 3, "CreatePartitionsTopic", name="t", count=4, assignments=None),
        part(37, 3, "CreatePartitionsTopic", name="t", count=1, assignments=None),
    ), timeout=1000, validate_only=False)  # fmt: skip
    assert [x.error_code for x in r.results] == [E.none, E.invalid_partitions]
    assert admin.calls == [("delete", "t"), ("partitions", "t", 4)]
    m, _, _, admin = managers(delete_topic_enable=False)
    r = call(m, 20, 5, topic_names=("t",), timeout=1000)
    assert r.responses[0].error_code == E.topic_deletion_disabled and admin.calls == []


def test_more_than_10000_partitions_per_request_is_a_policy_violation() -> None:
    """Kafka's controller caps one request at 10,000 new partitions; 2^31-1 of them used to wedge the broker."""
    m, _, _, admin = managers()
    r = call(m, 19, 7, topics=(creatable(7, "a", 6000), creatable(7, "b", 6000)), timeout=1000, validate_only=False)
    assert [(t.error_code, t.error_message) for t in r.topics] == [
        (E.policy_violation, "Excessively large number of partitions per request.")
    ] * 2
    r = call(m, 37, 3, topics=(part(37, 3, "CreatePartitionsTopic", name="t", count=2**31 - 1, assignments=None),),
             timeout=1000, validate_only=False)
    assert [x.error_code for x in r.results] == [E.policy_violation]
    assert admin.calls == []


def test_describe_and_alter_topic_configs() -> None:
    m, _, cluster, admin = managers()
    cluster.add("c", 1, ME, {"retention.ms": "1000"})
    res = part(32, 4, "DescribeConfigsResource", resource_type=2, resource_name="c",
               configuration_keys=("retention.ms", "cleanup.policy"))  # fmt: skip
    r = call(m, 32, 4, resources=(res,), include_synonyms=False, include_documentation=False)
    configs = {c.name: (c.value, c.config_source) for c in r.results[0].configs}
    assert configs == {"retention.ms": ("1000", 1), "cleanup.policy": ("delete", 5)}  # 1: topic, 5: default
    alter = part(44, 1, "AlterConfigsResource", resource_type=2, resource_name="c", configs=(
        part(44, 1, "AlterableConfig", name="retention.ms", config_operation=1, value=None),
        part(44, 1, "AlterableConfig", name="segment.ms", config_operation=0, value="60000"),
    ))  # fmt: skip
    r = call(m, 44, 1, resources=(alter,), validate_only=False)
    assert r.responses[0].error_code == E.none
    assert admin.calls == [("alter", "c", {"retention.ms": None, "segment.ms": "60000"})]


def test_describe_cluster_and_init_producer_id() -> None:
    m, _, _, _ = managers()
    r = call(m, 60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert (r.cluster_id, r.controller_id, len(r.brokers)) == ("test-cluster", OTHER, 2)
    r = call(m, 22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, 4242, 0)


def test_the_validation_policy_is_built_once_per_topic_config() -> None:
    from dataclasses import replace

    from kbus.server.apis.produce import _policy

    part = fake_partition("t", 0)
    first = _policy(part)
    assert first.topic_partition == "t-0" and not first.log_append_time
    assert _policy(part) is first
    part.log.update_config(replace(part.config, message_timestamp_type="LogAppendTime"))  # a topic config change
    changed = _policy(part)
    assert changed is not first and changed.log_append_time
