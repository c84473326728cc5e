"""Share group (KIP-932) admin calls over the Kafka protocol (kbus's own client, as librdkafka's AdminClient has
none of them): ListGroups v5 with the share type, ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets and
DeleteGroups, each sent to the group's coordinator (FindCoordinator), as Kafka's Admin does."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbus.admin.errors import AdminError
from kbus.admin.wire import AdminSession, Node, WireAdmin, build, nested

FIND_COORDINATOR, LIST_GROUPS, DELETE_GROUPS = 10, 16, 42
SHARE_GROUP_DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 77, 90, 91, 92


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class ShareGroupInfo:
    group_id: str
    state: str
    coordinator: Node
    group_epoch: int
    assignment_epoch: int
    members: list[ShareMember] = field(default_factory=list)


@dataclass(frozen=True)
class ShareOffset:
    topic: str
    partition: int
    start_offset: int  # -1: no state (never fetched, or its offsets deleted)
    leader_epoch: int
    lag: int


def _error(code: int, message: str | None, what: str) -> AdminError:
    from kio.schema.errors import ErrorCode

    name = ErrorCode(code).name.upper()
    return AdminError(message or f"{what}: {name}", name)


class ShareGroupAdmin:
    def __init__(self, wire: WireAdmin) -> None:
        self.wire = wire

    async def _coordinator(self, s: AdminSession, group: str) -> Node:
        nodes, _ = await self.wire.cluster(s)
        node = nodes[0]
        resp, _ = await s.send(node.host, node.port, FIND_COORDINATOR, (1, 3),
                               lambda cls, v: build(cls, key=group, key_type=0))
        if resp.error_code != 0:
            raise _error(int(resp.error_code), resp.error_message, f"FindCoordinator for {group}")
        return Node(int(resp.node_id), resp.host, int(resp.port))

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group, broker by broker."""

        async def work(s: AdminSession) -> list[tuple[str, str]]:
            nodes, _ = await self.wire.cluster(s)
            out: list[tuple[str, str]] = []
            for n in nodes:
                resp, _ = await s.send(n.host, n.port, LIST_GROUPS, (5, 5),
                                       lambda cls, v: build(cls, states_filter=[], types_filter=["share"]))
                if resp.error_code != 0:
                    raise _error(int(resp.error_code), None, "ListGroups")
                out += [(g.group_id, g.group_state) for g in resp.groups]
            return out

        return self.wire.run(work)

    def describe(self, groups: list[str]) -> list[ShareGroupInfo]:
        async def work(s: AdminSession) -> list[ShareGroupInfo]:
            out = []
            for group in groups:
                node = await self._coordinator(s, group)
                ids = [group]
                resp, _ = await s.send(node.host, node.port, SHARE_GROUP_DESCRIBE, (1, 1), lambda cls, v: build(
                    cls, group_ids=ids, include_authorized_operations=False))  # noqa: B023 (awaited at once)
                g = resp.groups[0]
                if g.error_code != 0:
                    raise _error(int(g.error_code), g.error_message, f"Describing {group}")
                members = [ShareMember(m.member_id, m.client_id, m.client_host, int(m.member_epoch), [
                    (tp.topic_name, int(p)) for tp in m.assignment.topic_partitions for p in tp.partitions])
                    for m in g.members]
                out.append(ShareGroupInfo(group, g.group_state, node, int(g.group_epoch), int(g.assignment_epoch),
                                          members))
            return out

        return self.wire.run(work)

    def offsets(self, group: str, topics: dict[str, list[int]] | None = None) -> list[ShareOffset]:
        """The start offsets of the group's share-partitions (all it was ever assigned when `topics` is None)."""

        async def work(s: AdminSession) -> list[ShareOffset]:
            node = await self._coordinator(s, group)

            def make(cls: type, v: int) -> object:
                wanted = None if topics is None else [
                    build(nested(cls, "DescribeShareGroupOffsetsRequestTopic"), topic_name=t, partitions=ps)
                    for t, ps in topics.items()]
                return build(cls, groups=[build(nested(cls, "DescribeShareGroupOffsetsRequestGroup"), group_id=group,
                                                 topics=wanted)])

            resp, version = await s.send(node.host, node.port, DESCRIBE_OFFSETS, (0, 1), make)
            g = resp.groups[0]
            if g.error_code != 0:
                raise _error(int(g.error_code), g.error_message, f"Describing the offsets of {group}")
            return sorted((ShareOffset(t.topic_name, int(p.partition_index), int(p.start_offset),
                                       int(p.leader_epoch), int(p.lag) if version >= 1 else -1)
                           for t in g.topics for p in t.partitions), key=lambda o: (o.topic, o.partition))

        return self.wire.run(work)

    def alter_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], str | None]:
        async def work(s: AdminSession) -> dict[tuple[str, int], str | None]:
            node = await self._coordinator(s, group)
            by_topic: dict[str, list[tuple[int, int]]] = {}
            for (t, p), o in sorted(offsets.items()):
                by_topic.setdefault(t, []).append((p, o))

            def make(cls: type, v: int) -> object:
                topic_cls = nested(cls, "AlterShareGroupOffsetsRequestTopic")
                partition_cls = nested(cls, "AlterShareGroupOffsetsRequestPartition")
                return build(cls, group_id=group, topics=[
                    build(topic_cls, topic_name=t, partitions=[
                        build(partition_cls, partition_index=p, start_offset=o) for p, o in ps])
                    for t, ps in by_topic.items()])

            resp, _ = await s.send(node.host, node.port, ALTER_OFFSETS, (0, 0), make)
            if resp.error_code != 0:
                raise _error(int(resp.error_code), resp.error_message, f"Altering the offsets of {group}")
            return {(t.topic_name, int(p.partition_index)):
                    None if p.error_code == 0 else _error(int(p.error_code), p.error_message, "").name
                    for t in resp.responses for p in t.partitions}

        return self.wire.run(work)

    def delete_offsets(self, group: str, topics: list[str]) -> dict[str, str | None]:
        async def work(s: AdminSession) -> dict[str, str | None]:
            node = await self._coordinator(s, group)
            resp, _ = await s.send(node.host, node.port, DELETE_OFFSETS, (0, 0), lambda cls, v: build(
                cls, group_id=group, topics=[build(nested(cls, "DeleteShareGroupOffsetsRequestTopic"), topic_name=t)
                                             for t in topics]))
            if resp.error_code != 0:
                raise _error(int(resp.error_code), resp.error_message, f"Deleting the offsets of {group}")
            return {t.topic_name: None if t.error_code == 0 else _error(int(t.error_code), t.error_message, "").name
                    for t in resp.responses}

        return self.wire.run(work)

    def delete(self, groups: list[str]) -> dict[str, str | None]:
        """Each group: None when deleted, else Kafka's error name."""

        async def work(s: AdminSession) -> dict[str, str | None]:
            out: dict[str, str | None] = {}
            for group in groups:
                node = await self._coordinator(s, group)
                resp, _ = await s.send(node.host, node.port, DELETE_GROUPS, (0, 2),
                                       lambda cls, v: build(cls, groups_names=[group]))  # noqa: B023
                code = int(resp.results[0].error_code)
                out[group] = None if code == 0 else _error(code, None, "").name
            return out

        return self.wire.run(work)
