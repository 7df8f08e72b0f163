"""ListOffsets (API 2): earliest, latest, max timestamp, and offsets by timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.storage.log import LEADER_EPOCH, Log

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5
LATEST_TIERED = -6
READ_COMMITTED = 1


def _answer(index: int, timestamp: int, offset: int, epoch: int = LEADER_EPOCH, code: int = errors.NONE) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "timestamp": timestamp, "offset": offset, "leader_epoch": epoch, "old_style_offsets": []}


def offset_for(lg: Log, index: int, target: int, isolation_level: int) -> dict[str, Any]:
    if target == LATEST:
        return _answer(index, -1, lg.last_stable_offset if isolation_level == READ_COMMITTED else lg.high_watermark)
    if target in (EARLIEST, EARLIEST_LOCAL):
        return _answer(index, -1, lg.log_start_offset)
    if target == MAX_TIMESTAMP:
        return _max_timestamp(lg, index)
    if target in (EARLIEST_PENDING_UPLOAD, LATEST_TIERED):
        return _answer(index, -1, -1, -1)
    found = lg.fetch_offset_by_timestamp(target)
    if found is None:
        return _answer(index, -1, -1, -1)
    pos, h, seg, start = found
    # Record-level answer: decode just this one batch.
    for batch in decode_batches(seg.read_batch_bytes(pos, h.size)):
        for r in batch.records:
            if r.timestamp >= target and r.offset >= start:
                return _answer(index, r.timestamp, r.offset)
    return _answer(index, h.max_timestamp, h.last_offset)


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


async def handle_list_offsets(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    lm = broker.log_manager
    isolation = getattr(request, "isolation_level", 0)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            lg = lm.get_log(t.name, p.partition_index)
            if lg is None:
                parts.append(_answer(p.partition_index, -1, -1, -1, errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                parts.append(offset_for(lg, p.partition_index, p.timestamp, isolation))
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
