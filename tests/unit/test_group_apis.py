"""Every advertised version of the group APIs: handlers called with kio-decoded requests, responses encoded.

No sockets: a stand-in broker with a real GroupCoordinator over an in-memory __consumer_offsets. Each response is
encoded with the wire codec and decoded back, so a field a version cannot carry fails here, not in a client.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader, entity_writer

import kbus.server.apis.groups  # noqa: F401  # registers the group handlers (OffsetCommit: apis.offset_commit)
from kbus.common.broker_config import KafkaConfig
from kbus.common.cluster import BrokerInfo
from kbus.protocol.codec import (
    RequestHeader,
    build,
    encode_response,
    nested,
    request_type,
    response_type,
)
from kbus.protocol.fetch_response import EncodedBody
from kbus.protocol.request_body import decode_body
from kbus.protocol.upgrade import to_version
from kbus.server.apis.registry import API_TABLE, RequestContext
from kbus.server.coordinator.commit_batch import OffsetAndMetadata
from kbus.server.coordinator.coordinator import GroupConfig, GroupCoordinator
from kbus.server.metadata.types import TopicMetadata
from kbus.server.quotas.manager import QuotaManagers
from tests.unit.test_group_coordinator import FakeClock, MemoryLog

T_ID = uuid.UUID(int=7)


class FakeBroker:
    """Stands in for the handlers' `Managers`: the group coordinator, and itself as the admin manager
    (ensure_topic) and the metadata cache (partition_leader)."""

    def __init__(self) -> None:
        self.config = KafkaConfig(offsets_topic_num_partitions=4)
        self.broker_id = 0
        self.leader = 0  # of every __consumer_offsets partition
        self.clock = FakeClock()
        self.admin = self.cluster = self
        self.transactions = None
        self.quotas = QuotaManagers()  # none configured: Heartbeat and OffsetCommit encode their own bodies
        self.groups: GroupCoordinator | None = GroupCoordinator(
            GroupConfig(offsets_topic_num_partitions=4, initial_rebalance_delay_ms=0, min_session_timeout_ms=1000),
            MemoryLog(),
            self.clock,
            partition_exists=lambda t, p: t == "t" and p < 2,
        )
        self.ensured: list[str] = []

    @property
    def group_coordinator(self) -> GroupCoordinator:
        assert self.groups is not None
        return self.groups

    async def ensure_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        self.ensured.append(name)
        assert configs["cleanup.policy"] == "compact"

    def partition_leader(self, topic: str, partition: int) -> BrokerInfo | None:
        return BrokerInfo(self.leader, "127.0.0.1", 9092 + self.leader)

    def brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(self.leader, "127.0.0.1", 9092 + self.leader)]

    def topics(self) -> dict[str, TopicMetadata]:
        # the one topic partition_exists knows ("t", 2 partitions), named by id in OffsetCommit/OffsetFetch v10
        return {"t": TopicMetadata("t", T_ID, {})}


def request(api_key: int, version: int, /, **fields: Any) -> Any:
    cls = request_type(api_key, version)
    assert cls is not None

    def convert(value: Any, name: str) -> Any:
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return tuple(build(nested(cls, name), **v) for v in value)
        return value

    names = {
        "protocols": "JoinGroupRequestProtocol",
        "assignments": "SyncGroupRequestAssignment",
        "members": "MemberIdentity",
    }
    out = {k: convert(v, names.get(k, "")) for k, v in fields.items()}
    msg = build(cls, **out)
    # Round-trip through the wire so the handler sees exactly what a client would send, decoded as the broker does
    # (by hand for Heartbeat and OffsetCommit: kbus.protocol.request_body)
    buf = io.BytesIO()
    entity_writer(cls)(buf, msg)
    return decode_body(buf.getvalue(), RequestHeader(api_key, version, 7, "client", bool(cls.__flexible__)), 0)


async def call(broker: FakeBroker, api_key: int, version: int, /, **fields: Any) -> Any:
    key = api_key
    req = request(key, version, **fields)
    header = RequestHeader(key, version, 7, "client", bool(request_type(key, version).__flexible__))
    ctx = RequestContext(header, "127.0.0.1", 50000, "c1")
    response = await API_TABLE[key].handler(broker, ctx, req)  # type: ignore[arg-type]
    frame = encode_response(header, response)
    body_at = 4 + 4 + (1 if header.flexible and key != 18 else 0)
    decoded, _ = entity_reader(response_type(key, version))(frame, body_at)
    if isinstance(response, EncodedBody):  # Heartbeat and OffsetCommit encode their own (checked against kio's)
        return decoded
    # a handler answers its newest version's class (or the last of a shape); the wire carries the request's version
    target = response_type(key, version)
    assert decoded == (response if type(response) is target else to_version(type(response), target)(response))
    return decoded


async def elected(broker: FakeBroker) -> None:
    for p in range(4):
        broker.group_coordinator.on_election(p)
    await broker.group_coordinator.settle()


def spec(key: int) -> range:
    s = API_TABLE[key]
    return range(s.min_version, s.max_version + 1)


@pytest.mark.parametrize("version", spec(10))
def test_find_coordinator(version: int) -> None:
    async def main() -> None:
        b = FakeBroker()
        # the metadata names this broker leader, but its coordinator has not taken the partitions yet
        if version >= 4:
            r = await call(b, 10, version, key_type=0, coordinator_keys=("g1",))
            assert [(c.node_id, c.error_code) for c in r.coordinators] == [(-1, E.coordinator_not_available)]
        else:
            r = await call(b, 10, version, key="g1")
            assert (r.error_code, r.node_id) == (E.coordinator_not_available, -1)
        b.leader = 1  # another broker's word is taken as it is: that broker answers for its own load
        one_key = {"key_type": 0, "coordinator_keys": ("g1",)} if version >= 4 else {"key": "g1"}
        r = await call(b, 10, version, **one_key)
        assert (r.coordinators[0] if version >= 4 else r).node_id == 1
        b.leader = 0
        await elected(b)
        if version >= 4:
            r = await call(b, 10, version, key_type=0, coordinator_keys=("g1", "g2"))
            assert [(c.key, c.node_id, c.port, c.error_code) for c in r.coordinators] == [
                ("g1", 0, 9092, E.none),
                ("g2", 0, 9092, E.none),
            ]
        else:
            r = await call(b, 10, version, key="g1")
            assert (r.error_code, r.node_id, r.host, r.port) == (E.none, 0, "127.0.0.1", 9092)
        assert b.ensured == ["__consumer_offsets"] * len(b.ensured) and b.ensured

    asyncio.run(main())


@pytest.mark.parametrize("version", spec(11))
def test_join_sync_heartbeat_commit_fetch_leave(version: int) -> None:
    async def main() -> None:
        b = FakeBroker()
        await elected(b)
        join = {
            "group_id": "g",
            "session_timeout": 10000,
            "rebalance_timeout": 20000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00"}],
        }
        if version >= 4:
            r = await call(b, 11, version, **join)
            assert r.error_code == E.member_id_required
            join["member_id"] = r.member_id
        task = asyncio.ensure_future(call(b, 11, version, **join))
        for _ in range(5):
            await asyncio.sleep(0)
            b.group_coordinator.timers.run_due(b.clock())
        r = await task
        assert r.error_code == E.none and r.generation_id == 1 and r.leader == r.member_id
        assert r.protocol_name == "range" and [m.member_id for m in r.members] == [r.member_id]
        member = r.member_id
        sync_v = min(version, API_TABLE[14].max_version)
        s = await call(
            b,
            14,
            sync_v,
            group_id="g",
            generation_id=1,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": member, "assignment": b"A"}],
        )
        assert s.error_code == E.none and s.assignment == b"A"
        hb = await call(b, 12, min(version, 4), group_id="g", generation_id=1, member_id=member)
        assert hb.error_code == E.none
        commit_v = max(2, min(version, 9))
        c = await call(
            b,
            8,
            commit_v,
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id=member,
            topics=(
                build(
                    nested(request_type(8, commit_v), "OffsetCommitRequestTopic"),
                    name="t",
                    partitions=(
                        build(
                            nested(request_type(8, commit_v), "OffsetCommitRequestPartition"),
                            partition_index=0,
                            committed_offset=42,
                            committed_metadata="meta",
                        ),
                    ),
                ),
            ),
        )
        assert [(t.name, p.partition_index, p.error_code) for t in c.topics for p in t.partitions] == [("t", 0, E.none)]
        leave_v = min(version, 5)
        if leave_v >= 3:
            lv = await call(b, 13, leave_v, group_id="g", members=[{"member_id": member}])
            assert [m.error_code for m in lv.members] == [E.none]
        else:
            lv = await call(b, 13, leave_v, group_id="g", member_id=member)
        assert lv.error_code == E.none

    asyncio.run(main())


@pytest.mark.parametrize("version", spec(9))
def test_offset_fetch(version: int) -> None:
    async def main() -> None:
        b = FakeBroker()
        await elected(b)
        errs = await b.group_coordinator.commit_offsets(
            "g",
            "",
            None,
            -1,
            {("t", 0): OffsetAndMetadata(5, 2, "m", 1), ("t", 1): OffsetAndMetadata(6, -1, "", 1)},
        )
        assert set(errs.values()) == {E.none}
        cls = request_type(9, version)
        if version >= 8:
            named = {"topic_id": T_ID} if version >= 10 else {"name": "t"}
            topic = build(nested(cls, "OffsetFetchRequestTopics"), **named, partition_indexes=(0, 1, 2))
            group = build(nested(cls, "OffsetFetchRequestGroup"), group_id="g", topics=(topic,))
            all_group = build(nested(cls, "OffsetFetchRequestGroup"), group_id="g", topics=None)
            r = await call(b, 9, version, groups=(group, all_group))
            parts = [
                [(p.partition_index, p.committed_offset, p.metadata) for t in g.topics for p in t.partitions]
                for g in r.groups
            ]
            assert sorted(parts[0]) == [(0, 5, "m"), (1, 6, ""), (2, -1, "")]
            assert sorted(parts[1]) == [(0, 5, "m"), (1, 6, "")]
        else:
            topic = build(nested(cls, "OffsetFetchRequestTopic"), name="t", partition_indexes=(0, 2))
            r = await call(b, 9, version, group_id="g", topics=(topic,))
            got = sorted((p.partition_index, p.committed_offset, p.metadata) for t in r.topics for p in t.partitions)
            assert got == [(0, 5, "m"), (2, -1, "")]
            if version >= 2:
                r = await call(b, 9, version, group_id="g", topics=None)
                assert len([p for t in r.topics for p in t.partitions]) == 2

    asyncio.run(main())


@pytest.mark.parametrize("key", [15, 16, 42, 47])
def test_admin_apis_all_versions(key: int) -> None:
    async def main() -> None:
        for version in spec(key):
            b = FakeBroker()
            await elected(b)
            await b.group_coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(5)})
            if key == 15:
                r = await call(b, 15, version, groups=("g", "missing"))
                assert [(g.group_id, g.group_state) for g in r.groups] == [("g", "Empty"), ("missing", "Dead")]
            elif key == 16:
                r = await call(b, 16, version)
                assert [g.group_id for g in r.groups] == ["g"]
            elif key == 42:
                r = await call(b, 42, version, groups_names=("g", "missing"))
                assert [(x.group_id, x.error_code) for x in r.results] == [
                    ("g", E.none),
                    ("missing", E.group_id_not_found),
                ]
            else:
                cls = request_type(47, version)
                part = build(nested(cls, "OffsetDeleteRequestPartition"), partition_index=0)
                topic = build(nested(cls, "OffsetDeleteRequestTopic"), name="t", partitions=(part,))
                r = await call(b, 47, version, group_id="g", topics=(topic,))
                assert r.error_code == E.none and r.topics[0].partitions[0].error_code == E.none

    asyncio.run(main())


def test_no_coordinator_means_coordinator_not_available() -> None:
    async def main() -> None:
        b = FakeBroker()
        b.groups = None
        r = await call(b, 12, 4, group_id="g", generation_id=1, member_id="m")
        assert r.error_code == E.coordinator_not_available
        r = await call(b, 10, 3, key="g")
        assert r.error_code == E.coordinator_not_available

    asyncio.run(main())


def test_offsets_v10_never_resolve_the_zero_topic_id() -> None:
    """Review of issue 22: a topic without an id yet (created by an old ZooKeeper tool, until the controller gives
    it one, kbus shows the zero UUID) is not what OffsetCommit/OffsetFetch v10's zero topic id names (Kafka resolves
    only ids other than Uuid.ZERO_UUID): UNKNOWN_TOPIC_ID, nothing committed, and an all-topics fetch leaves it out."""
    async def main() -> None:
        b = FakeBroker()
        b.topics = lambda: {"t": TopicMetadata("t", uuid.UUID(int=0), {})}  # type: ignore[method-assign]
        await elected(b)
        await b.group_coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(5)})
        zero = uuid.UUID(int=0)
        cls = request_type(8, 10)
        part = build(nested(cls, "OffsetCommitRequestPartition"), partition_index=1, committed_offset=9,
                     committed_leader_epoch=-1, committed_metadata="")
        topic = build(nested(cls, "OffsetCommitRequestTopic"), topic_id=zero, partitions=(part,))
        r = await call(b, 8, 10, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                       group_instance_id=None, topics=(topic,))
        assert [(p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == [(1, E.unknown_topic_id)]
        cls = request_type(9, 10)
        topic = build(nested(cls, "OffsetFetchRequestTopics"), topic_id=zero, partition_indexes=(0, 1))
        group = build(nested(cls, "OffsetFetchRequestGroup"), group_id="g", topics=(topic,))
        all_group = build(nested(cls, "OffsetFetchRequestGroup"), group_id="g", topics=None)
        r = await call(b, 9, 10, groups=(group, all_group), require_stable=True)
        got = [[(p.partition_index, p.committed_offset, p.error_code) for t in g.topics for p in t.partitions]
               for g in r.groups]
        assert got == [[(0, -1, E.unknown_topic_id), (1, -1, E.unknown_topic_id)], []]

    asyncio.run(main())


def test_with_a_request_quota_heartbeat_and_commit_answer_kio_objects_the_network_layer_throttles() -> None:
    # Without request quotas both encode their own bodies (throttle time 0); with one, the network layer writes the
    # quota's throttle time into the response object (processor._with_throttle_time), which a body would not take.
    from kbus.common.quotas import QuotaEntity
    from kbus.server.network.processor import _with_throttle_time

    async def main() -> None:
        b = FakeBroker()
        await elected(b)
        header = RequestHeader(12, 4, 7, "client", True)
        req = request(12, 4, group_id="g", generation_id=1, member_id="m")
        answer = await API_TABLE[12].handler(b, RequestContext(header, "127.0.0.1", 1, "c1"), req)  # type: ignore[arg-type]
        assert isinstance(answer, EncodedBody)
        b.quotas.request.update({QuotaEntity(client_id="client"): 10.0})
        for key, version, fields in ((12, 4, {"generation_id": 1}), (8, 8, {"generation_id_or_member_epoch": -1})):
            req = request(key, version, group_id="g", member_id="m", **fields)
            ctx = RequestContext(RequestHeader(key, version, 7, "client", True), "127.0.0.1", 1, "c1")
            answer = await API_TABLE[key].handler(b, ctx, req)  # type: ignore[arg-type]
            assert not isinstance(answer, EncodedBody)
            frame = encode_response(ctx.header, _with_throttle_time(ctx.header, answer, 500))
            decoded, _ = entity_reader(response_type(key, version))(frame, 9)
            assert decoded.throttle_time.total_seconds() == 0.5

    asyncio.run(main())


class _DenyTopic:
    """An authorizer allowing everything but `denied` (a topic or a group name)."""

    def __init__(self, denied: str) -> None:
        self.denied = denied

    def authorize(self, principal: object, host: str, operation: object, resource_type: object, name: str) -> bool:
        return name != self.denied


@pytest.mark.parametrize("version", spec(8))
def test_offset_commit_every_version(version: int) -> None:
    """What an OffsetCommit stores and answers, from a request read by kbus.protocol.group_requests (the
    connection's decoder; test_group_requests checks it against kio's for every version): a topic the principal
    may not read is refused per partition, an unknown partition too,
    the rest is stored with its leader epoch (v6+), metadata and, for v2-v4, its retention."""
    cls = request_type(8, version)

    def topic(name: str, parts: list[int]) -> Any:
        named = {"topic_id": T_ID if name == "t" else uuid.UUID(int=99)} if version >= 10 else {"name": name}
        fields = set(nested(cls, "OffsetCommitRequestPartition").__dataclass_fields__)
        return build(nested(cls, "OffsetCommitRequestTopic"), **named, partitions=tuple(
            build(nested(cls, "OffsetCommitRequestPartition"), **{k: v for k, v in {
                "partition_index": p, "committed_offset": 10 + p, "committed_leader_epoch": 4,
                "committed_metadata": f"m{p}"}.items() if k in fields}) for p in parts))  # fmt: skip

    async def main() -> None:
        b = FakeBroker()
        await elected(b)
        b.topics = lambda: {"t": TopicMetadata("t", T_ID, {}),  # type: ignore[method-assign]
                            "secret": TopicMetadata("secret", uuid.UUID(int=99), {})}  # fmt: skip
        fields = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                  "retention_time": datetime.timedelta(milliseconds=60_000),
                  "topics": (topic("t", [0, 1, 5]), topic("secret", [0]))}  # fmt: skip
        req = request(8, version, **{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})
        header = RequestHeader(8, version, 7, "client", bool(cls.__flexible__))
        ctx = RequestContext(header, "127.0.0.1", 50000, "c1", authorizer=_DenyTopic("secret"))  # type: ignore[arg-type]
        response = await API_TABLE[8].handler(b, ctx, req)  # type: ignore[arg-type]
        frame = encode_response(header, response)
        r, _ = entity_reader(response_type(8, version))(frame, 8 + (1 if header.flexible else 0))
        got = {(t.topic_id if version >= 10 else t.name, p.partition_index, p.error_code)
               for t in r.topics for p in t.partitions}  # fmt: skip
        t, secret = (T_ID, uuid.UUID(int=99)) if version >= 10 else ("t", "secret")
        assert got == {(t, 0, E.none), (t, 1, E.none), (t, 5, E.unknown_topic_or_partition),
                       (secret, 0, E.topic_authorization_failed)}  # fmt: skip
        _error, stored = b.group_coordinator.fetch_offsets("g", None)
        now = b.clock()
        epoch = 4 if version >= 6 else -1
        expire = now + 60_000 if version <= 4 else None
        assert stored == {("t", 0): OffsetAndMetadata(10, epoch, "m0", now, expire),
                          ("t", 1): OffsetAndMetadata(11, epoch, "m1", now, expire)}  # fmt: skip
        ctx = RequestContext(header, "127.0.0.1", 50000, "c1", authorizer=_DenyTopic("g"))  # type: ignore[arg-type]
        response = await API_TABLE[8].handler(b, ctx, req)  # type: ignore[arg-type]
        frame = encode_response(header, response)
        r, _ = entity_reader(response_type(8, version))(frame, 8 + (1 if header.flexible else 0))
        assert {p.error_code for t in r.topics for p in t.partitions} == {E.group_authorization_failed}

    asyncio.run(main())
