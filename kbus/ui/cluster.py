"""What the console's pages show, read from the cluster through kbus.admin: plain dataclasses, no HTML."""

from __future__ import annotations

from dataclasses import dataclass

from kbus.admin.errors import AdminError
from kbus.admin.kafka import EARLIEST, LATEST, KafkaAdmin
from kbus.admin.log_dirs import describe_log_dirs
from kbus.admin.models import ConfigEntry, GroupDescription, PartitionDescription, TopicDescription
from kbus.admin.reassign import broker_racks, list_reassignments
from kbus.admin.wire import METADATA_KEY, AdminSession, WireAdmin, build, nested


@dataclass(frozen=True)
class BrokerRow:
    id: int
    host: str | None  # None: a broker named in replica lists that is not registered (down)
    port: int | None
    controller: bool
    up: bool
    leaders: int
    replicas: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class Reassignment:
    topic: str
    partition: int
    replicas: list[int]  # the full set while moving: the target plus the ones being removed
    adding: list[int]
    removing: list[int]
    isr: list[int]

    @property
    def caught_up(self) -> int:
        """Replicas being added that are already in sync: the move completes when all are."""
        return sum(1 for b in self.adding if b in self.isr)


@dataclass(frozen=True)
class Overview:
    cluster_id: str | None
    controller_id: int | None
    brokers: list[BrokerRow]
    topic_count: int
    partition_count: int
    under_replicated: list[PartitionProblem]
    offline: list[PartitionProblem]  # no leader: nothing can be produced to or fetched from them
    reassignments: list[Reassignment] | None  # None: the controller would not say


def overview(admin: KafkaAdmin, wire: WireAdmin) -> Overview:
    cluster = admin.describe_cluster()
    topics = admin.describe_all_partitions()
    try:
        racks = broker_racks(wire)
    except (AdminError, OSError):
        racks = {}
    isr = {(t.name, p.partition): p.isr for t in topics for p in t.partitions}
    try:
        moving: list[Reassignment] | None = [
            Reassignment(t, p, o.replicas, o.adding, o.removing, isr.get((t, p), []))
            for (t, p), o in sorted(list_reassignments(wire).items())
        ]
    except (AdminError, OSError):
        moving = None
    live = {b.id: b for b in cluster.brokers}
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    under: list[PartitionProblem] = []
    offline: list[PartitionProblem] = []
    partitions = 0
    for t in topics:
        for p in t.partitions:
            partitions += 1
            if p.leader is not None:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
            problem = PartitionProblem(t.name, p.partition, p.leader, p.replicas, p.isr)
            # Kafka's UnderReplicatedPartitions: fewer in-sync replicas than assigned ones
            if len(p.isr) < len(p.replicas):
                under.append(problem)
            if p.leader is None:
                offline.append(problem)
    # Metadata lists only registered brokers; one named in a replica list but absent is down.
    ids = sorted(set(live) | set(replicas))
    rows = [
        BrokerRow(
            id=i,
            host=live[i].host if i in live else None,
            port=live[i].port if i in live else None,
            controller=i == cluster.controller_id,
            up=i in live,
            leaders=leaders.get(i, 0),
            replicas=replicas.get(i, 0),
            rack=racks.get(i),
        )
        for i in ids
    ]
    return Overview(cluster.cluster_id, cluster.controller_id, rows, len(topics), partitions, under, offline, moving)


def replica_sizes(wire: WireAdmin) -> dict[tuple[str, int, int], int] | None:
    """Bytes on disk of every replica, (topic, partition, broker id) -> size, from DescribeLogDirs (needs Describe
    on the cluster); None when the brokers would not say."""
    try:
        _, dirs = describe_log_dirs(wire, None)
    except (AdminError, OSError):
        return None
    return {(r.topic, r.partition, broker): r.size
            for broker, ds in dirs.items() for d in ds for r in d.replicas if not r.is_future}


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    internal: bool
    size: int | None  # bytes on disk, every replica counted


def topic_rows(admin: KafkaAdmin, wire: WireAdmin) -> list[TopicRow]:
    sizes = replica_sizes(wire)
    totals: dict[str, int] = {}
    for (topic, _, _), size in (sizes or {}).items():
        totals[topic] = totals.get(topic, 0) + size
    return [
        TopicRow(
            t.name,
            len(t.partitions),
            t.replication_factor,
            sum(1 for p in t.partitions if len(p.isr) < len(p.replicas)),
            t.is_internal,
            totals.get(t.name, 0) if sizes is not None else None,
        )
        for t in admin.describe_all_partitions()
    ]


@dataclass(frozen=True)
class PartitionRow:
    partition: PartitionDescription
    log_start: int | None
    log_end: int | None
    size: int | None  # bytes of the leader's replica

    @property
    def messages(self) -> int | None:
        if self.log_start is None or self.log_end is None:
            return None
        return self.log_end - self.log_start


@dataclass(frozen=True)
class TopicPage:
    topic: TopicDescription
    partitions: list[PartitionRow]
    configs: list[ConfigEntry]


def led_on_every_broker(wire: WireAdmin, name: str) -> bool:
    """Whether every broker's metadata has topic `name` with a leader for each partition. A page read after a
    create goes to whichever broker the client picks, and the controller's UpdateMetadata reaches them one by one."""

    async def work(session: AdminSession) -> bool:
        nodes, _ = await wire.cluster(session)

        def make(cls: type, version: int) -> object:
            return build(cls, topics=[build(nested(cls, "MetadataRequestTopic"), name=name)],
                         allow_auto_topic_creation=False)

        for node in nodes:
            resp, _ = await session.send(node.host, node.port, METADATA_KEY, (1, 12), make)
            if not all(int(t.error_code) == 0 and t.partitions and all(int(p.leader_id) >= 0 for p in t.partitions)
                       for t in resp.topics):
                return False
        return True

    return wire.run(work)


def topic_page(admin: KafkaAdmin, wire: WireAdmin, name: str) -> TopicPage:
    topic = admin.describe_topics([name])[0]
    tps = [(name, p.partition) for p in topic.partitions]
    starts = {o.partition: o.offset for o in admin.list_offsets(tps, EARLIEST)}
    ends = {o.partition: o.offset for o in admin.list_offsets(tps, LATEST)}
    sizes = replica_sizes(wire) or {}
    rows = [
        PartitionRow(p, starts.get(p.partition), ends.get(p.partition),
                     sizes.get((name, p.partition, p.leader)) if p.leader is not None else None)
        for p in topic.partitions
    ]
    return TopicPage(topic, rows, admin.describe_topic_configs(name))


@dataclass(frozen=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None  # None: nothing committed
    log_end: int | None
    member: str | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


def group_lag(admin: KafkaAdmin, group_id: str, description: GroupDescription | None = None) -> list[LagRow]:
    """One row per partition the group has committed offsets for or is assigned, as kafka-consumer-groups prints."""
    committed = {(o.topic, o.partition): o.offset for o in admin.list_group_offsets(group_id)}
    owner: dict[tuple[str, int], str] = {}
    if description is not None:
        for m in description.members:
            for tp in m.assignment:
                owner[tp] = m.client_id or m.member_id
    tps = sorted(set(committed) | set(owner))
    ends = {(o.topic, o.partition): o.offset for o in admin.list_offsets(tps, LATEST)} if tps else {}
    return [
        LagRow(
            t,
            p,
            committed[(t, p)] if committed.get((t, p), -1) >= 0 else None,
            ends.get((t, p)),
            owner.get((t, p)),
        )
        for t, p in tps
    ]


@dataclass(frozen=True)
class ResetRow:
    topic: str
    partition: int
    current: int | None
    new: int


def plan_reset(admin: KafkaAdmin, group_id: str, topic: str, strategy: str, value: str) -> list[ResetRow]:
    """kafka-consumer-groups --reset-offsets for one topic: to-earliest, to-latest, to-offset N, shift-by N,
    to-datetime (ms since the epoch); the result is clamped to each partition's log range, as Kafka does."""
    partitions = admin.partitions_of(topic)
    tps = [(topic, p) for p in partitions]
    starts = {o.partition: o.offset for o in admin.list_offsets(tps, EARLIEST)}
    ends = {o.partition: o.offset for o in admin.list_offsets(tps, LATEST)}
    current = {o.partition: o.offset for o in admin.list_group_offsets(group_id) if o.topic == topic}
    if strategy == "to-datetime":
        at = {o.partition: o.offset for o in admin.list_offsets(tps, _int(value, "timestamp"))}
    rows: list[ResetRow] = []
    for p in partitions:
        cur = current.get(p, -1)
        if strategy == "to-earliest":
            new = starts[p]
        elif strategy == "to-latest":
            new = ends[p]
        elif strategy == "to-offset":
            new = _int(value, "offset")
        elif strategy == "shift-by":
            new = (cur if cur >= 0 else ends[p]) + _int(value, "shift")
        elif strategy == "to-datetime":
            new = at[p] if at[p] >= 0 else ends[p]
        else:
            raise ValueError(f"unknown reset strategy {strategy!r}")
        rows.append(ResetRow(topic, p, cur if cur >= 0 else None, min(max(new, starts[p]), ends[p])))
    return rows


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {text!r}") from None
