"""Incremental fetch sessions (KIP-227): Kafka's FetchSession, FetchSessionCache and FetchContexts.

A consumer that sends Fetch with epoch 0 (INITIAL) gets a session: the broker remembers its
partitions and their fetch parameters, answers with a nonzero session id, and from then on the
client sends only what changed (epoch 1, 2, ...: partitions added or with a new fetch offset, and
``forgotten_topics_data``); the answer lists only partitions with records, an error, or a high
watermark / log start offset that moved since the session last answered them. Epoch -1 (FINAL)
asks for no session (and closes the one named). Errors are Kafka's: FETCH_SESSION_ID_NOT_FOUND
(70) for an unknown id, INVALID_FETCH_SESSION_EPOCH (71) for an epoch other than the session's
next, FETCH_SESSION_TOPIC_ID_ERROR (106) when a session made with topic ids (v13+) is continued
without them or the other way round.

The cache is Kafka's: ``max.incremental.fetch.session.cache.slots`` split over 8 shards, new
sessions given to the shards in turn, each shard's session ids in its own range; a full shard
evicts (within the shard) a session unused for 2 minutes, else the least valuable evictable one
if the new session is worth more: privileged (follower) over unprivileged, then more partitions.
When nothing can be evicted the answer has session id 0 (a sessionless fetch).

Per partition the session keeps a ``CachedPartition`` (plain slots): the request's fetch
parameters and the high watermark and log start offset last answered. Time is milliseconds of a
monotonic clock passed in, so tests drive eviction without sleeping.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kafka_sidecar.protocol import errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
# Kafka's BrokerServer: NumFetchSessionCacheShards and MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS.
NUM_SHARDS = 8
EVICTION_MS = 120_000

PartitionKey = tuple[Any, int]  # (topic id's int, partition) with topic ids (v13+), else (topic name, partition)


def next_epoch(prev: int) -> int:
    """FetchMetadata.nextEpoch: FINAL stays FINAL, and the epoch wraps from INT32_MAX to 1."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == INT32_MAX else prev + 1


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class CachedPartition:
    """One partition of a fetch: the request's parameters and, in a session, the high watermark
    and log start offset last sent (-1: never, or after an error, so it is sent again).

    ``key`` is its place in a session: (topic id as an int, partition) with topic ids, else (topic
    name, partition); ints and str hash in C, a UUID's hash is a Python call. Kafka's
    CachedPartition also keeps the request's leader epochs and the follower's log start offset
    for the replica fetcher's checks; a consumer fetch here does not use them."""

    __slots__ = ("key", "topic", "topic_id", "partition", "max_bytes", "fetch_offset", "high_watermark",
                 "local_log_start_offset")

    def __init__(self, key: PartitionKey, topic: str | None, topic_id: uuid.UUID | None, partition: int, max_bytes: int,
                 fetch_offset: int) -> None:
        self.key = key
        self.topic = topic  # None: a topic id this broker does not know (yet)
        self.topic_id = topic_id
        self.partition = partition
        self.max_bytes = max_bytes
        self.fetch_offset = fetch_offset
        self.high_watermark = -1
        self.local_log_start_offset = -1

    def update_request_params(self, req: CachedPartition) -> None:
        self.max_bytes = req.max_bytes
        self.fetch_offset = req.fetch_offset

    def __repr__(self) -> str:
        return (f"CachedPartition({self.topic}, {self.topic_id}, {self.partition}, fetch_offset={self.fetch_offset}, "
                f"high_watermark={self.high_watermark}, local_log_start_offset={self.local_log_start_offset})")


class FetchSession:
    """A session's partitions in fetch order (an insertion-ordered dict: a partition that
    returned records moves to the end, so the others get the response's bytes first next time)."""

    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch",
                 "cached_size", "evictable_by_all", "evictable_by_privileged")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[PartitionKey, CachedPartition],
                 uses_topic_ids: bool, creation_ms: int, epoch: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = creation_ms
        self.epoch = epoch
        self.cached_size = -1  # the size the cache last saw (-1: not in a cache)
        # Kafka's evictableByAll / evictableByPrivileged trees, decided at each touch.
        self.evictable_by_all = False
        self.evictable_by_privileged = False

    def update(self, fetch_data: dict[PartitionKey, CachedPartition], to_forget: Iterable[PartitionKey]) -> None:
        """An incremental request: new partitions added, known ones updated, then forgotten ones removed."""
        parts = self.partitions
        for key, req in fetch_data.items():
            cached = parts.get(key)
            if cached is None:
                parts[key] = req
            else:
                cached.update_request_params(req)
        for key in to_forget:
            parts.pop(key, None)

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, partitions={len(self.partitions)}, "
                f"uses_topic_ids={self.uses_topic_ids}, epoch={self.epoch})")


class FetchSessionCacheShard:
    """One shard: at most ``max_entries`` sessions with ids in [max(1, shard * range), (shard + 1) * range).

    Kafka keeps TreeMaps ordered by (last used, id) and (privileged, size, id); here the same
    orders are found by a scan when a full shard needs a slot (a shard holds slots / 8
    sessions), so using a session (``touch``) stays O(1)."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS, session_id_range: int = INT32_MAX,
                 shard_num: int = 0, rng: random.Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0
        self._rng = rng or random.Random()

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def __len__(self) -> int:
        return len(self.sessions)

    def new_session_id(self) -> int:
        low = max(1, self.shard_num * self.session_id_range)
        high = (self.shard_num + 1) * self.session_id_range
        while True:
            sid = self._rng.randrange(low, high)
            if sid != INVALID_SESSION_ID and sid not in self.sessions:
                return sid

    def maybe_create_session(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], dict[PartitionKey, CachedPartition]]) -> int:
        """A new session if there is room or one can be evicted for it; its id, else 0."""
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now):
            session = FetchSession(self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now,
                                   next_epoch(INITIAL_EPOCH))
            self.sessions[session.id] = session
            self.touch(session, now)
            return session.id
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        """Kafka's tryEvict: the least recently used session if stale, else the first evictable
        one (by privileged, size, id) when the new entry's key is not below it."""
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - oldest.last_used_ms > self.eviction_ms:
            self.remove(oldest)
            self.evictions += 1
            return True
        if privileged:
            candidates = [s for s in self.sessions.values() if s.evictable_by_privileged]
        else:
            candidates = [s for s in self.sessions.values() if s.evictable_by_all]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if key < (victim.privileged, victim.cached_size, victim.id):
            return False
        self.remove(victim)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        if isinstance(session, int):
            found = self.sessions.get(session)
            if found is None:
                return None
            session = found
        removed = self.sessions.pop(session.id, None)
        if removed is not None:
            self.num_partitions -= removed.cached_size
            removed.cached_size = -1
            removed.evictable_by_all = removed.evictable_by_privileged = False
        return removed

    def touch(self, session: FetchSession, now: int) -> None:
        """The session was used: its last-used time, size and evictability as Kafka's touch sets them."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        old_enough = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old_enough
        session.evictable_by_all = old_enough
        self.num_partitions += session.cached_size


class SessionIdOutOfRange(Exception):
    """A session id whose shard does not exist: Kafka's getCacheShard fails (an
    IndexOutOfBoundsException), and the request is answered UNKNOWN_SERVER_ERROR."""


class FetchSessionCache:
    """The shards; new sessions go to them in turn."""

    def __init__(self, max_slots: int, eviction_ms: int = EVICTION_MS, num_shards: int = NUM_SHARDS,
                 rng: random.Random | None = None) -> None:
        self.session_id_range = INT32_MAX // num_shards
        self.shards = [FetchSessionCacheShard(max_slots // num_shards, eviction_ms, self.session_id_range, n, rng)
                       for n in range(num_shards)]
        self._counter = itertools.count()

    def shard_for(self, session_id: int) -> FetchSessionCacheShard:
        # Java's int division truncates toward zero: small negative ids land in shard 0.
        index = abs(session_id) // self.session_id_range
        if session_id < 0:
            index = -index
        if not 0 <= index < len(self.shards):
            raise SessionIdOutOfRange(f"no fetch session cache shard for session id {session_id}")
        return self.shards[index]

    def next_shard(self) -> FetchSessionCacheShard:
        return self.shards[next(self._counter) % len(self.shards)]

    def __len__(self) -> int:
        return sum(len(s) for s in self.shards)

    @property
    def total_partitions(self) -> int:
        return sum(s.num_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        return sum(s.evictions for s in self.shards)


class Reads:
    """A fetch's answers in order: ``partitions[i]`` is answered by ``answers[i]`` (a
    protocol.fetch_response.FetchPartition). Two lists rather than a pair per partition: a
    1,000-partition fetch makes 1,000 fewer objects for the cyclic collector."""

    __slots__ = ("partitions", "answers")

    def __init__(self, partitions: list[CachedPartition] | None = None, answers: list[Any] | None = None) -> None:
        self.partitions: list[CachedPartition] = partitions if partitions is not None else []
        self.answers: list[Any] = answers if answers is not None else []

    def __len__(self) -> int:
        return len(self.partitions)


class FetchContext:
    """What one Fetch request reads (``partitions``) and how its answer is made from the reads."""

    incremental = False  # True: unchanged partitions may be left out of the reads' results
    error_code = errors.NONE

    def __init__(self, fetch_data: dict[PartitionKey, CachedPartition]) -> None:
        self.fetch_data = fetch_data  # the partitions the request names, in request order

    @property
    def partitions(self) -> Iterable[CachedPartition]:
        return self.fetch_data.values()

    def response(self, results: Reads, update: bool = True) -> tuple[int, int, Reads]:
        """(error code, session id, the partitions to answer); ``update=False`` only sizes it."""
        return errors.NONE, INVALID_SESSION_ID, results

    def throttled_response(self) -> tuple[int, int]:
        """(error code, session id) of the empty answer a throttled fetch gets."""
        return errors.NONE, INVALID_SESSION_ID


class SessionErrorContext(FetchContext):
    """A session error: nothing is read, the answer is the error with session id 0."""

    def __init__(self, error_code: int) -> None:
        super().__init__({})
        self.error_code = error_code

    def response(self, results: Reads, update: bool = True) -> tuple[int, int, Reads]:
        return self.error_code, INVALID_SESSION_ID, Reads()


class SessionlessFetchContext(FetchContext):
    """A full fetch without a session (epoch -1, or an incremental request that forgot every partition)."""


class FullFetchContext(FetchContext):
    """A full fetch (epoch 0): every named partition is answered, and a session is made of them
    if the cache has or can make room (else the answer's session id is 0)."""

    def __init__(self, fetch_data: dict[PartitionKey, CachedPartition], cache: FetchSessionCache, uses_topic_ids: bool,
                 privileged: bool, now: int) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged
        self.now = now

    def response(self, results: Reads, update: bool = True) -> tuple[int, int, Reads]:
        if not update:
            return errors.NONE, INVALID_SESSION_ID, results

        def create_partitions() -> dict[PartitionKey, CachedPartition]:
            parts: dict[PartitionKey, CachedPartition] = {}
            for cp, fp in zip(results.partitions, results.answers, strict=True):
                cp.high_watermark = fp.high_watermark
                cp.local_log_start_offset = fp.log_start_offset
                parts[cp.key] = cp
            return parts

        sid = self.cache.next_shard().maybe_create_session(self.now, self.privileged, len(results), self.uses_topic_ids,
                                                           create_partitions)
        return errors.NONE, sid, results


class IncrementalFetchContext(FetchContext):
    """An incremental fetch: the session's partitions are read; the answer leaves out those with
    no records, no error, and the same high watermark and log start offset as last answered."""

    incremental = True

    def __init__(self, fetch_data: dict[PartitionKey, CachedPartition], session: FetchSession, request_epoch: int) -> None:
        super().__init__(fetch_data)
        self.session = session
        self.request_epoch = request_epoch

    @property
    def partitions(self) -> Iterable[CachedPartition]:
        return self.session.partitions.values()

    def response(self, results: Reads, update: bool = True) -> tuple[int, int, Reads]:
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            # Another request of this session came in meanwhile (a duplicate).
            return errors.INVALID_FETCH_SESSION_EPOCH, session.id, Reads()
        out = Reads()
        out_partitions, out_answers = out.partitions, out.answers
        moved: list[CachedPartition] = []
        for cp, fp in zip(results.partitions, results.answers, strict=True):
            records = fp.records
            has_records = records is not None and (len(records) if records.__class__ is bytes else records.size) > 0
            must = has_records
            if cp.high_watermark != fp.high_watermark:
                must = True
                if update:
                    cp.high_watermark = fp.high_watermark
            if cp.local_log_start_offset != fp.log_start_offset:
                must = True
                if update:
                    cp.local_log_start_offset = fp.log_start_offset
            if fp.preferred_read_replica != -1:
                must = True
            if fp.error_code:
                # Sent again once the error is gone.
                if update:
                    cp.high_watermark = -1
                must = True
            if must:
                out_partitions.append(cp)
                out_answers.append(fp)
                if update and has_records:
                    moved.append(cp)
        if moved:
            parts = session.partitions
            for cp in moved:
                parts[cp.key] = parts.pop(cp.key)
        return errors.NONE, session.id, out

    def throttled_response(self) -> tuple[int, int]:
        if self.session.epoch != next_epoch(self.request_epoch):
            return errors.INVALID_FETCH_SESSION_EPOCH, self.session.id
        return errors.NONE, self.session.id


class FetchManager:
    """Kafka's FetchManager.newContext: which context a Fetch request gets."""

    def __init__(self, cache: FetchSessionCache, clock: Callable[[], int] = monotonic_ms) -> None:
        self.cache = cache
        self.clock = clock

    def new_context(self, version: int, session_id: int, epoch: int, privileged: bool,
                    fetch_data: dict[PartitionKey, CachedPartition], to_forget: list[PartitionKey]) -> FetchContext:
        """Raises SessionIdOutOfRange for a session id no shard covers (as Kafka fails there)."""
        cache = self.cache
        if epoch == INITIAL_EPOCH or epoch == FINAL_EPOCH:  # a full request
            if session_id != INVALID_SESSION_ID:
                cache.shard_for(session_id).remove(session_id)  # any session it names is closed
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(fetch_data, cache, version >= 13, privileged, self.clock())
        shard = cache.shard_for(session_id)
        session = shard.get(session_id)
        if session is None:
            return SessionErrorContext(errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return SessionErrorContext(errors.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            shard.remove(session)
            return SessionlessFetchContext(fetch_data)
        shard.touch(session, self.clock())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(fetch_data, session, epoch)
