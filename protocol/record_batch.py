"""RecordBatch v2 header: the fixed 61 bytes read on the hot produce/fetch paths.

Only the header is parsed here, with one ``struct`` call per batch, so appending
and serving data never touches individual records (DESIGN.md, measured facts).
The full format, records included, is decoded and built by ``records.py`` (specified with
``construct`` in tests/record_spec.py).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 61
assert BATCH_HEADER_SIZE == 61

# Offsets of fields within the header (used for in-place patching).
BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21  # CRC-32C covers everything from here to the end of the batch
MAX_TIMESTAMP_POS = 35
# baseOffset + batchLength: the part of a batch that is not counted in batchLength.
LOG_OVERHEAD = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1


class CorruptRecordError(ValueError):
    """A batch that is not a well-formed RecordBatch v2 (maps to CORRUPT_MESSAGE)."""


class InvalidRecordError(ValueError):
    """Records a produce request may not carry (maps to INVALID_RECORD)."""


class UnsupportedCompressionError(ValueError):
    """zstd before Produce v7 (maps to UNSUPPORTED_COMPRESSION_TYPE)."""


ZSTD = 4


def check_produce_records(version: int, buf: bytes | bytearray | memoryview) -> int:
    """Kafka's ProduceRequest.validateRecords for v3+: exactly one v2 batch per partition.

    Like Kafka's batch iterator, only complete batches count: a batch cut short is no batch
    ("must have at least one record batch"), and bytes after the first batch that do not make
    a complete one are ignored (Kafka's log append trims them). Returns the number of bytes
    to append: the first batch's size.
    """
    first = _complete_batch_size(buf, 0)
    if first is None:
        raise InvalidRecordError(f"Produce requests with version {version} must have at least one record batch per partition")
    if buf[MAGIC_POS] != 2:
        raise InvalidRecordError(
            f"Produce requests with version {version} are only allowed to contain record batches with magic version 2"
        )
    if version < 7 and len(buf) > ATTRIBUTES_POS + 1 and (buf[ATTRIBUTES_POS + 1] & COMPRESSION_MASK) == ZSTD:
        raise UnsupportedCompressionError(
            f"Produce requests with version {version} are not allowed to use ZStandard compression"
        )
    if _complete_batch_size(buf, first) is not None:
        raise InvalidRecordError(f"Produce requests with version {version} are only allowed to contain exactly one record batch per partition")
    return first


# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest batchLength its batch iterator accepts.
_MIN_BATCH_LENGTH = 14


def _complete_batch_size(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Kafka's ByteBufferLogInputStream.nextBatch: the size of the complete batch at ``pos``, or
    None if fewer bytes remain than it declares; a declared length below 14 is corrupt."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = struct.unpack_from(">i", buf, pos + LENGTH_POS)
    if length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"Record size {length} is less than the minimum record overhead ({_MIN_BATCH_LENGTH})")
    if remaining < length + LOG_OVERHEAD:
        return None
    return length + LOG_OVERHEAD


NO_SEQUENCE = -1
INT_MAX = 2**31 - 1


def increment_sequence(seq: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at Integer.MAX_VALUE."""
    if seq > INT_MAX - delta:
        return delta - (INT_MAX - seq) - 1
    return seq + delta


class BatchHeader(NamedTuple):
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

    @property
    def size(self) -> int:
        """Bytes this batch occupies in a log file."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record (-1 without a base sequence)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos`` (no validation)."""
    return BatchHeader._make(BATCH_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch as stored in its header: attributes to the end."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def validate_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Split a produce request's records into v2 batches and check each one.

    Checks what Kafka's LogValidator checks at the batch level: magic 2, a
    length that fits, a sane record count and offset delta, and the CRC-32C.
    Raises CorruptRecordError naming the problem; never looks at records.
    """
    view = memoryview(buf)
    total = len(view)
    pos = 0
    headers: list[BatchHeader] = []
    if total == 0:
        raise CorruptRecordError("empty record set")
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch at byte {pos}: {total - pos} bytes, header needs {BATCH_HEADER_SIZE}"
            )
        h = read_header(view, pos)
        if h.magic != 2:
            raise CorruptRecordError(f"batch at byte {pos} has magic {h.magic}; only magic 2 is supported")
        size = h.size
        if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + size > total:
            raise CorruptRecordError(
                f"batch at byte {pos} declares length {h.batch_length} but {total - pos - LOG_OVERHEAD} bytes remain"
            )
        if h.record_count < 0 or h.last_offset_delta < 0:
            raise CorruptRecordError(
                f"batch at byte {pos} has record count {h.record_count} and last offset delta {h.last_offset_delta}"
            )
        actual = compute_crc(view, pos, size)
        if actual != h.crc:
            raise CorruptRecordError(
                f"batch at byte {pos} fails its CRC-32C check (stored {h.crc}, computed {actual})"
            )
        headers.append(h)
        pos += size
    return headers


def iter_headers(buf: bytes | bytearray | memoryview, pos: int = 0):
    """Yield (position, header) for each complete batch in ``buf`` from ``pos``."""
    view = memoryview(buf)
    total = len(view)
    while total - pos >= BATCH_HEADER_SIZE:
        h = read_header(view, pos)
        if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + h.size > total:
            return
        yield pos, h
        pos += h.size


def batch_extents(buf: bytes | bytearray | memoryview) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, start, end) of each complete batch in ``buf`` (a fetched
    slice of a log: what share fetches acquire and filter)."""
    return [(h.base_offset, h.last_offset, pos, pos + h.size) for pos, h in iter_headers(buf)]
