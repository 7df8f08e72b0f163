"""Fetch (API 1, v4-18): fetch sessions, read from segments, long-poll for min_bytes, send with sendfile.

Follows Kafka's KafkaApis.handleFetchRequest and ReplicaManager.readFromLog. The request's
session id and epoch pick a context first (server/fetch_session.py, KIP-227): a full fetch
(epoch 0) is answered for every partition it names and opens an incremental session if the
cache has room; an incremental one (the session's next epoch) updates the session's partitions
and reads all of them, answering only those that changed; epoch -1 (and v4-6, which have no
session fields) fetches without a session. Partitions are read in the context's order within
the response ``max_bytes``; the first partition that returns data may exceed the limits by its
first batch (so a consumer can always progress). Partitions refused before reading (unknown
topic id, no READ, unknown topic or partition) come after the partitions read, as Kafka's answer
has them. At READ_COMMITTED (isolation_level 1) a partition is read only below its last stable
offset, and its answer lists the aborted transactions of the range read.
v18's partition ``HighWatermark`` (the high watermark a replica knows) is for follower fetches:
a consumer's fetch is answered as at v17, as Kafka does.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.messages import ms
from kafka_sidecar.storage.log import OffsetOutOfRangeError

from ..fetch_session import CachedPartition, FetchContext, PartitionKey, Reads, SessionIdOutOfRange
from ..request_context import Throttled
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import TOPIC_AUTHORIZATION_FAILED
from .leader_hints import current_leader, node_endpoints

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices


def _fetch_data(version: int, request: Any, topics_by_id: dict[Any, Any]) -> tuple[dict[PartitionKey, CachedPartition], list[PartitionKey]]:
    """The request's partitions (FetchRequest.fetchData: one per partition, in request order) and
    its forgotten partitions, keyed by topic id at v13+ and by topic name below."""
    data: dict[PartitionKey, CachedPartition] = {}
    if version >= 13:
        for t in request.topics:
            tid = t.topic_id
            info = topics_by_id.get(tid)
            name = info.name if info is not None else None
            tkey = tid.int if tid is not None else 0
            for p in t.partitions:
                index = p.partition
                key = (tkey, index)
                data[key] = CachedPartition(key, name, tid, index, p.partition_max_bytes, p.fetch_offset)
        forget = [(t.topic_id.int if t.topic_id is not None else 0, p) for t in request.forgotten_topics_data for p in t.partitions]
        return data, forget
    for t in request.topics:
        name = t.topic
        for p in t.partitions:
            index = p.partition
            key = (name, index)
            data[key] = CachedPartition(key, name, None, index, p.partition_max_bytes, p.fetch_offset)
    forget = [(t.topic, p) for t in getattr(request, "forgotten_topics_data", ()) for p in t.partitions]
    return data, forget


def _replica_id(version: int, request: Any) -> int:
    return request.replica_state.replica_id if version >= 15 else request.replica_id


_NO_TOPIC = object()


def _read_all(services: BrokerServices, ctx: FetchContext, uses_ids: bool, read_committed: bool, readable: set[str] | None,
              max_bytes: int) -> tuple[Reads, int, bool, int]:
    """One pass over the context's partitions: (answers, bytes, a read failed, partitions read).
    ``readable``: the topics the client may READ (None: all), the others get TOPIC_AUTHORIZATION_FAILED.
    ``max_bytes``: the request's, lowered to what the client's fetch quota allows in a window.
    An incremental context's unchanged partitions (no records, the high watermark and log start
    offset it last answered) are left out here already: its answer would drop them."""
    lm = services.log_manager
    logs = lm.logs
    topics_by_id = services.metadata.topics_by_id
    rm = services.replica_manager
    incremental = ctx.incremental
    limit = max_bytes if max_bytes > 0 else 2**31 - 1
    min_one = True
    total = 0
    read_error = False
    reads = Reads()
    read_cps, read_fps = reads.partitions, reads.answers
    unknown_ids: list[tuple[CachedPartition, FetchPartition]] = []  # Kafka's erroneous partitions: unknown
    refused: list[tuple[CachedPartition, FetchPartition]] = []  # topic ids first, then no READ / unknown topic or partition
    interesting = 0
    info: Any = None
    last_id: Any = _NO_TOPIC  # partitions of a topic come together: one topic id lookup for them
    for cp in ctx.partitions:
        name = cp.topic
        index = cp.partition
        if uses_ids:
            tid = cp.topic_id
            if tid is not last_id:
                info = topics_by_id.get(tid)
                last_id = tid
            if info is None:
                if name is None:
                    unknown_ids.append((cp, FetchPartition(index, errors.UNKNOWN_TOPIC_ID)))
                    continue
            elif name is None:
                name = cp.topic = info.name  # a session's topic id this broker learnt since
        if readable is not None and name not in readable:
            refused.append((cp, FetchPartition(index, TOPIC_AUTHORIZATION_FAILED)))
            continue
        lg = logs.get((name, index))
        if lg is None:
            fp = FetchPartition(index, rm.missing_log_error(name, index))
            if fp.error_code == errors.NOT_LEADER_OR_FOLLOWER:  # led by another node: KIP-951's hint
                leader = current_leader(services, name, index)
                fp.current_leader = (leader["leader_id"], leader["leader_epoch"])
            refused.append((cp, fp))
            continue
        if uses_ids and info is None:
            # The session's topic was deleted and another made under its name (ReplicaManager's topic id check).
            read_cps.append(cp)
            read_fps.append(FetchPartition(index, errors.INCONSISTENT_TOPIC_ID, aborted_transactions=[] if read_committed else None))
            read_error = True
            continue
        interesting += 1
        offset = cp.fetch_offset
        hw = lg.high_watermark
        log_start = lg.log_start_offset
        if incremental and offset == hw == cp.high_watermark and log_start == cp.local_log_start_offset:
            # Caught up and nothing moved (a read at the log end finds nothing, at either
            # isolation): the incremental answer leaves it out, so it is not read.
            continue
        aborted = [] if read_committed else None
        try:
            if read_committed:
                # READ_COMMITTED (Kafka's FetchIsolation.TXN_COMMITTED): data only below the last
                # stable offset, with the aborted transactions the fetched range overlaps.
                lso, data, aborted_txns = rm.read_committed(lg, offset, min(cp.max_bytes, limit), min_one)
                aborted = [(t.producer_id, t.first_offset) for t in aborted_txns]
            else:
                data = rm.read(lg, offset, min(cp.max_bytes, limit), min_one)
                lso = lg.last_stable_offset
        except OffsetOutOfRangeError:
            # Kafka answers -1 for the watermarks of an out-of-range fetch.
            read_cps.append(cp)
            read_fps.append(FetchPartition(index, errors.OFFSET_OUT_OF_RANGE, aborted_transactions=aborted))
            read_error = True
            continue
        if data is None or not data.size:
            if incremental and hw == cp.high_watermark and log_start == cp.local_log_start_offset:
                continue
            read_cps.append(cp)
            read_fps.append(FetchPartition(index, errors.NONE, hw, lso, log_start, aborted_transactions=aborted))
            continue
        read_cps.append(cp)
        read_fps.append(FetchPartition(index, errors.NONE, hw, lso, log_start, data, aborted_transactions=aborted))
        total += data.size
        limit = max(0, limit - data.size)
        min_one = False
    for cp, fp in (*unknown_ids, *refused):
        read_cps.append(cp)
        read_fps.append(fp)
    return reads, total, read_error, interesting


def _watched(ctx: FetchContext) -> list[tuple[str, int]]:
    """The partitions a parked fetch waits on (DelayedFetch's keys): made only when it parks."""
    return [(cp.topic, cp.partition) for cp in ctx.partitions if cp.topic is not None]


def _topics(results: Reads) -> list[FetchTopic]:
    """The answer's topics: consecutive partitions of one topic together (FetchResponse.of keeps
    the partitions' order, so a topic may appear more than once)."""
    out: list[FetchTopic] = []
    last_id: Any = _NO_TOPIC
    last_name: Any = _NO_TOPIC
    current: list[FetchPartition] = []
    for cp, fp in zip(results.partitions, results.answers, strict=True):
        tid, name = cp.topic_id, cp.topic
        if (tid is not last_id and tid != last_id) or (name is not last_name and name != last_name):
            current = []
            out.append(FetchTopic(name or "", tid, current))
            last_id, last_name = tid, name
        current.append(fp)
    return out


def _leader_endpoints(services: BrokerServices, context: RequestContext, sent: Reads) -> list[dict[str, Any]] | None:
    """KIP-951: the endpoints of the nodes leading the partitions answered NOT_LEADER_OR_FOLLOWER
    (only a node of a cluster answers that)."""
    if services.cluster is None:
        return None
    leaders = {fp.current_leader[0] for fp in sent.answers if fp.current_leader is not None}
    return node_endpoints(services, context.listener, leaders) if leaders else None


def _readable(services: BrokerServices, context: RequestContext, header: RequestHeader, ctx: FetchContext, uses_ids: bool) -> set[str]:
    """The topics of the context the client may READ (KafkaApis.handleFetchRequest), checked once per request."""
    topics_by_id = services.metadata.topics_by_id
    names: set[str] = set()
    for cp in ctx.partitions:
        name = cp.topic
        if name is None and uses_ids:
            info = topics_by_id.get(cp.topic_id)
            name = info.name if info is not None else None
        if name is not None:
            names.add(name)
    return services.authorizer.filter(context, header, AclOperation.READ, ResourceType.TOPIC, sorted(names))


def _failed_request(version: int, request: Any, code: int) -> list[Any]:
    """FetchRequest.getErrorResponse: the top-level error, the request's session id, and below v13
    the same error for every partition named."""
    topics = [] if version >= 13 else [
        FetchTopic(t.topic, None, [FetchPartition(p.partition, code) for p in t.partitions]) for t in request.topics]
    return encode_fetch_response(version, topics, error_code=code, session_id=getattr(request, "session_id", 0))


async def handle_fetch(services: BrokerServices, context: RequestContext, request: Any) -> list[Any] | Throttled:
    header = context.header
    version = header.api_version
    deadline = time.monotonic() + ms(request.max_wait) / 1000
    uses_ids = version >= 13
    fetch_data, to_forget = _fetch_data(version, request, services.metadata.topics_by_id)
    try:
        # v4-6 carry no session fields: Kafka's FetchMetadata.LEGACY (no session, epoch -1).
        ctx = services.fetch_manager.new_context(version, getattr(request, "session_id", 0), getattr(request, "session_epoch", -1),
                                               _replica_id(version, request) >= 0, fetch_data, to_forget)
    except SessionIdOutOfRange:
        return _failed_request(version, request, errors.UNKNOWN_SERVER_ERROR)
    readable = _readable(services, context, header, ctx, uses_ids) if services.authorizer.enabled else None
    read_committed = request.isolation_level == 1
    if services.client_quotas.active:
        return await _quota_fetch(services, context, header, request, ctx, readable, read_committed, deadline)
    while True:
        results, total, read_error, interesting = _read_all(services, ctx, uses_ids, read_committed, readable, request.max_bytes)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or read_error or remaining <= 0 or not interesting:
            break
        await services.replica_manager.wait_for_data(_watched(ctx), remaining)  # DelayedFetch
        if context.client.is_closing():
            raise asyncio.CancelledError
    error, session_id, sent = ctx.response(results)
    topics = _topics(sent)
    services.metrics.record_fetch(context.client, topics, ctx.fetch_data.values())  # bytes/records out per topic (server/metrics.py)
    return encode_fetch_response(version, topics, error_code=error, session_id=session_id, node_endpoints=_leader_endpoints(services, context, sent))


async def _quota_fetch(services: BrokerServices, context: RequestContext, header: RequestHeader, request: Any, ctx: FetchContext,
                       readable: set[str] | None, read_committed: bool, deadline: float) -> list[Any]:
    """A fetch while client quotas are set (KafkaApis.handleFetchRequest): max_bytes lowered to
    what consumer_byte_rate allows in a window, the handler time and the response's bytes
    recorded; over quota the answer is empty with the throttle time, its bytes taken back, and
    the connection muted for that long after it (KIP-219). A throttled answer leaves the fetch
    session as the request left it (its partitions' last answered state unchanged, no new
    session for a full fetch): the next request of the session gets what this one would have."""
    version = header.api_version
    uses_ids = version >= 13
    quotas = services.client_quotas
    window_max = quotas.fetch_max_bytes(context.principal, header.client_id)
    max_bytes = request.max_bytes if window_max >= request.max_bytes else max(int(window_max), 0)
    min_bytes = min(request.min_bytes, max_bytes)
    thread_ns = 0
    while True:
        started = time.perf_counter_ns()
        results, total, read_error, interesting = _read_all(services, ctx, uses_ids, read_committed, readable, max_bytes)
        thread_ns += time.perf_counter_ns() - started
        remaining = deadline - time.monotonic()
        if total >= min_bytes or read_error or remaining <= 0 or not interesting:
            break
        await services.replica_manager.wait_for_data(_watched(ctx), remaining)  # DelayedFetch
        if context.client.is_closing():
            raise asyncio.CancelledError
    started = time.perf_counter_ns()
    # FetchContext.getResponseSize: the answer's size without updating the session.
    error, session_id, sent = ctx.response(results, update=False)
    parts = encode_fetch_response(version, _topics(sent), error_code=error, session_id=session_id)
    size = sum(len(p) if isinstance(p, bytes) else p.size for p in parts)
    throttle = quotas.throttle_fetch(context.principal, header.client_id, size, thread_ns + time.perf_counter_ns() - started)
    if throttle:
        error, session_id = ctx.throttled_response()
        return Throttled(encode_fetch_response(version, [], throttle_ms=throttle, error_code=error, session_id=session_id), throttle)
    error, session_id, sent = ctx.response(results)
    topics = _topics(sent)
    services.metrics.record_fetch(context.client, topics, ctx.fetch_data.values())  # bytes/records out per topic (server/metrics.py)
    return encode_fetch_response(version, topics, error_code=error, session_id=session_id, node_endpoints=_leader_endpoints(services, context, sent))
