"""Fetch sessions (server/fetch_session.py) driven directly: Kafka's FetchManager.newContext rules,
the incremental answer's choice of partitions, and the cache's eviction (a clock passed in, no sleeps).
What a client sees over TCP is tests/integration/test_fetch_sessions.py."""

from __future__ import annotations

import random
import uuid

import pytest
from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.fetch_response import FetchPartition
from kafka_sidecar.server.fetch_session import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchManager,
    FetchSessionCache,
    FetchSessionCacheShard,
    FullFetchContext,
    IncrementalFetchContext,
    Reads,
    SessionErrorContext,
    SessionIdOutOfRange,
    SessionlessFetchContext,
    next_epoch,
)

TID = uuid.UUID(int=0x1234)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def by_name(topic: str, partitions: list[int], offset: int = 0) -> dict:
    return {(topic, p): CachedPartition((topic, p), topic, None, p, 1 << 20, offset) for p in partitions}


def by_id(partitions: list[int], offset: int = 0, tid: uuid.UUID = TID) -> dict:
    return {(tid.int, p): CachedPartition((tid.int, p), "t", tid, p, 1 << 20, offset) for p in partitions}


def answer(ctx, hw: int = 10, log_start: int = 0, records: dict | None = None, error: dict | None = None):
    """Results as _read_all makes them: every context partition read, with these answers."""
    out = Reads()
    for cp in ctx.partitions:
        code = (error or {}).get(cp.partition, 0)
        fp = FetchPartition(cp.partition, code, -1 if code else hw, -1 if code else hw, -1 if code else log_start,
                            (records or {}).get(cp.partition, b""))
        out.partitions.append(cp)
        out.answers.append(fp)
    return out


def reads(pairs) -> Reads:
    out = Reads()
    for cp, fp in pairs:
        out.partitions.append(cp)
        out.answers.append(fp)
    return out


def indexes(sent: Reads) -> list[int]:
    return [cp.partition for cp in sent.partitions]


def open_session(fm: FetchManager, data: dict, version: int = 12, **kw) -> int:
    ctx = fm.new_context(version, 0, INITIAL_EPOCH, False, data, [])
    assert isinstance(ctx, FullFetchContext)
    code, sid, sent = ctx.response(answer(ctx, **kw))
    assert code == 0 and sid != 0 and len(sent) == len(data)
    return sid


def test_next_epoch_wraps_to_1_and_final_stays_final():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_opens_a_session_then_incremental_epochs_advance():
    fm = FetchManager(FetchSessionCache(1000), Clock())
    sid = open_session(fm, by_name("t", [0, 1, 2]))
    assert 0 < sid < 2**31 - 1
    for epoch in (1, 2, 3):
        ctx = fm.new_context(12, sid, epoch, False, {}, [])
        assert isinstance(ctx, IncrementalFetchContext)
        assert [cp.partition for cp in ctx.partitions] == [0, 1, 2]
        code, got_sid, sent = ctx.response(answer(ctx))
        assert (code, got_sid, len(sent)) == (0, sid, 0)  # nothing changed: an empty incremental answer
    # The same epoch again (a retried request) is stale now.
    ctx = fm.new_context(12, sid, 3, False, {}, [])
    assert isinstance(ctx, SessionErrorContext)
    assert ctx.response(Reads())[:2] == (errors.INVALID_FETCH_SESSION_EPOCH, 0)


def test_session_errors():
    fm = FetchManager(FetchSessionCache(1000), Clock())
    sid = open_session(fm, by_id([0]), version=13)
    assert fm.new_context(13, sid + 1 if sid + 1 < 2**31 - 8 else sid - 1, 1, False, {}, []).error_code == errors.FETCH_SESSION_ID_NOT_FOUND
    assert fm.new_context(13, 0, 5, False, {}, []).error_code == errors.FETCH_SESSION_ID_NOT_FOUND
    assert fm.new_context(13, sid, 7, False, {}, []).error_code == errors.INVALID_FETCH_SESSION_EPOCH
    assert fm.new_context(13, sid, -2, False, {}, []).error_code == errors.INVALID_FETCH_SESSION_EPOCH
    # Made with topic ids (v13+), continued by name (v12): Kafka's FETCH_SESSION_TOPIC_ID_ERROR.
    assert fm.new_context(12, sid, 1, False, {}, []).error_code == errors.FETCH_SESSION_TOPIC_ID_ERROR
    # None of the errors moved the session: epoch 1 still continues it.
    assert isinstance(fm.new_context(13, sid, 1, False, {}, []), IncrementalFetchContext)
    # Small negative ids fall in shard 0 (Java's division): not found; ids past the last shard fail.
    assert fm.new_context(13, -5, 1, False, {}, []).error_code == errors.FETCH_SESSION_ID_NOT_FOUND
    with pytest.raises(SessionIdOutOfRange):
        fm.new_context(13, 2**31 - 1, 1, False, {}, [])
    with pytest.raises(SessionIdOutOfRange):
        fm.new_context(13, -(2**31), INITIAL_EPOCH, False, {}, [])


def test_full_requests_close_the_session_they_name():
    cache = FetchSessionCache(1000)
    fm = FetchManager(cache, Clock())
    sid = open_session(fm, by_name("t", [0]))
    ctx = fm.new_context(12, sid, FINAL_EPOCH, False, by_name("t", [0]), [])
    assert isinstance(ctx, SessionlessFetchContext) and len(cache) == 0
    assert ctx.response(answer(ctx))[:2] == (0, 0)
    sid = open_session(fm, by_name("t", [0]))
    sid2 = open_session(fm, by_name("t", [0]))  # epoch 0 naming no session: another session
    assert sid2 != sid and len(cache) == 2
    ctx = fm.new_context(12, sid, INITIAL_EPOCH, False, by_name("t", [0]), [])
    assert isinstance(ctx, FullFetchContext) and cache.shard_for(sid).get(sid) is None


def test_incremental_updates_then_forgets_and_an_empty_session_closes():
    cache = FetchSessionCache(1000)
    fm = FetchManager(cache, Clock())
    sid = open_session(fm, by_name("t", [0, 1]))
    # New partition 2, new offset for 0; partition 1 both named and forgotten: forgotten wins (Kafka's order).
    ctx = fm.new_context(12, sid, 1, False, {**by_name("t", [0], offset=5), **by_name("t", [2, 1])}, [("t", 1)])
    parts = {cp.partition: cp for cp in ctx.partitions}
    assert sorted(parts) == [0, 2] and parts[0].fetch_offset == 5
    code, _, sent = ctx.response(answer(ctx))
    assert indexes(sent) == [2]  # only the new one: 0 is unchanged
    ctx = fm.new_context(12, sid, 2, False, {}, [("t", 0), ("t", 2), ("u", 9)])
    assert isinstance(ctx, SessionlessFetchContext) and len(cache) == 0


def test_incremental_answer_rules():
    fm = FetchManager(FetchSessionCache(1000), Clock())
    sid = open_session(fm, by_name("t", [0, 1, 2, 3]), hw=10, log_start=0)
    ctx = fm.new_context(12, sid, 1, False, {}, [])
    results = answer(ctx, hw=10, log_start=0, records={1: b"x" * 70}, error={3: errors.UNKNOWN_TOPIC_OR_PARTITION})
    # Sizing (a quota check) changes nothing ...
    assert indexes(ctx.response(results, update=False)[2]) == [1, 3]
    # ... answering does: partition 1 had records, so it is read last from now on.
    assert indexes(ctx.response(results)[2]) == [1, 3]
    assert [cp.partition for cp in ctx.session.partitions.values()] == [0, 2, 3, 1]
    ctx = fm.new_context(12, sid, 2, False, {}, [])
    # Partition 3's error is gone: sent again (its cached high watermark was reset); 0's high watermark moved.
    results = reads((cp, FetchPartition(cp.partition, 0, 11 if cp.partition == 0 else 10, 10, 0)) for cp in ctx.partitions)
    assert indexes(ctx.response(results)[2]) == [0, 3]
    ctx = fm.new_context(12, sid, 3, False, {}, [])
    results = reads((cp, FetchPartition(cp.partition, 0, 11 if cp.partition == 0 else 10, 10, 2 if cp.partition == 2 else 0))
                    for cp in ctx.partitions)
    assert indexes(ctx.response(results)[2]) == [2]  # the log start offset moved


def test_throttled_answers_keep_the_session_state():
    fm = FetchManager(FetchSessionCache(1000), Clock())
    full = fm.new_context(12, 0, INITIAL_EPOCH, False, by_name("t", [0]), [])
    assert full.throttled_response() == (0, 0)  # throttled full fetch: no session made
    assert len(fm.cache) == 0
    sid = open_session(fm, by_name("t", [0]), hw=10)
    ctx = fm.new_context(12, sid, 1, False, {}, [])
    assert ctx.throttled_response() == (0, sid)
    ctx = fm.new_context(12, sid, 2, False, {}, [])  # the client goes on with the next epoch
    results = reads((cp, FetchPartition(0, 0, 12, 12, 0)) for cp in ctx.partitions)
    assert len(ctx.response(results)[2]) == 1
    # A duplicate of epoch 2 made meanwhile: the first one's answer is INVALID_FETCH_SESSION_EPOCH.
    ctx_a = fm.new_context(12, sid, 3, False, {}, [])
    fm.cache.shard_for(sid).get(sid).epoch = 3  # the session moved on under it (another request of epoch 3)
    assert ctx_a.throttled_response() == (errors.INVALID_FETCH_SESSION_EPOCH, sid)
    assert ctx_a.response(Reads())[:2] == (errors.INVALID_FETCH_SESSION_EPOCH, sid)


def test_cache_slots_are_split_over_8_shards_round_robin():
    cache = FetchSessionCache(1000, rng=random.Random(7))
    assert [s.max_entries for s in cache.shards] == [125] * 8
    fm = FetchManager(cache, Clock())
    ids = [open_session(fm, by_name("t", [0])) for _ in range(16)]
    assert [i // cache.session_id_range for i in ids] == list(range(8)) * 2
    assert all(i > 0 for i in ids) and len(set(ids)) == 16
    assert cache.total_partitions == 16
    # Fewer slots than shards: Kafka's integer division leaves every shard without room.
    tiny = FetchManager(FetchSessionCache(7), Clock())
    ctx = tiny.new_context(12, 0, INITIAL_EPOCH, False, by_name("t", [0]), [])
    assert ctx.response(answer(ctx))[1] == 0


def one_shard(slots: int) -> tuple[FetchManager, Clock, FetchSessionCacheShard]:
    clock = Clock()
    cache = FetchSessionCache(slots, num_shards=1)
    return FetchManager(cache, clock), clock, cache.shards[0]


def test_full_cache_answers_session_id_0_until_a_session_goes_stale():
    fm, clock, shard = one_shard(2)
    a = open_session(fm, by_name("t", [0, 1]))
    clock.ms += 1000
    b = open_session(fm, by_name("t", [0, 1]))
    ctx = fm.new_context(12, 0, INITIAL_EPOCH, False, by_name("t", [0, 1, 2]), [])
    # Young sessions are not evictable by an unprivileged one, whatever its size.
    assert ctx.response(answer(ctx))[1] == 0 and len(shard) == 2
    clock.ms += EVICTION_MS  # a: unused for more than 2 minutes since (b: exactly 2 minutes)
    ctx = fm.new_context(12, 0, INITIAL_EPOCH, False, by_name("t", [0]), [])
    c = ctx.response(answer(ctx))[1]
    assert c != 0 and shard.get(a) is None and shard.get(b) is not None and shard.evictions == 1


def test_unprivileged_evicts_an_old_smaller_session_only():
    fm, clock, shard = one_shard(1)
    a = open_session(fm, by_name("t", [0, 1]))
    clock.ms += EVICTION_MS + 1
    fm.new_context(12, a, 1, False, {}, [])  # touched when older than 2 minutes: evictable by all
    clock.ms += 10
    for size, evicted in ((2, False), (3, True)):  # more partitions than the victim, not as many
        ctx = fm.new_context(12, 0, INITIAL_EPOCH, False, by_name("u", list(range(size))), [])
        sid = ctx.response(answer(ctx))[1]
        assert (sid != 0) == evicted
    assert shard.get(a) is None and len(shard) == 1


def test_privileged_evicts_a_young_unprivileged_session():
    fm, clock, shard = one_shard(1)
    a = open_session(fm, by_name("t", [0, 1, 2]))
    clock.ms += 5
    ctx = fm.new_context(12, 0, INITIAL_EPOCH, True, by_name("t", [0]), [])  # a follower's fetch
    f = ctx.response(answer(ctx))[1]
    assert f != 0 and shard.get(a) is None and shard.get(f).privileged
    # A young privileged session is evictable by nobody.
    ctx = fm.new_context(12, 0, INITIAL_EPOCH, True, by_name("t", list(range(9))), [])
    assert ctx.response(answer(ctx))[1] == 0
