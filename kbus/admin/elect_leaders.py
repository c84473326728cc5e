"""ElectLeaders sent to the controller (kafka-leader-election.sh's call), retried when the controller moves."""

from __future__ import annotations

from kbus.admin.errors import AdminError
from kbus.admin.wire import AdminSession, WireAdmin, build, nested

ELECT_LEADERS = 43
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
_NOT_CONTROLLER = 41


def elect_leaders(
    admin: WireAdmin, kind: str, partitions: set[tuple[str, int]] | None
) -> dict[tuple[str, int], tuple[str, str] | None]:
    """Per partition: None when elected, else (Kafka's error name, message)."""

    async def work(session: AdminSession) -> dict[tuple[str, int], tuple[str, str] | None]:
        for _ in range(5):
            controller = await admin.controller(session)

            def make(cls: type, version: int) -> object:
                topics = None
                if partitions is not None:
                    by_topic: dict[str, list[int]] = {}
                    for topic, p in sorted(partitions):
                        by_topic.setdefault(topic, []).append(p)
                    tp_cls = nested(cls, "TopicPartitions")
                    topics = [build(tp_cls, topic=t, partitions=ps) for t, ps in by_topic.items()]
                return build(cls, election_type=ELECTION_TYPES[kind], topic_partitions=topics, timeout=30000)

            if kind != "preferred":
                await session.version(controller.host, controller.port, ELECT_LEADERS, (1, 2))
            resp, version = await session.send(controller.host, controller.port, ELECT_LEADERS, (0, 2), make)
            top = int(resp.error_code) if version >= 1 else 0
            if top == _NOT_CONTROLLER:
                continue  # the controller moved: ask the new one
            if top:
                name = resp.error_code.name.upper()
                raise AdminError(f"Leader election failed: {name}", name)
            out: dict[tuple[str, int], tuple[str, str] | None] = {}
            for r in resp.replica_election_results:
                for p in r.partition_result:
                    code = int(p.error_code)
                    out[(r.topic, int(p.partition_id))] = None if code == 0 else (
                        p.error_code.name.upper(), p.error_message or "")
            return out
        raise AdminError("The controller kept moving; try again", "NOT_CONTROLLER")

    return admin.run(work)
