"""RecordBatch v2 (magic 2), records included: specified with ``construct``, run by hand.

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

The ``construct`` structures below (``RecordBatchSpec``, ``BatchBodySpec``,
``RecordsSpec``, ``RecordSpec``) are the readable specification. They parse at a
few MB/s, so ``decode_batches`` and ``encode_batch`` do the same work by hand
(``struct`` for the header, an inlined varint loop for the records); the unit
tests check that both accept and reject the same bytes and produce the same
objects and bytes (``tests/unit/test_records.py``).

Decoding follows Kafka's ``DefaultRecordBatch`` / ``DefaultRecord.readFrom``:

- a varint has at most 5 bytes and a varlong at most 10 (``ByteUtils``:
  "Varint is too long"); the bits of the last byte that do not fit 32 / 64
  bits are dropped, as Java's int/long shifts drop them;
- a record's fields must fill exactly its declared length ("Invalid record
  size"), and the (decompressed) records section must hold exactly
  ``recordCount`` records and nothing after them;
- a negative header count or header key length is invalid.

Two deliberate differences, where we are stricter than Kafka: a key, value or
header value length below -1 is rejected (Kafka reads any negative length as
null), and a header key that is not valid UTF-8 is rejected (Java decodes it
with U+FFFD replacement characters).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

import crc32c
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

from . import compression as _compression
from .record_batch import (
    BATCH_HEADER,
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
_ATTRIBUTES_POS = BATCH_HEADER_SIZE - BODY_HEADER_SIZE  # 21: where the CRC-32C starts
_CRC_POS = _ATTRIBUTES_POS - 4


# --------------------------------------------------------------------------- spec


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


# ------------------------------------------------------------------------ varints

# Zigzag value of every 1-byte varint (0x00-0x7f): the common case of lengths, deltas, counts.
_ZZ1 = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
# Encoding of every value with a 1-byte varint (-64..63), indexed by zigzag value.
_ENC1 = tuple(bytes((v,)) for v in range(0x80))
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


class _Malformed(Exception):
    """A records section that does not follow the format (internal; becomes CorruptRecordError)."""


def _zigzag(n: int) -> bytes:
    """Zigzag LEB128 of ``n`` (any int64)."""
    v = (n << 1) if n >= 0 else ((-n) << 1) - 1
    if v < 0x80:
        return _ENC1[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(data: bytes, p: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``p`` (ByteUtils.readVarint)."""
    raw = 0
    for shift in (0, 7, 14, 21, 28):
        b = data[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= _MASK32
            return (raw >> 1) ^ -(raw & 1), p
    raise _Malformed("varint longer than 5 bytes")


def _varlong(data: bytes, p: int) -> tuple[int, int]:
    """(value, next position) of the varlong at ``p`` (ByteUtils.readVarlong)."""
    raw = 0
    for shift in range(0, 70, 7):
        b = data[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= _MASK64
            return (raw >> 1) ^ -(raw & 1), p
    raise _Malformed("varlong longer than 10 bytes")


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
    data = buf if type(buf) is bytes else bytes(buf)
    view = memoryview(data)
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
        batches.append(_decode_one(data, view, pos, size, verify_crc))
        pos += size
    return batches


def _decode_one(
    data: bytes, view: memoryview, pos: int, size: int, verify_crc: bool
) -> RecordBatch:
    """The batch of ``size`` bytes at ``pos`` (at least a full header)."""
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
     base_ts, max_ts, producer_id, producer_epoch, base_sequence, record_count) = BATCH_HEADER.unpack_from(data, pos)  # fmt: skip
    if magic != MAGIC:
        raise CorruptRecordError(f"batch at byte {pos} has magic {magic}, expected {MAGIC}")
    end = pos + size
    if verify_crc:
        actual = crc32c.crc32c(view[pos + _ATTRIBUTES_POS : end])
        if actual != crc:
            raise CorruptRecordError(
                f"batch at byte {pos} fails its CRC-32C check (stored {crc}, computed {actual})"
            )
    if record_count < 0:
        raise CorruptRecordError(f"batch at byte {pos} has record count {record_count}")
    batch = RecordBatch(
        base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
        base_ts, max_ts, producer_id, producer_epoch, base_sequence, record_count,
    )  # fmt: skip
    codec = attributes & COMPRESSION_MASK
    start = pos + BATCH_HEADER_SIZE
    if codec:
        try:
            section = _compression.decompress(codec, view[start:end])
        except ValueError as e:
            raise CorruptRecordError(f"batch at byte {pos}: {e}") from e
        start, end = 0, len(section)
    else:
        section = data
    try:
        batch.records = _decode_records(
            section, start, end, record_count, base_offset,
            max_ts if attributes & TIMESTAMP_TYPE_MASK else None, base_ts,
        )  # fmt: skip
    except (_Malformed, IndexError, UnicodeDecodeError) as e:
        why = "records end early" if isinstance(e, IndexError) else str(e)
        raise CorruptRecordError(
            f"batch at byte {pos}: records do not match the declared count {record_count}: {why}"
        ) from None
    return batch


def _decode_records(
    data: bytes, p: int, end: int, count: int, base_offset: int, append_ts: int | None, base_ts: int
) -> list[Record]:
    """``count`` records from ``data[p:end]``, which they must fill exactly.

    Raises _Malformed, IndexError (ran off the data) or UnicodeDecodeError (header key).
    Each varint is read inline when it has one or two bytes, by ``_varint`` otherwise.
    """
    zz = _ZZ1
    records: list[Record] = []
    append = records.append
    new = Record
    for i in range(count):
        # length
        b = data[p]
        if b < 0x80:
            length = zz[b]
            p += 1
        elif (c := data[p + 1]) < 0x80:
            v = (b & 0x7F) | (c << 7)
            length = (v >> 1) ^ -(v & 1)
            p += 2
        else:
            length, p = _varint(data, p)
        rend = p + length
        if length < 0 or rend > end:
            raise _Malformed(f"record {i} declares length {length}, {end - p} bytes remain")
        # attributes (int8, unused), timestampDelta
        b = data[p + 1]
        if b < 0x80:
            ts_delta = zz[b]
            p += 2
        else:
            ts_delta, p = _varlong(data, p + 1)
        # offsetDelta
        b = data[p]
        if b < 0x80:
            off_delta = zz[b]
            p += 1
        elif (c := data[p + 1]) < 0x80:
            v = (b & 0x7F) | (c << 7)
            off_delta = (v >> 1) ^ -(v & 1)
            p += 2
        else:
            off_delta, p = _varint(data, p)
        # key
        b = data[p]
        if b < 0x80:
            n = zz[b]
            p += 1
        elif (c := data[p + 1]) < 0x80:
            v = (b & 0x7F) | (c << 7)
            n = (v >> 1) ^ -(v & 1)
            p += 2
        else:
            n, p = _varint(data, p)
        if n >= 0:
            if n > rend - p:
                raise _Malformed(f"record {i}: key length {n} overruns the record")
            key = data[p : p + n]
            p += n
        elif n == -1:
            key = None
        else:
            raise _Malformed(f"record {i}: invalid key length {n}")
        # value
        b = data[p]
        if b < 0x80:
            n = zz[b]
            p += 1
        elif (c := data[p + 1]) < 0x80:
            v = (b & 0x7F) | (c << 7)
            n = (v >> 1) ^ -(v & 1)
            p += 2
        else:
            n, p = _varint(data, p)
        if n >= 0:
            if n > rend - p:
                raise _Malformed(f"record {i}: value length {n} overruns the record")
            value = data[p : p + n]
            p += n
        elif n == -1:
            value = None
        else:
            raise _Malformed(f"record {i}: invalid value length {n}")
        # headers
        b = data[p]
        if b == 0:
            p += 1
            headers = []
        else:
            if b < 0x80:
                n = zz[b]
                p += 1
            else:
                n, p = _varint(data, p)
            if n < 0:
                raise _Malformed(f"record {i}: invalid header count {n}")
            headers = _decode_headers(data, p, rend, n, i)
            p = headers.pop()
        if p != rend:
            raise _Malformed(
                f"record {i}: its fields take {p - rend + length} of its {length} bytes"
            )
        append(new(base_offset + off_delta, base_ts + ts_delta if append_ts is None else append_ts,
                   key, value, headers))  # fmt: skip
    if p != end:
        raise _Malformed(f"{end - p} bytes after the last record")
    return records


def _decode_headers(data: bytes, p: int, rend: int, count: int, i: int) -> list:
    """``count`` headers from ``p``, then the position after them (as the last item)."""
    headers: list = []
    for _ in range(count):
        if p >= rend:
            raise _Malformed(f"record {i}: headers overrun the record")
        b = data[p]
        if b < 0x80:
            n = _ZZ1[b]
            p += 1
        else:
            n, p = _varint(data, p)
        if n < 0 or n > rend - p:
            raise _Malformed(f"record {i}: invalid header key length {n}")
        hkey = str(data[p : p + n], "utf-8")
        p += n
        b = data[p]
        if b < 0x80:
            n = _ZZ1[b]
            p += 1
        else:
            n, p = _varint(data, p)
        if n >= 0:
            if n > rend - p:
                raise _Malformed(f"record {i}: header value length {n} overruns the record")
            hval = data[p : p + n]
            p += n
        elif n == -1:
            hval = None
        else:
            raise _Malformed(f"record {i}: invalid header value length {n}")
        headers.append((hkey, hval))
    headers.append(p)
    return headers


# ------------------------------------------------------------------------ encode

_BODY_HEADER = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC = struct.Struct(">I")


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
    batches the cleaner keeps to preserve producer state). ValueError for
    anything the format cannot hold (offset or timestamp deltas beyond
    int32 / int64, header fields out of range).
    """
    records = records if type(records) is list else list(records)
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

    # The header is written last, in place; the records follow its 61 bytes.
    out = bytearray(BATCH_HEADER_SIZE)
    enc1 = _ENC1
    prev_delta = -1
    top_ts = records[0].timestamp if records else NO_TIMESTAMP
    for r in records:
        offset_delta = r.offset - base_offset
        if offset_delta <= prev_delta:
            raise ValueError(
                f"record offsets must be >= base_offset {base_offset} and strictly increasing "
                f"(offset {r.offset} after delta {prev_delta})"
            )
        if offset_delta > _INT32_MAX:
            raise ValueError(
                f"offset {r.offset} is more than 2^31-1 above base_offset {base_offset}"
            )
        prev_delta = offset_delta
        ts = r.timestamp
        if ts > top_ts:
            top_ts = ts
        ts_delta = ts - base_timestamp
        if not _INT64_MIN <= ts_delta <= _INT64_MAX:
            raise ValueError(f"timestamp {ts} is too far from base timestamp {base_timestamp}")
        start = len(out)
        out += b"\x00"  # attributes
        out += enc1[ts_delta << 1] if 0 <= ts_delta < 64 else _zigzag(ts_delta)
        out += enc1[offset_delta << 1] if offset_delta < 64 else _zigzag(offset_delta)
        key = r.key
        if key is None:
            out += b"\x01"
        else:
            if type(key) is not bytes:
                key = bytes(key)
            n = len(key)
            out += enc1[n << 1] if n < 64 else _zigzag(n)
            out += key
        value = r.value
        if value is None:
            out += b"\x01"
        else:
            if type(value) is not bytes:
                value = bytes(value)
            n = len(value)
            out += enc1[n << 1] if n < 64 else _zigzag(n)
            out += value
        headers = r.headers
        if not headers:
            out += b"\x00"
        else:
            out += _zigzag(len(headers))
            for hk, hv in headers:
                kb = hk.encode("utf-8")
                out += _zigzag(len(kb))
                out += kb
                if hv is None:
                    out += b"\x01"
                else:
                    if type(hv) is not bytes:
                        hv = bytes(hv)
                    out += _zigzag(len(hv))
                    out += hv
        n = len(out) - start
        if n > _INT32_MAX:
            raise ValueError(f"record at offset {r.offset} is larger than 2^31-1 bytes")
        out[start:start] = enc1[n << 1] if n < 64 else _zigzag(n)  # the length prefix
    if max_timestamp is None:
        max_timestamp = top_ts
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

    if compression:
        section = _compression.compress(
            compression, memoryview(out)[BATCH_HEADER_SIZE:], level=compression_level
        )
        del out[BATCH_HEADER_SIZE:]
        out += section
    batch_length = len(out) - LOG_OVERHEAD
    try:
        _PREFIX.pack_into(out, 0, base_offset, batch_length, partition_leader_epoch, MAGIC)
        _BODY_HEADER.pack_into(
            out, _ATTRIBUTES_POS, attributes, last_offset_delta, base_timestamp, max_timestamp,
            producer_id, producer_epoch, base_sequence, len(records),
        )  # fmt: skip
    except struct.error as e:
        raise ValueError(f"batch header field out of range: {e}") from e
    _CRC.pack_into(out, _CRC_POS, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_POS:]))
    return bytes(out)
