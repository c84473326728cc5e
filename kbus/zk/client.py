"""KafkaZkClient: typed reads and writes of Kafka's znodes over kazoo, shared by the broker and the admin CLI.

Every read can leave a one-shot watch (`watch=`); the caller decides what a change means. Writes that race with
other brokers are compare-and-set against a znode version, as Kafka's are.

Why one file of ~670 lines: one class, as Kafka's KafkaZkClient, with one short method per znode read or write
over one kazoo client (its session, retries and multi-ops in one place). The znode layout (paths.py), the JSON
codecs (codec.py), ACLs, config changes, reassignment and elections are their own modules already.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from kbus.common.broker_config import ConfigError
from kbus.common.cluster import BrokerInfo
from kbus.common.errors import ErrorCode, KafkaError, TopicExistsError, UnknownTopicError
from kbus.common.quotas import QuotaEntity
from kbus.zk import codec, paths
from kbus.zk.codec import Endpoint, LeaderAndIsr, TopicAssignment
from kbus.zk.multi_read import MultiReadZxids
from kbus.zk.poll_handler import PollingHandler
from kbus.zk.security import ZkClientSecurity
from kbus.zk.znode_acls import KafkaKazooClient

log = logging.getLogger(__name__)
Watch = Callable[[WatchedEvent], None] | None
# partitions per multi op when a controller creates partition states: each is two creates of at most ~600 bytes
# (paths of a 249-character topic name, the state JSON, ACLs), so a batch stays well under ZooKeeper's default
# 1 MB jute.maxbuffer, which bounds a request
CREATE_STATES_BATCH = 500
# partitions per multi op when the controller deletes a topic's znodes: two deletes of at most ~300 bytes each
DELETE_STATES_BATCH = 500
# states per multiRead (peek_requests): a request of at most ~300 bytes per path and a reply of ~200 (the
# state JSON and its 68-byte stat), under the 1 MB jute.maxbuffer both ways
MULTI_READ_BATCH = 1000


class ZooKeeperConnectionError(KafkaError):
    """ZooKeeper cannot be reached (wrong address, server down)."""


class BrokerIdInUseError(KafkaError):
    """Another live broker already holds /brokers/ids/<id>."""


class TopicMarkedForDeletionError(KafkaError):
    error_code = ErrorCode.topic_deletion_disabled


class ControllerMovedError(KafkaError):
    """A newer controller took over; this one's writes are fenced by /controller_epoch."""

    error_code = ErrorCode.not_controller


def split_chroot(connect: str) -> tuple[str, str]:
    """ "h1:2181,h2:2181/kafka" -> ("h1:2181,h2:2181", "/kafka"); no chroot -> ("...", "")."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/") if chroot else ""


class KafkaZkClient:
    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self._multi_read = True  # until the server says it has none
        # the last peeked items and their multiRead requests, reused while the items stay the same
        self._peek_cache: tuple[tuple[tuple[str, int], ...], list[MultiReadZxids]] | None = None

    # ---- connection ----

    @classmethod
    def connect(
        cls,
        connect: str,
        session_timeout_s: float = 18.0,
        connection_timeout_s: float = 18.0,
        logger: logging.Logger | None = None,
        security: ZkClientSecurity | None = None,
    ) -> KafkaZkClient:
        """`security`: SASL/TLS and the znode ACL rule; by default a tool's, from KAFKA_OPTS."""
        if security is None:
            try:
                security = ZkClientSecurity.for_tool(os.environ)
            except ConfigError as exc:
                raise ZooKeeperConnectionError(str(exc)) from None
        hosts, chroot = split_chroot(connect)
        if chroot:
            # Kafka creates a missing chroot; a chrooted kazoo client cannot create its own root
            root = _start(hosts, session_timeout_s, connection_timeout_s, logger, security)
            try:
                root.ensure_path(chroot)
            finally:
                root.stop()
                root.close()
        return cls(_start(connect, session_timeout_s, connection_timeout_s, logger, security))

    def close(self) -> None:
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    @property
    def session_id(self) -> int:
        return self.zk.client_id[0] if self.zk.client_id else 0

    def last_zxid(self) -> int:
        """The zxid of the last write the server has applied: every reply's header carries it, so one cheap read
        tells whether anything at all changed in ZooKeeper since an earlier look."""
        self.zk.exists("/")
        return int(self.zk.last_zxid)

    # ---- cluster ----

    def ensure_persistent_paths(self) -> None:
        for path in paths.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def get_or_create_cluster_id(self) -> str:
        try:
            data, _ = self.zk.get(paths.CLUSTER_ID)
            return codec.decode_cluster_id(data)
        except NoNodeError:
            pass
        proposed = codec.new_cluster_id()
        try:
            self.zk.create(paths.CLUSTER_ID, codec.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:  # another broker won the race
            data, _ = self.zk.get(paths.CLUSTER_ID)
            return codec.decode_cluster_id(data)

    # ---- brokers ----

    def register_broker(
        self, broker_id: int, endpoints: list[Endpoint], rack: str | None = None, wait_s: float = 0.0
    ) -> None:
        """Create the ephemeral /brokers/ids/<id>. Another session's node is either a live duplicate or the
        registration of this broker's previous, crashed run, which ZooKeeper removes once that session times out.
        So wait up to `wait_s` for it to go before calling it a duplicate."""
        path = paths.broker(broker_id)
        data = codec.encode_broker(endpoints, rack)
        deadline = time.monotonic() + wait_s
        waited = False
        gone = threading.Event()
        while True:
            try:
                self.zk.create(path, data, ephemeral=True)
                return
            except NodeExistsError:
                pass
            try:
                _, stat = self.zk.get(path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.session_id:  # our own node (a retried create)
                self.zk.set(path, data)
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerIdInUseError(
                    f"broker.id {broker_id} is already registered in ZooKeeper ({path} is owned by live session "
                    f"0x{stat.ephemeralOwner:x}); every broker needs a unique broker.id"
                )
            if not waited:
                log.warning(
                    "%s is held by session 0x%x: waiting up to %.0f s for it to expire (a crashed earlier run of "
                    "this broker) before treating broker.id %d as a duplicate",
                    path,
                    stat.ephemeralOwner,
                    remaining,
                    broker_id,
                )
                waited = True
            gone.clear()
            if self.zk.exists(path, watch=lambda _event: gone.set()) is not None:
                gone.wait(min(remaining, 1.0))

    def get_broker_ids(self, watch: Watch = None) -> list[int]:
        return sorted(int(c) for c in self._children(paths.BROKER_IDS, watch) if c.isdigit())

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, stat = self.zk.get(paths.broker(broker_id))
        except NoNodeError:
            return None
        return codec.decode_broker(broker_id, data, stat.czxid)

    def get_all_brokers(self, watch: Watch = None) -> list[BrokerInfo]:
        out = []
        for broker_id in self.get_broker_ids(watch):
            info = self.get_broker(broker_id)
            if info is not None:
                out.append(info)
        return out

    # ---- controller ----

    def get_controller_id(self, watch: Watch = None) -> int:
        """The controller's broker id, -1 when there is none; `watch` fires on creation and deletion."""
        stat = self.zk.exists(paths.CONTROLLER, watch=watch)
        if stat is None:
            return codec.NO_LEADER
        try:
            data, _ = self.zk.get(paths.CONTROLLER)
        except NoNodeError:
            return codec.NO_LEADER
        return codec.decode_controller(data)

    def get_controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version), (0, -1) when no controller was ever elected."""
        try:
            data, stat = self.zk.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            return 0, -1
        return codec.decode_controller_epoch(data), stat.version

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Create the ephemeral /controller and bump /controller_epoch in one transaction (Kafka's
        registerControllerAndIncrementControllerEpoch). Returns (epoch, epoch znode version), None if lost."""
        for _ in range(5):
            epoch, version = self.get_controller_epoch()
            if version < 0:
                with contextlib.suppress(NodeExistsError):
                    self.zk.create(paths.CONTROLLER_EPOCH, codec.encode_controller_epoch(0))
                continue
            tx = self.zk.transaction()
            tx.create(paths.CONTROLLER, codec.encode_controller(broker_id), ephemeral=True)
            tx.set_data(paths.CONTROLLER_EPOCH, codec.encode_controller_epoch(epoch + 1), version=version)
            results = tx.commit()
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return epoch + 1, version + 1
            if any(isinstance(r, NodeExistsError) for r in failures):
                return None
            # BadVersion: another controller bumped the epoch between our read and write; look again
        return None

    def resign_controller(self, broker_id: int) -> None:
        try:
            data, stat = self.zk.get(paths.CONTROLLER)
            if codec.decode_controller(data) == broker_id and stat.ephemeralOwner == self.session_id:
                self.zk.delete(paths.CONTROLLER, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    # ---- topics ----

    def get_topics(self, watch: Watch = None) -> list[str]:
        return sorted(self._children(paths.BROKER_TOPICS, watch))

    def get_topic(self, topic: str, watch: Watch = None) -> tuple[TopicAssignment, int] | None:
        """The assignment and its znode version; None when the topic does not exist (the watch then waits for
        its creation)."""
        if watch is not None and self.zk.exists(paths.topic(topic), watch=watch) is None:
            return None
        try:
            data, stat = self.zk.get(paths.topic(topic), watch=watch)
        except NoNodeError:
            return None
        return codec.decode_topic(data), stat.version

    def get_topic_versions(self, topics: Sequence[str]) -> list[int | None]:
        """The assignment znodes' versions, pipelined (None where the topic is gone): which assignments changed."""
        pending = [self.zk.exists_async(paths.topic(t)) for t in topics]
        out: list[int | None] = []
        for result in pending:
            stat: ZnodeStat | None = result.get()
            out.append(None if stat is None else stat.version)
        return out

    def topic_exists(self, topic: str) -> bool:
        return self.zk.exists(paths.topic(topic)) is not None

    def create_topic(self, topic: str, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """AdminZkClient.createTopicWithAssignment: the config first, then the assignment the controller
        watches for; an existing assignment means the topic exists."""
        if self.topic_exists(topic):
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        self._set_or_create(paths.topic_config(topic), codec.encode_entity_config(configs))
        try:
            self.zk.create(paths.topic(topic), codec.encode_topic(assignment), makepath=True)
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment, version: int) -> None:
        self.zk.set(paths.topic(topic), codec.encode_topic(assignment), version=version)

    def get_partition_state(self, topic: str, partition: int, watch: Watch = None) -> LeaderAndIsr | None:
        path = paths.partition_state(topic, partition)
        if watch is not None and self.zk.exists(path, watch=watch) is None:
            return None
        try:
            data, stat = self.zk.get(path, watch=watch)
        except NoNodeError:
            return None
        return codec.decode_partition_state(data, stat.version, stat.mzxid)

    def get_partition_states(
        self, items: Sequence[tuple[str, int]], watch: Watch = None, *, absent_likely: bool = False
    ) -> list[LeaderAndIsr | None]:
        """Many state reads pipelined (a leader change touches every partition a broker led). A state not created
        yet is None, and with `watch` its creation is watched for (getData leaves no watch on a missing znode;
        exists does). `absent_likely` (a new topic's partitions, before the controller wrote them) skips the
        first read and asks exists first; all three steps are pipelined, so 10,000 new partitions cost three
        round trips, not 10,000."""
        out: list[LeaderAndIsr | None] = [None] * len(items)
        missing = list(range(len(items)))
        if not absent_likely:
            missing = self._read_states(items, missing, watch, out)
        if not missing or watch is None:
            return out
        probes = [(i, self.zk.exists_async(paths.partition_state(*items[i]), watch=watch)) for i in missing]
        present = [i for i, probe in probes if probe.get() is not None]  # created meanwhile: read it
        self._read_states(items, present, watch, out)  # deleted again before the read: None (and the watch fired)
        return out

    def peek_requests(self, items: Sequence[tuple[str, int]]) -> list[MultiReadZxids]:
        """The multiRead requests that peek at the states of items, MULTI_READ_BATCH to a request in items' order
        (kbus.zk.multi_read: one request per batch, not one getData per partition), made (paths built and
        serialized) once for the same items: the reconciliation sweeps the same partitions round after round."""
        key = tuple(items)
        if self._peek_cache is None or self._peek_cache[0] != key:
            requests = [
                MultiReadZxids.of(tuple(_prefix_root(self.zk.chroot, paths.partition_state(*i))
                                        for i in key[start : start + MULTI_READ_BATCH]))
                for start in range(0, len(key), MULTI_READ_BATCH)
            ]  # fmt: skip
            self._peek_cache = (key, requests)
        return self._peek_cache[1]

    def peek_writes(self, request: MultiReadZxids) -> list[int | None] | None:
        """The zxid of the last write of every state the request names (its znode's mzxid), read without watches
        in one multiRead; a missing znode is None. A znode's mzxid names one write, so a state held with the same
        mzxid is that write: the JSON is not decoded (it was half of a 10,000-partition peek's CPU). None when the
        server has no multiRead (ZooKeeper before 3.6): the caller reads the ordinary way."""
        if not self._multi_read:
            return None
        result = self.zk.handler.async_result()
        self.zk._call(request, result)
        try:
            replies = result.get()
        except UnimplementedError:
            self._multi_read = False
            return None
        out: list[int | None] = []
        for reply in replies:
            if isinstance(reply, NoNodeError):
                out.append(None)
            elif isinstance(reply, Exception):
                raise reply
            else:
                out.append(reply)
        return out

    def _read_states(
        self, items: Sequence[tuple[str, int]], which: list[int], watch: Watch, out: list[LeaderAndIsr | None]
    ) -> list[int]:
        """Pipelined reads of items[i] for i in `which` into out[i]; returns the indices that have no znode."""
        pending = [(i, self.zk.get_async(paths.partition_state(*items[i]), watch=watch)) for i in which]
        absent: list[int] = []
        for i, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                absent.append(i)
                continue
            out[i] = codec.decode_partition_state(data, stat.version, stat.mzxid)
        return absent

    def create_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, epoch_version: int | None = None
    ) -> LeaderAndIsr | None:
        """Create the state znode (and its parents). None if it already exists or the topic is gone; with
        `epoch_version` the write is fenced by /controller_epoch, as a controller's writes are."""
        return self.create_partition_states([(topic, partition, state)], epoch_version)[0]

    def update_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, epoch_version: int | None = None
    ) -> LeaderAndIsr | None:
        """Compare-and-set against state.zk_version. None if somebody else changed it first."""
        return self.update_partition_states([(topic, partition, state)], epoch_version)[0]

    def create_partition_states(
        self, items: Sequence[tuple[str, int, LeaderAndIsr]], epoch_version: int | None = None
    ) -> list[LeaderAndIsr | None]:
        """New partitions' state znodes (and their /partitions/<p> parents), fenced by /controller_epoch when
        `epoch_version` is given. Written as multi ops of up to CREATE_STATES_BATCH partitions each: a
        10,000-partition topic is about 20 ZooKeeper transactions instead of 20,000 requests (kazoo sends one
        request per turn of its connection loop, so the count, not the bytes, is what costs). A multi is
        all-or-nothing: when one fails (a znode of its batch exists already, e.g. written by a controller that
        died midway, or its topic was deleted) nothing of it was written, and that batch is written again one
        partition at a time, which tolerates existing parents and says per partition what was written. None
        where the state could not be created (it exists already, or its topic is gone)."""
        out: list[LeaderAndIsr | None] = []
        topics = dict.fromkeys(topic for topic, _, _ in items)
        for pending in [self.zk.create_async(paths.topic_partitions(t), b"") for t in topics]:
            with contextlib.suppress(NodeExistsError, NoNodeError):  # no topic: every create below fails
                pending.get()
        batches = [items[i : i + CREATE_STATES_BATCH] for i in range(0, len(items), CREATE_STATES_BATCH)]
        commits = []
        for batch in batches:  # pipelined: ZooKeeper applies one session's requests in order
            tx = self.zk.transaction()
            if epoch_version is not None:
                tx.check(paths.CONTROLLER_EPOCH, epoch_version)
            for topic, partition, state in batch:
                tx.create(paths.topic_partition(topic, partition), b"")
                tx.create(paths.partition_state(topic, partition), codec.encode_partition_state(state))
            commits.append(tx.commit_async())
        for batch, pending in zip(batches, commits, strict=True):
            if not _failed(pending.get(), epoch_version):
                out.extend(_written(state, 0) for _, _, state in batch)
            else:
                out.extend(self._create_partition_states_one_by_one(batch, epoch_version))
        return out

    def _create_partition_states_one_by_one(
        self, items: Sequence[tuple[str, int, LeaderAndIsr]], epoch_version: int | None
    ) -> list[LeaderAndIsr | None]:
        """Each state in a multi of its own (after its parents, existing ones fine), all pipelined."""
        parents = dict.fromkeys(
            p
            for topic, partition, _ in items
            for p in (paths.topic_partitions(topic), paths.topic_partition(topic, partition))
        )
        for pending in [self.zk.create_async(p, b"") for p in parents]:
            # exists already: fine; parent gone: the topic was deleted, and the state create below fails too
            with contextlib.suppress(NodeExistsError, NoNodeError):
                pending.get()
        commits = []
        for topic, partition, state in items:
            tx = self.zk.transaction()
            if epoch_version is not None:
                tx.check(paths.CONTROLLER_EPOCH, epoch_version)
            tx.create(paths.partition_state(topic, partition), codec.encode_partition_state(state))
            commits.append(tx.commit_async())
        out: list[LeaderAndIsr | None] = []
        for (_, _, state), pending in zip(items, commits, strict=True):
            results = pending.get()
            out.append(None if _failed(results, epoch_version) else _written(state, 0))
        return out

    def update_partition_states(
        self, items: Sequence[tuple[str, int, LeaderAndIsr]], epoch_version: int | None = None
    ) -> list[LeaderAndIsr | None]:
        """Pipelined compare-and-sets, each against its state's zk_version; None where somebody else won."""
        commits = []
        for topic, partition, state in items:
            tx = self.zk.transaction()
            if epoch_version is not None:
                tx.check(paths.CONTROLLER_EPOCH, epoch_version)
            tx.set_data(
                paths.partition_state(topic, partition), codec.encode_partition_state(state), version=state.zk_version
            )
            commits.append(tx.commit_async())
        out: list[LeaderAndIsr | None] = []
        for (_, _, state), pending in zip(items, commits, strict=True):
            results = pending.get()
            if _failed(results, epoch_version):
                out.append(None)
            else:
                stat: ZnodeStat = results[-1]
                out.append(_written(state, stat.version, stat.mzxid))
        return out

    def _entity_config(self, path: str, watch: Watch) -> dict[str, str]:
        """An entity's config znode ({} when absent); with a watch, it is set even while the znode is absent."""
        if watch is not None and self.zk.exists(path, watch=watch) is None:
            return {}
        try:
            data, _ = self.zk.get(path, watch=watch)
        except NoNodeError:
            return {}
        return codec.decode_entity_config(data)

    # ---- topic configs ----

    def get_topic_config(self, topic: str, watch: Watch = None) -> dict[str, str]:
        return self._entity_config(paths.topic_config(topic), watch)

    def change_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """AdminZkClient.changeTopicConfig: write the config, then the change notification brokers follow."""
        if not self.topic_exists(topic):
            raise UnknownTopicError(f"Topic '{topic}' does not exist.")
        self._set_or_create(paths.topic_config(topic), codec.encode_entity_config(configs))
        self.zk.create(
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            codec.encode_config_change("topics", topic),
            sequence=True,
            makepath=True,
        )

    # ---- other entities' configs (/config/users/<user>: SCRAM credentials) ----

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(paths.entity_config(entity_type, name))
        except NoNodeError:
            return {}
        return codec.decode_entity_config(data)

    def entity_names(self, entity_type: str) -> list[str]:
        return sorted(self._children(f"{paths.CONFIG}/{entity_type}", None))

    def change_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """AdminZkClient.changeConfigs: write the entity's whole config, then the change notification."""
        self._set_or_create(paths.entity_config(entity_type, name), codec.encode_entity_config(configs))
        self.zk.create(
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            codec.encode_config_change(entity_type, name),
            sequence=True,
            makepath=True,
        )

    # ---- client quotas (/config/users/<u>, /config/clients/<c>, /config/users/<u>/clients/<c>, /config/ips/<ip>) --

    def quota_entity_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        """Every user, client and user+client entity's whole config (ZkAdminManager's fetchAllEntityConfigs and
        fetchAllChildEntityConfigs); users' configs include their SCRAM credentials."""
        out: dict[QuotaEntity, dict[str, str]] = {}
        for client in self.entity_names("clients"):
            out[QuotaEntity(None, client)] = self.get_entity_config("clients", client)
        for user in self.entity_names("users"):
            out[QuotaEntity(user, None)] = self.get_entity_config("users", user)
            for client in sorted(self._children(f"{paths.entity_config('users', user)}/clients", None)):
                out[QuotaEntity(user, client)] = self.get_entity_config("users", f"{user}/clients/{client}")
        for ip in self.entity_names("ips"):
            out[QuotaEntity(ip=ip)] = self.get_entity_config("ips", ip)
        return out

    def get_quota_entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        kind, _, name = entity.path.partition("/")
        return self.get_entity_config(kind, name)

    def change_quota_entity_config(self, entity: QuotaEntity, configs: Mapping[str, str]) -> None:
        """AdminZkClient.changeConfigs for a quota entity: the whole config, then the change notification
        {"version":2,"entity_path":"users/<u>/clients/<c>"} every broker follows."""
        kind, _, name = entity.path.partition("/")
        self.change_entity_config(kind, name, configs)

    # ---- dynamic broker configs (/config/brokers/<id> and /config/brokers/<default>) ----

    def get_broker_config(self, entity: str, watch: Watch = None) -> dict[str, str]:
        """A broker's (or the cluster default's) dynamic configs; the watch is set even while the znode is absent."""
        return self._entity_config(paths.broker_config(entity), watch)

    def change_broker_config(self, entity: str, configs: Mapping[str, str]) -> None:
        """AdminZkClient.changeBrokerConfig: the config, then the change notification (Kafka's brokers follow the
        notifications; kbus's watch the znode itself, so both kinds of broker see a change made by either tool)."""
        self.change_entity_config("brokers", entity, configs)

    # ---- deletion ----

    def mark_topic_for_deletion(self, topic: str) -> None:
        if not self.topic_exists(topic):
            raise UnknownTopicError(f"Topic '{topic}' does not exist.")
        try:
            self.zk.create(paths.delete_topic_marker(topic), b"", makepath=True)
        except NodeExistsError:
            raise TopicMarkedForDeletionError(f"Topic {topic} is already marked for deletion.") from None

    def get_topic_deletions(self, watch: Watch = None) -> list[str]:
        return sorted(self._children(paths.DELETE_TOPICS, watch))

    def remove_topic_deletion_marker(self, topic: str) -> None:
        with contextlib.suppress(NoNodeError):
            self.zk.delete(paths.delete_topic_marker(topic))

    def delete_topic_znodes(self, topic: str) -> None:
        """What the controller does once a topic's replicas are gone: assignment, states, config, marker.

        The partitions' znodes go first, /partitions/<p>/state then /partitions/<p>, in multi ops of
        DELETE_STATES_BATCH partitions, pipelined: kazoo's recursive delete asks each znode for its children and
        deletes it, one request after the other (~30,000 round trips for 10,000 partitions). A batch that fails (a
        znode with a child it does not name, one gone meanwhile) deleted nothing, and the recursive delete that
        follows takes whatever is left, as it took everything before."""
        try:
            partitions = self.zk.get_children(paths.topic_partitions(topic))
        except NoNodeError:
            partitions = []
        commits = []
        for start in range(0, len(partitions), DELETE_STATES_BATCH):
            tx = self.zk.transaction()
            for partition in partitions[start : start + DELETE_STATES_BATCH]:
                tx.delete(f"{paths.topic_partitions(topic)}/{partition}/state")
                tx.delete(f"{paths.topic_partitions(topic)}/{partition}")
            commits.append(tx.commit_async())
        for pending in commits:
            pending.get()  # a failed batch's results are exceptions, not raised: left to the recursive delete
        for path in (paths.topic(topic), paths.topic_config(topic)):
            _delete_recursive(self.zk, path)
        with contextlib.suppress(NoNodeError):
            self.zk.delete(paths.delete_topic_marker(topic))

    # ---- log dir failures (LogDirEventNotificationZNode) ----

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """A broker's log dir failed: a persistent sequential notification the controller watches."""
        self.zk.create(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{paths.LOG_DIR_EVENT_PREFIX}",
                       codec.encode_log_dir_event(broker_id), sequence=True, makepath=True)  # fmt: skip

    def get_log_dir_events(self, watch: Watch = None) -> list[tuple[str, int | None]]:
        """The pending notifications, oldest first: (znode name, broker id)."""
        try:
            names = self.zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION, watch=watch)
        except NoNodeError:
            return []
        out: list[tuple[str, int | None]] = []
        for name in sorted(n for n in names if n.startswith(paths.LOG_DIR_EVENT_PREFIX)):
            try:
                data, _ = self.zk.get(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}")
            except NoNodeError:
                continue
            try:
                out.append((name, codec.decode_log_dir_event(data)))
            except (ValueError, KeyError, TypeError):
                out.append((name, None))  # malformed: deleted like the others
        return out

    def delete_log_dir_events(self, names: Sequence[str]) -> None:
        for name in names:
            with contextlib.suppress(NoNodeError):
                self.zk.delete(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}")

    # ---- preferred replica election ----

    def get_preferred_replica_election(self, watch: Watch = None) -> list[tuple[str, int]] | None:
        """The partitions an admin asked to move back to their preferred replica; None when no request."""
        if self.zk.exists(paths.PREFERRED_REPLICA_ELECTION, watch=watch) is None:
            return None
        try:
            data, _ = self.zk.get(paths.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return None
        return codec.decode_partition_list(data)

    def request_preferred_replica_election(self, partitions: list[tuple[str, int]]) -> None:
        try:
            self.zk.create(paths.PREFERRED_REPLICA_ELECTION, codec.encode_partition_list(partitions), makepath=True)
        except NodeExistsError:
            raise KafkaError("Preferred replica leader election currently in progress for another request") from None

    def get_reassignment_request(self, watch: Watch = None) -> tuple[dict[tuple[str, int], list[int]], int] | None:
        """/admin/reassign_partitions and its version; None when there is none."""
        if self.zk.exists(paths.REASSIGN_PARTITIONS, watch=watch) is None:
            return None
        try:
            data, stat = self.zk.get(paths.REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return codec.decode_reassignment(data), stat.version

    def request_reassignment(self, targets: Mapping[tuple[str, int], list[int]]) -> None:
        """What kafka-reassign-partitions.sh --zookeeper (Kafka 2.x) writes; refused while one is pending."""
        self.zk.create(paths.REASSIGN_PARTITIONS, codec.encode_reassignment(targets), makepath=True)

    def finish_reassignment_request(self, done: set[tuple[str, int]], version: int) -> None:
        """Remove completed partitions from /admin/reassign_partitions (the znode goes when none is left)."""
        found = self.get_reassignment_request()
        if found is None or found[1] != version:
            return
        left = {tp: r for tp, r in found[0].items() if tp not in done}
        with contextlib.suppress(NoNodeError, BadVersionError):
            if left:
                self.zk.set(paths.REASSIGN_PARTITIONS, codec.encode_reassignment(left), version=version)
            else:
                self.zk.delete(paths.REASSIGN_PARTITIONS, version=version)

    def delete_preferred_replica_election(self) -> None:
        with contextlib.suppress(NoNodeError):
            self.zk.delete(paths.PREFERRED_REPLICA_ELECTION)

    # ---- producer ids ----

    def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """ProducerIdManager (ZK mode): claim the next block of ids with a compare-and-set."""
        self.zk.ensure_path(paths.LATEST_PRODUCER_ID_BLOCK)
        while True:
            data, stat = self.zk.get(paths.LATEST_PRODUCER_ID_BLOCK)
            start = codec.decode_producer_id_block_end(data) + 1
            end = start + codec.PRODUCER_ID_BLOCK_SIZE - 1
            try:
                self.zk.set(
                    paths.LATEST_PRODUCER_ID_BLOCK,
                    codec.encode_producer_id_block(broker_id, start, end),
                    version=stat.version,
                )
                return start, end
            except BadVersionError:
                continue

    # ---- helpers ----

    def _children(self, path: str, watch: Watch) -> list[str]:
        """Children of a persistent path; a ZooKeeper no broker ever used has none (rather than an error)."""
        try:
            children: list[str] = self.zk.get_children(path, watch=watch)
            return children
        except NoNodeError:
            if watch is not None:
                self.zk.exists(path, watch=watch)
            return []

    def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)


def _failed(results: list[Any], epoch_version: int | None) -> bool:
    """A multi's results: exceptions instead of raising. A failed epoch check means a newer controller."""
    if epoch_version is not None and isinstance(results[0], BadVersionError):
        raise ControllerMovedError("controller epoch changed: this broker is no longer the controller")
    return any(isinstance(r, Exception) for r in results)


def _written(state: LeaderAndIsr, zk_version: int, zk_mzxid: int = -1) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, zk_version, zk_mzxid)


def _delete_recursive(zk: KazooClient, path: str) -> None:
    for _ in range(10):
        try:
            zk.delete(path, recursive=True)
            return
        except NoNodeError:
            return
        except NotEmptyError:  # a child appeared while deleting (a leader writing state); go again
            continue


def _start(
    hosts: str,
    session_timeout_s: float,
    connection_timeout_s: float,
    logger: logging.Logger | None,
    security: ZkClientSecurity,
) -> KazooClient:
    zk = KafkaKazooClient(
        secure_acls=security.secure_acls,
        **{"handler": PollingHandler(), **security.kazoo_options()},  # TLS: its own handler, a PollingHandler too
        hosts=hosts,
        timeout=session_timeout_s,
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2.0),
        command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0),
        logger=logger or logging.getLogger("kazoo.client"),
    )
    try:
        zk.start(timeout=connection_timeout_s)
    except KazooTimeoutError:
        zk.stop()
        zk.close()
        raise ZooKeeperConnectionError(
            f"Timed out connecting to ZooKeeper at {hosts} after {connection_timeout_s:g} s "
            + (
                "over TLS (is that ZooKeeper's secureClientPort, and does each side trust the other's certificate?)"
                if security.tls is not None
                else "(is it running? `kbus zookeeper-start`)"
            )
        ) from None
    if security.sasl is not None:
        # kazoo reports CONNECTED before the SASL exchange; a request queued now is answered only after it
        try:
            zk.exists("/")
        except (ConnectionClosedError, AuthFailedError):
            zk.stop()
            zk.close()
            raise ZooKeeperConnectionError(
                f"ZooKeeper at {hosts} refused SASL authentication for user '{security.sasl.username}' (check the "
                "username and password in the JAAS file's Client section)"
            ) from None
    return zk
