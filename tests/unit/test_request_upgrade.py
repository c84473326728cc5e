"""kbus.protocol.upgrade: an older version's kio request as the newer class its handler is written against.

Every advertised version of every API registered with `request=` reaches its handler as the declared class; a
field the old version lacks holds Kafka's default (the schema's, else the type's zero); what cannot be carried
(a removed field, an added entity with no default, a changed type) is refused by name.
"""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import pytest
from kio.schema.describe_groups.v0.request import DescribeGroupsRequest as DescribeGroupsV0
from kio.schema.join_group.v0.request import JoinGroupRequest as JoinGroupV0
from kio.schema.join_group.v0.request import JoinGroupRequestProtocol as JoinGroupProtocolV0
from kio.schema.join_group.v9.request import JoinGroupRequest as JoinGroupV9
from kio.schema.join_group.v9.request import JoinGroupRequestProtocol as JoinGroupProtocolV9
from kio.schema.metadata.v0.request import MetadataRequest as MetadataV0
from kio.schema.metadata.v0.request import MetadataRequestTopic as MetadataTopicV0
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as MetadataTopicV12

import kbus.server.apis  # noqa: F401  (registers every handler)
from kbus.protocol.codec import RequestHeader, build, request_type
from kbus.protocol.upgrade import UpgradeError, _shape, upgrader, upgrades_for, version_of
from kbus.server.apis.registry import API_TABLE, RequestContext, _upgrades, _upgrading, api


def _declared(key: int) -> tuple[type, ...] | None:
    """The request classes API `key`'s handler declares (api's `request`; mypy checks its parameter's annotation
    against them), None when it takes whatever was decoded."""
    return API_TABLE[key].requests or None


TYPED = sorted(key for key in API_TABLE if _declared(key) is not None)


def test_every_api_but_the_hand_decoded_ones_is_typed() -> None:
    # Produce, Fetch, OffsetCommit, Heartbeat: decoded by hand (kbus.protocol.*_decode, group_requests), no upgrade
    assert set(API_TABLE) - set(TYPED) == {0, 1, 8, 12}


@pytest.mark.parametrize("key", TYPED)
def test_every_advertised_version_reaches_the_handler_as_its_declared_class(key: int) -> None:
    spec = API_TABLE[key]
    declared = _declared(key)
    assert declared is not None
    for version in range(spec.min_version, spec.max_version + 1):
        cls = request_type(key, version)
        assert cls is not None
        req = build(cls)  # every field at Kafka's zero
        upgraded = upgrades_for({version: cls}, declared).get(cls)
        out = req if upgraded is None else upgraded(req)
        assert type(out) in declared, (spec.name, version)
        # the newest declared class at or after this version: no field of the request is dropped on the way
        assert {f.name for f in fields(cls)} <= {f.name for f in fields(type(out))}
    assert request_type(key, spec.max_version) in declared  # the newest version needs no conversion


def test_join_group_v0_gets_kafkas_defaults_for_the_fields_it_lacks() -> None:
    v0 = JoinGroupV0(group_id="g", session_timeout=datetime.timedelta(seconds=10), member_id="",
                     protocol_type="consumer", protocols=(JoinGroupProtocolV0(name="range", metadata=b"m"),))
    v9 = upgrader(JoinGroupV0, JoinGroupV9)(v0)
    assert isinstance(v9, JoinGroupV9)
    assert v9.rebalance_timeout == datetime.timedelta(milliseconds=-1)  # JoinGroupRequest.json: "default": "-1"
    assert v9.group_instance_id is None and v9.reason is None  # "default": "null"
    assert v9.protocols == (JoinGroupProtocolV9(name="range", metadata=b"m"),)  # nested entities converted
    assert (v9.group_id, v9.session_timeout, v9.member_id) == ("g", datetime.timedelta(seconds=10), "")


def test_metadata_v0_gets_the_schema_default_and_the_types_zero() -> None:
    v12 = upgrader(MetadataV0, MetadataV12)(MetadataV0(topics=(MetadataTopicV0(name="t"),)))
    assert isinstance(v12, MetadataV12)
    assert v12.allow_auto_topic_creation is True  # MetadataRequest.json: "default": "true"
    assert v12.include_topic_authorized_operations is False  # no default: Kafka's generated class holds false
    assert v12.topics == (MetadataTopicV12(topic_id=None, name="t"),)  # no default: the zero (null) uuid


def test_describe_groups_v0_does_not_ask_for_authorized_operations() -> None:
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5

    v5 = upgrader(DescribeGroupsV0, DescribeGroupsV5)(DescribeGroupsV0(groups=("a", "b")))
    assert isinstance(v5, DescribeGroupsV5)
    assert v5.groups == ("a", "b") and v5.include_authorized_operations is False


# Every request field kbus's advertised versions fill with the type's zero because kio (Kafka's schema) has no
# explicit default for it, each checked against Kafka's JSON: a field added to this list by a kio upgrade or a new
# API must be checked too (its zero must mean what the old version meant).
ZERO_FILLED = {
    ("ApiVersions", "client_software_name"),  # "": v0-v2 send no client software
    ("ApiVersions", "client_software_version"),
    ("DescribeGroups", "include_authorized_operations"),  # false: v0-v2 never asked for them
    ("ElectLeaders", "election_type"),  # 0 (preferred): v0 is preferred election only
    ("ListOffsets", "isolation_level"),  # 0 (read_uncommitted): v1 has no isolation
    ("Metadata", "include_cluster_authorized_operations"),  # false: v0-v7 never asked for them
    ("Metadata", "include_topic_authorized_operations"),
    ("Metadata.topics", "topic_id"),  # the zero uuid (kio: None): v0-v9 name topics only
    ("Fetch", "forgotten_topics_data"),  # empty: v4-v6 have no fetch sessions
}


def _zero_filled(old: type, new: type, where: str, out: set[tuple[str, str]]) -> None:
    old_fields = {f.name: f for f in fields(old)}
    for f in fields(new):
        if f.name not in old_fields:
            if f.default is f.default_factory:  # both MISSING
                out.add((where, f.name))
            continue
        inner_new, inner_old = _entity(new, f.name), _entity(old, f.name)
        if inner_new is not None and inner_old is not None:
            _zero_filled(inner_old, inner_new, f"{where}.{f.name}", out)


def _entity(cls: type, name: str) -> type | None:
    return _shape(cls)[name][1]


def test_the_fields_filled_with_the_types_zero_are_the_reviewed_ones() -> None:
    found: set[tuple[str, str]] = set()
    for key, spec in API_TABLE.items():
        targets = _declared(key) or (request_type(key, spec.max_version),)
        ordered = sorted(targets, key=lambda t: version_of(t))
        for version in range(spec.min_version, spec.max_version + 1):
            old = request_type(key, version)
            assert old is not None
            target = next(t for t in ordered if version_of(t) >= version)
            if old is not target and (key in TYPED or _upgradable(old, target)):
                _zero_filled(old, target, spec.name, found)
    assert found <= ZERO_FILLED, sorted(found - ZERO_FILLED)


def _upgradable(old: type, new: type) -> bool:
    try:
        upgrader(old, new)
    except UpgradeError:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class _Inner:
    __version__: ClassVar[int] = 0
    x: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Old:
    __version__: ClassVar[int] = 0
    a: int = field(metadata={"kafka_type": "int32"})
    gone: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _NewWithoutGone:
    __version__: ClassVar[int] = 1
    a: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _NewWithEntity:
    __version__: ClassVar[int] = 1
    a: int = field(metadata={"kafka_type": "int32"})
    gone: int = field(metadata={"kafka_type": "int32"})
    inner: _Inner


@dataclass(frozen=True, slots=True, kw_only=True)
class _NewWithWiderType:
    __version__: ClassVar[int] = 1
    a: int = field(metadata={"kafka_type": "int64"})
    gone: int = field(metadata={"kafka_type": "int32"})


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (_NewWithoutGone, "has gone, which v1 lacks"),
        (_NewWithEntity, "inner: an entity added after v0 with no default"),
        (_NewWithWiderType, "a: its type changed"),
    ],
)
def test_what_cannot_be_carried_is_refused_by_name(new: type, message: str) -> None:
    with pytest.raises(UpgradeError, match=message):
        upgrader(_Old, new)


def test_registering_a_request_class_that_is_not_the_newest_versions_is_refused() -> None:
    with pytest.raises(UpgradeError, match="is not v9's request class"):
        api(999_999, 0, 9, request=JoinGroupV0)(_unused_handler)  # type: ignore[arg-type]
    from kio.schema.leave_group.v5.request import LeaveGroupRequest as LeaveGroupV5

    with pytest.raises(UpgradeError, match="has member_id, which v5 lacks"):  # LeaveGroup v0-v2: one member_id
        api(13, 0, 5, request=LeaveGroupV5)(_unused_handler)  # checked before the duplicate-key check
    assert 999_999 not in API_TABLE


async def _unused_handler(m: Any, ctx: Any, req: Any) -> None:
    raise AssertionError("never called")


def test_the_registered_wrapper_hands_the_handler_the_upgraded_request() -> None:
    seen: list[object] = []

    async def record(m: Any, ctx: Any, req: Any) -> None:
        seen.append(req)

    served = _upgrading(record, _upgrades(11, 0, 9, (JoinGroupV9,)))  # what api(11, 0, 9, request=...) registers
    header = RequestHeader(11, 0, 1, "c", False)
    v0 = build(JoinGroupV0, group_id="g", member_id="m", protocol_type="consumer")
    v9 = build(JoinGroupV9, group_id="g", member_id="m", protocol_type="consumer")
    for req in (v0, v9):
        asyncio.run(served(None, RequestContext(header, "h", 1, "c1"), req))  # type: ignore[arg-type]
    assert isinstance(seen[0], JoinGroupV9) and seen[0].group_id == "g"
    assert seen[1] is v9  # the declared class itself is passed through untouched
