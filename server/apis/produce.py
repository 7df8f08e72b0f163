"""Produce (API 0): validate batch headers, assign offsets, append, answer.

Per batch work only: the 61-byte header is read with ``struct`` and the CRC-32C
checked over the batch bytes; records are never decoded here, except on
compacted topics where every record needs a key (Kafka's LogValidator rule).
A bad batch fails its own partition only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.record_batch import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionError,
    check_produce_records,
    validate_batches,
)
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.storage.log import Log, StorageError
from kafka_sidecar.storage.producer_state import ProducerStateError

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection

log = logging.getLogger(__name__)


def _partition_result(index: int, code: int, message: str | None = None, base_offset: int = -1, log_append_time: int = -1, log_start_offset: int = -1, record_errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time": log_append_time,
        "log_start_offset": log_start_offset,
        "record_errors": record_errors or [],
        "error_message": message,
    }


def _keyless_record_errors(records: bytes) -> list[dict[str, Any]]:
    """Records without a key, as Kafka reports them for a compacted topic."""
    out = []
    index = 0
    for batch in decode_batches(records):
        for r in batch.records:
            if r.key is None:
                out.append({"batch_index": index, "batch_index_error_message": "Compacted topic cannot accept message without key in topic partition"})
            index += 1
    return out


def append_to_log(broker: Broker, lg: Log, index: int, records: bytes | None, version: int, client: str | None, to_flush: list[Log]) -> dict[str, Any]:
    topic = lg.topic
    try:
        check_produce_records(version, records or b"")
        headers = validate_batches(records or b"")
        if len(headers) > 1:
            raise InvalidRecordError(f"Produce requests with version {version} are only allowed to contain exactly one record batch per partition")
    except InvalidRecordError as e:
        log.warning("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        return _partition_result(index, errors.INVALID_RECORD, str(e))
    except UnsupportedCompressionError as e:
        log.warning("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        return _partition_result(index, errors.UNSUPPORTED_COMPRESSION_TYPE, str(e))
    except CorruptRecordError as e:
        log.warning("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        return _partition_result(index, errors.CORRUPT_MESSAGE, str(e))
    config = lg.config
    for h in headers:
        if h.size > config.max_message_bytes:
            msg = f"The request included a message larger than the max message size the server will accept: batch of {h.size} bytes > max.message.bytes {config.max_message_bytes}"
            log.info("rejected produce to %s-%d from %s: %s", topic, index, client, msg)
            return _partition_result(index, errors.MESSAGE_TOO_LARGE, msg)
    if len(records) > config.segment_bytes:
        msg = f"The request included message batch larger than the configured segment size on the server: {len(records)} > segment.bytes {config.segment_bytes}"
        log.info("rejected produce to %s-%d from %s: %s", topic, index, client, msg)
        return _partition_result(index, errors.RECORD_LIST_TOO_LARGE, msg)
    if config.compact:
        record_errors = _keyless_record_errors(records)
        if record_errors:
            msg = f"One or more records have been rejected: compacted topic {topic} cannot accept a record without a key ({len(record_errors)} keyless)"
            log.info("rejected produce to %s-%d from %s: %s", topic, index, client, msg)
            return _partition_result(index, errors.INVALID_RECORD, msg, record_errors=record_errors)
    try:
        info = lg.append_as_leader(bytearray(records), headers)
    except ProducerStateError as e:
        log.info("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        # Kafka answers these with no message and the partition's log start offset.
        return _partition_result(index, e.error_code, None, log_start_offset=lg.log_start_offset)
    except StorageError as e:
        # Disk full, read-only file system...: nothing of the batch stays in the log.
        log.warning("produce to %s-%d from %s failed: %s", topic, index, client, e)
        return _partition_result(index, errors.KAFKA_STORAGE_ERROR, f"Disk error when trying to access log file on the disk: {e}")
    if info.needs_flush:
        to_flush.append(lg)
    broker.notify_append(topic, index)
    broker.metrics.record_produce(topic, len(records), info.last_offset - info.first_offset + 1)
    return _partition_result(index, errors.NONE, None, info.first_offset, info.log_append_time, info.log_start_offset)


async def handle_produce(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any] | None:
    lm = broker.log_manager
    acks = request.acks
    responses = []
    to_flush: list[Log] = []
    flushed_results: dict[int, list[dict[str, Any]]] = {}  # id(log) -> its partition results
    for t in request.topic_data:
        results = []
        for p in t.partition_data:
            if acks not in (0, 1, -1):
                results.append(_partition_result(p.index, errors.INVALID_REQUIRED_ACKS))
                continue
            lg = lm.get_log(t.name, p.index)
            if lg is None:
                log.info("rejected produce to %s-%d from %s: unknown topic or partition", t.name, p.index, header.client_id)
                results.append(_partition_result(p.index, errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."))
                continue
            flushing = len(to_flush)
            results.append(append_to_log(broker, lg, p.index, p.records, header.api_version, header.client_id, to_flush))
            if len(to_flush) > flushing:
                flushed_results.setdefault(id(lg), []).append(results[-1])
        responses.append({"name": t.name, "partition_responses": results})
    for lg in to_flush:
        # flush.messages reached: fsync before acknowledging, off the event loop.
        try:
            await broker.run_blocking(lg.flush)
        except OSError as e:
            log.warning("flush of %s-%d failed: %s", lg.topic, lg.partition, e)
            for r in flushed_results.get(id(lg), []):
                r.update(error_code=errors.KAFKA_STORAGE_ERROR, base_offset=-1, log_append_time=-1,
                         error_message=f"Disk error when trying to flush the log to the disk: {e.strerror or e}")
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}
