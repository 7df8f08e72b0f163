"""SharePartition: the in-flight records of one topic-partition for one share group (KIP-932).

Kafka's ``SharePartition`` keeps, between the share-partition start offset and end offset, a
state per record: AVAILABLE, ACQUIRED (by one member, under an acquisition lock), ACKNOWLEDGED
or ARCHIVED, with a delivery count. Records below the start offset are all done; the start
offset advances over every leading ACKNOWLEDGED/ARCHIVED record.

As in Kafka (its in-flight batch map, split into per-offset state only where acknowledgements
split a batch), the state is kept per run of offsets, not per offset: ``batches`` is a list of
InFlightBatch runs, in offset order, that exactly covers [start offset, next new offset). An
acquisition of a fetched batch of N records is one run; an acknowledgement of a range splits
at most two runs. So acquiring and acknowledging cost O(runs touched), not O(records): a share
consumer draining a topic does no Python work per record here. No I/O and no asyncio: time is
passed in (``now_ms``) so the state machine is tested on its own.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter


# Kafka's RecordState ids (org.apache.kafka.coordinator.group.share / server.share.fetch).
class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


# Kafka's AcknowledgeType ids, as sent in ShareFetch/ShareAcknowledge (0 is a gap).
class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


INVALID_RECORD_STATE = 121
INVALID_REQUEST = 42
NONE = 0

_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_first = attrgetter("first_offset")


@dataclass(slots=True)
class InFlightBatch:
    """Consecutive in-flight records [first_offset, last_offset] in one state (Kafka's InFlightBatch
    / InFlightState): one delivery count, one owner and one lock deadline for all of them."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = 0

    def same_state(self, other: InFlightBatch) -> bool:
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.lock_deadline_ms == other.lock_deadline_ms)

    def size(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass(frozen=True)
class AcquiredRecords:
    """One range of the ShareFetch response's AcquiredRecords."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionCheckpoint:
    """A SharePartition's in-flight state at one moment (``SharePartition.checkpoint``)."""

    start_offset: int
    next_fetch_offset_new: int
    write_start_offset: int
    lock_floor_ms: int | None
    archived_since_write: bool
    batches: list[InFlightBatch]
    done_since_write: list[InFlightBatch]
    pending_archive: list[tuple[int, int]]


class SharePartition:
    """The share-partition state machine (Kafka's SharePartition, in memory)."""

    def __init__(self, start_offset: int, *, lock_duration_ms: int = 30000, delivery_count_limit: int = 5,
                 max_in_flight_records: int = 200) -> None:
        self.start_offset = start_offset
        # The next offset never fetched before (Kafka's endOffset + 1).
        self.next_fetch_offset_new = start_offset
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight_records = max_in_flight_records
        self.batches: list[InFlightBatch] = []
        # Kafka writes a share-partition's state with the start offset it had before the change
        # being written (its cache moves after the write): the start offset of the next write,
        # and the finished runs the start offset has moved over since the last write.
        self.write_start_offset = start_offset
        self.done_since_write: list[InFlightBatch] = []
        # A lower bound of the acquired records' lock deadlines (None: none acquired since the
        # last scan), so that checking for expired locks on every request is not a scan of
        # every in-flight run; and whether a record was archived since the last state write.
        self.lock_floor_ms: int | None = None
        self.archived_since_write = False
        # Aborted ranges beyond the next new offset (read_committed), archived by the next acquire.
        self._pending_archive: list[tuple[int, int]] = []

    def checkpoint(self) -> SharePartitionCheckpoint:
        """The in-flight state as it is now, for ``rollback`` when the state write of a change fails
        (Kafka's InFlightState.completeStateTransition(false)): O(runs), never per record."""
        return SharePartitionCheckpoint(
            self.start_offset, self.next_fetch_offset_new, self.write_start_offset, self.lock_floor_ms,
            self.archived_since_write,
            [InFlightBatch(b.first_offset, b.last_offset, b.state, b.delivery_count, b.member_id, b.lock_deadline_ms)
             for b in self.batches],
            list(self.done_since_write), list(self._pending_archive))

    def rollback(self, c: SharePartitionCheckpoint) -> None:
        """Back to the state of ``checkpoint`` (the runs were copied: nothing since touched them)."""
        self.start_offset, self.next_fetch_offset_new, self.write_start_offset = c.start_offset, c.next_fetch_offset_new, c.write_start_offset
        self.lock_floor_ms, self.archived_since_write = c.lock_floor_ms, c.archived_since_write
        self.batches, self.done_since_write, self._pending_archive = c.batches, c.done_since_write, c.pending_archive

    @property
    def initialized(self) -> bool:
        """False until the first ShareFetch resolves the start offset (Kafka's -1, uninitialized)."""
        return self.start_offset >= 0

    def initialize(self, start_offset: int) -> None:
        """Kafka's SharePartition.maybeInitialize for a state without a start offset:
        share.auto.offset.reset resolved to ``start_offset``."""
        self.start_offset = self.next_fetch_offset_new = self.write_start_offset = start_offset

    # ---- fetch side --------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE in-flight record, else the
        first offset never acquired (Kafka's SharePartition.nextFetchOffset)."""
        for b in self.batches:
            if b.state == RecordState.AVAILABLE:
                return b.first_offset
        return self.next_fetch_offset_new

    def in_flight_count(self) -> int:
        return self.next_fetch_offset_new - self.start_offset

    def can_acquire(self) -> bool:
        """More records may be acquired: some are AVAILABLE again, or the in-flight window
        (group.share.partition.max.record.locks) has room."""
        return (self.in_flight_count() < self.max_in_flight_records
                or any(b.state == RecordState.AVAILABLE for b in self.batches))

    def acquire(self, member_id: str, batches: list[tuple[int, int]], max_records: int, now_ms: int,
                *, record_limit: bool = False) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the AVAILABLE and new records of the fetched ``batches``
        ((base offset, last offset), in log order). ``max_records`` is a soft limit aligned to
        batch boundaries (share.acquire.mode batch_optimized), a hard one with ``record_limit``."""
        out: list[AcquiredRecords] = []
        count = 0
        deadline = now_ms + self.lock_duration_ms

        def take(first: int, last: int, delivery: int) -> None:
            nonlocal count
            count += last - first + 1
            prev = out[-1] if out else None
            if prev is not None and prev.last_offset + 1 == first and prev.delivery_count == delivery:
                out[-1] = AcquiredRecords(prev.first_offset, last, delivery)
            else:
                out.append(AcquiredRecords(first, last, delivery))

        for base, last in batches:
            if count >= max_records:
                break
            lo = max(base, self.start_offset)
            # Records fetched before: the AVAILABLE ones among them.
            hi = min(last, self.next_fetch_offset_new - 1)
            if lo <= hi:
                i = self._index(lo)
                while i < len(self.batches) and self.batches[i].first_offset <= hi:
                    b = self.batches[i]
                    if b.state != RecordState.AVAILABLE:
                        i += 1
                        continue
                    if record_limit and count >= max_records:
                        break
                    a, z = max(b.first_offset, lo), min(b.last_offset, hi)
                    if record_limit:
                        z = min(z, a + max_records - count - 1)
                    i, j = self._slice(a, z)
                    for piece in self.batches[i:j]:
                        piece.state = RecordState.ACQUIRED
                        piece.delivery_count += 1
                        piece.member_id = member_id
                        piece.lock_deadline_ms = deadline
                        take(piece.first_offset, piece.last_offset, piece.delivery_count)
                    i = j
            # Records never fetched before.
            pos = max(lo, self.next_fetch_offset_new)
            while pos <= last and not (record_limit and count >= max_records):
                archived = next((r for r in self._pending_archive if r[0] <= pos <= r[1]), None)
                if archived is not None:
                    # (with the log's gap before it, if any: archived alike)
                    self._append_new(self.next_fetch_offset_new, min(archived[1], last), RecordState.ARCHIVED, 0)
                    pos = self.next_fetch_offset_new
                    continue
                if self.in_flight_count() >= self.max_in_flight_records:
                    break
                if pos > self.next_fetch_offset_new:
                    # A gap in the log (compaction) between the last new offset and this one is archived.
                    self._append_new(self.next_fetch_offset_new, pos - 1, RecordState.ARCHIVED, 0)
                ahead = [r[0] for r in self._pending_archive if r[0] > pos]
                z = min(last, min(ahead) - 1) if ahead else last
                # The window is checked before each new record (at least one is taken).
                z = min(z, max(pos, self.start_offset + self.max_in_flight_records - 1))
                if record_limit:
                    z = min(z, pos + max_records - count - 1)
                self._append_new(pos, z, RecordState.ACQUIRED, 1, member_id, deadline)
                take(pos, z, 1)
                pos = z + 1
        self._pending_archive.clear()
        if out and (self.lock_floor_ms is None or deadline < self.lock_floor_ms):
            self.lock_floor_ms = deadline
        self._advance_start_offset()
        return out

    def archive(self, ranges: list[tuple[int, int]]) -> None:
        """Records never fetched before that must not be delivered (an aborted transaction's,
        under read_committed) are ARCHIVED as they are read: at once where they follow the
        records fetched so far, else when the acquisition of the same read reaches them."""
        for first, last in sorted(ranges):
            first = max(first, self.next_fetch_offset_new)
            if first > last:
                continue
            self.archived_since_write = True
            if first == self.next_fetch_offset_new:
                self._append_new(first, last, RecordState.ARCHIVED, 0)
            else:
                self._pending_archive.append((first, last))
        self._advance_start_offset()

    # ---- acknowledgements --------------------------------------------------------------

    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, ack_types: list[int], now_ms: int) -> int:
        """One AcknowledgementBatch: one type for the whole range, or one per offset. Every record
        must be ACQUIRED by ``member_id`` (gaps excepted), else INVALID_RECORD_STATE and nothing changes."""
        if last_offset < first_offset or not ack_types or (len(ack_types) != 1 and len(ack_types) != last_offset - first_offset + 1):
            return INVALID_REQUEST
        if len(ack_types) == 1:
            if ack_types[0] not in _ACK_TYPES:
                return INVALID_REQUEST
            runs = [(first_offset, last_offset, ack_types[0])]
        else:
            if not _ACK_TYPES.issuperset(ack_types):
                return INVALID_REQUEST
            runs = []
            at = first_offset
            for t, same in groupby(ack_types):
                n = sum(1 for _ in same)
                runs.append((at, at + n - 1, t))
                at += n
        start, end = self.start_offset, self.next_fetch_offset_new - 1
        plan: list[tuple[int, int, int]] = []
        for a, z, ack in runs:
            gap = ack == AcknowledgeType.GAP
            # Below the start offset (done) or never fetched: only a gap may name them.
            if (a < start or z > end) and not gap:
                return INVALID_RECORD_STATE
            a, z = max(a, start), min(z, end)
            if a > z:
                continue
            i = self._index(a)
            while i < len(self.batches) and self.batches[i].first_offset <= z:
                b = self.batches[i]
                i += 1
                if gap and b.state == RecordState.ARCHIVED:
                    continue
                if b.state != RecordState.ACQUIRED or b.member_id != member_id:
                    return INVALID_RECORD_STATE
                plan.append((max(a, b.first_offset), min(z, b.last_offset), ack))
        for a, z, ack in plan:
            i, j = self._slice(a, z)
            for b in self.batches[i:j]:
                if ack == AcknowledgeType.ACCEPT:
                    self._finish(b, RecordState.ACKNOWLEDGED)
                elif ack in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                    self._finish(b, RecordState.ARCHIVED)
                elif ack == AcknowledgeType.RELEASE:
                    self._release(b)
                elif ack == AcknowledgeType.RENEW:
                    b.lock_deadline_ms = now_ms + self.lock_duration_ms
            self._merge(i - 1, j + 1)
        self._advance_start_offset()
        return NONE

    def release_member(self, member_id: str) -> int:
        """A member left or closed its share session: its acquired records become AVAILABLE
        again (ARCHIVED at the delivery count limit). Returns how many were released."""
        released = 0
        for b in self.batches:
            if b.state == RecordState.ACQUIRED and b.member_id == member_id:
                self._release(b)
                released += b.size()
        if released:
            self._merge(0, len(self.batches))
        self._advance_start_offset()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks that timed out: the records go back as after a RELEASE. A scan of
        the in-flight runs only once the earliest lock may have run out."""
        if self.lock_floor_ms is None or now_ms < self.lock_floor_ms:
            return 0
        expired = 0
        floor = None
        for b in self.batches:
            if b.state == RecordState.ACQUIRED:
                if b.lock_deadline_ms <= now_ms:
                    self._release(b)
                    expired += b.size()
                elif floor is None or b.lock_deadline_ms < floor:
                    floor = b.lock_deadline_ms
        self.lock_floor_ms = floor
        if expired:
            self._merge(0, len(self.batches))
            self._advance_start_offset()
        return expired

    def next_lock_deadline(self) -> int | None:
        if self.lock_floor_ms is None:
            return None
        deadlines = [b.lock_deadline_ms for b in self.batches if b.state == RecordState.ACQUIRED]
        self.lock_floor_ms = min(deadlines) if deadlines else None
        return self.lock_floor_ms

    def acquired_count(self) -> tuple[int, int]:
        """(records ACQUIRED, contiguous runs of them): the in-flight metrics."""
        records = runs = 0
        prev: InFlightBatch | None = None
        for b in self.batches:
            if b.state == RecordState.ACQUIRED:
                records += b.size()
                if prev is None or prev.state != RecordState.ACQUIRED:
                    runs += 1
            prev = b
        return records, runs

    def counts(self) -> tuple[Counter[RecordState], Counter[int]]:
        """In-flight records per state and per delivery count (the web console's share-state table)."""
        states: Counter[RecordState] = Counter()
        deliveries: Counter[int] = Counter()
        for b in self.batches:
            states[b.state] += b.size()
            deliveries[b.delivery_count] += b.size()
        return states, deliveries

    def restore(self, start_offset: int, end_offset: int, runs: list[tuple[int, int, int, int]]) -> None:
        """The state read back from ``__share_group_state``: ``runs`` of (first, last, state,
        delivery count) within [start_offset, end_offset), the offsets between them AVAILABLE
        never delivered; then the start offset moves over the leading finished records."""
        self.start_offset = self.next_fetch_offset_new = start_offset
        self.batches = []
        for first, last, state, count in sorted(runs):
            first = max(first, self.next_fetch_offset_new)
            if first > last:
                continue
            if first > self.next_fetch_offset_new:
                self._append_new(self.next_fetch_offset_new, first - 1, RecordState.AVAILABLE, 0)
            self._append_new(first, last, RecordState(state), count)
        if end_offset > self.next_fetch_offset_new:
            self._append_new(self.next_fetch_offset_new, end_offset - 1, RecordState.AVAILABLE, 0)
        self._merge(0, len(self.batches))
        self._advance_start_offset()

    # ---- internals ---------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """The index of the run holding ``offset`` (start offset <= offset < next new offset)."""
        return bisect_right(self.batches, offset, key=_first) - 1

    def _split(self, offset: int) -> int:
        """Make a run start at ``offset`` (start offset <= offset <= next new offset): its index."""
        if offset >= self.next_fetch_offset_new:
            return len(self.batches)
        i = self._index(offset)
        b = self.batches[i]
        if b.first_offset == offset:
            return i
        self.batches.insert(i + 1, InFlightBatch(offset, b.last_offset, b.state, b.delivery_count, b.member_id, b.lock_deadline_ms))
        b.last_offset = offset - 1
        return i + 1

    def _slice(self, first: int, last: int) -> tuple[int, int]:
        """The runs [i, j) covering exactly [first, last], split where needed."""
        i = self._split(first)
        return i, self._split(last + 1)

    def _merge(self, lo: int, hi: int) -> None:
        """Join neighbouring runs in the same state within [lo, hi), so acknowledgements that
        split runs do not leave them fragmented."""
        lo, hi = max(lo, 1), min(hi, len(self.batches))
        i = lo
        while i < hi:
            prev, b = self.batches[i - 1], self.batches[i]
            if prev.same_state(b):
                prev.last_offset = b.last_offset
                del self.batches[i]
                hi -= 1
            else:
                i += 1

    def _append_new(self, first: int, last: int, state: RecordState, delivery_count: int,
                    member_id: str | None = None, lock_deadline_ms: int = 0) -> None:
        """Records [first, last] fetched for the first time (first == the next new offset)."""
        b = InFlightBatch(first, last, state, delivery_count, member_id, lock_deadline_ms)
        if self.batches and self.batches[-1].same_state(b):
            self.batches[-1].last_offset = last
        else:
            self.batches.append(b)
        if state == RecordState.ARCHIVED:
            self.archived_since_write = True
        self.next_fetch_offset_new = last + 1

    def _release(self, b: InFlightBatch) -> None:
        b.member_id = None
        b.lock_deadline_ms = 0
        b.state = RecordState.ARCHIVED if b.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE

    @staticmethod
    def _finish(b: InFlightBatch, state: RecordState) -> None:
        b.state = state
        b.member_id = None
        b.lock_deadline_ms = 0

    def _advance_start_offset(self) -> None:
        """Kafka's maybeUpdateCachedStateAndOffsets: move the start offset over the leading
        ACKNOWLEDGED/ARCHIVED runs and drop them from the cache."""
        n = 0
        for b in self.batches:
            if b.state not in _DONE:
                break
            if b.last_offset >= self.write_start_offset:
                first = max(b.first_offset, self.write_start_offset)
                self.done_since_write.append(InFlightBatch(first, b.last_offset, b.state, b.delivery_count))
            n += 1
        if n:
            del self.batches[:n]
        self.start_offset = self.batches[0].first_offset if self.batches else max(self.start_offset, self.next_fetch_offset_new)

    def state_of(self, offset: int) -> RecordState | None:
        """The state of one record (None beyond the records fetched so far); for tests and tools."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED
        if offset >= self.next_fetch_offset_new:
            return None
        return self.batches[self._index(offset)].state
