"""The follower's side of a KIP-227 fetch session (Kafka's FetchSessionHandler), sans I/O.

A follower fetches every partition it follows from a leader after every response. Without a session each request
lists all of them and each response carries all of them, so the leader re-reads and re-encodes, and the follower
re-decodes, every idle partition (17 idle `__consumer_offsets` partitions beside the one with data, in the RF=3
latency benchmark) on the replica round trip that acks=all waits for. In a session the first request is full;
the leader answers with a session id, and from then on a request lists only the partitions whose fetch position
changed (plus the ones the follower stopped fetching, as forgotten) and a response only the partitions with
something new: records, an error, a changed high watermark or log start offset.

An error naming the session (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH: the leader restarted or
evicted it) starts a new one with a full fetch; so does any failed request, as the leader may or may not have
moved the epoch on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kbus.protocol.fetch_request import FetchPartition

TopicPartition = tuple[str, int]
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
NO_SESSION = 0
_SESSION_ERRORS = (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch)


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What one Fetch request of the session carries."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, FetchPartition]  # a full fetch: every partition; incremental: the changed ones
    forgotten: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def topics(self) -> list[tuple[str, list[FetchPartition]]]:
        """`to_send` grouped by topic, as a Fetch request lists it."""
        out: dict[str, list[FetchPartition]] = {}
        for (topic, _), fp in self.to_send.items():
            out.setdefault(topic, []).append(fp)
        return list(out.items())

    def forgotten_topics(self) -> list[tuple[str, list[int]]]:
        """`forgotten` grouped by topic, as `forgotten_topics_data` lists it."""
        out: dict[str, list[int]] = {}
        for topic, index in self.forgotten:
            out.setdefault(topic, []).append(index)
        return list(out.items())


@dataclass(slots=True)
class FetchSessionHandler:
    """One leader's session, as the follower keeps it. `build()` before each request, then exactly one of
    `handle_response()` / `handle_error()` for it."""

    session_id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH
    # the partitions the leader's session holds, with the position it last heard for each
    _session: dict[TopicPartition, FetchPartition] = field(default_factory=dict)
    _pending: dict[TopicPartition, FetchPartition] | None = None

    def build(self, wanted: dict[TopicPartition, FetchPartition]) -> SessionRequest:
        """The request for fetching `wanted` (every partition this follower fetches from the leader now)."""
        self._pending = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, self._pending, [])
        session = self._session
        # `is not` first: the fetcher hands back the same object for a position that has not moved
        to_send = {tp: fp for tp, fp in wanted.items() if (held := session.get(tp)) is not fp and held != fp}
        forgotten = [tp for tp in session if tp not in wanted]
        return SessionRequest(self.session_id, self.epoch, to_send, forgotten)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """The response's top-level error and session id; False when the response carried no partitions to apply
        (a session error: the next request is a full one)."""
        pending, self._pending = self._pending, None
        if error_code != ErrorCode.none:
            if error_code in _SESSION_ERRORS:
                self.session_id = NO_SESSION  # the leader has no such session: ask for a new one
            self.epoch = INITIAL_EPOCH  # anything else: close this one and start again (nextCloseExisting)
            self._session = {}
            return False
        if self.epoch == INITIAL_EPOCH:
            # session id 0: the leader keeps no session for us (its cache is full, or sessions are off):
            # the next fetch is full again and asks once more
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == NO_SESSION else 1
        else:
            self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
        if pending is not None:
            self._session = pending if self.session_id != NO_SESSION else {}
        return True

    def handle_error(self) -> None:
        """The request failed without a response (connection lost, timeout): whether the leader moved the
        epoch on is unknown, so the next request starts the session again (closing this one, if it exists)."""
        self._pending = None
        self.epoch = INITIAL_EPOCH
        self._session = {}
