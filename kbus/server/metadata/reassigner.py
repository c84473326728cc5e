"""The controller's half of partition reassignment (kafka-reassign-partitions.sh, AlterPartitionReassignments):
start or cancel reassignments in the topic znodes, complete each once its target replicas are in sync, and follow
the legacy /admin/reassign_partitions znode. The rules are in kbus.zk.reassignment; this applies them to
ZooKeeper with compare-and-set writes, so a concurrent ISR change is never overwritten."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NoNodeError

from kbus.server.metadata.controller import ControllerEpoch, ControllerView
from kbus.zk.client import KafkaZkClient, Watch
from kbus.zk.codec import TopicAssignment
from kbus.zk.reassignment import PartitionAssignment, cancel, completion, start, validate_target

log = logging.getLogger("kbus.server.controller")
TopicPartition = tuple[str, int]


def _partition(assignment: TopicAssignment, p: int) -> PartitionAssignment:
    return PartitionAssignment(list(assignment.partitions[p]), list(assignment.adding_replicas.get(p, [])),
                               list(assignment.removing_replicas.get(p, [])))  # fmt: skip


def _with(assignment: TopicAssignment, p: int, pa: PartitionAssignment) -> TopicAssignment:
    partitions = {**assignment.partitions, p: pa.replicas}
    adding = {k: v for k, v in assignment.adding_replicas.items() if k != p}
    removing = {k: v for k, v in assignment.removing_replicas.items() if k != p}
    if pa.adding:
        adding[p] = pa.adding
    if pa.removing:
        removing[p] = pa.removing
    return TopicAssignment(partitions, assignment.topic_id, adding, removing)


class Reassigner:
    def __init__(self, broker_id: int, client: Callable[[], KafkaZkClient], view: ControllerView) -> None:
        self.broker_id = broker_id
        self._client = client
        self._view = view

    def in_progress(self, partitions: set[TopicPartition] | None = None) -> dict[TopicPartition, PartitionAssignment]:
        snap = self._view.snapshot()
        out = {}
        for name, (assignment, _) in sorted(snap.assignments.items()):
            for p in sorted(assignment.partitions):
                pa = _partition(assignment, p)
                if pa.in_progress and (partitions is None or (name, p) in partitions):
                    out[(name, p)] = pa
        return out

    def alter(self, requests: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str | None]:
        """Start (a replica list) or cancel (None) reassignments: per partition None or Kafka's error name."""
        results: dict[TopicPartition, str | None] = {}
        by_topic: dict[str, dict[int, list[int] | None]] = {}
        for (name, p), target in requests.items():
            by_topic.setdefault(name, {})[p] = target
        for name, wanted in sorted(by_topic.items()):
            for _ in range(5):
                snap = self._view.snapshot()
                found = snap.assignments.get(name)
                if found is None or name in snap.deleting:
                    results.update({(name, p): "UNKNOWN_TOPIC_OR_PARTITION" for p in wanted})
                    break
                assignment, version = found
                updated = assignment
                for p, target in sorted(wanted.items()):
                    if p not in assignment.partitions:
                        results[(name, p)] = "UNKNOWN_TOPIC_OR_PARTITION"
                        continue
                    current = _partition(assignment, p)
                    if target is None:
                        if not current.in_progress:
                            results[(name, p)] = "NO_REASSIGNMENT_IN_PROGRESS"
                            continue
                        updated = _with(updated, p, cancel(current))
                    else:
                        error = validate_target(target, snap.live | set(current.replicas))
                        if error is not None:
                            results[(name, p)] = error
                            continue
                        updated = _with(updated, p, start(current, target))
                    results[(name, p)] = None
                if updated == assignment:
                    break
                try:
                    self._client().set_topic_assignment(name, updated, version)
                except BadVersionError:  # the topic changed under us: read it and decide again
                    self._view.refresh_topic(name)
                    continue
                except NoNodeError:
                    results.update({(name, p): "UNKNOWN_TOPIC_OR_PARTITION" for p in wanted})
                    break
                self._view.refresh_topic(name)
                log.info("Controller %d: reassignment of %s: %s", self.broker_id, name,
                         {p: t for p, t in wanted.items() if results.get((name, p)) is None})  # fmt: skip
                break
            else:
                results.update({(name, p): "REQUEST_TIMED_OUT" for p in wanted if results.get((name, p)) is None})
        return results

    def advance(self, controller_epoch: ControllerEpoch) -> tuple[bool, set[TopicPartition]]:
        """Complete every reassignment whose target replicas are all in sync. Returns (view changed, the
        partitions completed)."""
        epoch, epoch_version = controller_epoch
        zk = self._client()
        snap = self._view.snapshot()
        changed = False
        done: set[TopicPartition] = set()
        for name, (assignment, version) in sorted(snap.assignments.items()):
            if name in snap.deleting or not (assignment.adding_replicas or assignment.removing_replicas):
                continue
            updated = assignment
            for p in sorted(assignment.partitions):
                pa = _partition(assignment, p)
                state = snap.states.get(name, {}).get(p)
                if not pa.in_progress or state is None:
                    continue
                final = completion(pa, state, snap.live, epoch)
                if final is None:
                    continue
                if final is not state:
                    written = zk.update_partition_states([(name, p, final)], epoch_version)[0]
                    if written is None:
                        self._view.request_state_read(name, p)
                        continue
                    self._view.record_state(name, p, written)
                    changed = True
                updated = _with(updated, p, PartitionAssignment(pa.target, [], []))
                done.add((name, p))
                log.info("Controller %d: reassignment of %s-%d complete, replicas %s, leader %d", self.broker_id,
                         name, p, pa.target, final.leader)  # fmt: skip
            if updated != assignment:
                try:
                    zk.set_topic_assignment(name, updated, version)
                except (BadVersionError, NoNodeError):
                    done -= {(name, p) for p in assignment.partitions}
                changed |= self._view.refresh_topic(name)
        return changed, done

    def follow_request_znode(self, watch: Watch, done: set[TopicPartition]) -> bool:
        """/admin/reassign_partitions: start what it asks for (once), drop completed partitions from it."""
        zk = self._client()
        found = zk.get_reassignment_request(watch=watch)
        if found is None:
            return False
        targets, version = found
        running = self.in_progress(set(targets))
        wanted = {tp: t for tp, t in targets.items() if tp not in running and tp not in done}
        # a partition already on its target is done at once
        snap = self._view.snapshot()
        finished = set(done)
        for (name, p), target in list(wanted.items()):
            current = snap.assignments.get(name)
            if current is not None and list(current[0].partitions.get(p, [])) == list(target):
                finished.add((name, p))
                del wanted[(name, p)]
        changed = False
        if wanted:
            results = self.alter(dict(wanted))
            for tp, error in results.items():
                if error is not None:
                    log.warning("Reassignment of %s-%d from /admin/reassign_partitions refused: %s", *tp, error)
                    finished.add(tp)
            changed = True
        if finished & set(targets):
            zk.finish_reassignment_request(finished, version)
        return changed
