"""Kafka 4's online migration between the classic and the consumer group protocols (group.consumer.migration.policy)
against a real kbus broker with librdkafka (confluent-kafka) members, each in its own process
(tests/group_member.py): a rolling upgrade from `group.protocol=classic` to `consumer` while records flow.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse

from kbus.protocol.client import KafkaConnection
from tests.group_member import MemberProcess, wait_until
from tests.integration.test_consumer_group_protocol import BROKER, owned_sets, partitioned
from tests.integration.test_consumer_groups import create_topic, produce, uid
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration


def group_type(broker: BrokerProcess, group: str) -> str | None:
    """The group's type as ListGroups v5 names it (a raw request)."""

    async def main() -> str | None:
        conn = KafkaConnection("127.0.0.1", broker.port, "migration-test")
        try:
            listed = await conn.request(ListGroupsRequest(states_filter=(), types_filter=()), ListGroupsResponse)
        finally:
            await conn.close()
        return next((str(g.group_type) for g in listed.groups if g.group_id == group), None)

    return asyncio.run(main())


@pytest.fixture
def kbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(BROKER)


@pytest.fixture
def members() -> Iterator[list[MemberProcess]]:
    started: list[MemberProcess] = []
    yield started
    for m in started:
        m.kill()


def test_rolling_upgrade_from_classic_to_consumer_members(
    kbroker: BrokerProcess, members: list[MemberProcess]
) -> None:
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 6)
    group = uid("g")
    classic = [MemberProcess(bootstrap, group, topic, name=f"classic-{n}") for n in ("a", "b")]
    members.extend(classic)
    wait_until(lambda: partitioned(classic, 6), 30, "2 classic members to own the 6 partitions")
    produced = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, produced, 6)
    seen = lambda: {v for m in members for v in m.values()}  # noqa: E731
    wait_until(lambda: set(produced) <= seen(), 30, "the first 300 values")

    # the rolling upgrade: two consumer-protocol members join; the group becomes a consumer group and the four
    # members share the partitions (the classic ones assigned by the broker through JoinGroup/SyncGroup)
    modern = [MemberProcess(bootstrap, group, topic, name=f"consumer-{n}", protocol="consumer") for n in ("c", "d")]
    members.extend(modern)
    wait_until(lambda: partitioned(members, 6), 45, "the 2 classic and 2 consumer members to share the partitions")
    batch = [f"w{i}" for i in range(300)]
    produce(bootstrap, topic, batch, 6)
    produced += batch
    wait_until(lambda: set(produced) <= seen(), 30, "the second 300 values")

    # the classic members leave (LeaveGroup): the consumer members take everything
    for m in classic:
        m.stop()
    wait_until(lambda: partitioned(modern, 6), 45, "the 2 consumer members to own the 6 partitions")
    batch = [f"x{i}" for i in range(300)]
    produce(bootstrap, topic, batch, 6)
    produced += batch
    wait_until(lambda: set(produced) <= seen(), 30, "the third 300 values")

    # nothing lost; duplicates only from offsets not yet committed when a partition moved (auto-commit every
    # 200 ms, stored only after processing): a bounded window, never a partition re-read from the start
    counts = Counter(v for m in members for v in m.values())
    assert set(counts) == set(produced)
    duplicated = sum(n - 1 for n in counts.values())
    assert duplicated <= 150, f"{duplicated} duplicates"
    assert sorted(len(s) for s in owned_sets(modern)) == [3, 3]


def test_downgrade_when_the_consumer_member_leaves(kbroker: BrokerProcess, members: list[MemberProcess]) -> None:
    """A consumer-protocol member joins a classic group (upgrade), then leaves: the group is a classic group again
    (group.consumer.migration.policy=bidirectional) and its classic members rebalance among themselves."""
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = uid("g")
    classic = [MemberProcess(bootstrap, group, topic, name=f"classic-{n}") for n in ("a", "b")]
    members.extend(classic)
    wait_until(lambda: partitioned(classic, 4), 30, "2 classic members to own the 4 partitions")
    modern = MemberProcess(bootstrap, group, topic, name="consumer-c", protocol="consumer")
    members.append(modern)
    wait_until(lambda: partitioned(members, 4), 45, "the 3 members to share the partitions")
    assert group_type(kbroker, group) == "consumer"
    produced = [f"v{i}" for i in range(200)]
    produce(bootstrap, topic, produced, 4)
    seen = lambda: {v for m in members for v in m.values()}  # noqa: E731
    wait_until(lambda: set(produced) <= seen(), 30, "the first 200 values")
    modern.stop()
    wait_until(lambda: partitioned(classic, 4), 45, "the 2 classic members to own the 4 partitions again")
    wait_until(lambda: group_type(kbroker, group) == "classic", 15, "the group to be listed as classic")
    batch = [f"w{i}" for i in range(200)]
    produce(bootstrap, topic, batch, 4)
    produced += batch
    wait_until(lambda: set(produced) <= seen(), 30, "the second 200 values")
    counts = Counter(v for m in members for v in m.values())
    assert set(counts) == set(produced)
    assert sum(n - 1 for n in counts.values()) <= 100
