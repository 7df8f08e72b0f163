"""Fast RecordBatch v2 reading and writing for the Spark data sources (no pyspark needed).

``kafka_sidecar.protocol.records`` specifies the whole format with ``construct``;
it is exact but parses at a few MB/s, too slow to feed Spark. This module does
the same work by hand: the 61-byte header with ``struct`` (``record_batch``),
the records with an inlined zigzag-varint loop, and decompression through
``protocol.compression`` (every codec Kafka uses). The unit tests check it
against ``protocol.records`` record for record and byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import crc32c
from kafka_sidecar.protocol import compression as _compression
from kafka_sidecar.protocol.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptRecordError,
    read_header,
)

CREATE_TIME = 0
LOG_APPEND_TIME = 1
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
_BODY_HEADER = struct.Struct(">hiqqqhii")  # attributes .. recordCount (what the CRC covers first)
_CRC_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc


@dataclass
class Columns:
    """Decoded records of one topic-partition, column by column (what an Arrow batch needs)."""

    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)  # milliseconds
    timestamp_types: list[int] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]] | None] | None = None  # None: not decoded

    def __len__(self) -> int:
        return len(self.offsets)


def new_columns(include_headers: bool) -> Columns:
    return Columns(headers=[] if include_headers else None)


# --------------------------------------------------------------------------- reading


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each complete v2 batch in ``buf`` from ``pos``.

    A truncated trailing batch (a Fetch response cut at its byte limit, a log
    tail being written) ends the iteration. Raises CorruptRecordError on a batch
    that is not magic 2, declares an impossible length, or fails its CRC-32C.
    """
    view = memoryview(buf)
    total = len(view)
    while total - pos >= BATCH_HEADER_SIZE:
        h = read_header(view, pos)
        if h.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch at byte {pos} declares length {h.batch_length}")
        if pos + h.size > total:
            return
        if h.magic != 2:
            raise CorruptRecordError(
                f"batch at byte {pos} has magic {h.magic}; only RecordBatch v2 (magic 2) is supported"
            )
        if verify_crc:
            actual = crc32c.crc32c(view[pos + ATTRIBUTES_POS : pos + h.size])
            if actual != h.crc:
                raise CorruptRecordError(
                    f"batch at offset {h.base_offset} (byte {pos}) fails its CRC-32C check "
                    f"(stored {h.crc}, computed {actual})"
                )
        yield pos, h
        pos += h.size


def records_section(buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> bytes:
    """The batch's records, decompressed."""
    raw = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + h.size])
    codec = h.attributes & COMPRESSION_MASK
    if codec == 0:
        return raw
    try:
        return _compression.decompress(codec, raw)
    except ValueError as e:
        raise CorruptRecordError(f"batch at offset {h.base_offset}: {e}") from e


def decode_into(
    cols: Columns,
    buf: bytes | bytearray | memoryview,
    pos: int,
    h: BatchHeader,
    lo: int = 0,
    hi: int = 1 << 63,
    ts_lo: int | None = None,
    ts_hi: int | None = None,
) -> int:
    """Append the batch's records with ``lo <= offset < hi`` (and, when given,
    ``ts_lo <= timestamp <= ts_hi``) to ``cols``; returns how many were added.

    Offsets are baseOffset + offsetDelta, timestamps baseTimestamp +
    timestampDelta (also when baseTimestamp holds a compaction delete horizon),
    or the batch's maxTimestamp for LogAppendTime, as Kafka's consumers see them.
    """
    data = records_section(buf, pos, h)
    base_offset = h.base_offset
    append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    ts_type = LOG_APPEND_TIME if append_time else CREATE_TIME
    base_ts = h.base_timestamp
    max_ts = h.max_timestamp
    keys, values, offsets = cols.keys, cols.values, cols.offsets
    timestamps, ts_types, headers_col = cols.timestamps, cols.timestamp_types, cols.headers
    end = len(data)
    p = 0
    added = 0
    try:
        for _ in range(h.record_count):
            # length (varint, zigzag)
            b = data[p]
            p += 1
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
            else:
                v = b & 0x7F
                shift = 7
                while True:
                    b = data[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                length = (v >> 1) ^ -(v & 1)
            rec_end = p + length
            if length < 0 or rec_end > end:
                raise CorruptRecordError(f"batch at offset {base_offset}: record length {length} overruns the batch")
            p += 1  # record attributes (unused)
            # timestampDelta (varlong)
            b = data[p]
            p += 1
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
            else:
                v = b & 0x7F
                shift = 7
                while True:
                    b = data[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                ts_delta = (v >> 1) ^ -(v & 1)
            # offsetDelta (varint)
            b = data[p]
            p += 1
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
            else:
                v = b & 0x7F
                shift = 7
                while True:
                    b = data[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                off_delta = (v >> 1) ^ -(v & 1)
            offset = base_offset + off_delta
            ts = max_ts if append_time else base_ts + ts_delta
            if offset < lo or offset >= hi or (ts_lo is not None and ts < ts_lo) or (ts_hi is not None and ts > ts_hi):
                p = rec_end
                continue
            # key
            b = data[p]
            p += 1
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
            else:
                v = b & 0x7F
                shift = 7
                while True:
                    b = data[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                n = (v >> 1) ^ -(v & 1)
            if n < 0:
                key = None
            else:
                key = data[p : p + n]
                p += n
            # value
            b = data[p]
            p += 1
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
            else:
                v = b & 0x7F
                shift = 7
                while True:
                    b = data[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                n = (v >> 1) ^ -(v & 1)
            if n < 0:
                value = None
            else:
                value = data[p : p + n]
                p += n
            if headers_col is not None:
                count, p = _varint(data, p)
                hdrs = []
                for _h in range(count):
                    n, p = _varint(data, p)
                    if n < 0:
                        raise CorruptRecordError(f"batch at offset {base_offset}: null header key")
                    hkey = data[p : p + n].decode("utf-8")
                    p += n
                    n, p = _varint(data, p)
                    if n < 0:
                        hval = None
                    else:
                        hval = data[p : p + n]
                        p += n
                    hdrs.append((hkey, hval))
                # Spark's Kafka source gives null, not [], for a record without headers.
                headers_col.append(hdrs or None)
            if p > rec_end:
                raise CorruptRecordError(f"batch at offset {base_offset}: record at offset {offset} overruns its length")
            p = rec_end
            keys.append(key)
            values.append(value)
            offsets.append(offset)
            timestamps.append(ts)
            ts_types.append(ts_type)
            added += 1
    except IndexError:
        raise CorruptRecordError(
            f"batch at offset {base_offset}: records end before the declared count {h.record_count}"
        ) from None
    except UnicodeDecodeError as e:
        raise CorruptRecordError(f"batch at offset {base_offset}: header key is not UTF-8: {e}") from None
    return added


def _varint(data: bytes, p: int) -> tuple[int, int]:
    v = 0
    shift = 0
    while True:
        b = data[p]
        p += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return (v >> 1) ^ -(v & 1), p
        shift += 7


# --------------------------------------------------------------------------- writing


def _zigzag(n: int, out: bytearray) -> None:
    v = (n << 1) if n >= 0 else ((-n) << 1) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
) -> None:
    """Append one record (length-prefixed) to ``out``."""
    body = bytearray(b"\x00")  # attributes
    _zigzag(timestamp_delta, body)
    _zigzag(offset_delta, body)
    if key is None:
        body.append(1)  # zigzag(-1)
    else:
        _zigzag(len(key), body)
        body += key
    if value is None:
        body.append(1)
    else:
        _zigzag(len(value), body)
        body += value
    if not headers:
        body.append(0)
    else:
        _zigzag(len(headers), body)
        for hk, hv in headers:
            kb = hk.encode("utf-8")
            _zigzag(len(kb), body)
            body += kb
            if hv is None:
                body.append(1)
            else:
                _zigzag(len(hv), body)
                body += hv
    _zigzag(len(body), out)
    out += body


def record_size_upper_bound(key: bytes | None, value: bytes | None, headers) -> int:
    """Bytes a record takes in a batch, at most (for batch sizing before encoding)."""
    size = 21 + (len(key) if key else 0) + (len(value) if value else 0)
    for hk, hv in headers or ():
        size += 10 + len(hk) * 3 + (len(hv) if hv else 0)
    return size


def build_batch(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int]],
    *,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
) -> bytes:
    """One RecordBatch v2 (CreateTime) of ``(key, value, headers, timestamp_ms)`` records,
    consecutive offsets from ``base_offset``, with a correct CRC-32C."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = records[0][3]
    max_ts = base_ts
    section = bytearray()
    for i, (key, value, headers, ts) in enumerate(records):
        if ts > max_ts:
            max_ts = ts
        encode_record(section, i, ts - base_ts, key, value, headers)
    payload = bytes(section) if compression == 0 else _compression.compress(compression, bytes(section))
    body = _BODY_HEADER.pack(
        compression & COMPRESSION_MASK,
        len(records) - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + payload
    batch_length = 9 + len(body)  # partitionLeaderEpoch + magic + crc + body
    return _CRC_PREFIX.pack(base_offset, batch_length, -1, 2, crc32c.crc32c(body)) + body


# --------------------------------------------------------------------------- partitioner


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (signed 32-bit result), used by its default partitioner."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition for a keyed record: toPositive(murmur2(key)) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
