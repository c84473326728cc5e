"""DescribeLogDirs against every broker (or the chosen ones): what kafka-log-dirs.sh --describe asks."""

from __future__ import annotations

from dataclasses import dataclass

from kbus.admin.errors import AdminError
from kbus.admin.wire import AdminSession, WireAdmin, build, nested

DESCRIBE_LOG_DIRS = 35
# Kafka's exception class per error code, as kafka-log-dirs.sh prints it in "error"
ERROR_CLASSES = {
    56: "org.apache.kafka.common.errors.KafkaStorageException",
    29: "org.apache.kafka.common.errors.ClusterAuthorizationException",
}


@dataclass(frozen=True)
class ReplicaInfo:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    log_dir: str
    error: str | None  # Kafka's exception class name
    replicas: list[ReplicaInfo]
    total_bytes: int
    usable_bytes: int


def describe_log_dirs(
    admin: WireAdmin, broker_ids: set[int] | None
) -> tuple[list[int], dict[int, list[LogDirDescription]]]:
    """(the cluster's broker ids, {broker id: its log dirs}) for `broker_ids` (None: every broker). Unknown ids
    raise AdminError before anything is asked."""

    async def work(session: AdminSession) -> tuple[list[int], dict[int, list[LogDirDescription]]]:
        nodes, _ = await admin.cluster(session)
        cluster = sorted(n.node_id for n in nodes)
        if broker_ids is not None:
            missing = sorted(broker_ids - set(cluster))
            if missing:
                raise AdminError(
                    f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, missing))}. "
                    f"Current existent brokers: {','.join(map(str, cluster))}",
                    "INVALID_REQUEST",
                )
        out: dict[int, list[LogDirDescription]] = {}
        for node in nodes:
            if broker_ids is not None and node.node_id not in broker_ids:
                continue
            resp, version = await session.send(node.host, node.port, DESCRIBE_LOG_DIRS, (1, 4),
                                               lambda cls, v: build(cls, topics=None))  # fmt: skip
            if version >= 3 and int(resp.error_code):
                raise AdminError(f"DescribeLogDirs failed on broker {node.node_id}: {resp.error_code.name}",
                                 resp.error_code.name.upper())  # fmt: skip
            dirs = []
            for r in resp.results:
                replicas = [
                    ReplicaInfo(t.name, int(p.partition_index), int(p.partition_size), int(p.offset_lag),
                                bool(p.is_future_key))
                    for t in r.topics
                    for p in t.partitions
                ]  # fmt: skip
                code = int(r.error_code)
                error = None if code == 0 else ERROR_CLASSES.get(code, r.error_code.name.upper())
                space = (int(r.total_bytes), int(r.usable_bytes)) if version >= 4 else (-1, -1)
                dirs.append(LogDirDescription(r.log_dir, error, replicas, *space))
            out[node.node_id] = dirs
        return cluster, out

    return admin.run(work)


ALTER_REPLICA_LOG_DIRS = 34
TopicPartitionReplica = tuple[str, int, int]  # Kafka's TopicPartitionReplica: topic, partition, broker id


def alter_replica_log_dirs(
    admin: WireAdmin, moves: dict[TopicPartitionReplica, str]
) -> dict[TopicPartitionReplica, str | None]:
    """Admin.alterReplicaLogDirs: each broker is asked to move its replicas; per replica None or Kafka's error
    name (REPLICA_NOT_AVAILABLE while the replica has not reached that broker yet)."""

    async def work(session: AdminSession) -> dict[TopicPartitionReplica, str | None]:
        nodes, _ = await admin.cluster(session)
        by_id = {n.node_id: n for n in nodes}
        out: dict[TopicPartitionReplica, str | None] = {}
        for broker in sorted({b for _, _, b in moves}):
            mine = {(t, p): d for (t, p, b), d in moves.items() if b == broker}
            node = by_id.get(broker)
            if node is None:
                out.update({(t, p, broker): "BROKER_NOT_AVAILABLE" for t, p in mine})
                continue

            def make(cls: type, version: int, mine: dict[tuple[str, int], str] = mine) -> object:
                dirs: dict[str, dict[str, list[int]]] = {}
                for (t, p), d in sorted(mine.items()):
                    dirs.setdefault(d, {}).setdefault(t, []).append(p)
                return build(cls, dirs=[
                    build(nested(cls, "AlterReplicaLogDir"), path=d, topics=[
                        build(nested(cls, "AlterReplicaLogDirTopic"), name=t, partitions=ps) for t, ps in ts.items()])
                    for d, ts in dirs.items()])  # fmt: skip

            resp, _ = await session.send(node.host, node.port, ALTER_REPLICA_LOG_DIRS, (1, 2), make)
            for t in resp.results:
                for p in t.partitions:
                    code = int(p.error_code)
                    out[(t.topic_name, int(p.partition_index), broker)] = (
                        None if code == 0 else p.error_code.name.upper()
                    )
        return out

    return admin.run(work)


def describe_replica_log_dirs(
    admin: WireAdmin, replicas: set[TopicPartitionReplica]
) -> dict[TopicPartitionReplica, tuple[str | None, str | None]]:
    """Admin.describeReplicaLogDirs, built on DescribeLogDirs as Kafka's is: per replica (its current dir, the
    dir it is being moved to), None where there is none."""
    _, by_broker = describe_log_dirs(admin, {b for _, _, b in replicas})
    out: dict[TopicPartitionReplica, tuple[str | None, str | None]] = dict.fromkeys(replicas, (None, None))
    for broker, dirs in by_broker.items():
        for d in dirs:
            for r in d.replicas:
                key = (r.topic, r.partition, broker)
                if key in out:
                    current, future = out[key]
                    out[key] = (current, d.log_dir) if r.is_future else (d.log_dir, future)
    return out


__all__ = [
    "LogDirDescription",
    "ReplicaInfo",
    "alter_replica_log_dirs",
    "describe_log_dirs",
    "describe_replica_log_dirs",
    "nested",
]
