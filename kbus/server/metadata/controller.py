"""The controller (Kafka 2.x's KafkaController over ZooKeeper): the broker holding /controller decides partition
states for new partitions, elects leaders from the ISR when brokers die, deletes topics and moves leadership back
to preferred replicas. Every broker also runs the two leadership moves it makes for itself: winning the
/controller election and its own controlled shutdown.

The controller reads the cluster through a `ControllerView` (the ZooKeeper store's in-memory view, refreshed by its
event thread, which is also the only thread calling in here) and writes through `KafkaZkClient`, every write
compare-and-set against the controller epoch or the znode version it decided on. The decisions themselves are the
pure functions of `kbus.zk.election`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from kazoo.exceptions import BadVersionError, NoNodeError

from kbus.common.cluster import BrokerInfo
from kbus.zk import paths
from kbus.zk.client import KafkaZkClient, Watch
from kbus.zk.codec import NO_LEADER, LeaderAndIsr, TopicAssignment
from kbus.zk.election import imbalanced_brokers, initial_state, preferred_leader, reconcile, requested_election, settled

log = logging.getLogger("kbus.server.metadata.zk_store")

ControllerEpoch = tuple[int, int]  # (epoch, znode version of /controller_epoch)
TopicPartition = tuple[str, int]
# (broker, the replicas assigned to it) -> those in its offline log dirs, None when it could not be asked
OfflineReplicaProbe = Callable[[BrokerInfo, Collection[TopicPartition]], set[TopicPartition] | None]


@dataclass(frozen=True)
class ClusterSnapshot:
    """A consistent copy of the view, taken under the view's lock."""

    live: frozenset[int]
    assignments: dict[str, tuple[TopicAssignment, int]]
    states: dict[str, dict[int, LeaderAndIsr]]
    configs: dict[str, dict[str, str]]
    deleting: frozenset[str]


class ControllerView(Protocol):
    """What the controller needs from the metadata view it acts on."""

    def snapshot(self) -> ClusterSnapshot: ...
    def brokers(self) -> list[BrokerInfo]: ...
    def state_of(self, topic: str, partition: int) -> LeaderAndIsr | None: ...
    def live_broker_ids(self) -> set[int]: ...
    def record_state(self, topic: str, partition: int, state: LeaderAndIsr) -> None: ...
    def forget_topic(self, topic: str) -> None: ...
    def refresh_state(self, topic: str, partition: int) -> bool: ...
    def refresh_topic(self, topic: str) -> bool: ...
    def refresh_deletions(self) -> bool: ...
    def request_state_read(self, topic: str, partition: int) -> None: ...


@dataclass(frozen=True)
class ControllerSettings:
    delete_topic_enable: bool = True
    unclean_leader_election_enable: bool = False
    leader_imbalance_per_broker_percentage: int = 10


def elect_controller(
    zk: KafkaZkClient, broker_id: int, held: ControllerEpoch | None, watch: Watch
) -> tuple[int, ControllerEpoch | None]:
    """Who holds /controller now, trying to take it when nobody does; with our epoch when it is us."""
    controller = zk.get_controller_id(watch=watch)
    epoch = held
    # losing the race to a broker that is itself gone again would leave nobody trying: loop until some
    # broker holds /controller
    for _ in range(10):
        if controller != NO_LEADER:
            break
        won = zk.try_become_controller(broker_id)
        if won is not None:
            epoch, controller = won, broker_id
            log.info("Broker %d elected controller (epoch %d)", broker_id, won[0])
        # re-arm the watch on /controller, and if we lost, see who won
        current = zk.get_controller_id(watch=watch)
        if won is None:
            controller = current
    if controller != broker_id:
        return controller, None
    if epoch is None:
        # /controller says us, but we hold no epoch: only adopt it if this session owns the node
        with contextlib.suppress(NoNodeError):
            _, stat = zk.zk.get(paths.CONTROLLER)
            if stat.ephemeralOwner == zk.session_id:
                epoch = zk.get_controller_epoch()
    return controller, epoch


class Controller:
    def __init__(
        self,
        broker_id: int,
        client: Callable[[], KafkaZkClient],
        view: ControllerView,
        settings: ControllerSettings,
    ) -> None:
        self.broker_id = broker_id
        self._client = client
        self._view = view
        self._settings = settings
        # Kafka's controllerContext.replicasOnOfflineDirs: per live broker, its replicas in failed log dirs. They
        # count as dead replicas (never elected, out of the ISR) until the broker re-registers.
        self.offline_replicas: dict[int, frozenset[TopicPartition]] = {}

    def set_unclean_default(self, enabled: bool) -> None:
        """unclean.leader.election.enable as a dynamic broker config (kafka-configs --entity-type brokers)."""
        self._settings = dataclasses.replace(self._settings, unclean_leader_election_enable=enabled)

    # ---- the active controller's rules ----------------------------------------------------------------------

    def handle_log_dir_events(self, probe: OfflineReplicaProbe | None, watch: Watch) -> bool:
        """/log_dir_event_notification (Kafka's LogDirEventNotification): for each broker that reported a failed
        log dir, learn which of its replicas are offline; the next act() moves their leadership and ISR
        membership. The notifications are deleted once read. Returns whether anything changed."""
        zk = self._client()
        events = zk.get_log_dir_events(watch=watch)
        if not events:
            return False
        broker_ids = sorted({b for _, b in events if b is not None})
        snap = self._view.snapshot()
        brokers = {b.broker_id: b for b in self._view.brokers()}
        changed = False
        for broker_id in broker_ids:
            info = brokers.get(broker_id)
            if info is None or broker_id not in snap.live or probe is None:
                continue  # a dead broker's replicas are all offline anyway
            assigned = [
                (name, p)
                for name, (assignment, _) in snap.assignments.items()
                for p, replicas in assignment.partitions.items()
                if broker_id in replicas
            ]
            offline = probe(info, assigned)
            if offline is None:
                continue
            log.info("Controller %d: broker %d reported a log dir failure; offline replicas: %s", self.broker_id,
                     broker_id, ",".join(f"{t}-{p}" for t, p in sorted(offline)) or "none")  # fmt: skip
            if self.offline_replicas.get(broker_id, frozenset()) != offline:
                self.offline_replicas[broker_id] = frozenset(offline)
                changed = True
        zk.delete_log_dir_events([name for name, _ in events])
        return changed

    def _live_for(self, live: frozenset[int], topic: str, partition: int) -> frozenset[int]:
        """The brokers whose replica of the partition is online (Kafka's isReplicaOnline)."""
        if not self.offline_replicas:
            return live
        out = [b for b, tps in self.offline_replicas.items() if (topic, partition) in tps]
        return live.difference(out) if out else live

    def _forget_departed(self, live: frozenset[int]) -> None:
        # a broker that went away comes back with its dirs checked afresh (and reports again if still failed)
        for b in [b for b in self.offline_replicas if b not in live]:
            del self.offline_replicas[b]

    def act(self, controller_epoch: ControllerEpoch) -> bool:
        """Delete marked topics, give new partitions their first state, re-elect leaders whose broker died.
        Returns whether the view changed."""
        zk = self._client()
        epoch, epoch_version = controller_epoch
        delete_enabled = self._settings.delete_topic_enable
        snap = self._view.snapshot()
        self._forget_departed(snap.live)
        changed = False
        topics = dict(snap.assignments)
        deleting = snap.deleting if delete_enabled else frozenset()
        for name in sorted(deleting):
            log.info("Controller %d deleting topic %s", self.broker_id, name)
            zk.delete_topic_znodes(name)
            self._view.forget_topic(name)
            topics.pop(name, None)
            changed = True
        if not delete_enabled and snap.deleting:
            # Kafka's controller removes deletion requests it will not honour
            for name in sorted(snap.deleting):
                log.warning("Ignoring deletion of topic %s: delete.topic.enable=false", name)
                zk.remove_topic_deletion_marker(name)
            changed = True
        if snap.deleting:
            self._view.refresh_deletions()
        creations: list[tuple[str, int, LeaderAndIsr]] = []
        updates: list[tuple[str, int, LeaderAndIsr]] = []
        # Most partitions need nothing: election.settled first (act runs on every event batch and walks every
        # partition: 20 ms at 11,111 partitions without this, bench/notes/spikes-2026-11-27-s15.md). Only without
        # replicas in failed log dirs, where a partition's live brokers are not the live brokers
        settled_live = snap.live if not self.offline_replicas else None
        previous: dict[tuple[str, int], LeaderAndIsr] = {}
        for name, (assignment, version) in sorted(topics.items()):
            if assignment.topic_id is None:
                # topics written by old tools carry no id; the controller gives them one (as Kafka 2.8 does)
                with contextlib.suppress(BadVersionError, NoNodeError):
                    with_id = TopicAssignment(
                        assignment.partitions, uuid.uuid4(), assignment.adding_replicas, assignment.removing_replicas
                    )
                    zk.set_topic_assignment(name, with_id, version)
                    changed |= self._view.refresh_topic(name)
            unclean = snap.configs.get(name, {}).get("unclean.leader.election.enable")
            default_unclean = self._settings.unclean_leader_election_enable
            allow_unclean = default_unclean if unclean is None else unclean.lower() == "true"
            states = snap.states.get(name, {})
            for partition, replicas in sorted(assignment.partitions.items()):
                current = states.get(partition)
                if settled_live is not None and current is not None and settled(current, settled_live):
                    continue  # a live leader and a live ISR: reconcile() would leave it as it is
                live = self._live_for(snap.live, name, partition)
                if current is None:
                    fresh = initial_state(replicas, live, epoch)
                    if fresh is not None:
                        creations.append((name, partition, fresh))
                else:
                    proposed = reconcile(replicas, current, live, epoch, allow_unclean)
                    if proposed is not None:
                        updates.append((name, partition, proposed))
                        previous[(name, partition)] = current
        # all writes pipelined: a broker death touching hundreds of partitions costs about one round trip
        created = zk.create_partition_states(creations, epoch_version) if creations else []
        updated = zk.update_partition_states(updates, epoch_version) if updates else []
        for (name, partition, _), written in zip(creations + updates, created + updated, strict=True):
            if written is None:
                # somebody else wrote first (a leader changing its ISR): read it and decide again
                changed |= self._view.refresh_state(name, partition)
                self._view.request_state_read(name, partition)
                continue
            before = previous.get((name, partition))
            if before is not None and before.leader != written.leader:
                log.info("Controller %d: %s-%d leader %d -> %d (leader epoch %d, isr %s)", self.broker_id, name,
                         partition, before.leader, written.leader, written.leader_epoch, list(written.isr))  # fmt: skip
            self._view.record_state(name, partition, written)
            changed = True
        return changed

    def run_preferred_replica_election(self, controller_epoch: ControllerEpoch, watch: Watch) -> bool:
        """/admin/preferred_replica_election (kafka-preferred-replica-election.sh --zookeeper): move the listed
        partitions to their preferred replica, then remove the request."""
        zk = self._client()
        request = zk.get_preferred_replica_election(watch=watch)
        if request is None:
            return False
        changed = self.elect_preferred_leaders(controller_epoch, only_imbalanced=False, partitions=set(request))
        zk.delete_preferred_replica_election()
        return changed

    def elect_preferred_leaders(
        self, controller_epoch: ControllerEpoch, only_imbalanced: bool, partitions: set[tuple[str, int]] | None = None
    ) -> bool:
        zk = self._client()
        epoch, epoch_version = controller_epoch
        snap = self._view.snapshot()
        replicas: dict[tuple[str, int], Sequence[int]] = {
            (name, p): r
            for name, (assignment, _) in snap.assignments.items()
            if name not in snap.deleting
            for p, r in assignment.partitions.items()
        }
        states = {(name, p): st for name, parts in snap.states.items() for p, st in parts.items()}
        wanted = set(replicas) if partitions is None else set(replicas) & partitions
        if only_imbalanced:
            lagging = imbalanced_brokers(replicas, {tp: st.leader for tp, st in states.items()},
                                         self._settings.leader_imbalance_per_broker_percentage)  # fmt: skip
            wanted = {tp for tp in wanted if replicas[tp] and replicas[tp][0] in lagging}
        changed = False
        moves: list[tuple[str, int, LeaderAndIsr]] = []
        for name, partition in sorted(wanted):
            current = states.get((name, partition))
            live = self._live_for(snap.live, name, partition)
            proposed = current and preferred_leader(replicas[(name, partition)], current, live, epoch)
            if proposed:
                moves.append((name, partition, proposed))
        written_all = zk.update_partition_states(moves, epoch_version) if moves else []
        for (name, partition, _), written in zip(moves, written_all, strict=True):
            if written is None:
                self._view.request_state_read(name, partition)
                continue
            log.info("Controller %d: preferred replica %d leads %s-%d again", self.broker_id, written.leader,
                     name, partition)  # fmt: skip
            self._view.record_state(name, partition, written)
            changed = True
        return changed

    def elect_leaders(
        self, controller_epoch: ControllerEpoch, kind: str, partitions: set[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str | None]:
        """ElectLeaders (kafka-leader-election.sh): per partition None when a new leader was written, else the
        Kafka error name saying why not. `partitions` None means every partition."""
        zk = self._client()
        epoch, epoch_version = controller_epoch
        snap = self._view.snapshot()
        replicas: dict[tuple[str, int], Sequence[int]] = {
            (name, p): r
            for name, (assignment, _) in snap.assignments.items()
            if name not in snap.deleting
            for p, r in assignment.partitions.items()
        }
        wanted = set(replicas) if partitions is None else partitions
        results: dict[tuple[str, int], str | None] = {}
        moves: list[tuple[str, int, LeaderAndIsr]] = []
        for tp in sorted(wanted):
            current = snap.states.get(tp[0], {}).get(tp[1])
            if tp not in replicas:
                results[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif current is None:
                results[tp] = "LEADER_NOT_AVAILABLE"
            else:
                outcome = requested_election(kind, replicas[tp], current, self._live_for(snap.live, *tp), epoch)
                if isinstance(outcome, str):
                    results[tp] = outcome
                else:
                    moves.append((tp[0], tp[1], outcome))
        written_all = zk.update_partition_states(moves, epoch_version) if moves else []
        for (name, partition, _), written in zip(moves, written_all, strict=True):
            if written is None:  # a leader changed its ISR meanwhile: the client may simply ask again
                self._view.request_state_read(name, partition)
                results[(name, partition)] = "REQUEST_TIMED_OUT"
                continue
            log.info("Controller %d: %s election made %d leader of %s-%d", self.broker_id, kind, written.leader,
                     name, partition)  # fmt: skip
            self._view.record_state(name, partition, written)
            results[(name, partition)] = None
        return results

    # ---- this broker's own leadership moves ------------------------------------------------------------------

    def controlled_shutdown(self) -> tuple[list[tuple[str, int]], bool]:
        """Before a clean stop: hand every partition this broker leads to another live in-sync replica and leave
        every ISR (Kafka's controlled shutdown), so clients move on before the broker goes away. Returns the
        partitions nobody could take over (no other live in-sync replica; they go offline when the session ends)
        and whether there was anything to do. Writes are compare-and-set per partition, so a concurrent
        controller decision is never overwritten."""
        zk = self._client()
        me = self.broker_id
        stranded: list[tuple[str, int]] = []
        snap = self._view.snapshot()
        work = [
            (name, partition, assignment.partitions[partition])
            for name, (assignment, _) in sorted(snap.assignments.items())
            for partition in sorted(assignment.partitions)
            if me in assignment.partitions[partition]
        ]
        for name, partition, replicas in work:
            for _ in range(5):
                current = self._view.state_of(name, partition)
                live = self._view.live_broker_ids()
                if current is None or (current.leader != me and me not in current.isr):
                    break
                others = [b for b in replicas if b != me and b in live and b in current.isr]
                if not others:
                    stranded.append((name, partition))
                    break
                leader = others[0] if current.leader == me else current.leader
                isr = tuple(b for b in current.isr if b != me)
                proposed = LeaderAndIsr(leader, current.leader_epoch + 1, isr, current.controller_epoch,
                                        current.zk_version)  # fmt: skip
                written = zk.update_partition_state(name, partition, proposed)
                if written is not None:
                    self._view.record_state(name, partition, written)
                    break
                self._view.refresh_state(name, partition)
        log.info("Controlled shutdown of broker %d: %d partition(s) left without another in-sync replica",
                 me, len(stranded))  # fmt: skip
        return stranded, bool(work)
