"""ProducerStateManager: idempotent-producer state of one partition, and its snapshots.

Per producer id Kafka keeps the epoch and the metadata of the last 5 batches
(first/last sequence, last offset, offset delta, max timestamp), so that a
retried batch is answered with its original offsets instead of being written
twice, a sequence gap is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and a stale
epoch is fenced (INVALID_PRODUCER_EPOCH). All checks are per batch, from the
batch header: never per record.

Transactions (Kafka's ProducerAppendInfo/ProducerStateManager): a transactional
batch starts the producer's transaction if none is ongoing (its first offset is
the entry's ``current_txn_first_offset`` and a key of ``ongoing_txns``); a
non-transactional batch during one is INVALID_TXN_STATE. A marker (written by
Log.append_transaction_marker, checked by check_end_txn: older producer epoch
INVALID_PRODUCER_EPOCH, older coordinator epoch TRANSACTION_COORDINATOR_FENCED)
ends it (end_txn -> CompletedTxn, then complete_txn). The earliest ongoing
first offset is the log's first unstable offset (its last stable offset).

Snapshots are Kafka's ``<offset>.snapshot`` files (version 1, CRC-32C, one
46-byte entry per producer holding its last batch and currentTxnFirstOffset),
taken on segment roll and clean shutdown; start-up loads the newest snapshot at
or below the log end and replays the batches (and markers) after it.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    TRANSACTION_COORDINATOR_FENCED,
)
from kafka_sidecar.protocol.record_batch import INT_MAX, NO_SEQUENCE, BatchHeader

from .formats import encode_producer_snapshot, read_producer_snapshot

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1



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
    # First offset of the producer's ongoing transaction in this partition, -1 if none
    # (Kafka's ProducerStateEntry.currentTxnFirstOffset).
    current_txn_first_offset: int = -1

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

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


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction ended by a marker (Kafka's CompletedTxn); ``last_offset`` is the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


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
        # first offset -> producer id of each ongoing transaction (Kafka's ongoingTxns)
        self.ongoing_txns: dict[int, int] = {}
        self.last_snapshot_offset: int | None = None
        self._last_snapshot_durable = False  # fsynced when written, or read back at load
        # Offsets of the snapshot files, sorted: listed from the directory once, then kept up to
        # date by this class, the only one that writes or removes them (Kafka's ``snapshots`` map).
        self._snapshots: list[int] | None = None

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
        if entry.current_txn_first_offset >= 0 and not h.is_transactional:
            # Kafka's ProducerAppendInfo.appendDataBatch: a non-transactional write during a transaction.
            raise ProducerStateError(
                INVALID_TXN_STATE,
                f"Expected transactional write from producer {h.producer_id} at offset {offset} in partition {self.topic_partition}",
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
        """Record an appended data batch of an idempotent or transactional producer; a
        transactional batch starts the producer's transaction if none is ongoing."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
        entry.maybe_update_producer_epoch(h.producer_epoch)
        entry.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, last_offset, h.last_offset_delta, max_timestamp))
        entry.last_timestamp = max_timestamp
        if h.is_transactional and entry.current_txn_first_offset < 0:
            first = last_offset - h.last_offset_delta
            entry.current_txn_first_offset = first
            self.ongoing_txns[first] = h.producer_id

    # ---- transactions ---------------------------------------------------------------

    def check_end_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int) -> None:
        """Kafka's checks of a marker written for the coordinator (ProducerAppendInfo.appendEndTxnMarker)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {producer_id} at offset {offset} in {self.topic_partition} is {producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.producer_epoch}",
            )
        if entry.coordinator_epoch > coordinator_epoch:
            raise ProducerStateError(
                TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {producer_id} at offset {offset} in partition "
                f"{self.topic_partition}: {coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
            )

    def end_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, marker_offset: int, timestamp: int) -> CompletedTxn | None:
        """Apply a marker (no checks: see check_end_txn): the producer's transaction ends. Returns
        the completed transaction if it had data here (else None: no LSO or index effect).
        The transaction stays in ``ongoing_txns`` until complete_txn (for last_stable_offset_after)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.current_txn_first_offset, marker_offset, is_aborted=not commit)
        entry.maybe_update_producer_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = -1
        return completed

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """Kafka's ProducerStateManager.lastStableOffset(completedTxn): the first offset of the
        earliest other ongoing transaction, else the offset after the marker."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete_txn(self, txn: CompletedTxn) -> None:
        self.ongoing_txns.pop(txn.first_offset, None)

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def has_ongoing_txn(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    # ---- expiry, truncation --------------------------------------------------------------

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        # A producer with an ongoing transaction never expires (Kafka's isProducerExpired).
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshot files, oldest first."""
        if self._snapshots is None:
            self._snapshots = list_snapshots(self.dir)
        return self._snapshots

    def found_snapshots(self, offsets: list[int]) -> None:
        """The offsets of the snapshot files (sorted), as the log loader found them listing the
        directory: known without listing it again."""
        self._snapshots = offsets

    def _delete_snapshot(self, offset: int) -> None:
        snapshot_path(self.dir, offset).unlink(missing_ok=True)
        offsets = self.snapshot_offsets()
        i = bisect.bisect_left(offsets, offset)
        if i < len(offsets) and offsets[i] == offset:
            del offsets[i]

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop snapshots outside [log start, log end] (after truncation or retention)."""
        for offset in list(self.snapshot_offsets()):
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)

    def delete_snapshots_below(self, offset: int) -> None:
        for off in list(self.snapshot_offsets()):
            if off < offset:
                self._delete_snapshot(off)

    # ---- snapshots ----------------------------------------------------------------------

    def encode_snapshot(self) -> bytes:
        rows = []
        for pid in sorted(self.producers):
            e = self.producers[pid]
            last = e.batches[-1] if e.batches else BatchMetadata(NO_SEQUENCE, NO_SEQUENCE, -1, 0, e.last_timestamp)
            rows.append((pid, e.producer_epoch, last.last_seq, last.last_offset, last.offset_delta, e.last_timestamp,
                         e.coordinator_epoch, e.current_txn_first_offset))
        return encode_producer_snapshot(rows)

    def take_snapshot(self, offset: int, sync: bool = False) -> None:
        """Write ``<offset>.snapshot`` (tmp + rename, fsync when ``sync``). Nothing is written
        when the last snapshot is already at ``offset`` (Kafka's takeSnapshot: not a new
        offset, not worth another snapshot), so stopping thousands of idle partitions costs no
        fsync each."""
        path = snapshot_path(self.dir, offset)
        if offset == self.last_snapshot_offset and (self._last_snapshot_durable or not sync) and offset in self.snapshot_offsets():
            return
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
        self._last_snapshot_durable = sync
        offsets = self.snapshot_offsets()
        i = bisect.bisect_left(offsets, offset)
        if i == len(offsets) or offsets[i] != offset:
            offsets.insert(i, offset)

    def load_snapshot(self, offset: int) -> bool:
        """Replace the state with snapshot ``offset``; False (and the file removed) if it is corrupt."""
        # A str path (no Path object: one snapshot is read per partition at start).
        path = f"{os.fspath(self.dir)}/{offset:020d}{SNAPSHOT_SUFFIX}"
        try:
            entries = read_producer_snapshot(path)
            producers: dict[int, ProducerStateEntry] = {}
            ongoing: dict[int, int] = {}
            for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in entries:
                e = ProducerStateEntry(pid, epoch, coord, ts)
                if txn_first >= 0:
                    e.current_txn_first_offset = txn_first
                    ongoing[txn_first] = pid
                if last_offset >= 0:
                    first_seq = NO_SEQUENCE if last_seq == NO_SEQUENCE else (last_seq - delta) % (INT_MAX + 1)
                    e.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
                producers[pid] = e
        except (OSError, ValueError) as e:  # ProducerSnapshotError is a ValueError
            log.warning("%s: ignoring producer snapshot %s (%s); state is rebuilt from the log", self.topic_partition,
                        os.path.basename(path), e)
            self._delete_snapshot(offset)
            return False
        self.producers = producers
        self.ongoing_txns = ongoing
        self.last_snapshot_offset = offset
        self._last_snapshot_durable = True
        return True

    def reset(self) -> None:
        self.producers = {}
        self.ongoing_txns = {}

    def latest_snapshot_at_or_below(self, offset: int) -> int | None:
        offsets = self.snapshot_offsets()
        i = bisect.bisect_right(offsets, offset)
        return offsets[i - 1] if i else None
