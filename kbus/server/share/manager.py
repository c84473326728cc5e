"""The share-partitions this broker leads and the share sessions of its share consumers (Kafka's
SharePartitionManager and ShareSessionCache).

A share session (KIP-932) is per (group, member): ShareSessionEpoch 0 opens it with the request's partitions
(replacing an older one), each later request must carry the next epoch and may add partitions or forget some, -1
closes it (acknowledging only) and releases what the member still holds.

A share-partition is created on the first ShareFetch of its group, its SPSO set by `share.auto.offset.reset`:
`latest` (Kafka's default) is the partition's high watermark then, `earliest` its log start offset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode as E

from kbus.server.share.partition import SharePartition

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


@dataclass(frozen=True, slots=True)
class ShareConfig:
    lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000
    auto_offset_reset: str = "latest"


class SessionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class SharePartitionManager:
    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    @staticmethod
    def now() -> float:
        return time.monotonic()

    # ---------------------------------------------------------------- sessions

    def session(self, group_id: str, member_id: str, epoch: int, add: set[TopicPartition],
                forget: set[TopicPartition], *, acknowledging: bool) -> ShareSession | None:
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
            session = ShareSession(group_id, member_id, next_epoch(0), set(add))
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

    def _release(self, session: ShareSession) -> None:
        for topic, partition in session.partitions:
            sp = self.partitions.get((session.group_id, topic, partition))
            if sp is not None:
                sp.release_member(session.member_id)

    # ---------------------------------------------------------------- share-partitions

    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic, partition))

    def get_or_create(self, group_id: str, topic: str, partition: int, leader_epoch: int,
                      log_start_offset: int, high_watermark: int) -> SharePartition:
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is not None and sp.leader_epoch != leader_epoch:
            # leadership moved away and back: what this broker knew is stale
            sp = None
            del self.partitions[key]
        if sp is None:
            start = log_start_offset if self.config.auto_offset_reset == "earliest" else high_watermark
            sp = SharePartition(start, lock_duration_ms=self.config.lock_duration_ms,
                                delivery_count_limit=self.config.delivery_count_limit,
                                max_in_flight=self.config.max_in_flight)
            sp.leader_epoch = leader_epoch
            self.partitions[key] = sp
        return sp

    def drop_group(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
