"""The share-partitions this broker leads and the share sessions of its share consumers (Kafka's
SharePartitionManager and ShareSessionCache).

A share session (KIP-932) is per (group, member): ShareSessionEpoch 0 opens it with the request's partitions
(replacing an older one), each later request must carry the next epoch and may add partitions or forget some, -1
closes it (acknowledging only) and releases what the member still holds.

A share-partition is loaded on the first ShareFetch of its group after this broker became the partition's
leader: from its durable state (the share coordinator, through `persister`) when there is one, else new, its SPSO
set by `share.auto.offset.reset` (`latest`, Kafka's default: the partition's high watermark then; `earliest`: its
log start offset) and written at once. Every change that matters after a failover (acknowledgements, releases,
acquisitions, expired locks) is written before the request that made it is answered (`persist`), one write per
share-partition per request carrying its whole in-flight state.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode as E

from kbus.server.share.partition import SharePartition
from kbus.server.share.state import ShareState, ShareStateKey

SharePartitionKey = tuple[str, str, int]  # group, topic, partition
TopicPartition = tuple[str, int]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: set[TopicPartition] = field(default_factory=set)
    connection_id: str = ""  # the connection that opened it: its close ends the session


@dataclass(frozen=True, slots=True)
class ShareConfig:
    lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000
    auto_offset_reset: str = "latest"


class PersisterError(Exception):
    """A read or write of the durable state failed with this Kafka error code."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or str(code))
        self.code = code


class Persister(Protocol):
    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None: ...
    async def write(self, key: ShareStateKey, state: ShareState) -> None: ...


class SessionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _int(overrides: dict[str, str], key: str, default: int) -> int:
    value = overrides.get(key)
    return int(value) if value is not None and value.strip().isdigit() else default


def _retrieve_outcome(task: asyncio.Task[SharePartition]) -> None:
    """Its waiters get a failed load's exception; read here too, for when none is left (no "never retrieved")."""
    if not task.cancelled():
        task.exception()


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class SharePartitionManager:
    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.persister: Persister | None = None  # None: in memory only (a broker without its share coordinator)
        # a group's configs (KIP-932's share.* group configs), read when a share-partition is loaded; may block
        self.group_config: Callable[[str], dict[str, str]] | None = None
        self._loading: dict[SharePartitionKey, asyncio.Future[SharePartition]] = {}

    @staticmethod
    def now() -> float:
        return time.monotonic()

    # ---------------------------------------------------------------- sessions

    def session(self, group_id: str, member_id: str, epoch: int, add: set[TopicPartition],
                forget: set[TopicPartition], *, acknowledging: bool, connection_id: str = "") -> ShareSession | None:
        """The share session for a request with ShareSessionEpoch `epoch` (None: the final one, now closed).
        Kafka's SharePartitionManager.newContext: epoch 0 with acknowledgements is INVALID_REQUEST, an unknown
        session SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise SessionError(E.invalid_request, "Acknowledge data present on initial fetch request")
            old = self.sessions.pop(key, None)
            if old is not None:
                self._release(old)
            session = ShareSession(group_id, member_id, next_epoch(0), set(add), connection_id)
            self.sessions[key] = session
            return session
        current = self.sessions.get(key)
        if current is None:
            raise SessionError(E.share_session_not_found, f"Share session not found for member {member_id}")
        if epoch == FINAL_EPOCH:
            if add:
                raise SessionError(E.invalid_request, "Fetch data present on final fetch request")
            return None
        if epoch != current.epoch:
            raise SessionError(E.invalid_share_session_epoch,
                               f"Expected share session epoch {current.epoch}, got {epoch}")
        current.epoch = next_epoch(epoch)
        current.partitions |= add
        current.partitions -= forget
        return current

    def close_session(self, group_id: str, member_id: str) -> None:
        """After the final request's acknowledgements: the session goes and the member's records are released."""
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            self._release(session)

    def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: the share sessions it opened end and their members' acquired records are
        available to the others at once, not when their locks expire (Kafka's SharePartitionManager does this with
        its connection-disconnect listener). The release is in memory, as close_session's: the next change of the
        share-partition writes it."""
        if not connection_id:
            return
        for key in [k for k, s in self.sessions.items() if s.connection_id == connection_id]:
            self._release(self.sessions.pop(key))

    def _release(self, session: ShareSession) -> None:
        for topic, partition in session.partitions:
            sp = self.partitions.get((session.group_id, topic, partition))
            if sp is not None:
                sp.release_member(session.member_id)

    # ---------------------------------------------------------------- share-partitions

    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic, partition))

    async def load(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                   log_start_offset: int, high_watermark: int) -> SharePartition:
        """The share-partition, read back from its durable state on the first use under this leader epoch (one
        read however many requests wait for it)."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is not None and sp.leader_epoch == leader_epoch:
            return sp
        pending = self._loading.get(key)
        if pending is None:
            # a task of its own that requests only wait for: run in the first request's task, the read was
            # cancelled with it (its client disconnected) and every request waiting for the same read got a
            # CancelledError it never asked for, so went unanswered
            pending = self._loading[key] = asyncio.get_running_loop().create_task(
                self._load_and_keep(key, topic_id, leader_epoch, log_start_offset, high_watermark)
            )
            pending.add_done_callback(_retrieve_outcome)
        return await asyncio.shield(pending)

    async def _load_and_keep(self, key: SharePartitionKey, topic_id: uuid.UUID, leader_epoch: int,
                             log_start_offset: int, high_watermark: int) -> SharePartition:
        group_id, _, partition = key
        try:
            sp = await self._load(group_id, topic_id, partition, leader_epoch, log_start_offset, high_watermark)
            self.partitions[key] = sp
            return sp
        finally:
            del self._loading[key]

    async def _load(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                    log_start_offset: int, high_watermark: int) -> SharePartition:
        overrides = await asyncio.to_thread(self.group_config, group_id) if self.group_config is not None else {}
        reset = overrides.get("share.auto.offset.reset", self.config.auto_offset_reset)
        start = log_start_offset if reset == "earliest" else high_watermark
        sp = SharePartition(
            start,
            lock_duration_ms=_int(overrides, "share.record.lock.duration.ms", self.config.lock_duration_ms),
            delivery_count_limit=_int(overrides, "share.delivery.count.limit", self.config.delivery_count_limit),
            max_in_flight=_int(overrides, "share.partition.max.record.locks", self.config.max_in_flight),
        )
        sp.read_committed = overrides.get("share.isolation.level") == "read_committed"
        sp.leader_epoch = leader_epoch
        sp.state_key = ShareStateKey(group_id, topic_id, partition)
        if self.persister is None:
            return sp
        stored = await self.persister.read(sp.state_key, leader_epoch)
        if stored is not None:
            sp.state_epoch = stored.state_epoch
            if stored.start_offset >= 0:  # -1: reset (DeleteShareGroupOffsets), share.auto.offset.reset applies
                sp.restore(max(stored.start_offset, log_start_offset), stored.batches)
        await self.persist(sp)  # the start offset (and this leader epoch) are durable before anything is served
        return sp

    async def persist(self, sp: SharePartition) -> None:
        """Write the share-partition's state if it changed since the last write (writes of one share-partition
        one at a time, each the state as it is when its turn comes, so the last one written is the newest)."""
        if self.persister is None or sp.state_key is None:
            return
        async with sp.write_lock:
            snapshot = sp.snapshot()
            if snapshot == sp.persisted:
                return
            start, batches = snapshot
            try:
                await self.persister.write(sp.state_key, ShareState(sp.state_epoch, sp.leader_epoch, start, batches))
            except PersisterError as exc:
                if exc.code in (E.fenced_state_epoch, E.fenced_leader_epoch):
                    # re-initialized by an admin, or another leader took over: what this broker holds is stale
                    key = (sp.state_key.group_id, self._topic_of(sp), sp.state_key.partition)
                    if self.partitions.get(key) is sp:
                        del self.partitions[key]
                raise
            sp.persisted = snapshot

    def _topic_of(self, sp: SharePartition) -> str:
        return next((k[1] for k, v in self.partitions.items() if v is sp), "")

    def drop_group(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
