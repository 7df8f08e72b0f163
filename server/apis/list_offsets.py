"""ListOffsets (API 2): earliest, latest, max timestamp, and offsets by timestamp.

v8-v11 add the tiered-storage targets (earliest local, latest tiered, earliest pending upload);
without tiered storage they answer as Kafka does for a topic with remote storage disabled.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.storage.log import LEADER_EPOCH, Log

from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import TOPIC_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6  # KIP-1023, ListOffsets v11
READ_COMMITTED = 1
# Kafka 4.3's ReplicaManager.timestampMinSupportedVersion: a special (negative) timestamp needs
# at least this request version; any other negative timestamp is UNSUPPORTED_VERSION.
MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
               EARLIEST_PENDING_UPLOAD: 11}


def _answer(index: int, timestamp: int, offset: int, epoch: int = LEADER_EPOCH, code: int = errors.NONE) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "timestamp": timestamp, "offset": offset, "leader_epoch": epoch}


def _error(index: int, code: int) -> dict[str, Any]:
    return _answer(index, -1, -1, -1, code)


def unsupported(target: int, version: int) -> bool:
    return target < 0 and version < MIN_VERSION.get(target, 2**15)


def offset_for(lg: Log, index: int, target: int, isolation_level: int) -> dict[str, Any]:
    if target == LATEST:
        return _answer(index, -1, lg.last_stable_offset if isolation_level == READ_COMMITTED else lg.high_watermark)
    if target in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: the local log start is the log start
        return _answer(index, -1, lg.log_start_offset)
    if target == MAX_TIMESTAMP:
        return _max_timestamp(lg, index)
    if target in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # no tiered storage: Kafka answers offset -1, epoch -1
        return _answer(index, -1, -1, -1)
    found = lg.fetch_offset_by_timestamp(target)
    if found is None:
        return _answer(index, -1, -1, -1)
    timestamp, offset, epoch = found
    return _answer(index, timestamp, offset, epoch)


def _max_timestamp(lg: Log, index: int) -> dict[str, Any]:
    """Kafka's UnifiedLog MAX_TIMESTAMP: in the segment with the largest timestamp, the first batch
    whose max timestamp is it, and in that batch the first record carrying it (not the batch's
    last offset)."""
    segments = lg.segments
    if not segments:
        return _answer(index, -1, -1, -1)
    seg = max(segments, key=lambda s: s.max_timestamp_so_far)  # the first of equals, like Scala's maxBy
    ts = seg.max_timestamp_so_far
    if ts >= 0:
        _, position = seg.offset_index.lookup(seg.offset_of_max_timestamp)
        for pos, h in seg.iter_batches(position):
            if h.max_timestamp != ts:
                continue
            for batch in decode_batches(seg.read_batch_bytes(pos, h.size)):
                for r in batch.records:
                    if r.timestamp == ts:
                        return _answer(index, ts, r.offset, h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1)
            break
    return _answer(index, -1, -1, -1)


async def handle_list_offsets(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    lm = services.log_manager
    isolation = getattr(request, "isolation_level", 0)
    topics = []
    version = header.api_version
    # A partition named twice is INVALID_REQUEST in both places (Kafka's duplicatePartitions).
    named = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    duplicates = {tp for tp, n in named.items() if n > 1}
    # DESCRIBE on each topic (KafkaApis): the others are answered after the rest, TOPIC_AUTHORIZATION_FAILED.
    az = services.authorizer
    describable = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in request.topics]) if az.enabled else None
    unauthorized = []
    for t in request.topics:
        if describable is not None and t.name not in describable:
            unauthorized.append({"name": t.name, "partitions": [_error(p.partition_index, TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]})
            continue
        parts = []
        for p in t.partitions:
            if (t.name, p.partition_index) in duplicates:
                parts.append(_error(p.partition_index, errors.INVALID_REQUEST))
                continue
            if unsupported(p.timestamp, version):
                parts.append(_error(p.partition_index, errors.UNSUPPORTED_VERSION))
                continue
            lg = lm.get_log(t.name, p.partition_index)
            if lg is None:
                parts.append(_error(p.partition_index, services.replica_manager.missing_log_error(t.name, p.partition_index)))
            else:
                parts.append(offset_for(lg, p.partition_index, p.timestamp, isolation))
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics + unauthorized}
