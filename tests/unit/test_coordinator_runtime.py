"""The coordinator runtime (server/coordinator/runtime.py) over a real LogManager and
ReplicaManager: records are appended then replayed at their offsets, a failed append replays
nothing, a request's answer waits for the flush of the partitions it wrote and not for others,
and a timer's writes (on a ManualClock: no sleeping) are tracked until flushed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.records import iter_batches
from kafka_sidecar.server.coordinator.clock import ManualClock
from kafka_sidecar.server.coordinator.runtime import CoordinatorResult, CoordinatorRuntime, Producer
from kafka_sidecar.server.replica_manager import ReplicaManager
from kafka_sidecar.storage.log_manager import LogManager
from kafka_sidecar.storage.log_segment import StorageError


def _runtime(tmp_path: Path, clock: ManualClock | None = None, **configs: object) -> tuple[CoordinatorRuntime, LogManager]:
    lm = LogManager(tmp_path, {})
    lm.startup()
    lm.create_topic("state", 2, configs)
    return CoordinatorRuntime(ReplicaManager(lm), clock or ManualClock()), lm


class _Gate:
    """Holds a log's flushes (on the storage thread) until opened."""

    def __init__(self, flush) -> None:
        self.flush = flush
        self.open = threading.Event()

    def __call__(self, *args: object) -> None:
        assert self.open.wait(10)
        self.flush(*args)


async def test_records_are_replayed_at_their_offsets_only_after_the_append(tmp_path):
    clock = ManualClock(1_000)
    runtime, lm = _runtime(tmp_path, clock)
    replayed: list[tuple[bytes, bytes | None, int]] = []
    records = [(b"k1", b"v1"), (b"k2", None)]
    assert runtime.write("state", 0, records, lambda k, v, o: replayed.append((k, v, o))) == errors.NONE
    assert replayed == [(b"k1", b"v1", 0), (b"k2", None, 1)]
    data = lm.get_log("state", 0).read(0, 1 << 20, True).read()
    [(_, header)] = list(iter_batches(data))
    assert (header.base_offset, header.last_offset_delta, header.max_timestamp) == (0, 1, 1_000)  # the runtime's clock

    error, response = runtime.run_write("state", 0, lambda: CoordinatorResult([(b"k3", b"v3")], "answer"),
                                        lambda k, v, o: replayed.append((k, v, o)))
    assert (error, response, replayed[-1]) == (errors.NONE, "answer", (b"k3", b"v3", 2))


async def test_a_failed_append_replays_nothing_and_says_why(tmp_path):
    runtime, lm = _runtime(tmp_path)
    replayed: list[int] = []

    def fail(topic: str, partition: int) -> None:
        raise StorageError(f"no space left on {topic}-{partition}")

    runtime.before_append = fail
    assert runtime.write("state", 1, [(b"k", b"v")], lambda k, v, o: replayed.append(o)) == errors.KAFKA_STORAGE_ERROR
    assert replayed == [] and runtime.failed_appends == 1
    assert lm.get_log("state", 1).log_end_offset == 0
    runtime.before_append = None
    # No log for the partition: the caller's "not available" error, nothing replayed.
    assert runtime.write("state", 9, [(b"k", b"v")], lambda k, v, o: replayed.append(o)) == errors.COORDINATOR_NOT_AVAILABLE
    assert runtime.write("state", 9, [(b"k", b"v")], lambda k, v, o: replayed.append(o),
                         not_available=errors.NOT_COORDINATOR) == errors.NOT_COORDINATOR
    assert replayed == []


async def test_transactional_batches_continue_the_producers_sequence(tmp_path):
    runtime, lm = _runtime(tmp_path)
    producer = Producer(producer_id=42, producer_epoch=3)
    assert runtime.append("state", 0, [(b"a", b"1")], producer=producer) == (errors.NONE, 0)
    assert runtime.append("state", 0, [(b"b", b"2"), (b"c", b"3")], producer=producer) == (errors.NONE, 1)
    data = lm.get_log("state", 0).read(0, 1 << 20, True).read()
    headers = [h for _, h in iter_batches(data)]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) for h in headers] == [
        (42, 3, 0, True), (42, 3, 1, True)]


async def test_an_answer_waits_for_its_partitions_flush_only(tmp_path):
    runtime, lm = _runtime(tmp_path, **{"flush.messages": 1})
    gates = {}
    for p in (0, 1):
        lg = lm.get_log("state", p)
        gates[p] = lg.flush = _Gate(lg.flush)
    # An unrelated flush in flight (partition 1) ...
    with runtime.scope():
        assert runtime.write("state", 1, [(b"other", b"x")], lambda *a: None) == errors.NONE
    # ... and this request's write to partition 0.
    with runtime.scope() as scope:
        assert runtime.write("state", 0, [(b"mine", b"y")], lambda *a: None) == errors.NONE
    assert scope.partitions == {("state", 0)}
    answered = asyncio.ensure_future(runtime.await_durable(scope))
    await asyncio.sleep(0)
    assert not answered.done()  # its own flush is held
    gates[0].open.set()
    await asyncio.wait_for(answered, 5)  # partition 1's flush is still held: not waited for
    assert lm.get_log("state", 0).recovery_point == 1
    assert lm.get_log("state", 1).recovery_point == 0
    gates[1].open.set()
    await asyncio.wait_for(runtime.shutdown(), 5)


async def test_a_read_waits_for_the_writes_before_it(tmp_path):
    """An operation that writes nothing still answers after the partition's pending write is
    durable (Kafka's deferred read)."""
    runtime, lm = _runtime(tmp_path, **{"flush.messages": 1})
    lg = lm.get_log("state", 0)
    gate = lg.flush = _Gate(lg.flush)
    runtime.write("state", 0, [(b"k", b"v")], lambda *a: None)  # no scope: tracked in the background
    assert runtime.in_flight == 1
    with runtime.scope() as scope:
        assert runtime.write("state", 0, [], lambda *a: None) == errors.NONE
    answered = asyncio.ensure_future(runtime.await_durable(scope))
    await asyncio.sleep(0)
    assert not answered.done()
    gate.open.set()
    await asyncio.wait_for(answered, 5)
    await asyncio.wait_for(runtime.shutdown(), 5)
    assert runtime.in_flight == 0


async def test_timer_writes_are_tracked_and_their_errors_logged(tmp_path, caplog):
    clock = ManualClock()
    runtime, lm = _runtime(tmp_path, clock, **{"flush.messages": 1})
    lg = lm.get_log("state", 0)
    gate = lg.flush = _Gate(lg.flush)
    replayed: list[int] = []
    runtime.call_later(5_000, lambda: runtime.write("state", 0, [(b"expired", None)], lambda k, v, o: replayed.append(o)),
                       "expiry")

    def broken() -> None:
        raise RuntimeError("timer bug")

    runtime.call_later(6_000, broken, "broken")
    assert clock.advance(4_999) == 0 and replayed == []
    assert clock.advance(1) == 1 and replayed == [0]
    assert runtime.in_flight == 1  # the timer's write is not durable yet: the runtime holds it
    assert clock.advance(1_000) == 1
    assert "coordinator timer broken failed" in caplog.text
    stopping = asyncio.ensure_future(runtime.shutdown())
    await asyncio.sleep(0)
    assert not stopping.done()  # shutdown waits for the timer's flush
    gate.open.set()
    await asyncio.wait_for(stopping, 5)
    assert runtime.in_flight == 0 and lg.recovery_point == 1
