"""What kafka-reassign-partitions.sh asks the cluster: current replica assignments (Metadata), reassignments
under way (ListPartitionReassignments) and starting or cancelling them (AlterPartitionReassignments), the last
two at the controller (retried when it moves)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbus.admin.errors import AdminError
from kbus.admin.wire import METADATA_KEY, AdminSession, WireAdmin, build, nested
from kbus.common.errors import KafkaError
from kbus.zk.assignment import assign_replicas

ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
_NOT_CONTROLLER = 41
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Ongoing:
    replicas: list[int]
    adding: list[int]
    removing: list[int]


def current_assignment(admin: WireAdmin, topics: list[str] | None) -> dict[TopicPartition, list[int]]:
    """Replicas per partition of `topics` (None: every topic); unknown topics raise AdminError."""

    async def work(session: AdminSession) -> dict[TopicPartition, list[int]]:
        nodes, _ = await admin.cluster(session)
        node = nodes[0]

        def make(cls: type, version: int) -> object:
            wanted = None if topics is None else [build(nested(cls, "MetadataRequestTopic"), name=t) for t in topics]
            return build(cls, topics=wanted, allow_auto_topic_creation=False)

        resp, _ = await session.send(node.host, node.port, METADATA_KEY, (1, 12), make)
        out: dict[TopicPartition, list[int]] = {}
        for t in resp.topics:
            if int(t.error_code):
                raise AdminError(f"Topic {t.name} not found", "UNKNOWN_TOPIC_OR_PARTITION")
            for p in t.partitions:
                out[(t.name, int(p.partition_index))] = [int(b) for b in p.replica_nodes]
        return out

    return admin.run(work)


async def _at_controller(
    admin: WireAdmin, session: AdminSession, api_key: int, make: Callable[[type, int], object]
) -> Any:
    for _ in range(5):
        controller = await admin.controller(session)
        resp, _ = await session.send(controller.host, controller.port, api_key, (0, 0), make)
        if int(resp.error_code) == _NOT_CONTROLLER:
            continue
        if int(resp.error_code):
            name = resp.error_code.name.upper()
            raise AdminError(resp.error_message or f"Request failed: {name}", name)
        return resp
    raise AdminError("The controller kept moving; try again", "NOT_CONTROLLER")


def list_reassignments(admin: WireAdmin) -> dict[TopicPartition, Ongoing]:
    async def work(session: AdminSession) -> dict[TopicPartition, Ongoing]:
        resp = await _at_controller(admin, session, LIST_REASSIGNMENTS, lambda cls, v: build(cls, topics=None))
        return {
            (t.name, int(p.partition_index)): Ongoing([int(b) for b in p.replicas], [int(b) for b in p.adding_replicas],
                                                      [int(b) for b in p.removing_replicas])
            for t in resp.topics
            for p in t.partitions
        }  # fmt: skip

    return admin.run(work)


def alter_reassignments(
    admin: WireAdmin, targets: dict[TopicPartition, list[int] | None]
) -> dict[TopicPartition, tuple[str, str] | None]:
    """Start (replicas) or cancel (None); per partition None or (Kafka's error name, message)."""

    async def work(session: AdminSession) -> dict[TopicPartition, tuple[str, str] | None]:
        def make(cls: type, version: int) -> object:
            by_topic: dict[str, list[object]] = {}
            for (t, p), replicas in sorted(targets.items()):
                by_topic.setdefault(t, []).append(
                    build(nested(cls, "ReassignablePartition"), partition_index=p, replicas=replicas))
            topics = [build(nested(cls, "ReassignableTopic"), name=t, partitions=ps) for t, ps in by_topic.items()]
            return build(cls, timeout=30000, topics=topics)

        resp = await _at_controller(admin, session, ALTER_REASSIGNMENTS, make)
        out: dict[TopicPartition, tuple[str, str] | None] = {}
        for t in resp.responses:
            for p in t.partitions:
                code = int(p.error_code)
                out[(t.name, int(p.partition_index))] = None if code == 0 else (
                    p.error_code.name.upper(), p.error_message or "")
        return out

    return admin.run(work)


def broker_racks(admin: WireAdmin) -> dict[int, str | None]:
    """The live brokers and their `broker.rack` (None when unset), as describeCluster().nodes() gives them."""

    async def work(session: AdminSession) -> dict[int, str | None]:
        nodes, _ = await admin.cluster(session)
        return {n.node_id: n.rack for n in nodes}

    return admin.run(work)


def live_brokers(admin: WireAdmin) -> list[int]:
    """The ids of the brokers the cluster lists now (Kafka's describeCluster().nodes())."""

    async def work(session: AdminSession) -> list[int]:
        nodes, _ = await admin.cluster(session)
        return [n.node_id for n in nodes]

    return admin.run(work)


def brokers_for_generate(live: dict[int, str | None], broker_list: list[int],
                         rack_aware: bool) -> dict[int, str | None]:  # fmt: skip
    """ReassignPartitionsCommand.getBrokerMetadata: the listed brokers the cluster knows (others are dropped, as
    describeCluster() does not return them), with their racks unless --disable-rack-aware; some with a rack and
    some without is an error, since the assignment could not keep replicas apart by rack."""
    chosen = {b: (live[b] if rack_aware else None) for b in broker_list if b in live}
    rackless = sum(1 for r in chosen.values() if r is None)
    if rack_aware and 0 < rackless < len(chosen):
        raise AdminError("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                         "replica assignment without rack information.", "INVALID_REQUEST")  # fmt: skip
    return chosen


def calculate_assignment(current: dict[tuple[str, int], list[int]], racks: dict[int, str | None],
                         rng: random.Random | None = None) -> dict[tuple[str, int], list[int]]:  # fmt: skip
    """ReassignPartitionsCommand.calculateAssignment: per topic, Kafka's replica assignment of as many partitions,
    with the replication factor of its first partition, over `racks` (rack-aware when they have racks)."""
    proposed: dict[tuple[str, int], list[int]] = {}
    for topic in sorted({t for t, _ in current}):
        parts = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, parts[0])])
        try:
            assignment = assign_replicas(racks, len(parts), rf, rng=rng)
        except KafkaError as exc:
            raise AdminError(str(exc), exc.error_code.name.upper()) from None
        for p, replicas in assignment.items():
            proposed[(topic, p)] = replicas
    return proposed
