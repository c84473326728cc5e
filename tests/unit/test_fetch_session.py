"""KIP-227 fetch sessions: which partitions an incremental fetch reads and answers, and the session errors."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kbus.server.replication.fetch_session import FetchContext, FetchSessionCache, FetchSessionError


@dataclass(frozen=True)
class FP:
    partition: int
    fetch_offset: int = 0
    partition_max_bytes: int = 1 << 20


def full(cache: FetchSessionCache, n: int = 3, now: float = 0.0) -> FetchContext:
    ctx = cache.new_context(0, 0, [("t", [FP(p) for p in range(n)])], [], now)
    assert isinstance(ctx, FetchContext)
    return ctx


def answer(ctx: FetchContext, changed: dict[int, int], records: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """One response: partition p has high watermark changed.get(p, 0); returns the partitions included."""
    out = [fp.partition for t, parts in ctx.topics() for fp in parts
           if ctx.include(t, fp.partition, error=ErrorCode.none, has_records=fp.partition in records,
                          high_watermark=changed.get(fp.partition, 0), last_stable_offset=0, log_start_offset=0)]
    ctx.commit()
    return out


def test_a_session_answers_only_what_changed() -> None:
    cache = FetchSessionCache(10)
    first = full(cache)
    assert first.session_id != 0 and not first.incremental
    assert answer(first, {}) == [0, 1, 2]  # a full fetch answers everything
    # epoch 1: the client sends nothing (no position moved); only partition 1's high watermark moved
    inc = cache.new_context(first.session_id, 1, [], [], 1.0)
    assert isinstance(inc, FetchContext) and inc.incremental
    assert [fp.partition for _, parts in inc.topics() for fp in parts] == [0, 1, 2]  # all are still read
    assert answer(inc, {1: 5}) == [1]
    # epoch 2: partition 2 has records to send; partition 1 is unchanged since it was last answered
    inc = cache.new_context(first.session_id, 2, [], [], 2.0)
    assert isinstance(inc, FetchContext)
    assert answer(inc, {1: 5}, records={2}) == [2]


def test_new_positions_and_forgotten_partitions_update_the_session() -> None:
    cache = FetchSessionCache(10)
    first = full(cache)
    answer(first, {})
    inc = cache.new_context(first.session_id, 1, [("t", [FP(1, fetch_offset=40)]), ("u", [FP(0)])],
                            [("t", [2])], 1.0)
    assert isinstance(inc, FetchContext)
    read = [(t, fp.partition, fp.fetch_offset) for t, parts in inc.topics() for fp in parts]
    assert read == [("t", 0, 0), ("t", 1, 40), ("u", 0, 0)]
    assert answer(inc, {}) == [0]  # u-0 is new to the client (t-0 is the partition index listed first)


def test_a_thrown_away_pass_is_not_remembered() -> None:
    cache = FetchSessionCache(10)
    first = full(cache, 1)
    answer(first, {})
    inc = cache.new_context(first.session_id, 1, [], [], 1.0)
    assert isinstance(inc, FetchContext)
    assert inc.include("t", 0, error=0, has_records=False, high_watermark=9, last_stable_offset=0,
                       log_start_offset=0)
    inc.reset_pass()  # the fetch waited and read again; nothing went out
    inc.commit()
    inc = cache.new_context(first.session_id, 2, [], [], 2.0)
    assert isinstance(inc, FetchContext)
    assert answer(inc, {0: 9}) == [0]  # still news to the client


def test_session_errors_and_sessionless_fetches() -> None:
    cache = FetchSessionCache(10)
    first = full(cache)
    assert cache.new_context(first.session_id, 5, [], [], 1.0) == \
        FetchSessionError(ErrorCode.invalid_fetch_session_epoch)
    assert cache.new_context(12345, 1, [], [], 1.0) == FetchSessionError(ErrorCode.fetch_session_id_not_found)
    # librdkafka: session 0, epoch -1: a full fetch without a session
    ctx = cache.new_context(0, -1, [("t", [FP(0)])], [], 1.0)
    assert isinstance(ctx, FetchContext) and ctx.session_id == 0 and ctx.session is None
    # epoch -1 with a session id closes that session
    cache.new_context(first.session_id, -1, [("t", [FP(0)])], [], 1.0)
    assert cache.new_context(first.session_id, 1, [], [], 1.0) == \
        FetchSessionError(ErrorCode.fetch_session_id_not_found)


def test_the_cache_is_bounded() -> None:
    assert full(FetchSessionCache(0)).session_id == 0  # max.incremental.fetch.session.cache.slots=0: none
    cache = FetchSessionCache(2, eviction_ms=1000)
    a, b = full(cache, now=0.0), full(cache, now=0.5)
    assert full(cache, now=0.9).session_id == 0  # full, and nobody idle long enough to evict
    c = full(cache, now=1.2)  # a has been idle for 1.2 s: evicted
    assert c.session_id not in (0, a.session_id, b.session_id) and len(cache) == 2
    assert cache.new_context(a.session_id, 1, [], [], 1.3) == FetchSessionError(ErrorCode.fetch_session_id_not_found)


def test_unchanged_is_what_the_client_was_last_told() -> None:
    cache = FetchSessionCache(10)
    first = full(cache, 2)
    assert not first.unchanged("t", 0, 0, 0, 0)  # a full fetch reads everything
    answer(first, {1: 7})
    inc = cache.new_context(first.session_id, 1, [], [], 1.0)
    assert isinstance(inc, FetchContext)
    assert inc.unchanged("t", 0, 0, 0, 0) and inc.unchanged("t", 1, 7, 0, 0)
    assert not inc.unchanged("t", 1, 8, 0, 0)  # the high watermark moved: the client must hear of it
    assert not inc.unchanged("t", 0, 0, 0, 3)  # so did the log start offset
    assert not inc.unchanged("u", 0, 0, 0, 0)  # never told


def test_a_followers_session_takes_a_consumers_slot_when_the_cache_is_full() -> None:
    cache = FetchSessionCache(2, eviction_ms=60_000)

    def start(now: float, privileged: bool) -> int:
        ctx = cache.new_context(0, 0, [("t", [FP(0)])], [], now, privileged=privileged)
        assert isinstance(ctx, FetchContext)
        return ctx.session_id

    consumer, follower = start(0.0, False), start(0.1, True)
    assert start(0.2, False) == 0  # a consumer waits for an idle slot
    second_follower = start(0.3, True)  # a follower does not: the consumer's session goes
    assert second_follower != 0 and len(cache) == 2
    assert cache.new_context(consumer, 1, [], [], 0.4) == FetchSessionError(ErrorCode.fetch_session_id_not_found)
    assert start(0.5, True) == 0  # only followers left: nobody to evict
    assert isinstance(cache.new_context(follower, 1, [], [], 0.6), FetchContext)


def test_a_topic_listed_twice_in_a_row_is_one_group() -> None:
    # the response groups partitions by topic as Kafka's does (a new topic entry only where the topic changes); a
    # topic listed with no partitions is not in it
    cache = FetchSessionCache(10)
    for epoch in (-1, 0):  # sessionless, and a new session
        ctx = cache.new_context(0, epoch, [("t", [FP(0)]), ("t", [FP(1)]), ("u", []), ("v", [FP(0)]), ("t", [FP(2)])],
                                [], 0.0)
        assert isinstance(ctx, FetchContext)
        assert [(t, [fp.partition for fp in parts]) for t, parts in ctx.topics()] == [
            ("t", [0, 1]), ("v", [0]), ("t", [2])]
        # the common case, each topic once: the request's own lists, as they are
        parts = [FP(0), FP(1)]
        ctx = cache.new_context(0, epoch, [("t", parts), ("v", [FP(0)])], [], 0.0)
        assert isinstance(ctx, FetchContext)
        assert ctx.topics()[0][1] is parts
