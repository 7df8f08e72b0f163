"""Kafka's on-disk layouts, defined once, and read-only readers of them.

A partition directory holds, per segment, ``<base>.log`` (batches, each framed by
its base offset and length: ``LOG_ENTRY_HEADER``, then the rest of the 61-byte
RecordBatch v2 header of ``protocol/record_batch.py``), ``<base>.index``
(``OFFSET_INDEX_ENTRY``), ``<base>.timeindex`` (``TIME_INDEX_ENTRY``),
``<base>.txnindex`` (``ABORTED_TXN_ENTRY``) and ``<offset>.snapshot`` producer
snapshots (``PRODUCER_SNAPSHOT_*``).

The broker's classes (``index.py``, ``txn_index.py``, ``producer_state.py``) write
these files through their own descriptors. Everything else that only reads them
(``verify.py``, the dump-log tool, the Spark log source) uses the readers here: a
file is opened ``"rb"`` and never created, extended or truncated, so a running
broker's directory, a read-only mount or a copy of Apache Kafka's files can be
read; a missing file is a FileNotFoundError. Readers return what is on disk
(every whole entry, the zero padding of a preallocated index included) and leave
the rules for what counts as valid to their callers, which differ (Kafka's broker,
kafka-dump-log.sh and our verifier each stop at a different entry).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import crc32c
from kafka_sidecar.protocol.record_batch import LOG_OVERHEAD, BatchHeader
from kafka_sidecar.protocol.records import iter_batches

# ---- layouts ----------------------------------------------------------------------------------

# .log: each batch starts with baseOffset int64 and batchLength int32 (the bytes after these 12).
LOG_ENTRY_HEADER = struct.Struct(">qi")
assert LOG_ENTRY_HEADER.size == LOG_OVERHEAD

# .index: offset relative to the segment's base offset int32, file position int32.
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
# .timeindex: timestamp int64, offset relative to the segment's base offset int32.
TIME_INDEX_ENTRY = struct.Struct(">qi")

# .txnindex: Kafka's AbortedTxn: version int16, producerId, firstOffset, lastOffset (the ABORT
# marker's offset), lastStableOffset (the LSO right after the marker), all int64.
ABORTED_TXN_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_VERSION = 0

# .snapshot: version int16, CRC-32C uint32 of everything after it, count int32, then one entry
# per producer: producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp,
# coordinatorEpoch, currentTxnFirstOffset.
PRODUCER_SNAPSHOT_HEADER = struct.Struct(">hI")
PRODUCER_SNAPSHOT_COUNT = struct.Struct(">i")
PRODUCER_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
PRODUCER_SNAPSHOT_VERSION = 1

# How much of a .log is read at a time by iter_log_batches.
READ_CHUNK = 8 << 20


class AbortedTxnEntry(NamedTuple):
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class ProducerSnapshotEntry(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class ProducerSnapshotError(ValueError):
    """A snapshot Kafka's ProducerStateManager.readSnapshot refuses (its messages)."""


# ---- reading ----------------------------------------------------------------------------------


# A file up to this size is read with one read(2): the usual index, snapshot or small log.
_SMALL_FILE = 1 << 16


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The whole file, opened read-only: a missing file is a FileNotFoundError, never created.

    A small file (most: a start after a clean stop reads one producer snapshot per partition)
    costs open, read and close, without a buffered file object; a larger one is read whole
    through one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            data = os.read(fd, _SMALL_FILE)
        except IsADirectoryError as e:  # open() refuses a directory, naming it
            raise IsADirectoryError(e.errno, e.strerror, os.fspath(path)) from None
        if len(data) < _SMALL_FILE:  # a short read of a regular file: its end
            return data
        os.lseek(fd, 0, os.SEEK_SET)
        with open(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def unpack_entries(data: bytes | bytearray | memoryview, layout: struct.Struct) -> list[tuple[int, ...]]:
    """Every whole fixed-size entry of ``data``; a torn last entry is left out."""
    whole = len(data) - len(data) % layout.size
    return list(layout.iter_unpack(memoryview(data)[:whole]))


def split_padding(entries: list[tuple[int, ...]]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """(entries before the first all-zero one, that one and the rest): the rest of a
    preallocated index is zeros, anything else in it is damage."""
    for i, e in enumerate(entries):
        if not any(e):
            return entries[:i], entries[i:]
    return entries, []


def read_offset_index(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """(relative offset, position) of every whole ``.index`` entry, zero padding included."""
    return unpack_entries(read_file(path), OFFSET_INDEX_ENTRY)  # type: ignore[return-value]


def read_time_index(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """(timestamp, relative offset) of every whole ``.timeindex`` entry, zero padding included."""
    return unpack_entries(read_file(path), TIME_INDEX_ENTRY)  # type: ignore[return-value]


def read_txn_index(path: str | os.PathLike[str]) -> list[AbortedTxnEntry]:
    """Every whole ``.txnindex`` entry, unchecked (Kafka's sanity check is the caller's)."""
    return [AbortedTxnEntry._make(e) for e in unpack_entries(read_file(path), ABORTED_TXN_ENTRY)]


def decode_producer_snapshot(data: bytes, name: object) -> list[ProducerSnapshotEntry]:
    """Entries of a producer snapshot; ProducerSnapshotError (naming ``name``) as Kafka refuses one."""
    head = PRODUCER_SNAPSHOT_HEADER.size
    if len(data) < head + PRODUCER_SNAPSHOT_COUNT.size:
        raise ProducerSnapshotError(f"Snapshot file {name} is too short ({len(data)} bytes)")
    version, crc = PRODUCER_SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise ProducerSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c.crc32c(data[head:])
    if computed != crc:
        raise ProducerSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}")
    (count,) = PRODUCER_SNAPSHOT_COUNT.unpack_from(data, head)
    pos = head + PRODUCER_SNAPSHOT_COUNT.size
    if len(data) != pos + count * PRODUCER_SNAPSHOT_ENTRY.size:
        raise ProducerSnapshotError(f"Snapshot {name} holds {len(data) - pos} bytes of entries for {count} entries")
    return [ProducerSnapshotEntry._make(e) for e in PRODUCER_SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[pos:])]


def read_producer_snapshot(path: str | os.PathLike[str]) -> list[ProducerSnapshotEntry]:
    """Entries of a ``.snapshot`` file (Kafka's ProducerStateManager.readSnapshot, with its errors)."""
    return decode_producer_snapshot(read_file(path), path)


def encode_producer_snapshot(entries: Iterable[tuple[int, int, int, int, int, int, int, int]]) -> bytes:
    """A version 1 snapshot of ``entries`` (ProducerSnapshotEntry fields, in order), CRC included."""
    rows = list(entries)
    body = PRODUCER_SNAPSHOT_COUNT.pack(len(rows)) + b"".join(PRODUCER_SNAPSHOT_ENTRY.pack(*e) for e in rows)
    return PRODUCER_SNAPSHOT_HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def iter_log_batches(
    path: str | os.PathLike[str], position: int = 0, *, verify_crc: bool = True, chunk_size: int = READ_CHUNK
) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in buffer, header) of each complete batch of a ``.log`` from file
    ``position``, read ``chunk_size`` bytes at a time through a read-only file. A torn or
    still-being-written tail ends the iteration; a batch that cannot be right raises
    CorruptRecordError (protocol.records.iter_batches' rules)."""
    with open(path, "rb") as f:
        f.seek(position)
        carry = b""
        want = chunk_size
        while True:
            chunk = f.read(want)
            if not chunk:
                return
            buf = carry + chunk if carry else chunk
            consumed = 0
            for pos, h in iter_batches(buf, verify_crc=verify_crc):
                yield buf, pos, h
                consumed = pos + h.size
            carry = buf[consumed:]
            want = chunk_size
            if len(carry) >= LOG_OVERHEAD:  # a batch bigger than what is buffered: read all of it at once
                _, length = LOG_ENTRY_HEADER.unpack_from(carry, 0)
                want = max(chunk_size, length + LOG_OVERHEAD - len(carry))
