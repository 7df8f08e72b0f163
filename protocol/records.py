"""RecordBatch v2 (magic 2), records included, specified once with ``construct``.

This is the complete format: for tools, tests, the log cleaner and internal
topics. The produce/fetch hot paths only read the fixed header with ``struct``
(``record_batch.py``); both agree on the layout below.

Batch (big-endian)::

    baseOffset int64, batchLength int32 (bytes after this field),
    partitionLeaderEpoch int32, magic int8 = 2,
    crc uint32 (CRC-32C of attributes .. end of batch),
    attributes int16, lastOffsetDelta int32, baseTimestamp int64,
    maxTimestamp int64, producerId int64, producerEpoch int16,
    baseSequence int32, recordCount int32,
    records (compressed as a whole if attributes & 0x07)

Record (varint = zigzag LEB128, as protobuf ``sint32``/``sint64``)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
    headerCount varint, headers: [keyLength varint, key utf-8,
                                  valueLength varint (-1 = null), value]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import crc32c
from construct import (
    Adapter,
    Array,
    Bytes,
    Const,
    ConstructError,
    If,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    PascalString,
    Prefixed,
    PrefixedArray,
    RawCopy,
    Struct,
    Terminated,
    ZigZag,
    this,
)

from . import compression as _compression
from .record_batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    CorruptRecordError,
    increment_sequence,
)

MAGIC = 2
CREATE_TIME = 0
LOG_APPEND_TIME = 1
# batchLength counts partitionLeaderEpoch (4) + magic (1) + crc (4) + the CRC-covered body.
_LENGTH_BEFORE_BODY = 9
# Size of the CRC-covered part of the header (attributes .. recordCount).
BODY_HEADER_SIZE = BATCH_HEADER_SIZE - LOG_OVERHEAD - _LENGTH_BEFORE_BODY  # 40


# --------------------------------------------------------------------------- spec


class _NullableBytesAdapter(Adapter):
    """Varint length (-1 = null) + bytes  <->  ``bytes | None``."""

    def _decode(self, obj, context, path):
        if obj.length < -1:
            raise ConstructError(f"invalid nullable bytes length {obj.length}", path=path)
        return None if obj.length < 0 else obj.data

    def _encode(self, obj, context, path):
        if obj is None:
            return {"length": -1, "data": None}
        obj = bytes(obj)
        return {"length": len(obj), "data": obj}


NullableVarBytes = _NullableBytesAdapter(
    Struct(
        "length" / ZigZag,
        "data" / If(this.length >= 0, Bytes(this.length)),
    )
)

RecordHeader = Struct(
    "key" / PascalString(ZigZag, "utf8"),
    "value" / NullableVarBytes,
)

# One record; the length prefix counts the bytes after itself.
RecordSpec = Prefixed(
    ZigZag,
    Struct(
        "attributes" / Int8sb,
        "timestamp_delta" / ZigZag,  # varlong
        "offset_delta" / ZigZag,  # varint
        "key" / NullableVarBytes,
        "value" / NullableVarBytes,
        "headers" / PrefixedArray(ZigZag, RecordHeader),
    ),
)

# The (decompressed) records section: exactly ``count`` records, nothing after.
# Parse with ``RecordsSpec.parse(data, count=n)``.
RecordsSpec = Struct(
    "records" / Array(this._.count, RecordSpec),
    Terminated,
)

# Everything the CRC-32C covers: attributes to the end of the batch. ``records``
# holds the records section as stored (compressed when the codec is not none).
BatchBodySpec = Struct(
    "attributes" / Int16sb,
    "last_offset_delta" / Int32sb,
    "base_timestamp" / Int64sb,
    "max_timestamp" / Int64sb,
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "base_sequence" / Int32sb,
    "record_count" / Int32sb,
    "records" / Bytes(this._.batch_length - _LENGTH_BEFORE_BODY - BODY_HEADER_SIZE),
)

RecordBatchSpec = Struct(
    "base_offset" / Int64sb,
    "batch_length" / Int32sb,
    "partition_leader_epoch" / Int32sb,
    "magic" / Const(MAGIC, Int8sb),
    "crc" / Int32ub,
    "body" / RawCopy(BatchBodySpec),
)


# ----------------------------------------------------------------------- objects


@dataclass
class Record:
    """One record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class RecordBatch:
    """A decoded RecordBatch v2: every header field plus its records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: list[Record] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Bytes this batch occupies in a log file."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon the cleaner stored in baseTimestamp, if any."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (-1 without a base sequence), wrapping like Kafka."""
        if self.base_sequence < 0:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)


# ------------------------------------------------------------------------ decode


def decode_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> list[RecordBatch]:
    """Decode every complete batch in ``buf``, records included.

    A truncated trailing batch (as in a Fetch response cut at max_bytes) is
    ignored. Records get absolute offsets (baseOffset + offsetDelta) and
    timestamps (baseTimestamp + timestampDelta, also when baseTimestamp holds a
    delete horizon); in a LogAppendTime batch every record's timestamp is the
    batch's maxTimestamp, as Kafka reports it. Raises CorruptRecordError on a
    malformed batch (or a CRC mismatch when ``verify_crc``).
    """
    data = bytes(buf)
    total = len(data)
    batches: list[RecordBatch] = []
    pos = 0
    while total - pos >= LOG_OVERHEAD:
        batch_length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch at byte {pos} declares length {batch_length}")
        size = batch_length + LOG_OVERHEAD
        if pos + size > total:
            break  # truncated trailing batch
        batches.append(_decode_one(data[pos : pos + size], pos, verify_crc))
        pos += size
    return batches


def _decode_one(raw: bytes, pos: int, verify_crc: bool) -> RecordBatch:
    try:
        parsed = RecordBatchSpec.parse(raw)
    except ConstructError as e:
        raise CorruptRecordError(f"batch at byte {pos}: {e}") from e
    body = parsed.body.value
    if verify_crc:
        actual = crc32c.crc32c(parsed.body.data)
        if actual != parsed.crc:
            raise CorruptRecordError(
                f"batch at byte {pos} fails its CRC-32C check (stored {parsed.crc}, computed {actual})"
            )
    if body.record_count < 0:
        raise CorruptRecordError(f"batch at byte {pos} has record count {body.record_count}")
    batch = RecordBatch(
        base_offset=parsed.base_offset,
        batch_length=parsed.batch_length,
        partition_leader_epoch=parsed.partition_leader_epoch,
        magic=parsed.magic,
        crc=parsed.crc,
        attributes=body.attributes,
        last_offset_delta=body.last_offset_delta,
        base_timestamp=body.base_timestamp,
        max_timestamp=body.max_timestamp,
        producer_id=body.producer_id,
        producer_epoch=body.producer_epoch,
        base_sequence=body.base_sequence,
        record_count=body.record_count,
    )
    try:
        section = _compression.decompress(batch.compression, body.records)
    except ValueError as e:
        raise CorruptRecordError(f"batch at byte {pos}: {e}") from e
    try:
        parsed_records = RecordsSpec.parse(section, count=body.record_count).records
    except (ConstructError, UnicodeDecodeError) as e:
        raise CorruptRecordError(
            f"batch at byte {pos}: records do not match the declared count {body.record_count}: {e}"
        ) from e
    append_time = batch.timestamp_type == LOG_APPEND_TIME
    batch.records = [
        Record(
            offset=batch.base_offset + r.offset_delta,
            timestamp=(
                batch.max_timestamp if append_time else batch.base_timestamp + r.timestamp_delta
            ),
            key=r.key,
            value=r.value,
            headers=[(h.key, h.value) for h in r.headers],
        )
        for r in parsed_records
    ]
    return batch


# ------------------------------------------------------------------------ encode


def encode_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    timestamp_type: int = CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Build one RecordBatch v2 with a correct CRC-32C.

    Each record's offsetDelta is ``record.offset - base_offset`` (non-negative,
    strictly increasing). Defaults follow Kafka's builder: baseTimestamp is the
    first record's timestamp, maxTimestamp the largest record timestamp (-1 for
    an empty batch), lastOffsetDelta the last record's offsetDelta.
    ``delete_horizon_ms`` sets attribute bit 0x40 and stores the horizon as
    baseTimestamp (what Kafka's cleaner does); record timestamps stay exact.
    ``last_offset_delta`` overrides the computed value (e.g. for the empty
    batches the cleaner keeps to preserve producer state).
    """
    records = list(records)
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(
            f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not {timestamp_type}"
        )
    _compression.codec_name(compression)  # validates the codec id

    if delete_horizon_ms is not None:
        if base_timestamp is not None and base_timestamp != delete_horizon_ms:
            raise ValueError("base_timestamp and delete_horizon_ms are the same field; give one")
        base_timestamp = delete_horizon_ms
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)

    built = bytearray()
    prev_delta = -1
    for r in records:
        offset_delta = r.offset - base_offset
        if offset_delta <= prev_delta:
            raise ValueError(
                f"record offsets must be >= base_offset {base_offset} and strictly increasing "
                f"(offset {r.offset} after delta {prev_delta})"
            )
        prev_delta = offset_delta
        built += RecordSpec.build(
            {
                "attributes": 0,
                "timestamp_delta": r.timestamp - base_timestamp,
                "offset_delta": offset_delta,
                "key": r.key,
                "value": r.value,
                "headers": [{"key": k, "value": v} for k, v in r.headers],
            }
        )
    if last_offset_delta is None:
        last_offset_delta = max(prev_delta, 0)
    elif last_offset_delta < prev_delta:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} is below the last record's {prev_delta}"
        )

    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK

    section = _compression.compress(compression, bytes(built), level=compression_level)
    batch_length = _LENGTH_BEFORE_BODY + BODY_HEADER_SIZE + len(section)
    body = BatchBodySpec.build(
        {
            "attributes": attributes,
            "last_offset_delta": last_offset_delta,
            "base_timestamp": base_timestamp,
            "max_timestamp": max_timestamp,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "base_sequence": base_sequence,
            "record_count": len(records),
            "records": section,
        },
        batch_length=batch_length,
    )
    return RecordBatchSpec.build(
        {
            "base_offset": base_offset,
            "batch_length": batch_length,
            "partition_leader_epoch": partition_leader_epoch,
            "crc": crc32c.crc32c(body),
            "body": {"data": body},
        }
    )
