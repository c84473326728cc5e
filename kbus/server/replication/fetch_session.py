"""Incremental fetch sessions (KIP-227, Kafka's FetchSession.scala / FetchSessionCache), sans I/O.

A client that sends session_id 0 and epoch 0 asks for a session: the broker remembers the partitions it fetches
and answers with a session id. Its next fetches (epoch 1, 2, ...) list only the partitions whose fetch position
changed (plus `forgotten_topics_data` to drop some), and the response carries only partitions with something new:
records, an error, or a changed high watermark, last stable offset or log start offset. With 1,000 partitions
and data on a few, neither side re-sends and re-encodes the other 990-odd partitions every time.

Epoch -1 (FINAL) is a sessionless full fetch (librdkafka always sends that), closing the session it names.
A wrong epoch answers INVALID_FETCH_SESSION_EPOCH, an unknown id FETCH_SESSION_ID_NOT_FOUND; the client then starts
over with a full fetch. Sessions live in a cache of `max.incremental.fetch.session.cache.slots` entries (0: no
sessions); when it is full, the least recently used session idle for `min.incremental.fetch.session.eviction.ms`
makes room, and a follower's new session (privileged, as in Kafka: replication must not lose its sessions to
consumers) may take the least recently used consumer's. Kafka also lets a consumer session with more partitions
evict a smaller one; kbus does not weigh sizes.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


class FetchPartitionRequest(Protocol):
    """What a Fetch request says about one partition (kio's FetchPartition of any version)."""

    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...  # -1 where the version lacks it


class _Sent:
    """What the client was last told about a partition (plain classes here: mypyc compiles their __init__, a
    dataclass's is generated Python; one of these is made per partition whose offsets a response changes)."""

    __slots__ = ("high_watermark", "last_stable_offset", "log_start_offset")

    def __init__(self, high_watermark: int = -2, last_stable_offset: int = -2, log_start_offset: int = -2) -> None:
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    last_used: float
    privileged: bool = False  # a follower's
    partitions: OrderedDict[tuple[str, int], FetchPartitionRequest] = field(default_factory=OrderedDict)
    sent: dict[tuple[str, int], _Sent] = field(default_factory=dict)


class FetchContext:
    """How to answer one Fetch: which partitions to read, which to put in the response, what session id to send."""

    __slots__ = ("_pending", "groups", "incremental", "session", "session_id")

    def __init__(
        self,
        session_id: int,
        groups: list[tuple[str, Sequence[FetchPartitionRequest]]],
        session: FetchSession | None = None,
        incremental: bool = False,
    ) -> None:
        self.session_id = session_id
        self.groups = groups  # by topic, in request (or session) order; no topic right after itself
        self.session = session
        self.incremental = incremental
        self._pending: dict[tuple[str, int], _Sent] = {}

    def topics(self) -> list[tuple[str, Sequence[FetchPartitionRequest]]]:
        """The partitions to read, grouped by topic in request (or session) order."""
        return self.groups

    def unchanged(
        self, topic: str, partition: int, high_watermark: int, last_stable_offset: int, log_start_offset: int
    ) -> bool:
        """The client of this incremental fetch already knows these offsets of the partition."""
        if self.session is None:
            return False
        sent = self.session.sent.get((topic, partition))
        return (
            sent is not None
            and sent.high_watermark == high_watermark
            and sent.last_stable_offset == last_stable_offset
            and sent.log_start_offset == log_start_offset
        )

    def include(
        self,
        topic: str,
        partition: int,
        *,
        error: int,
        has_records: bool,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
    ) -> bool:
        """Whether the response carries this partition: always in a full fetch; in an incremental one only when
        something changed for the client. What it is told is remembered only when `commit()` is called."""
        if self.session is None:
            return True
        key = (topic, partition)
        sent = self.session.sent.get(key)
        changed = (
            sent is None
            or sent.high_watermark != high_watermark
            or sent.last_stable_offset != last_stable_offset
            or sent.log_start_offset != log_start_offset
        )
        if changed:
            self._pending[key] = _Sent(high_watermark, last_stable_offset, log_start_offset)
        return not self.incremental or changed or has_records or error != ErrorCode.none

    def reset_pass(self) -> None:
        """A pass over the partitions was thrown away (the fetch waits for more data)."""
        self._pending.clear()

    def commit(self) -> None:
        """The response is going out: remember what it told the client."""
        if self.session is not None:
            self.session.sent.update(self._pending)
        self._pending.clear()


@dataclass(frozen=True, slots=True)
class FetchSessionError:
    error_code: int


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int = 120_000) -> None:
        self.max_slots = max_slots
        self.eviction_s = eviction_ms / 1000
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def new_context(
        self,
        session_id: int,
        epoch: int,
        topics: Sequence[tuple[str, Sequence[FetchPartitionRequest]]],  # lists from kbus's decoder, tuples from kio's
        forgotten: Sequence[tuple[str, Sequence[int]]],
        now: float,
        privileged: bool = False,
    ) -> FetchContext | FetchSessionError:
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id:
                self._sessions.pop(session_id, None)  # the client closes (or restarts) its session
            groups = _grouped(topics)
            if epoch == FINAL_EPOCH:
                return FetchContext(0, groups)
            session = self._create(now, privileged)
            if session is None:
                return FetchContext(0, groups)  # no room: a sessionless full fetch
            for t, parts in groups:
                for fp in parts:
                    session.partitions[(t, fp.partition)] = fp
            return FetchContext(session.session_id, groups, session)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchSessionError(ErrorCode.fetch_session_id_not_found)
        if epoch != session.epoch:
            return FetchSessionError(ErrorCode.invalid_fetch_session_epoch)
        session.epoch = _next_epoch(epoch)
        session.last_used = now
        self._sessions.move_to_end(session_id)
        for t, indexes in forgotten:
            for p in indexes:
                session.partitions.pop((t, p), None)
                session.sent.pop((t, p), None)
        for t, fps in topics:
            for fp in fps:
                session.partitions[(t, fp.partition)] = fp  # a new partition, or a new position for a known one
        return FetchContext(session_id, _session_groups(session.partitions), session, True)

    def discard(self, session_id: int) -> None:
        """Forget a session whose first response was never sent (a throttled fetch)."""
        self._sessions.pop(session_id, None)

    def _create(self, now: float, privileged: bool) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.last_used >= self.eviction_s:
                del self._sessions[oldest_id]
            elif privileged:
                consumer = next((sid for sid, s in self._sessions.items() if not s.privileged), None)
                if consumer is None:
                    return None
                del self._sessions[consumer]
            else:
                return None
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, 2**31 - 1)
        session = FetchSession(session_id, 1, now, privileged)
        self._sessions[session_id] = session
        return session


def _grouped(
    topics: Sequence[tuple[str, Sequence[FetchPartitionRequest]]],
) -> list[tuple[str, Sequence[FetchPartitionRequest]]]:
    """The request's topics as the response groups them: a topic listed twice in a row is one group, a topic with
    no partitions none. Almost every request lists each topic once, with partitions: its own lists are kept then,
    nothing is made per partition (a full fetch of 1,000 partitions made a (topic, partition) pair for each)."""
    previous: str | None = None
    regroup = False
    for t, parts in topics:
        if t == previous or not parts:
            regroup = True
            break
        previous = t
    if not regroup:
        return list(topics)
    out: list[tuple[str, Sequence[FetchPartitionRequest]]] = []
    for t, parts in topics:
        if not parts:
            continue
        if out and out[-1][0] == t:
            out[-1] = (t, [*out[-1][1], *parts])
        else:
            out.append((t, parts))
    return out


def _session_groups(
    partitions: OrderedDict[tuple[str, int], FetchPartitionRequest],
) -> list[tuple[str, Sequence[FetchPartitionRequest]]]:
    """A session's partitions grouped by topic, in session order (a topic may come back later, as a new group)."""
    out: list[tuple[str, Sequence[FetchPartitionRequest]]] = []
    group: list[FetchPartitionRequest] = []
    topic = ""
    for (t, _), fp in partitions.items():
        if t != topic and group:
            out.append((topic, group))
            group = []
        topic = t
        group.append(fp)
    if group:
        out.append((topic, group))
    return out


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1
