"""ProducerStateManager: idempotent-producer state of one partition, and its snapshots.

Per producer id Kafka keeps the epoch and the metadata of the last 5 batches
(first/last sequence, last offset, offset delta, max timestamp), so that a
retried batch is answered with its original offsets instead of being written
twice, a sequence gap is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and a stale
epoch is fenced (INVALID_PRODUCER_EPOCH). All checks are per batch, from the
batch header: never per record.

Snapshots are Kafka's ``<offset>.snapshot`` files (version 1, CRC-32C, one
46-byte entry per producer holding its last batch), taken on segment roll and
clean shutdown; start-up loads the newest snapshot at or below the log end and
replays the batches after it.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from kafka_sidecar.protocol.record_batch import INT_MAX, NO_SEQUENCE, BatchHeader

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
# producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset
_ENTRY = struct.Struct(">qhiqiqiq")

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


class ProducerStateError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.producer_epoch:
            return None
        last_seq = h.last_sequence
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def snapshot_path(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(dir: Path) -> list[int]:
    out = []
    for name in os.listdir(dir):
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
            out.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
    return sorted(out)


class ProducerStateManager:
    def __init__(self, dir: Path, topic_partition: str) -> None:
        self.dir = dir
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerStateEntry] = {}
        self.last_snapshot_offset: int | None = None

    # ---- the produce path -------------------------------------------------------------

    def check(self, h: BatchHeader, offset: int) -> BatchMetadata | None:
        """Validate an idempotent batch; returns the original batch if it is a duplicate.

        Raises ProducerStateError for a fenced epoch or a sequence gap.
        """
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return None
        dup = entry.find_duplicate(h)
        if dup is not None:
            return dup
        if h.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {h.producer_id} at offset {offset} in {self.topic_partition} is {h.producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.producer_epoch}",
            )
        if h.base_sequence == NO_SEQUENCE:
            return None
        if h.producer_epoch != entry.producer_epoch:
            if h.base_sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {h.producer_id} at offset {offset} in partition "
                    f"{self.topic_partition}: {h.producer_epoch} (request epoch), {h.base_sequence} (seq. number), "
                    f"{entry.producer_epoch} (current producer epoch)",
                )
        elif entry.last_seq != NO_SEQUENCE and not _in_sequence(entry.last_seq, h.base_sequence):
            raise ProducerStateError(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {h.producer_id} at offset {offset} in partition "
                f"{self.topic_partition}: {h.base_sequence} (incoming seq. number), {entry.last_seq} (current end sequence number)",
            )
        return None

    def update(self, h: BatchHeader, last_offset: int, max_timestamp: int) -> None:
        """Record an appended batch of an idempotent producer."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
        if h.producer_epoch != entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = h.producer_epoch
        entry.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, last_offset, h.last_offset_delta, max_timestamp))
        entry.last_timestamp = max_timestamp

    # ---- expiry, truncation --------------------------------------------------------------

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        expired = [pid for pid, e in self.producers.items() if now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop snapshots outside [log start, log end] (after truncation or retention)."""
        for offset in list_snapshots(self.dir):
            if offset > log_end_offset or offset < log_start_offset:
                snapshot_path(self.dir, offset).unlink(missing_ok=True)

    def delete_snapshots_below(self, offset: int) -> None:
        for off in list_snapshots(self.dir):
            if off < offset:
                snapshot_path(self.dir, off).unlink(missing_ok=True)

    # ---- snapshots ----------------------------------------------------------------------

    def encode_snapshot(self) -> bytes:
        body = bytearray(_COUNT.pack(len(self.producers)))
        for pid in sorted(self.producers):
            e = self.producers[pid]
            last = e.batches[-1] if e.batches else BatchMetadata(NO_SEQUENCE, NO_SEQUENCE, -1, 0, e.last_timestamp)
            body += _ENTRY.pack(pid, e.producer_epoch, last.last_seq, last.last_offset, last.offset_delta, last.timestamp, e.coordinator_epoch, -1)
        return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)

    def take_snapshot(self, offset: int, sync: bool = False) -> None:
        """Write ``<offset>.snapshot`` (tmp + rename, fsync when ``sync``)."""
        path = snapshot_path(self.dir, offset)
        tmp = path.with_name(path.name + ".tmp")
        data = self.encode_snapshot()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self.last_snapshot_offset = offset

    def load_snapshot(self, offset: int) -> bool:
        """Replace the state with snapshot ``offset``; False (and the file removed) if it is corrupt."""
        path = snapshot_path(self.dir, offset)
        try:
            data = path.read_bytes()
            version, crc = _SNAPSHOT_HEAD.unpack_from(data, 0)
            if version != SNAPSHOT_VERSION:
                raise ValueError(f"unknown snapshot version {version}")
            if crc32c.crc32c(data[_SNAPSHOT_HEAD.size :]) != crc:
                raise ValueError("CRC mismatch")
            (count,) = _COUNT.unpack_from(data, _SNAPSHOT_HEAD.size)
            pos = _SNAPSHOT_HEAD.size + _COUNT.size
            if len(data) != pos + count * _ENTRY.size:
                raise ValueError(f"{len(data)} bytes for {count} entries")
            producers: dict[int, ProducerStateEntry] = {}
            for pid, epoch, last_seq, last_offset, delta, ts, coord, _txn in _ENTRY.iter_unpack(data[pos:]):
                e = ProducerStateEntry(pid, epoch, coord, ts)
                if last_offset >= 0:
                    first_seq = NO_SEQUENCE if last_seq == NO_SEQUENCE else (last_seq - delta) % (INT_MAX + 1)
                    e.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
                producers[pid] = e
        except (OSError, ValueError, struct.error) as e:
            log.warning("%s: ignoring producer snapshot %s (%s); state is rebuilt from the log", self.topic_partition, path.name, e)
            path.unlink(missing_ok=True)
            return False
        self.producers = producers
        self.last_snapshot_offset = offset
        return True

    def latest_snapshot_at_or_below(self, offset: int) -> int | None:
        candidates = [o for o in list_snapshots(self.dir) if o <= offset]
        return candidates[-1] if candidates else None
