"""ZkClusterView: the cluster metadata a broker reads from ZooKeeper (Kafka 2.x's znode layout), kept current by one
thread; the MetadataStore operations on it (admin writes, ISR changes, ACLs, credentials, quotas) are zk_store.py's.

One thread (like Kafka's controller event thread) owns every reaction to ZooKeeper: watches only enqueue the
path that changed, the thread re-reads it (leaving a fresh one-shot watch), updates the in-memory view the broker
reads, and, when this broker holds /controller, hands the view to the controller (`controller.py`): partition
states for new partitions, leader election from the ISR when brokers die, topic deletion, preferred-leader
rebalancing. Listeners hear about every change.

A watch can be missed, and Kafka's LeaderAndIsr push has no ZooKeeper equivalent, so two things make every change
reach this view anyway:
- kazoo forgets every watch when its connection to ZooKeeper drops (SUSPENDED; it has no SetWatches, unlike
  ZooKeeper's Java client) and a new session has none: on every CONNECTED, same session or new, the thread reads
  everything again (registration, brokers, controller, topics, partition states), leaving fresh watches.
- every RECONCILE_INTERVAL_S the thread asks ZooKeeper for its last zxid and, if anything was written since its
  last look, re-reads the brokers, the controller and the assignments, and peeks at the next part of a sweep over
  every partition state (1/SWEEP_PASSES of them, all of them up to 1,000 partitions), which goes on while anything
  was written since the last complete sweep began. So a decision whose notification was lost still arrives within
  that interval (a leader or ISR change within SWEEP_PASSES intervals); a quiet cluster costs one read per
  interval. A pass that takes long stretches the interval to RECONCILE_BUDGET times its duration, so it never
  takes more than 1/RECONCILE_BUDGET of the event thread's time.

Why ~750 lines: one view and the one thread that writes it; the operations on it are zk_store.py's, the
controller's rules controller.py's, the znode I/O kbus/zk/client.py's.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NoAuthError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from kbus.common.cluster import BrokerInfo
from kbus.server.metadata.controller import (
    ClusterSnapshot,
    Controller,
    ControllerSettings,
    OfflineReplicaProbe,
    elect_controller,
)
from kbus.server.metadata.reassigner import Reassigner
from kbus.server.metadata.types import PartitionState, TopicMetadata
from kbus.server.util.stall_watch import STALL_WATCH
from kbus.zk import paths
from kbus.zk.client import (
    ControllerMovedError,
    KafkaZkClient,
    ZooKeeperConnectionError,
)
from kbus.zk.codec import NO_LEADER, Endpoint, LeaderAndIsr, TopicAssignment
from kbus.zk.config_changes import ConfigChangeListener
from kbus.zk.multi_read import MultiReadZxids
from kbus.zk.security import ZkClientSecurity

log = logging.getLogger("kbus.server.metadata.zk_store")  # the store's logger, as before the split

Event = tuple[str | int, ...]  # (kind, topic[, partition])
_RESYNC: Event = ("resync",)
_STOP: Event = ("stop",)
_REBALANCE: Event = ("rebalance",)
_RECHECK: Event = ("recheck",)  # nothing to read: just let the controller act again
_RECONCILE: Event = ("reconcile",)
_SESSION_LOST: Event = ("session_lost",)
# how often the view is checked against ZooKeeper for changes whose watch never fired (see the module docstring)
RECONCILE_INTERVAL_S = 5.0
RECONCILE_BUDGET = 20
# a reconciliation pass peeks at this fraction of the partition states (see _sweep_states)
SWEEP_PASSES = 12
_TIMERS = (_RECONCILE, _REBALANCE)  # the event thread's own timers: no news from ZooKeeper in themselves


class ZkClusterView:
    """The broker's view of the cluster in ZooKeeper and the one thread that keeps it (see the module docstring);
    kbus.server.metadata.zk_store.ZkMetadataStore adds the MetadataStore's operations on top."""

    def __init__(
        self,
        connect: str,
        broker_id: int,
        host: str,
        port: int,
        *,
        rack: str | None = None,
        endpoints: list[Endpoint] | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        delete_topic_enable: bool = True,
        unclean_leader_election_enable: bool = False,
        auto_leader_rebalance_enable: bool = True,
        leader_imbalance_check_interval_s: float = 300.0,
        leader_imbalance_per_broker_percentage: int = 10,
        registration_wait_ms: int | None = None,
        security: ZkClientSecurity | None = None,
        reconcile_interval_s: float = RECONCILE_INTERVAL_S,
    ) -> None:
        self.connect = connect
        self._security = security  # None: a tool's (KAFKA_OPTS), as in tests that start bare stores
        self.broker_id = broker_id
        self._endpoints = endpoints or [Endpoint("PLAINTEXT", host, port)]
        self._rack = rack
        self._session_timeout_s = session_timeout_ms / 1000
        # a restart right after a crash finds its own old registration until that session times out
        if registration_wait_ms is None:
            registration_wait_ms = session_timeout_ms + 1000
        self._registration_wait_s = registration_wait_ms / 1000
        self._connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self._delete_topic_enable = delete_topic_enable
        self._static_unclean = unclean_leader_election_enable
        self._auto_rebalance = auto_leader_rebalance_enable
        self._rebalance_interval_s = leader_imbalance_check_interval_s if auto_leader_rebalance_enable else 1e9
        self._next_rebalance = time.monotonic() + self._rebalance_interval_s
        self._reconcile_interval_s = reconcile_interval_s
        self._next_reconcile = time.monotonic() + reconcile_interval_s
        self._reconcile_took_s = 0.0  # how long the last full re-read took (it stretches the interval)
        self._reconciled_zxid = -1  # ZooKeeper's last zxid when the last full read or complete sweep began
        self._checked_zxid = -1  # ZooKeeper's last zxid when the brokers, controller and topics were last read
        self._sweep: _Sweep | None = None  # the reconciliation's look at every partition state, under way

        self._zk: KafkaZkClient | None = None
        self._events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[], None]] = []
        self._config_listeners: list[ConfigChangeListener] = []
        self._stopping = False
        self.cluster_id = ""

        # the view, guarded by _cond's lock; _generation counts processed event batches (for waiting on them)
        self._cond = threading.Condition()
        self._generation = 0
        self._brokers: dict[int, BrokerInfo] = {}
        self._brokers_sorted: tuple[BrokerInfo, ...] = ()  # _brokers by id, replaced with it
        self._assignments: dict[str, tuple[TopicAssignment, int]] = {}
        self._states: dict[str, dict[int, LeaderAndIsr]] = {}
        self._configs: dict[str, dict[str, str]] = {}
        # dynamic broker configs this broker follows: /config/brokers/<default> and /config/brokers/<id>
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._deleting: set[str] = set()
        self._controller_id = NO_LEADER
        self._controller_epoch: tuple[int, int] | None = None  # (epoch, znode version) while we are controller
        self._topics_view: dict[str, TopicMetadata] | None = None
        # the last event batch this broker processed as controller changed nothing, Controller.act included
        self._controller_settled = False
        self._controller = Controller(
            broker_id,
            self._client,
            self,
            ControllerSettings(
                delete_topic_enable, unclean_leader_election_enable, leader_imbalance_per_broker_percentage
            ),
        )
        self._reassigner = Reassigner(broker_id, self._client, self)
        self._offline_replica_probe: OfflineReplicaProbe | None = None
        self._pid_lock = threading.Lock()
        self._next_producer_id = 0
        self._producer_id_end = -1

    # ---- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, register /brokers/ids/<id> and read the cluster: the first full read and election happen
        before start() returns, so the broker starts with a view. The caller listens on its ports first (Kafka's
        order): the controller may make this broker a leader the moment it registers."""
        zk = KafkaZkClient.connect(
            self.connect, self._session_timeout_s, self._connection_timeout_s, security=self._security
        )
        self._zk = zk
        zk.zk.add_listener(self._on_session_state)
        try:
            self._while_zookeeper_away(self._register_and_read)
        except NoAuthError:
            self._zk = None
            zk.close()
            # kazoo's NoAuthError has no message: say what it means
            raise ZooKeeperConnectionError(
                f"ZooKeeper at {self.connect} refused this broker's writes (NoAuth): its znodes were created with "
                "zookeeper.set.acl=true by another ZooKeeper identity; authenticate as that one (the JAAS Client "
                "section in KAFKA_OPTS, or zookeeper.ssl.keystore.*)"
            ) from None
        except BaseException:
            self._zk = None
            zk.close()
            raise
        self._thread = threading.Thread(target=self._run, name=f"zk-metadata-{self.broker_id}", daemon=True)
        self._thread.start()
        log.info(
            "Registered broker %d in ZooKeeper %s (cluster %s, controller %d)",
            self.broker_id,
            self.connect,
            self.cluster_id,
            self._controller_id,
        )

    def _register_and_read(self) -> None:
        zk = self._client()
        zk.ensure_persistent_paths()
        self.cluster_id = zk.get_or_create_cluster_id()
        self._process([_RESYNC])  # registers, then reads everything (and takes /controller if free)

    def _while_zookeeper_away(self, step: Callable[[], None]) -> None:
        """Run an idempotent start-up step again each time ZooKeeper goes away under it (a paused or restarted
        server, a session that expired meanwhile: kazoo reconnects, with a new session if need be), as Kafka's
        KafkaZkClient retries its requests until connected. Each wait for the connection is bounded by
        zookeeper.connection.timeout.ms; then the start fails saying so."""
        zk = self._client()
        while True:
            try:
                step()
                return
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as exc:
                if self._stopping:
                    raise
                lost = f"{type(exc).__name__}{': ' + str(exc) if str(exc) else ''}"
                log.warning("ZooKeeper %s went away while broker %d was starting (%s); waiting up to %g s for it",
                            self.connect, self.broker_id, lost, self._connection_timeout_s)  # fmt: skip
                deadline = time.monotonic() + self._connection_timeout_s
                while not zk.zk.connected:
                    if time.monotonic() > deadline or self._stopping:
                        raise ZooKeeperConnectionError(
                            f"Lost the connection to ZooKeeper at {self.connect} while starting ({lost}) and it did "
                            f"not come back within zookeeper.connection.timeout.ms="
                            f"{round(self._connection_timeout_s * 1000)}"
                        ) from exc
                    time.sleep(0.05)

    def stop(self) -> None:
        if self._zk is None:
            return
        self._stopping = True
        for listener in self._config_listeners:
            listener.stop()
        self._events.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout=10)
        # closing the session removes /brokers/ids/<id> and /controller at once, so failover starts now
        self._zk.close()
        self._zk = None

    # ---- reads ---------------------------------------------------------------------------------------------

    def brokers(self) -> list[BrokerInfo]:
        # Replaced (never changed in place) under the lock when the brokers change: the reference read here is a
        # consistent snapshot without taking the lock (a Python-level Condition; every Metadata request asks)
        return list(self._brokers_sorted)

    def topics(self) -> dict[str, TopicMetadata]:
        with self._cond:
            return dict(self._topics_view_locked())

    def topic(self, name: str) -> TopicMetadata | None:
        # The view is built under the lock and replaced (never changed in place) when the metadata changes, so the
        # reference read here is a consistent snapshot without taking the lock (a Python-level Condition).
        view = self._topics_view
        if view is None:
            with self._cond:
                view = self._topics_view_locked()
        return view.get(name)

    def _topics_view_locked(self) -> dict[str, TopicMetadata]:
        view = self._topics_view
        if view is None:
            view = self._topics_view = {
                name: self._topic_metadata(name, assignment)
                for name, (assignment, _) in sorted(self._assignments.items())
                # with delete.topic.enable=false a marker deletes nothing (the controller drops it)
                if name not in self._deleting or not self._delete_topic_enable
            }
        return view

    def controller_id(self) -> int:
        return self._controller_id  # one int, replaced under the lock: read without it (every Metadata request)

    def is_controller(self) -> bool:
        with self._cond:
            return self._controller_epoch is not None

    def partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        with self._cond:
            return self._states.get(topic, {}).get(partition)

    # ---- the event thread ----------------------------------------------------------------------------------

    def _on_watch(self, event: WatchedEvent) -> None:
        # runs on kazoo's thread: never touch ZooKeeper here, only hand the path to our thread
        if event.type == EventType.NONE or not event.path:
            return
        kind = paths.parse(event.path)
        if kind[0] == "state":
            self._events.put(("state", kind[1], int(kind[2])))
        elif kind[0] != "other":
            self._events.put(kind)

    def _on_session_state(self, state: str) -> None:
        # runs on kazoo's connection thread: never touch ZooKeeper here, only hand the event to our thread
        if self._stopping:
            return
        if state == KazooState.LOST:
            self._events.put(_SESSION_LOST)
        elif state == KazooState.CONNECTED:
            # Whether the session survived (SUSPENDED -> CONNECTED: a ZooKeeper restart or pause, a lost link) or
            # is new (LOST -> CONNECTED), kazoo dropped every watch when the connection went and does not set them
            # again, and anything may have changed meanwhile: register (a new session has no /brokers/ids/<id>),
            # then read everything again with fresh watches (Kafka's reinitialize and state-change handlers).
            self._events.put(_RESYNC)

    def _run(self) -> None:
        while True:
            due = min(self._next_rebalance, self._next_reconcile)
            batch: list[Event] = []
            with contextlib.suppress(queue.Empty):
                batch.append(self._events.get(timeout=max(0.0, due - time.monotonic())))
            # timers are checked after every wait, so a steady stream of events cannot postpone them
            now = time.monotonic()
            if now >= self._next_rebalance:
                self._next_rebalance = now + self._rebalance_interval_s
                batch.append(_REBALANCE)
            if now >= self._next_reconcile:
                self._next_reconcile = now + max(self._reconcile_interval_s, RECONCILE_BUDGET * self._reconcile_took_s)
                batch.append(_RECONCILE)
            with contextlib.suppress(queue.Empty):
                while len(batch) < 10000:
                    batch.append(self._events.get_nowait())
            if not batch:
                continue
            if _STOP in batch:
                return
            try:
                with STALL_WATCH.phase(f"Broker {self.broker_id}'s ZooKeeper metadata thread"):
                    self._process(batch)
            except (KazooException, OSError) as e:
                if self._stopping:
                    return
                log.warning("ZooKeeper metadata update failed (%s); retrying", e)
                time.sleep(0.5)
                self._events.put(_RESYNC)
            except Exception:
                log.exception("metadata event thread: unexpected error; resyncing")
                time.sleep(0.5)
                self._events.put(_RESYNC)

    def _process(self, batch: Iterable[Event]) -> None:
        events = list(dict.fromkeys(batch))
        changed = False
        was_controller = self._controller_epoch is not None
        if _SESSION_LOST in events:
            with self._cond:
                self._controller_epoch = None
        if _RESYNC in events:
            changed |= self._resync()
        else:
            if _RECONCILE in events:
                changed |= self._reconcile()
            for event in events:
                changed |= self._apply(event)
            with self._cond:
                reads = [(str(e[1]), int(e[2])) for e in events if e[0] == "state" and e[1] in self._assignments]
            changed |= self._refresh_states(reads)
        if self._controller_epoch is not None:
            settled, self._controller_settled = self._controller_settled, False
            try:
                epoch = self._controller_epoch
                if ("log_dir_events",) in events or _RESYNC in events or not was_controller:
                    changed |= self._controller.handle_log_dir_events(self._offline_replica_probe, self._on_watch)
                # Controller.act walks every partition (~10 µs each: ~0.1 s of this thread at 10,000), and the
                # reconciliation timer alone brings a batch every RECONCILE_INTERVAL_S. A batch of timers that
                # changed nothing, after a batch that changed nothing either, would find what that one found:
                # nothing to do. Whatever else changes the view (a broker, a topic, a state, a config, a deletion
                # mark, this controller's own writes) arrives as a watch event, and such a batch acts.
                if not (settled and was_controller and not changed and all(e in _TIMERS for e in events)):
                    changed |= self._controller.act(epoch)
                if _REBALANCE in events and self._auto_rebalance:
                    changed |= self._controller.elect_preferred_leaders(epoch, only_imbalanced=True)
                if ("preferred_election",) in events or _RESYNC in events or not was_controller:
                    changed |= self._controller.run_preferred_replica_election(epoch, self._on_watch)
                moved, done = self._reassigner.advance(epoch)
                changed |= moved
                changed |= self._reassigner.follow_request_znode(self._on_watch, done)
                self._controller_settled = not changed
            except ControllerMovedError:
                log.info("Broker %d is no longer the controller", self.broker_id)
                with self._cond:
                    self._controller_epoch = None
                changed |= self._refresh_controller()
        with self._cond:
            if changed:
                self._topics_view = None
            self._generation += 1
            self._cond.notify_all()
        if changed:
            self._notify()

    def _apply(self, event: Event) -> bool:
        kind = event[0]
        if kind == "brokers":
            return self._refresh_brokers()
        if kind == "topics":
            return self._refresh_topic_list()
        if kind == "topic":
            return event[1] in self._assignments and self.refresh_topic(event[1])
        if kind == "state":
            return False  # read together, pipelined, after the other events (see _process)
        if kind == "config":
            return event[1] in self._assignments and self._refresh_config(event[1])
        if kind == "broker_config":
            return event[1] in self._broker_entities() and self._refresh_broker_config(event[1])
        if kind == "delete_topics":
            return self.refresh_deletions()
        if kind == "controller":
            return self._refresh_controller()
        return False  # rebalance and preferred_election are controller-only work, done after the refreshes

    def _resync(self) -> bool:
        zk = self._client()
        zxid = zk.last_zxid()  # read first: whatever is written after it, the next reconciliation sees
        zk.register_broker(self.broker_id, self._endpoints, self._rack, self._registration_wait_s)
        self._refresh_brokers()
        self._refresh_topic_list(reread=True)
        self.refresh_deletions()
        for entity in self._broker_entities():
            self._refresh_broker_config(entity)
        self._refresh_controller()
        self._reconciled_zxid = self._checked_zxid = zxid
        self._sweep = None  # everything was read: a sweep under way has nothing left to find
        return True

    def _reconcile(self) -> bool:
        """The backstop for a notification that never came (see the module docstring). When ZooKeeper has changed
        since the last pass, read the live brokers, the controller and the topics' assignments again; and while
        ZooKeeper has changed since the last complete sweep began, peek at the next part of the partition states
        (_sweep_states). Returns whether the view changed."""
        zk = self._client()
        zxid = zk.last_zxid()
        if self._sweep is None and zxid == self._reconciled_zxid:
            return False
        started = time.monotonic()
        changed = False
        if zxid != self._checked_zxid:
            changed |= self._refresh_brokers()
            changed |= self._refresh_controller()
            changed |= self._refresh_topic_list()
            with self._cond:
                names = sorted(self._assignments)
            versions = zk.get_topic_versions(names)
            with self._cond:
                moved = [n for n, v in zip(names, versions, strict=True)
                         if v != self._assignments.get(n, (None, v))[1]]  # fmt: skip
            for name in moved:  # a new assignment (reassignment, added partitions) or a topic gone meanwhile
                changed |= self.refresh_topic(name)
            self._checked_zxid = zxid
        if self._sweep is None:
            with self._cond:
                items = [(n, p) for n, (assignment, _) in self._assignments.items() for p in assignment.partitions]
            self._sweep = _Sweep(zxid, items, zk.peek_requests(items))
        if self._refresh_states(self._sweep_states(self._sweep)):
            # usually a watch lost with its connection; rarely one that fired while this ran (it finds no change)
            log.info("Broker %d: re-read partition states that had changed in ZooKeeper unannounced", self.broker_id)
            changed = True
        if self._sweep.done:
            # every state written before the sweep began is in the view (a later write moved the zxid past it)
            self._reconciled_zxid, self._sweep = self._sweep.zxid, None
        self._reconcile_took_s = time.monotonic() - started
        return changed

    def _sweep_states(self, sweep: _Sweep) -> list[tuple[str, int]]:
        """The partitions, among the sweep's next requests, whose state in ZooKeeper is not the write the view
        holds: peeked without watches in multiRead batches (one request per 1,000, where one getData each cost
        ~0.1 ms of CPU per partition); those are then read again with a watch.

        A leader or ISR write changes its state znode's stat only (no parent's mzxid, pzxid or cversion moves), so
        finding one whose notification was lost takes a look at every state. One pass looks at 1/SWEEP_PASSES of
        them (at least one request): at 11,111 partitions the full look cost the metadata thread 90-107 ms after
        every write anywhere in the ensemble (bench/notes/spikes-2026-11-27-s16.md), now a twelfth of it per
        pass, and a lost notification still arrives within SWEEP_PASSES intervals (one, up to 1,000 partitions).
        Notifications themselves (the watches) arrive at once, as before. Every item of the sweep's next requests
        when the server has no multiRead (before 3.6)."""
        zk = self._client()
        found: list[tuple[str, int]] = []
        for _ in range(-(-len(sweep.requests) // SWEEP_PASSES)):
            if sweep.done:
                break
            request = sweep.requests[sweep.next]
            items = sweep.items[sweep.offset : sweep.offset + request.size]
            sweep.next += 1
            sweep.offset += request.size
            peeked = zk.peek_writes(request)
            if peeked is None:
                found += items
                continue
            with self._cond:
                found += [item for item, mzxid in zip(items, peeked, strict=True)
                          if not _same_write(self._states.get(item[0], {}).get(item[1]), mzxid)]  # fmt: skip
        return found

    def _broker_entities(self) -> tuple[str, str]:
        return (paths.BROKER_DEFAULT_ENTITY, str(self.broker_id))

    # ---- refreshing the view (each re-reads with a watch and says whether anything changed) ----------------

    def _refresh_brokers(self) -> bool:
        brokers = {b.broker_id: b for b in self._client().get_all_brokers(watch=self._on_watch)}
        with self._cond:
            if brokers == self._brokers:
                return False
            gone, joined = set(self._brokers) - set(brokers), set(brokers) - set(self._brokers)
            self._brokers = brokers
            self._brokers_sorted = tuple(brokers[b] for b in sorted(brokers))
        if gone or joined:
            log.info("Live brokers %s (joined %s, gone %s)", sorted(brokers), sorted(joined), sorted(gone))
        return True

    def _refresh_topic_list(self, reread: bool = False) -> bool:
        names = set(self._client().get_topics(watch=self._on_watch))
        with self._cond:
            known = set(self._assignments)
        changed = False
        for name in sorted(names if reread else names - known):
            changed |= self.refresh_topic(name, reread)
        for name in known - names:
            self.forget_topic(name)
            changed = True
        return changed

    def refresh_topic(self, name: str, reread: bool = False) -> bool:
        zk = self._client()
        found = zk.get_topic(name, watch=self._on_watch)
        if found is None:
            with self._cond:
                known = name in self._assignments
            if known:
                self.forget_topic(name)
            return known
        assignment, version = found
        with self._cond:
            before = self._assignments.get(name)
            self._assignments[name] = (assignment, version)
            known_states = self._states.get(name, {})
            missing = [p for p in assignment.partitions if reread or p not in known_states]
        changed = before is None or before[0] != assignment
        if before is None or reread:
            self._refresh_config(name)
        if before is None and not reread and self._writes_states_next():
            # A new topic, and this broker's controller writes its states later in this same pass (Controller.act
            # runs after the refreshes): watching for their creation first would cost an exists per partition
            # and queue as many notifications ahead of the controller's own writes. They are read (and watched)
            # in the next pass instead, as if each had been announced.
            for partition in missing:
                self._events.put(("state", name, partition))
        else:
            # partitions without a known state are mostly ones the controller has not written yet: exists first
            changed |= self._refresh_states([(name, partition) for partition in missing], absent_likely=not reread)
        if changed:
            # callers outside the event thread (a reassignment started by a request) notify listeners themselves:
            # they must not read the cached view from before this change (the watch that follows sees no change)
            with self._cond:
                self._topics_view = None
        return changed

    def _writes_states_next(self) -> bool:
        """On the event thread of the controller: Controller.act follows the refreshes of this pass."""
        with self._cond:
            controller = self._controller_epoch is not None
        return controller and threading.current_thread() is self._thread

    def _refresh_states(self, items: list[tuple[str, int]], *, absent_likely: bool = False) -> bool:
        if not items:
            return False
        fresh = self._client().get_partition_states(items, watch=self._on_watch, absent_likely=absent_likely)
        changed = False
        with self._cond:
            for (name, partition), state in zip(items, fresh, strict=True):
                changed |= self._take_state(name, partition, state)
        return changed

    def refresh_state(self, name: str, partition: int) -> bool:
        state = self._client().get_partition_state(name, partition, watch=self._on_watch)
        with self._cond:
            return self._take_state(name, partition, state)

    def _take_state(self, name: str, partition: int, state: LeaderAndIsr | None) -> bool:
        """Store a state read from (or written to) ZooKeeper unless the stored one was written later, and say
        whether the view changed. A read can be overtaken: at 10k partitions a pipelined re-read takes about a
        second, and this broker's own ISR write (alter_isr, on a worker thread) may be stored meanwhile; taking the
        older read would undo an ISR expansion ZooKeeper still lists. Writes are ordered by their zxid, so a topic
        deleted and created again (its state znodes restart at version 0) is still taken. Caller holds _cond."""
        states = self._states.setdefault(name, {})
        current = states.get(partition)
        if current == state:
            if current is not None and state is not None and not state.is_older_than(current):
                states[partition] = state  # the same write: keep the one whose zxid is known
            return False
        if state is None:
            states.pop(partition, None)  # the znode is gone
        elif current is not None and state.is_older_than(current):
            return False
        else:
            states[partition] = state
        return True

    def _refresh_broker_config(self, entity: str) -> bool:
        configs = self._client().get_broker_config(entity, watch=self._on_watch)
        with self._cond:
            if self._broker_configs.get(entity, {}) == configs:
                return False
            self._broker_configs[entity] = configs
            layers = [self._broker_configs.get(e, {}) for e in self._broker_entities()]
        # the controller's default for topics without their own unclean.leader.election.enable
        unclean = self._static_unclean
        for layer in layers:
            value = layer.get("unclean.leader.election.enable", "").strip().lower()
            if value in ("true", "false"):
                unclean = value == "true"
        self._controller.set_unclean_default(unclean)
        return True

    def _refresh_config(self, name: str) -> bool:
        configs = self._client().get_topic_config(name, watch=self._on_watch)
        with self._cond:
            if self._configs.get(name) == configs:
                return False
            self._configs[name] = configs
            return True

    def refresh_deletions(self) -> bool:
        marked = set(self._client().get_topic_deletions(watch=self._on_watch))
        with self._cond:
            if marked == self._deleting:
                return False
            self._deleting = marked
            return True

    def _refresh_controller(self) -> bool:
        controller, epoch = elect_controller(self._client(), self.broker_id, self._controller_epoch, self._on_watch)
        with self._cond:
            changed = controller != self._controller_id
            self._controller_id = controller
            self._controller_epoch = epoch
        return changed

    # ---- what the controller reads and writes (ControllerView) -----------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        with self._cond:
            return ClusterSnapshot(
                live=frozenset(self._brokers),
                assignments=dict(self._assignments),
                states={t: dict(s) for t, s in self._states.items()},
                configs={t: dict(c) for t, c in self._configs.items()},
                deleting=frozenset(self._deleting),
            )

    def state_of(self, topic: str, partition: int) -> LeaderAndIsr | None:
        with self._cond:
            return self._states.get(topic, {}).get(partition)

    def live_broker_ids(self) -> set[int]:
        with self._cond:
            return set(self._brokers)

    def record_state(self, topic: str, partition: int, state: LeaderAndIsr) -> None:
        with self._cond:
            if topic in self._assignments and self._take_state(topic, partition, state):
                self._topics_view = None

    def request_state_read(self, topic: str, partition: int) -> None:
        self._events.put(("state", topic, partition))

    def forget_topic(self, name: str) -> None:
        with self._cond:
            self._assignments.pop(name, None)
            self._states.pop(name, None)
            self._configs.pop(name, None)

    # ---- helpers -------------------------------------------------------------------------------------------

    def _client(self) -> KafkaZkClient:
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        return self._zk

    def _topic_metadata(self, name: str, assignment: TopicAssignment) -> TopicMetadata:
        states = self._states.get(name, {})
        partitions = {}
        for partition, replicas in sorted(assignment.partitions.items()):
            state = states.get(partition)
            if state is None:
                partitions[partition] = PartitionState(NO_LEADER, 0, list(replicas), [])
            else:
                partitions[partition] = PartitionState(
                    state.leader, state.leader_epoch, list(replicas), list(state.isr)
                )
        # a topic from an old tool has no id until the controller writes one; the zero UUID stands in
        topic_id = assignment.topic_id or uuid.UUID(int=0)
        return TopicMetadata(name, topic_id, partitions, dict(self._configs.get(name, {})))

    def _has_all_states(self, name: str, count: int) -> bool:
        return len(self._states.get(name, {})) >= count

    def _wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until the event thread has made `predicate` true (checked after each processed batch)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("metadata listener failed")


@dataclass(slots=True)
class _Sweep:
    """The reconciliation's look at every partition state, a part per pass (_sweep_states)."""

    zxid: int  # ZooKeeper's last zxid when the sweep began
    items: list[tuple[str, int]]  # every partition of the view then, in the requests' order
    requests: list[MultiReadZxids]
    next: int = 0  # the next request
    offset: int = 0  # the index in items of its first partition

    @property
    def done(self) -> bool:
        return self.next >= len(self.requests)


def _same_write(held: LeaderAndIsr | None, found_mzxid: int | None) -> bool:
    """Whether the view holds the write ZooKeeper has: both absent, or the write of the same zxid (a held state
    whose zxid is unknown, -1: one this broker wrote, is read again once to learn it)."""
    if held is None or found_mzxid is None:
        return held is None and found_mzxid is None
    return held.zk_mzxid == found_mzxid
