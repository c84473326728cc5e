"""The follower's side of a KIP-227 fetch session (kbus.server.replication.session), against the leader's session
cache (kbus.server.replication.fetch_session) where the two meet: what a request lists, and how errors start over."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kbus.protocol.fetch_request import FetchPartition
from kbus.server.replication.fetch_session import FetchContext, FetchSessionCache
from kbus.server.replication.session import INITIAL_EPOCH, FetchSessionHandler


def fp(index: int, offset: int, epoch: int = 0) -> FetchPartition:
    return FetchPartition(index, epoch, offset, 0, 1 << 20)


def wanted(**offsets: int) -> dict[tuple[str, int], FetchPartition]:
    return {(topic, 0): fp(0, offset) for topic, offset in offsets.items()}


def test_full_then_only_what_moved() -> None:
    h = FetchSessionHandler()
    first = h.build(wanted(a=0, b=5, c=9))
    assert first.full and first.session_id == 0 and first.epoch == INITIAL_EPOCH and len(first.to_send) == 3
    assert h.handle_response(ErrorCode.none, 77)
    second = h.build(wanted(a=3, b=5, c=9))  # only a moved on
    assert (second.session_id, second.epoch, list(second.to_send), second.forgotten) == (77, 1, [("a", 0)], [])
    assert h.handle_response(ErrorCode.none, 77)
    idle = h.build(wanted(a=3, b=5, c=9))
    assert (idle.epoch, idle.to_send, idle.forgotten) == (2, {}, [])  # nothing moved: an empty incremental fetch
    h.handle_response(ErrorCode.none, 77)
    dropped = h.build(wanted(a=3, c=9))
    assert dropped.to_send == {} and dropped.forgotten == [("b", 0)]
    h.handle_response(ErrorCode.none, 77)
    back = h.build({**wanted(a=3, c=9), ("b", 0): fp(0, 5, epoch=1)})  # back, with a new leader epoch
    assert list(back.to_send) == [("b", 0)] and back.epoch == 4


def test_a_new_leader_epoch_is_a_change() -> None:
    h = FetchSessionHandler()
    h.build({("t", 0): fp(0, 10)})
    h.handle_response(ErrorCode.none, 5)
    assert list(h.build({("t", 0): fp(0, 10, epoch=2)}).to_send) == [("t", 0)]


def test_session_errors_start_a_new_session_with_a_full_fetch() -> None:
    for error in (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch):
        h = FetchSessionHandler()
        h.build(wanted(a=0, b=0))
        h.handle_response(ErrorCode.none, 9)
        h.build(wanted(a=1, b=0))
        assert not h.handle_response(error, 0)
        again = h.build(wanted(a=1, b=0))
        assert again.full and again.session_id == 0 and len(again.to_send) == 2


def test_a_failed_request_closes_the_session_and_opens_another() -> None:
    h = FetchSessionHandler()
    h.build(wanted(a=0))
    h.handle_response(ErrorCode.none, 9)
    h.build(wanted(a=1))
    h.handle_error()  # connection lost: did the leader move the epoch on? unknown
    again = h.build(wanted(a=1))
    assert again.full and (again.session_id, again.epoch) == (9, INITIAL_EPOCH)  # closes 9, asks for a new one


def test_no_session_from_the_leader_keeps_fetching_in_full() -> None:
    h = FetchSessionHandler()
    h.build(wanted(a=0))
    assert h.handle_response(ErrorCode.none, 0)  # the leader's cache had no room
    assert h.build(wanted(a=0)).full


def test_with_the_leaders_cache_the_session_holds_every_partition() -> None:
    """The follower's incremental requests and the leader's cache agree on what the session holds and at which
    positions, across moves, drops and re-adds."""
    cache = FetchSessionCache(max_slots=10)
    h = FetchSessionHandler()
    now = 0.0
    steps = [wanted(a=0, b=0, c=0), wanted(a=2, b=0, c=0), wanted(a=2, b=0, c=4), wanted(a=2, c=4),
             wanted(a=2, c=4), {**wanted(a=5, c=4), ("b", 0): fp(0, 1, 3)}]  # fmt: skip
    for step in steps:
        req = h.build(step)
        ctx = cache.new_context(req.session_id, req.epoch, req.topics(), req.forgotten_topics(), now)
        assert isinstance(ctx, FetchContext)
        assert {(t, p.partition): p.fetch_offset for t, ps in ctx.topics() for p in ps} == {
            tp: p.fetch_offset for tp, p in step.items()
        }
        assert ctx.incremental == (not req.full)
        h.handle_response(ErrorCode.none, ctx.session_id)
        now += 1
