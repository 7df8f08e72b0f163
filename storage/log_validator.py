"""Kafka's LogValidator record checks: keys on compacted topics, CreateTime timestamps in range.

Kafka checks every record of a produced batch; a record that fails rejects the whole batch
with a RecordValidationException: INVALID_TIMESTAMP if any record's timestamp is out of range,
else INVALID_RECORD, a message naming the errors, and one record error per failing record.

To keep the produce path free of per-record work, records are decoded only when a check could
fail: on compacted topics (every record needs a key), when ``message.timestamp.before.max.ms``
is finite (the batch header holds only the first and the largest timestamp), when the batch's
largest timestamp is beyond ``now + message.timestamp.after.max.ms``, or when the producer set
the LogAppendTime flag. In the default configuration a CreateTime batch is checked from its
header alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.record_batch import NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, BatchHeader
from kafka_sidecar.protocol.records import Record, RecordBatch, decode_batches

from .log_config import LogConfig

LONG_MAX = 2**63 - 1


def _java_long(value: int) -> int:
    """Java's wrapping 64-bit arithmetic (Kafka prints ``now - before.max.ms`` that way)."""
    return (value + 2**63) % 2**64 - 2**63


@dataclass
class RecordValidationError(Exception):
    """A batch rejected for its records: Kafka's RecordValidationException."""

    error_code: int
    message: str
    record_errors: list[tuple[int, str]]  # (index of the record in its batch, message)

    def __str__(self) -> str:
        return self.message


def _needs_records(h: BatchHeader, config: LogConfig, now_ms: int) -> bool:
    if config.compact or h.is_log_append_time:
        return True
    if config.log_append_time:
        return False
    if config.message_timestamp_before_max_ms < LONG_MAX:
        return True
    return h.max_timestamp != NO_TIMESTAMP and h.max_timestamp - now_ms > config.message_timestamp_after_max_ms


def _record_to_string(r: Record) -> str:
    """Java's DefaultRecord.toString."""
    key = len(r.key) if r.key is not None else 0
    value = len(r.value) if r.value is not None else 0
    return f"DefaultRecord(offset={r.offset}, timestamp={r.timestamp}, key={key} bytes, value={value} bytes)"


def _check_batch(batch: RecordBatch, topic_partition: str, config: LogConfig, now_ms: int) -> list[tuple[int, int, str]]:
    """Kafka's validateRecord for each record: (error code, record index, message)."""
    found: list[tuple[int, int, str]] = []
    create_time = not config.log_append_time
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    for index, r in enumerate(batch.records):
        if config.compact and r.key is None:
            found.append((errors.INVALID_RECORD, index,
                          f"Compacted topic cannot accept message without key in topic partition {topic_partition}"))
            continue
        if create_time and r.timestamp != NO_TIMESTAMP:
            diff = now_ms - r.timestamp
            if diff > before or -diff > after:
                found.append((errors.INVALID_TIMESTAMP, index,
                              f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. The timestamp "
                              f"should be within [{_java_long(now_ms - before)}, {_java_long(now_ms + after)}]"))
        elif batch.attributes & TIMESTAMP_TYPE_MASK:
            found.append((errors.INVALID_TIMESTAMP, index,
                          f"Invalid timestamp type in message {_record_to_string(r)}. Producer should not set timestamp "
                          "type to LogAppendTime."))
    return found


def validate_records(records: bytes | bytearray | memoryview, headers: list[BatchHeader], config: LogConfig,
                     topic: str, partition: int, now_ms: int) -> None:
    """Raise RecordValidationError as Kafka's LogValidator would for these (already CRC-checked) batches."""
    for h in headers:  # a loop, not any() over a generator: this runs for every produced batch
        if _needs_records(h, config, now_ms):
            break
    else:
        return
    topic_partition = f"{topic}-{partition}"
    for batch in decode_batches(records, verify_crc=False):
        found = _check_batch(batch, topic_partition, config, now_ms)
        if not found:
            continue
        record_errors = [(index, message) for _, index, message in found]
        if any(code == errors.INVALID_TIMESTAMP for code, _, _ in found):
            raise RecordValidationError(errors.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
                                        record_errors)
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
        raise RecordValidationError(
            errors.INVALID_RECORD,
            f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]",
            record_errors,
        )
