"""RecordBatch v2 (magic 2), records included: specified with ``construct`` (in the tests), run by hand.

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

The readable specification is written with ``construct`` in ``tests/record_spec.py``
(``RecordBatchSpec``, ``BatchBodySpec``, ``RecordsSpec``, ``RecordSpec``; a test
dependency). It parses at a few MB/s, so the codec does the same work by hand
(``struct`` for the header, an inlined varint loop for the records); the unit tests
check that both accept and reject the same bytes and produce the same objects and
bytes (``tests/unit/test_records.py``).

This is the one record codec of the code base: ``decode_batches`` /
``encode_batch`` with ``Record`` objects, and, for readers that want columns
rather than objects (the Spark data sources, the group coordinator's loader),
``iter_batches`` (checked headers, records not read) + ``decode_records``
(a batch's records appended field by field to five lists) and
``encode_columns``. Records are walked in one place each way:
``_decode_records`` and ``encode_columns``.

Decoding follows Kafka's ``DefaultRecordBatch`` / ``DefaultRecord.readFrom``:

- a varint has at most 5 bytes and a varlong at most 10 (``ByteUtils``:
  "Varint is too long"); the bits of the last byte that do not fit 32 / 64
  bits are dropped, as Java's int/long shifts drop them;
- a record's fields must fill exactly its declared length ("Invalid record
  size"), and the (decompressed) records section must hold exactly
  ``recordCount`` records and nothing after them;
- a negative record count, header count or header key length is invalid.

Two deliberate differences, where we are stricter than Kafka: a key, value or
header value length below -1 is rejected (Kafka reads any negative length as
null), and a header key that is not valid UTF-8 is rejected (Java decodes it
with U+FFFD replacement characters).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import crc32c

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
    BatchHeader,
    CorruptRecordError,
    increment_sequence,
)
from .varint import VarintError, read_varint, read_varlong

MAGIC = 2
CREATE_TIME = 0
LOG_APPEND_TIME = 1
# batchLength counts partitionLeaderEpoch (4) + magic (1) + crc (4) + the CRC-covered body.
_LENGTH_BEFORE_BODY = 9
# Size of the CRC-covered part of the header (attributes .. recordCount).
BODY_HEADER_SIZE = BATCH_HEADER_SIZE - LOG_OVERHEAD - _LENGTH_BEFORE_BODY  # 40
_ATTRIBUTES_POS = BATCH_HEADER_SIZE - BODY_HEADER_SIZE  # 21: where the CRC-32C starts
_CRC_POS = _ATTRIBUTES_POS - 4


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


_BATCH_LENGTH = struct.Struct(">i")
_new_tuple = tuple.__new__  # BatchHeader from the unpacked fields without namedtuple's _make


class _Malformed(Exception):
    """A records section that does not follow the format (internal; becomes CorruptRecordError)."""


def _zigzag(n: int) -> bytes:
    """Zigzag LEB128 of ``n`` (any int64)."""
    return encode_uvarint((n << 1) if n >= 0 else ((-n) << 1) - 1)


def encode_uvarint(v: int) -> bytes:
    """LEB128 of ``v`` >= 0 (Kafka's unsigned varint: a zigzag value, a compact length)."""
    if v < 0x80:
        return _ENC1[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _size(v: int) -> int:
    """Bytes of the LEB128 of ``v`` >= 0."""
    return (v.bit_length() + 6) // 7 or 1


def _encode_headers(headers: list[tuple[str, bytes | None]]) -> bytes:
    """A record's header count and headers."""
    out = bytearray(_zigzag(len(headers)))
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
    return bytes(out)


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
    batches: list[RecordBatch] = []
    for pos, h in iter_batches(data, verify_crc=verify_crc):
        offsets: list[int] = []
        timestamps: list[int] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        headers: list[list[tuple[str, bytes | None]]] = []
        decode_records(data, pos, h, offsets, timestamps, keys, values, headers)
        batches.append(
            RecordBatch(*h, list(map(Record, offsets, timestamps, keys, values, headers)))
        )
    return batches


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in ``buf`` from ``pos``, records not read.

    A truncated trailing batch (a Fetch response cut at its byte limit, a log tail
    being written) ends the iteration. Raises CorruptRecordError on a batch that
    declares a length shorter than its header, is not magic 2, fails its CRC-32C
    check (when ``verify_crc``) or has a negative record count (Kafka's
    ``DefaultRecordBatch``: "Found invalid record count"). ``decode_records``
    reads a batch's records.
    """
    view = memoryview(buf)
    total = len(view)
    length_at = _BATCH_LENGTH.unpack_from
    unpack = BATCH_HEADER.unpack_from
    while total - pos >= LOG_OVERHEAD:
        (batch_length,) = length_at(view, pos + 8)
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch at byte {pos} declares length {batch_length}")
        size = batch_length + LOG_OVERHEAD
        if pos + size > total:
            return  # truncated trailing batch
        h = _new_tuple(BatchHeader, unpack(view, pos))
        if h.magic != MAGIC:
            raise CorruptRecordError(f"batch at byte {pos} has magic {h.magic}, expected {MAGIC}")
        if verify_crc:
            actual = crc32c.crc32c(view[pos + _ATTRIBUTES_POS : pos + size])
            if actual != h.crc:
                raise CorruptRecordError(
                    f"batch at byte {pos} fails its CRC-32C check (stored {h.crc}, computed {actual})"
                )
        if h.record_count < 0:
            raise CorruptRecordError(f"batch at byte {pos} has record count {h.record_count}")
        yield pos, h
        pos += size


def decode_records(
    buf: bytes | bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    offsets: list[int],
    timestamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[list[tuple[str, bytes | None]]],
) -> int:
    """Append the records of the batch at ``pos`` to five lists, one per field (columns,
    no per-record objects); returns how many.

    ``header`` is the batch's header as ``iter_batches`` yields it (already checked).
    Offsets and timestamps are absolute, as in ``decode_batches``; a record without
    headers gets ``[]``. The batch is appended whole or, with CorruptRecordError, not
    at all. Keys and values are ``bytes`` (copies: ``buf`` may be reused).
    """
    base_offset, batch_length, _, _, _, attributes, _, base_ts, max_ts, _, _, _, count = header
    start = pos + BATCH_HEADER_SIZE
    end = pos + batch_length + LOG_OVERHEAD
    codec = attributes & COMPRESSION_MASK
    if codec:
        try:
            section = _compression.decompress(codec, memoryview(buf)[start:end])
        except ValueError as e:
            raise CorruptRecordError(f"batch at byte {pos}: {e}") from e
        start, end = 0, len(section)
    elif type(buf) is bytes:
        section = buf  # read in place
    else:
        section = bytes(memoryview(buf)[start:end])
        start, end = 0, len(section)
    n0 = len(offsets)
    try:
        _decode_records(
            section, start, end, count, base_offset,
            max_ts if attributes & TIMESTAMP_TYPE_MASK else None, base_ts,
            offsets, timestamps, keys, values, headers,
        )  # fmt: skip
    except (_Malformed, VarintError, IndexError, UnicodeDecodeError) as e:
        added = len(offsets) - n0  # the same in every list: each record is appended to all five
        if added:
            for column in (offsets, timestamps, keys, values, headers):
                del column[len(column) - added :]
        why = "records end early" if isinstance(e, IndexError) else str(e)
        raise CorruptRecordError(
            f"batch at byte {pos}: records do not match the declared count {count}: {why}"
        ) from None
    return count


def _decode_records(
    data: bytes,
    p: int,
    end: int,
    count: int,
    base_offset: int,
    append_ts: int | None,
    base_ts: int,
    offsets: list[int],
    timestamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers_col: list[list[tuple[str, bytes | None]]],
) -> None:
    """``count`` records from ``data[p:end]``, which they must fill exactly, appended field
    by field to the five lists. The one place that walks records (the Spark readers and the
    group coordinator's loader come here through ``decode_records``).

    Raises _Malformed, IndexError (ran off the data) or UnicodeDecodeError (header key).
    Each varint is read inline when it has one or two bytes, by ``read_varint`` otherwise.
    """
    zz = _ZZ1
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
            length, p = read_varint(data, p)
        rend = p + length
        if length < 0 or rend > end:
            raise _Malformed(f"record {i} declares length {length}, {end - p} bytes remain")
        # attributes (int8, unused), timestampDelta
        b = data[p + 1]
        if b < 0x80:
            ts_delta = zz[b]
            p += 2
        elif (c := data[p + 2]) < 0x80:
            v = (b & 0x7F) | (c << 7)
            ts_delta = (v >> 1) ^ -(v & 1)
            p += 3
        else:
            ts_delta, p = read_varlong(data, p + 1)
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
            off_delta, p = read_varint(data, p)
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
            n, p = read_varint(data, p)
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
            n, p = read_varint(data, p)
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
                n, p = read_varint(data, p)
            if n < 0:
                raise _Malformed(f"record {i}: invalid header count {n}")
            headers = _decode_headers(data, p, rend, n, i)
            p = headers.pop()
        if p != rend:
            raise _Malformed(
                f"record {i}: its fields take {p - rend + length} of its {length} bytes"
            )
        offsets.append(base_offset + off_delta)
        timestamps.append(base_ts + ts_delta if append_ts is None else append_ts)
        keys.append(key)
        values.append(value)
        headers_col.append(headers)
    if p != end:
        raise _Malformed(f"{end - p} bytes after the last record")


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
            n, p = read_varint(data, p)
        if n < 0 or n > rend - p:
            raise _Malformed(f"record {i}: invalid header key length {n}")
        hkey = str(data[p : p + n], "utf-8")
        p += n
        b = data[p]
        if b < 0x80:
            n = _ZZ1[b]
            p += 1
        else:
            n, p = read_varint(data, p)
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
    return encode_columns(
        [r.offset for r in records], [r.timestamp for r in records], [r.key for r in records],
        [r.value for r in records], [r.headers for r in records],
        base_offset=base_offset, compression=compression, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch, timestamp_type=timestamp_type,
        is_transactional=is_transactional, is_control=is_control, base_timestamp=base_timestamp,
        max_timestamp=max_timestamp, delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=last_offset_delta, compression_level=compression_level,
    )  # fmt: skip


def encode_columns(
    offsets: Sequence[int],
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[list[tuple[str, bytes | None]] | None],
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
    """``encode_batch`` for records given field by field, as ``decode_records`` reads them:
    five sequences of the same length, no per-record objects (``None`` headers = none).
    The options and the bytes are ``encode_batch``'s.
    """
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(
            f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not {timestamp_type}"
        )
    _compression.codec_name(compression)  # validates the codec id

    count = len(offsets)
    if delete_horizon_ms is not None:
        if base_timestamp is not None and base_timestamp != delete_horizon_ms:
            raise ValueError("base_timestamp and delete_horizon_ms are the same field; give one")
        base_timestamp = delete_horizon_ms
    if base_timestamp is None:
        base_timestamp = timestamps[0] if count else NO_TIMESTAMP

    # The header is written last, in place; the records follow its 61 bytes. Each record's
    # size is computed first, so that its length prefix is written before it; varints of
    # one or two bytes (values below 2^13 and above -2^13) are written inline.
    out = bytearray(BATCH_HEADER_SIZE)
    enc1 = _ENC1
    prev_delta = -1
    top_ts = timestamps[0] if count else NO_TIMESTAMP
    for offset, ts, key, value, hdrs in zip(
        offsets, timestamps, keys, values, headers, strict=True
    ):
        offset_delta = offset - base_offset
        if offset_delta <= prev_delta:
            raise ValueError(
                f"record offsets must be >= base_offset {base_offset} and strictly increasing "
                f"(offset {offset} after delta {prev_delta})"
            )
        if offset_delta > _INT32_MAX:
            raise ValueError(f"offset {offset} is more than 2^31-1 above base_offset {base_offset}")
        prev_delta = offset_delta
        if ts > top_ts:
            top_ts = ts
        ts_delta = ts - base_timestamp
        if not _INT64_MIN <= ts_delta <= _INT64_MAX:
            raise ValueError(f"timestamp {ts} is too far from base timestamp {base_timestamp}")
        # zigzag values: timestampDelta, offsetDelta, key length, value length
        tv = (ts_delta << 1) if ts_delta >= 0 else ((-ts_delta) << 1) - 1
        ov = offset_delta << 1
        size = 2 if not hdrs else 1  # attributes (+ a header count of 0)
        if key is None:
            kv = 1
        else:
            if type(key) is not bytes:
                key = bytes(key)
            kv = len(key) << 1
            size += len(key)
        if value is None:
            vv = 1
        else:
            if type(value) is not bytes:
                value = bytes(value)
            vv = len(value) << 1
            size += len(value)
        if hdrs:
            hb = _encode_headers(hdrs)
            size += len(hb)
        size += (
            (1 if tv < 0x80 else 2 if tv < 0x4000 else _size(tv))
            + (1 if ov < 0x80 else 2 if ov < 0x4000 else _size(ov))
            + (1 if kv < 0x80 else 2 if kv < 0x4000 else _size(kv))
            + (1 if vv < 0x80 else 2 if vv < 0x4000 else _size(vv))
        )
        if size > _INT32_MAX:
            raise ValueError(f"record at offset {offset} is larger than 2^31-1 bytes")
        v = size << 1
        if v < 0x80:
            out += enc1[v]
        elif v < 0x4000:
            out.append((v & 0x7F) | 0x80)
            out.append(v >> 7)
        else:
            out += encode_uvarint(v)
        out += b"\x00"  # attributes
        if tv < 0x80:
            out += enc1[tv]
        elif tv < 0x4000:
            out.append((tv & 0x7F) | 0x80)
            out.append(tv >> 7)
        else:
            out += encode_uvarint(tv)
        if ov < 0x80:
            out += enc1[ov]
        elif ov < 0x4000:
            out.append((ov & 0x7F) | 0x80)
            out.append(ov >> 7)
        else:
            out += encode_uvarint(ov)
        if kv < 0x80:
            out += enc1[kv]
        elif kv < 0x4000:
            out.append((kv & 0x7F) | 0x80)
            out.append(kv >> 7)
        else:
            out += encode_uvarint(kv)
        if key is not None:
            out += key
        if vv < 0x80:
            out += enc1[vv]
        elif vv < 0x4000:
            out.append((vv & 0x7F) | 0x80)
            out.append(vv >> 7)
        else:
            out += encode_uvarint(vv)
        if value is not None:
            out += value
        if hdrs:
            out += hb
        else:
            out += b"\x00"
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
            producer_id, producer_epoch, base_sequence, count,
        )  # fmt: skip
    except struct.error as e:
        raise ValueError(f"batch header field out of range: {e}") from e
    _CRC.pack_into(out, _CRC_POS, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_POS:]))
    return bytes(out)
