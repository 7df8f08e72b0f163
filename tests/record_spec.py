"""The RecordBatch v2 format written as ``construct`` structures: the readable specification the
hand-written codec of ``protocol/records.py`` is checked against (tests/unit/test_records.py).
Parses at a few MB/s, so only the tests use it; ``construct`` is a test dependency."""

from __future__ import annotations

from construct import (
    Adapter,
    Array,
    Bytes,
    Const,
    Construct,
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
    this,
)
from construct.core import stream_read, stream_write
from kafka_sidecar.protocol.records import _LENGTH_BEFORE_BODY, BODY_HEADER_SIZE, MAGIC, _zigzag


class _KafkaZigZag(Construct):
    """Kafka's zigzag varint (5 bytes at most, 32 bits) or varlong (10 bytes, 64 bits).

    Like ``ByteUtils.readVarint`` / ``readVarlong``: a longer encoding is an error, and
    bits of the last byte beyond 32 / 64 are dropped (Java's shifts drop them). Building
    refuses values outside int32 / int64.
    """

    def __init__(self, max_bytes: int, bits: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.bits = bits

    def _parse(self, stream, context, path):
        raw = 0
        for i in range(self.max_bytes):
            b = stream_read(stream, 1, path)[0]
            raw |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                raw &= (1 << self.bits) - 1
                return (raw >> 1) ^ -(raw & 1)
        raise ConstructError(f"varint longer than {self.max_bytes} bytes", path=path)

    def _build(self, obj, stream, context, path):
        limit = 1 << (self.bits - 1)
        if not isinstance(obj, int) or not -limit <= obj < limit:
            raise ConstructError(f"{obj!r} does not fit a {self.bits}-bit varint", path=path)
        data = _zigzag(obj)
        stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise ConstructError("varints have no fixed size", path=path)


VarInt = _KafkaZigZag(5, 32)
VarLong = _KafkaZigZag(10, 64)


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
        "length" / VarInt,
        "data" / If(this.length >= 0, Bytes(this.length)),
    )
)

RecordHeader = Struct(
    "key" / PascalString(VarInt, "utf8"),  # a negative length is an error
    "value" / NullableVarBytes,
)

# One record; the length prefix counts the bytes after itself, and the fields fill it exactly.
RecordSpec = Prefixed(
    VarInt,
    Struct(
        "attributes" / Int8sb,
        "timestamp_delta" / VarLong,
        "offset_delta" / VarInt,
        "key" / NullableVarBytes,
        "value" / NullableVarBytes,
        "headers" / PrefixedArray(VarInt, RecordHeader),  # a negative count is an error
        Terminated,
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


