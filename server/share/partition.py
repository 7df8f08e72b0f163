"""SharePartition: the in-flight records of one topic-partition for one share group (KIP-932).

Kafka's ``SharePartition`` keeps, between the share-partition start offset and end offset, a
state per record: AVAILABLE, ACQUIRED (by one member, under an acquisition lock), ACKNOWLEDGED
or ARCHIVED, with a delivery count. Records below the start offset are all done; the start
offset advances over every leading ACKNOWLEDGED/ARCHIVED record. Kafka caches batches and
splits them into offsets on demand; here each in-flight offset has its own entry, which gives
the same answers (acquired ranges are coalesced on the way out). No I/O and no asyncio: time
is passed in (``now_ms``) so the state machine is tested on its own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


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


@dataclass
class InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class AcquiredRecords:
    """One range of the ShareFetch response's AcquiredRecords."""

    first_offset: int
    last_offset: int
    delivery_count: int


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
        self.records: dict[int, InFlightRecord] = {}
        # Kafka writes a share-partition's state with the start offset it had before the change
        # being written (its cache moves after the write): the start offset of the next write,
        # and the finished records the start offset has moved over since the last write.
        self.write_start_offset = start_offset
        self.done_since_write: dict[int, InFlightRecord] = {}
        # A lower bound of the acquired records' lock deadlines (None: none acquired since the
        # last scan), so that checking for expired locks on every request is not a scan of
        # every in-flight record; and whether a record was archived since the last state write.
        self.lock_floor_ms: int | None = None
        self.archived_since_write = False

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
        available = [o for o, r in self.records.items() if r.state == RecordState.AVAILABLE]
        return min(available) if available else self.next_fetch_offset_new

    def in_flight_count(self) -> int:
        return self.next_fetch_offset_new - self.start_offset

    def can_acquire(self) -> bool:
        """More records may be acquired: some are AVAILABLE again, or the in-flight window
        (group.share.partition.max.record.locks) has room."""
        return (any(r.state == RecordState.AVAILABLE for r in self.records.values())
                or self.in_flight_count() < self.max_in_flight_records)

    def acquire(self, member_id: str, batches: list[tuple[int, int]], max_records: int, now_ms: int,
                *, record_limit: bool = False) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the AVAILABLE and new records of the fetched ``batches``
        ((base offset, last offset), in log order). ``max_records`` is a soft limit aligned to
        batch boundaries (share.acquire.mode batch_optimized), a hard one with ``record_limit``."""
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        for base, last in batches:
            if len(acquired) >= max_records:
                break
            for offset in range(max(base, self.start_offset), last + 1):
                if record_limit and len(acquired) >= max_records:
                    break
                rec = self.records.get(offset)
                if rec is None:
                    if offset < self.next_fetch_offset_new:
                        continue  # done (acknowledged and below the window's cache) or archived
                    if self.in_flight_count() >= self.max_in_flight_records:
                        break
                    # A gap in the log (compaction) between the last new offset and this one is archived.
                    for gap in range(self.next_fetch_offset_new, offset):
                        self.records[gap] = InFlightRecord(RecordState.ARCHIVED, 0)
                        self.archived_since_write = True
                    rec = self.records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
                    self.next_fetch_offset_new = offset + 1
                if rec.state != RecordState.AVAILABLE:
                    continue
                rec.state = RecordState.ACQUIRED
                rec.delivery_count += 1
                rec.member_id = member_id
                rec.lock_deadline_ms = now_ms + self.lock_duration_ms
                acquired.append((offset, rec.delivery_count))
        if acquired and (self.lock_floor_ms is None or now_ms + self.lock_duration_ms < self.lock_floor_ms):
            self.lock_floor_ms = now_ms + self.lock_duration_ms
        self._advance_start_offset()
        return _coalesce(acquired)

    def archive(self, ranges: list[tuple[int, int]]) -> None:
        """Records never fetched before that must not be delivered (an aborted transaction's,
        under read_committed) are ARCHIVED as they are read."""
        for first, last in ranges:
            for offset in range(max(first, self.next_fetch_offset_new), last + 1):
                self.records.setdefault(offset, InFlightRecord(RecordState.ARCHIVED, 0))
                self.archived_since_write = True
        while (rec := self.records.get(self.next_fetch_offset_new)) is not None and rec.state == RecordState.ARCHIVED:
            self.next_fetch_offset_new += 1
        self._advance_start_offset()

    # ---- acknowledgements --------------------------------------------------------------

    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, ack_types: list[int], now_ms: int) -> int:
        """One AcknowledgementBatch: one type for the whole range, or one per offset. Every record
        must be ACQUIRED by ``member_id`` (gaps excepted), else INVALID_RECORD_STATE and nothing changes."""
        if last_offset < first_offset or not ack_types or (len(ack_types) != 1 and len(ack_types) != last_offset - first_offset + 1):
            return INVALID_REQUEST
        if any(t not in AcknowledgeType._value2member_map_ for t in ack_types):
            return INVALID_REQUEST
        plan: list[tuple[int, int]] = []
        for i, offset in enumerate(range(first_offset, last_offset + 1)):
            ack = ack_types[0] if len(ack_types) == 1 else ack_types[i]
            rec = self.records.get(offset)
            if ack == AcknowledgeType.GAP and (rec is None or rec.state == RecordState.ARCHIVED):
                continue
            if offset < self.start_offset and rec is None:
                return INVALID_RECORD_STATE
            if rec is None or rec.state != RecordState.ACQUIRED or rec.member_id != member_id:
                return INVALID_RECORD_STATE
            plan.append((offset, ack))
        for offset, ack in plan:
            rec = self.records[offset]
            if ack == AcknowledgeType.ACCEPT:
                self._finish(rec, RecordState.ACKNOWLEDGED)
            elif ack in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                self._finish(rec, RecordState.ARCHIVED)
            elif ack == AcknowledgeType.RELEASE:
                self._release(rec)
            elif ack == AcknowledgeType.RENEW:
                rec.lock_deadline_ms = now_ms + self.lock_duration_ms
        self._advance_start_offset()
        return NONE

    def release_member(self, member_id: str) -> int:
        """A member left or closed its share session: its acquired records become AVAILABLE
        again (ARCHIVED at the delivery count limit). Returns how many were released."""
        released = 0
        for rec in self.records.values():
            if rec.state == RecordState.ACQUIRED and rec.member_id == member_id:
                self._release(rec)
                released += 1
        self._advance_start_offset()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks that timed out: the records go back as after a RELEASE. A scan of
        the in-flight records only once the earliest lock may have run out."""
        if self.lock_floor_ms is None or now_ms < self.lock_floor_ms:
            return 0
        expired = 0
        floor = None
        for rec in self.records.values():
            if rec.state == RecordState.ACQUIRED:
                if rec.lock_deadline_ms <= now_ms:
                    self._release(rec)
                    expired += 1
                elif floor is None or rec.lock_deadline_ms < floor:
                    floor = rec.lock_deadline_ms
        self.lock_floor_ms = floor
        if expired:
            self._advance_start_offset()
        return expired

    def next_lock_deadline(self) -> int | None:
        if self.lock_floor_ms is None:
            return None
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.state == RecordState.ACQUIRED]
        self.lock_floor_ms = min(deadlines) if deadlines else None
        return self.lock_floor_ms

    # ---- internals ---------------------------------------------------------------------

    def _release(self, rec: InFlightRecord) -> None:
        rec.member_id = None
        rec.lock_deadline_ms = 0
        rec.state = RecordState.ARCHIVED if rec.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE

    @staticmethod
    def _finish(rec: InFlightRecord, state: RecordState) -> None:
        rec.state = state
        rec.member_id = None
        rec.lock_deadline_ms = 0

    def _advance_start_offset(self) -> None:
        """Kafka's maybeUpdateCachedStateAndOffsets: move the start offset over the leading
        ACKNOWLEDGED/ARCHIVED records and drop them from the cache."""
        offset = self.start_offset
        while offset < self.next_fetch_offset_new:
            rec = self.records.get(offset)
            if rec is None or rec.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                self.records.pop(offset, None)
                if rec is not None and offset >= self.write_start_offset:
                    self.done_since_write[offset] = rec
                offset += 1
            else:
                break
        self.start_offset = offset

    def state_of(self, offset: int) -> RecordState | None:
        """The state of one record (None beyond the records fetched so far); for tests and tools."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED
        rec = self.records.get(offset)
        return rec.state if rec is not None else None


def _coalesce(acquired: list[tuple[int, int]]) -> list[AcquiredRecords]:
    """Offsets with their delivery counts -> contiguous ranges of equal delivery count."""
    out: list[AcquiredRecords] = []
    for offset, count in acquired:
        if out and out[-1].last_offset + 1 == offset and out[-1].delivery_count == count:
            out[-1] = AcquiredRecords(out[-1].first_offset, offset, count)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out
