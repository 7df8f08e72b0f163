"""The share partition's runs of offsets (server/share/partition.py) against a per-offset model.

SharePartition keeps its in-flight state per run of offsets so that a batch of N records costs
O(runs), not O(N). The model below is the plain per-offset state machine it replaced (one state,
delivery count, owner and lock deadline per offset); random sequences of acquisitions,
acknowledgements (one type per range, or one per offset), releases, lock expiries and aborted
ranges must give the same answers: acquired ranges, error codes, every offset's state, start
offset, next fetch offset, and the state as the persister writes it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from kafka_sidecar.server.share.partition import (
    INVALID_RECORD_STATE,
    INVALID_REQUEST,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
)
from kafka_sidecar.server.share.persister import ReplayedState, persisted_state
from kafka_sidecar.server.share.records import StateBatch


@dataclass
class _Rec:
    state: RecordState
    count: int
    member: str | None = None
    deadline: int = 0


class Model:
    """One entry per in-flight offset."""

    def __init__(self, start: int, lock: int, limit: int, window: int) -> None:
        self.start = self.new = self.write_start = start
        self.lock, self.limit, self.window = lock, limit, window
        self.recs: dict[int, _Rec] = {}
        self.done: dict[int, _Rec] = {}

    def next_fetch_offset(self) -> int:
        avail = [o for o, r in self.recs.items() if r.state == RecordState.AVAILABLE]
        return min(avail) if avail else self.new

    def can_acquire(self) -> bool:
        return any(r.state == RecordState.AVAILABLE for r in self.recs.values()) or self.new - self.start < self.window

    def acquire(self, member: str, batches: list[tuple[int, int]], max_records: int, now: int, record_limit: bool,
                archived: list[tuple[int, int]]) -> list[tuple[int, int]]:
        aborted: set[int] = set()
        for a, z in sorted(archived):  # archived at once where they follow the records fetched so far
            a = max(a, self.new)
            if a == self.new and a <= z:
                for g in range(a, z + 1):
                    self.recs[g] = _Rec(RecordState.ARCHIVED, 0)
                self.new = z + 1
            aborted.update(range(a, z + 1))
        self.advance()
        got: list[tuple[int, int]] = []
        for base, last in batches:
            if len(got) >= max_records:
                break
            for o in range(max(base, self.start), last + 1):
                if record_limit and len(got) >= max_records:
                    break
                r = self.recs.get(o)
                if r is None:
                    if o < self.new:
                        continue
                    if o in aborted:
                        for g in range(self.new, o + 1):
                            self.recs[g] = _Rec(RecordState.ARCHIVED, 0)
                        self.new = o + 1
                        continue
                    if self.new - self.start >= self.window:
                        break
                    for g in range(self.new, o):
                        self.recs[g] = _Rec(RecordState.ARCHIVED, 0)
                    r = self.recs[o] = _Rec(RecordState.AVAILABLE, 0)
                    self.new = o + 1
                if r.state != RecordState.AVAILABLE:
                    continue
                r.state, r.count, r.member, r.deadline = RecordState.ACQUIRED, r.count + 1, member, now + self.lock
                got.append((o, r.count))
        self.advance()
        return got

    def acknowledge(self, member: str, first: int, last: int, types: list[int], now: int) -> int:
        if last < first or not types or len(types) not in (1, last - first + 1) or any(t not in (0, 1, 2, 3, 4) for t in types):
            return INVALID_REQUEST
        plan = []
        for i, o in enumerate(range(first, last + 1)):
            t = types[0] if len(types) == 1 else types[i]
            r = self.recs.get(o)
            if t == AcknowledgeType.GAP and (r is None or r.state == RecordState.ARCHIVED):
                continue
            if r is None or r.state != RecordState.ACQUIRED or r.member != member:
                return INVALID_RECORD_STATE
            plan.append((r, t))
        for r, t in plan:
            if t == AcknowledgeType.ACCEPT:
                r.state, r.member, r.deadline = RecordState.ACKNOWLEDGED, None, 0
            elif t in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                r.state, r.member, r.deadline = RecordState.ARCHIVED, None, 0
            elif t == AcknowledgeType.RELEASE:
                self.release(r)
            else:
                r.deadline = now + self.lock
        self.advance()
        return 0

    def release(self, r: _Rec) -> None:
        r.member, r.deadline = None, 0
        r.state = RecordState.ARCHIVED if r.count >= self.limit else RecordState.AVAILABLE

    def release_member(self, member: str) -> int:
        mine = [r for r in self.recs.values() if r.state == RecordState.ACQUIRED and r.member == member]
        for r in mine:
            self.release(r)
        self.advance()
        return len(mine)

    def expire(self, now: int) -> int:
        gone = [r for r in self.recs.values() if r.state == RecordState.ACQUIRED and r.deadline <= now]
        for r in gone:
            self.release(r)
        self.advance()
        return len(gone)

    def advance(self) -> None:
        while self.start < self.new and self.recs[self.start].state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            r = self.recs.pop(self.start)
            if self.start >= self.write_start:
                self.done[self.start] = r
            self.start += 1

    def state_of(self, o: int) -> RecordState | None:
        if o < self.start:
            return RecordState.ACKNOWLEDGED
        r = self.recs.get(o)
        return None if r is None else r.state

    def persisted(self) -> tuple[int, tuple[StateBatch, ...]]:
        out: list[StateBatch] = []
        recs = {**self.done, **self.recs}
        for o in sorted(x for x in recs if x >= self.write_start):
            r = recs[o]
            state, count = (0, r.count - 1) if r.state == RecordState.ACQUIRED else (int(r.state), r.count)
            if state == 0 and count == 0:
                continue
            if out and out[-1].last_offset + 1 == o and (out[-1].delivery_state, out[-1].delivery_count) == (state, count):
                out[-1] = StateBatch(out[-1].first_offset, o, state, count)
            else:
                out.append(StateBatch(o, o, state, count))
        return self.write_start, tuple(out)

    def written(self) -> None:
        self.write_start, self.done = self.start, {}


def _expand(acquired: list[AcquiredRecords]) -> list[tuple[int, int]]:
    return [(o, a.delivery_count) for a in acquired for o in range(a.first_offset, a.last_offset + 1)]


def _log_batches(rng: random.Random, frm: int, end: int) -> list[tuple[int, int]]:
    """Batches of the log from ``frm``, some with gaps between them (compaction)."""
    out, at = [], frm
    while at < end and len(out) < 4:
        at += rng.choice([0, 0, 0, 1, 3])
        size = rng.randint(1, 12)
        out.append((at, at + size - 1))
        at += size
    return out


@pytest.mark.parametrize("seed", range(25))
def test_runs_answer_as_the_per_offset_model(seed: int) -> None:
    rng = random.Random(seed)
    lock, limit, window = 100, rng.randint(1, 4), rng.choice([8, 20, 200])
    sp = SharePartition(0, lock_duration_ms=lock, delivery_count_limit=limit, max_in_flight_records=window)
    m = Model(0, lock, limit, window)
    members = ["a", "b", "c"]
    now = 0
    for step in range(300):
        now += rng.randint(0, 30)
        op = rng.random()
        where = f"seed {seed} step {step}"
        if op < 0.35:
            member = rng.choice(members)
            frm = rng.choice([sp.next_fetch_offset(), max(0, sp.next_fetch_offset() - rng.randint(0, 10))])
            batches = _log_batches(rng, frm, frm + 40)
            aborted = []
            if rng.random() < 0.2 and batches:
                b = rng.choice(batches)
                aborted = [(b[0], b[1])]
                sp.archive(aborted)
            max_records, record_limit = rng.randint(1, 30), rng.random() < 0.3
            got = sp.acquire(member, batches, max_records, now, record_limit=record_limit)
            assert _expand(got) == m.acquire(member, batches, max_records, now, record_limit, aborted), where
            # ranges are coalesced: no two neighbours with the same delivery count
            assert all(not (x.last_offset + 1 == y.first_offset and x.delivery_count == y.delivery_count) for x, y in zip(got, got[1:], strict=False))
        elif op < 0.8:
            member = rng.choice(members)
            first = rng.randint(max(0, sp.start_offset - 3), sp.next_fetch_offset_new + 2)
            last = first + rng.randint(-1, 10)
            if rng.random() < 0.5:
                types = [rng.choice([1, 1, 1, 2, 3, 4, 0])]
            else:
                types = [rng.choice([1, 2, 3, 4, 0]) for _ in range(max(1, last - first + 1))]
            assert sp.acknowledge(member, first, last, types, now) == m.acknowledge(member, first, last, types, now), where
        elif op < 0.87:
            member = rng.choice(members)
            assert sp.release_member(member) == m.release_member(member), where
        elif op < 0.95:
            assert sp.expire_locks(now) == m.expire(now), where
        else:
            # what the persister does after a write
            sp.write_start_offset, sp.done_since_write = sp.start_offset, []
            m.written()
        assert (sp.start_offset, sp.next_fetch_offset_new, sp.next_fetch_offset(), sp.can_acquire()) == \
            (m.start, m.new, m.next_fetch_offset(), m.can_acquire()), where
        assert [sp.state_of(o) for o in range(m.start - 2, m.new + 2)] == [m.state_of(o) for o in range(m.start - 2, m.new + 2)], where
        assert persisted_state(sp, as_written=True) == m.persisted(), where
        # the runs cover [start, next new) exactly, in order
        assert [(b.first_offset, b.last_offset) for b in sp.batches] == sorted((b.first_offset, b.last_offset) for b in sp.batches)
        covered = sum(b.size() for b in sp.batches)
        assert covered == sp.next_fetch_offset_new - sp.start_offset and (not sp.batches or sp.batches[0].first_offset == sp.start_offset), where


def test_acquiring_a_large_batch_is_one_run() -> None:
    sp = SharePartition(0, max_in_flight_records=1_000_000)
    assert sp.acquire("a", [(0, 499_999)], 500, now_ms=0) == [AcquiredRecords(0, 499_999, 1)]
    assert len(sp.batches) == 1
    assert sp.acknowledge("a", 0, 249_999, [int(AcknowledgeType.ACCEPT)], now_ms=1) == 0
    assert sp.acknowledge("a", 250_000, 499_999, [int(AcknowledgeType.RELEASE)], now_ms=1) == 0
    assert sp.start_offset == 250_000 and len(sp.batches) == 1 and sp.batches[0].state == RecordState.AVAILABLE


def test_replay_overlays_batches_and_restores_runs() -> None:
    st = ReplayedState(10, 0, 0)
    st.overlay([StateBatch(10, 19, 0, 1), StateBatch(25, 29, 4, 2)])
    st.overlay([StateBatch(12, 13, 2, 1)])  # an update: 12-13 acknowledged
    assert st.runs == [(10, 11, 0, 1), (12, 13, 2, 1), (14, 19, 0, 1), (25, 29, 4, 2)]
    st.start_offset = 12
    st.overlay([])
    assert st.runs[0] == (12, 13, 2, 1)
    sp = SharePartition(12)
    sp.restore(12, 30, st.runs)
    # 12-13 done: the start moves to 14; 20-24 are AVAILABLE never delivered; 25-29 archived
    assert sp.start_offset == 14 and sp.next_fetch_offset_new == 30
    assert [sp.state_of(o) for o in (14, 20, 25)] == [RecordState.AVAILABLE, RecordState.AVAILABLE, RecordState.ARCHIVED]
    assert persisted_state(sp) == (14, (StateBatch(14, 19, 0, 1), StateBatch(25, 29, 4, 2)))

