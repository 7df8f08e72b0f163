"""Fetch (API 1, v4-18): read from segments, long-poll for min_bytes, send with sendfile.

Follows Kafka's ReplicaManager.readFromLog: partitions are read in request
order within the response ``max_bytes``; the first partition that returns data
may exceed the limits by its first batch (so a consumer can always progress).
At READ_COMMITTED (isolation_level 1) a partition is read only below its last stable
offset, and its answer lists the aborted transactions of the range read. Fetch sessions are not kept: the answer carries session id 0 (KIP-227's "no
session"), so clients send full fetch requests.
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

from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import TOPIC_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection


def _read_all(broker: Broker, version: int, request: Any, readable: set[str] | None = None,
              max_bytes: int | None = None) -> tuple[list[FetchTopic], int, bool, list[tuple[str, int]]]:
    """One pass over the requested partitions: (topics, bytes, any error, partitions read).
    ``readable``: the topics the client may READ (None: all), the others get TOPIC_AUTHORIZATION_FAILED.
    ``max_bytes``: the request's, lowered to what the client's fetch quota allows in a window."""
    lm = broker.log_manager
    rm = broker.replica_manager
    read_committed = getattr(request, "isolation_level", 0) == 1
    if max_bytes is None:
        max_bytes = request.max_bytes
    limit = max_bytes if max_bytes > 0 else 2**31 - 1
    min_one = True
    total = 0
    has_error = False
    out: list[FetchTopic] = []
    tps: list[tuple[str, int]] = []
    for t in request.topics:
        topic_id = getattr(t, "topic_id", None)
        if version >= 13:
            info = broker.metadata.topics_by_id.get(topic_id)
            name = info.name if info else ""
            unknown = errors.UNKNOWN_TOPIC_ID
        else:
            name = t.topic
            info = broker.metadata.topics.get(name)
            unknown = errors.UNKNOWN_TOPIC_OR_PARTITION
        ft = FetchTopic(name, topic_id if topic_id is not None else (info.topic_id if info else None), [])
        out.append(ft)
        for p in t.partitions:
            if readable is not None and name not in readable and (info is not None or version < 13):
                # Kafka checks READ after resolving a topic id and before the topic's existence.
                ft.partitions.append(FetchPartition(p.partition, TOPIC_AUTHORIZATION_FAILED))
                has_error = True
                continue
            lg = lm.get_log(name, p.partition) if info else None
            if lg is None:
                ft.partitions.append(FetchPartition(p.partition, unknown))
                has_error = True
                continue
            tps.append((name, p.partition))
            aborted = [] if read_committed else None
            fp = FetchPartition(p.partition, errors.NONE, lg.high_watermark, lg.last_stable_offset, lg.log_start_offset, aborted_transactions=aborted)
            try:
                if read_committed:
                    # READ_COMMITTED (Kafka's FetchIsolation.TXN_COMMITTED): data only below the last
                    # stable offset, with the aborted transactions the fetched range overlaps.
                    lso, data, aborted_txns = rm.read_committed(lg, p.fetch_offset, min(p.partition_max_bytes, limit), min_one)
                    fp.last_stable_offset = lso
                    fp.aborted_transactions = [(t.producer_id, t.first_offset) for t in aborted_txns]
                else:
                    data = rm.read(lg, p.fetch_offset, min(p.partition_max_bytes, limit), min_one)
            except OffsetOutOfRangeError:
                # Kafka answers -1 for the watermarks of an out-of-range fetch.
                fp = FetchPartition(p.partition, errors.OFFSET_OUT_OF_RANGE, aborted_transactions=aborted)
                has_error = True
                data = None
            if data is not None:
                fp.records = data
                total += data.size
                limit = max(0, limit - data.size)
                min_one = False
            ft.partitions.append(fp)
    return out, total, has_error, tps


async def handle_fetch(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> list[Any]:
    version = header.api_version
    deadline = time.monotonic() + ms(request.max_wait) / 1000
    readable = None
    if broker.authorizer.enabled:
        # READ on each topic (KafkaApis.handleFetchRequest), checked once per request.
        if version >= 13:
            infos = [broker.metadata.topics_by_id.get(t.topic_id) for t in request.topics]
            names = [i.name for i in infos if i is not None]
        else:
            names = [t.topic for t in request.topics]
        readable = broker.authorizer.filter(conn, header, AclOperation.READ, ResourceType.TOPIC, names)
    quotas = broker.client_quotas
    if quotas.active:
        return await _quota_fetch(broker, conn, header, request, readable, deadline)
    while True:
        topics, total, has_error, tps = _read_all(broker, version, request, readable)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or has_error or remaining <= 0 or not tps:
            break
        await broker.replica_manager.wait_for_data(tps, remaining)  # DelayedFetch
        if conn.writer.is_closing():
            raise asyncio.CancelledError
    broker.metrics.record_fetch(conn, request.topics, topics)  # bytes/records out per topic (server/metrics.py)
    return encode_fetch_response(version, topics, session_id=0)


async def _quota_fetch(broker: Broker, conn: Connection, header: RequestHeader, request: Any,
                       readable: set[str] | None, deadline: float) -> list[Any]:
    """A fetch while client quotas are set (KafkaApis.handleFetchRequest): max_bytes lowered to
    what consumer_byte_rate allows in a window, the handler time and the response's bytes
    recorded; over quota the answer is empty with the throttle time, its bytes taken back, and
    the connection muted for that long after it (KIP-219)."""
    version = header.api_version
    quotas = broker.client_quotas
    window_max = quotas.fetch_max_bytes(conn.principal, header.client_id)
    max_bytes = request.max_bytes if window_max >= request.max_bytes else max(int(window_max), 0)
    min_bytes = min(request.min_bytes, max_bytes)
    thread_ns = 0
    while True:
        started = time.perf_counter_ns()
        topics, total, has_error, tps = _read_all(broker, version, request, readable, max_bytes)
        thread_ns += time.perf_counter_ns() - started
        remaining = deadline - time.monotonic()
        if total >= min_bytes or has_error or remaining <= 0 or not tps:
            break
        await broker.replica_manager.wait_for_data(tps, remaining)  # DelayedFetch
        if conn.writer.is_closing():
            raise asyncio.CancelledError
    started = time.perf_counter_ns()
    parts = encode_fetch_response(version, topics, session_id=0)
    size = sum(len(p) if isinstance(p, bytes) else p.size for p in parts)
    throttle = quotas.throttle_fetch(conn.principal, header.client_id, size, thread_ns + time.perf_counter_ns() - started)
    if throttle:
        conn.throttle_until = time.monotonic() + throttle / 1000
        return encode_fetch_response(version, [], throttle_ms=throttle, session_id=0)
    broker.metrics.record_fetch(conn, request.topics, topics)  # bytes/records out per topic (server/metrics.py)
    return parts
