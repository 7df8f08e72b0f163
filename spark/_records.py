"""RecordBatch v2 reading and writing for the Spark data sources (no pyspark needed).

The records are walked by ``kafka_sidecar.protocol.records`` (``iter_batches``,
``decode_records``, ``encode_batch``), the broker's own codec, so Spark reads
batches under the same rules as the broker and Kafka (see that module's
docstring). This module adds what Spark needs on top: columns for Arrow,
offset and timestamp filters, Spark's null for a record without headers, the
sink's ``(key, value, headers, timestamp)`` rows, and Kafka's partitioner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat

from kafka_sidecar.protocol.record_batch import TIMESTAMP_TYPE_MASK, BatchHeader
from kafka_sidecar.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    decode_records,
    encode_columns,
    iter_batches,
)

__all__ = [
    "Columns",
    "build_batch",
    "decode_into",
    "iter_batches",
    "murmur2",
    "new_columns",
    "partition_for_key",
    "record_size_upper_bound",
]


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
    """Append the records of the batch at ``pos`` (from ``iter_batches``) with
    ``lo <= offset < hi`` (and, when given, ``ts_lo <= timestamp <= ts_hi``) to ``cols``;
    returns how many were added.

    Offsets are baseOffset + offsetDelta, timestamps baseTimestamp + timestampDelta
    (also when baseTimestamp holds a compaction delete horizon), or the batch's
    maxTimestamp for LogAppendTime, as Kafka's consumers see them. Every record of the
    batch is checked, also those filtered out and headers that are not kept; a
    malformed batch raises CorruptRecordError and adds nothing.
    """
    offsets, timestamps, keys, values = cols.offsets, cols.timestamps, cols.keys, cols.values
    n0 = len(offsets)
    headers: list[list[tuple[str, bytes | None]]] = []
    n = decode_records(buf, pos, h, offsets, timestamps, keys, values, headers)
    if not n:
        return 0
    # Most batches lie inside the range: filter record by record only at its ends.
    if ts_lo is not None or ts_hi is not None or offsets[n0] < lo or offsets[-1] >= hi:
        keep = [
            i
            for i in range(n0, n0 + n)
            if lo <= offsets[i] < hi
            and (ts_lo is None or timestamps[i] >= ts_lo)
            and (ts_hi is None or timestamps[i] <= ts_hi)
        ]
        if len(keep) < n:
            for column in (offsets, timestamps, keys, values):
                column[n0:] = [column[i] for i in keep]
            if cols.headers is not None:
                headers = [headers[i - n0] for i in keep]
            n = len(keep)
    if cols.headers is not None:
        # Spark's Kafka source gives null, not [], for a record without headers.
        cols.headers += [hs or None for hs in headers]
    cols.timestamp_types.extend(
        repeat(LOG_APPEND_TIME if h.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME, n)
    )
    return n


# --------------------------------------------------------------------------- writing


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
    consecutive offsets from ``base_offset`` (``encode_batch``'s bytes, Kafka's defaults)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    keys, values, headers, timestamps = zip(*records, strict=True)
    return encode_columns(
        range(base_offset, base_offset + len(records)),
        timestamps,
        keys,
        values,
        headers,
        base_offset=base_offset,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


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
