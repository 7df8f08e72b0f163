"""The ReplicaManager (server/replica_manager.py) over a real LogManager: one durability rule
for every writer (an fsync that flush.messages asks for runs on the storage thread, one at a
time per log, and the write is acknowledged after it), fetch wake-ups for every append, and
produce metrics for client appends only."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from kafka_sidecar.protocol.record_batch import read_header
from kafka_sidecar.protocol.records import Record, encode_batch
from kafka_sidecar.server.metrics import Metrics
from kafka_sidecar.server.replica_manager import (
    AppendOrigin,
    NoSuchPartitionError,
    ReplicaManager,
    append_error_code,
)
from kafka_sidecar.storage.log_manager import LogManager
from kafka_sidecar.storage.producer_state import ProducerStateError

TS = int(time.time() * 1000)


def _batch(*values: bytes, producer_id: int = -1, seq: int = -1, transactional: bool = False) -> bytearray:
    return bytearray(encode_batch([Record(i, TS, None, v) for i, v in enumerate(values)], producer_id=producer_id,
                                  producer_epoch=0 if producer_id >= 0 else -1, base_sequence=seq,
                                  is_transactional=transactional, base_timestamp=TS, max_timestamp=TS))


def _manager(tmp_path: Path, **configs: object) -> tuple[ReplicaManager, LogManager]:
    lm = LogManager(tmp_path, {})
    lm.startup()
    lm.create_topic("t", 2, {k.replace("_", "."): v for k, v in configs.items()})
    return ReplicaManager(lm, Metrics()), lm


class _Recorder:
    """Wraps Log.flush to see which thread runs it and whether two ever overlap. A flush holds
    at ``gate`` (open unless a test closes it) after telling ``entered``."""

    def __init__(self, flush) -> None:
        self.flush = flush
        self.threads: list[str] = []
        self.running = 0
        self.overlapped = False
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, *args: object) -> None:
        self.running += 1
        self.overlapped |= self.running > 1
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        assert self.gate.wait(10)
        try:
            self.flush(*args)
        finally:
            self.running -= 1


async def test_client_append_waits_for_the_flush_policy_off_the_loop(tmp_path):
    rm, lm = _manager(tmp_path, flush_messages=2)
    lg = lm.get_log("t", 0)
    rec = lg.flush = _Recorder(lg.flush)
    info, flush = rm.append_records(lg, _batch(b"a"), [read_header(_batch(b"a"))])
    assert flush is None and info.first_offset == 0  # one message: flush.messages=2 not reached
    info, flush = rm.append_records(lg, _batch(b"b"), [read_header(_batch(b"b"))])
    assert flush is not None and not flush.done()  # the fsync is not done on the caller's (loop) thread
    await flush
    assert lg.recovery_point == lg.log_end_offset == 2
    assert rec.threads and threading.main_thread().name not in rec.threads


async def test_flushes_of_one_log_run_one_after_another(tmp_path):
    rm, lm = _manager(tmp_path, flush_messages=1)
    lg = lm.get_log("t", 0)
    rec = lg.flush = _Recorder(lg.flush)
    rec.gate.clear()  # the first flush holds until the others have had every chance to start
    futures = []
    for v in (b"a", b"b", b"c"):
        b = _batch(v)
        futures.append(rm.append_records(lg, b, [read_header(b)])[1])
    assert await asyncio.to_thread(rec.entered.wait, 10)
    for _ in range(20):
        await asyncio.sleep(0)  # loop turns: a flush not chained after the first would be submitted
    assert len(rec.threads) == 1
    rec.gate.set()
    await asyncio.gather(*futures)
    assert len(rec.threads) == 3 and not rec.overlapped
    assert lg.recovery_point == 3


async def test_coordinator_writes_and_markers_flush_before_the_barrier_returns(tmp_path):
    rm, lm = _manager(tmp_path, flush_messages=1)
    lg = lm.get_log("t", 1)
    rec = lg.flush = _Recorder(lg.flush)
    info = rm.append_batch("t", 1, _batch(b"state"))
    assert info.first_offset == 0
    b = _batch(b"txn", producer_id=7, seq=0, transactional=True)
    rm.append_records(lg, b, [read_header(b)], AppendOrigin.COORDINATOR)
    assert rm.append_transaction_marker(lg, 7, 0, 0, commit=True) == 2
    assert lg.recovery_point < 3  # nothing fsynced on this (the loop's) thread
    await rm.await_pending_flushes()
    assert lg.recovery_point == lg.log_end_offset == 3
    assert threading.main_thread().name not in rec.threads


async def test_every_append_wakes_the_parked_fetches_of_its_partition(tmp_path):
    rm, lm = _manager(tmp_path)
    parked = asyncio.ensure_future(rm.wait_for_data([("t", 0)], 5.0))
    other = asyncio.ensure_future(rm.wait_for_data([("t", 1)], 0.3))
    await asyncio.sleep(0)
    assert rm.purgatory.watched() == 2
    started = time.monotonic()
    rm.append_batch("t", 0, _batch(b"x"))  # a coordinator's append wakes a fetch too
    await asyncio.wait_for(parked, 1.0)
    assert time.monotonic() - started < 0.25
    assert not other.done()
    await other  # times out by itself
    assert rm.purgatory.watched() == 0


async def test_only_client_appends_count_as_produce_traffic(tmp_path):
    rm, lm = _manager(tmp_path)
    b = _batch(b"1", b"2")
    rm.append_records(lm.get_log("t", 0), b, [read_header(b)])
    rm.append_batch("t", 0, _batch(b"3"))
    assert rm.metrics.messages_in["t"] == 2 and rm.metrics.bytes_in["t"] == len(b)


async def test_append_errors_map_to_kafka_codes(tmp_path):
    rm, lm = _manager(tmp_path)
    try:
        rm.append_batch("missing", 0, _batch(b"x"))
    except NoSuchPartitionError as e:
        assert append_error_code(e) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    else:
        raise AssertionError("append to a missing partition succeeded")
    lg = lm.get_log("t", 0)
    first = _batch(b"a", producer_id=9, seq=0)
    rm.append_records(lg, first, [read_header(first)])
    gap = _batch(b"b", producer_id=9, seq=5)
    try:
        rm.append_records(lg, gap, [read_header(gap)])
    except ProducerStateError as e:
        assert append_error_code(e) == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    else:
        raise AssertionError("a sequence gap was accepted")


async def test_delete_topic_detaches_on_the_loop_and_closes_on_the_storage_thread(tmp_path):
    rm, lm = _manager(tmp_path, flush_messages=1)
    lg = lm.get_log("t", 0)
    b = _batch(b"a")
    _, flush = rm.append_records(lg, b, [read_header(b)])  # a flush in flight when the deletion starts
    parked = asyncio.ensure_future(rm.wait_for_data([("t", 1)], 5.0))
    await asyncio.sleep(0)
    finished_on: list[str] = []
    finish = lm.finish_topic_deletion

    def recording_finish(*args):
        finished_on.append(threading.current_thread().name)
        return finish(*args)

    lm.finish_topic_deletion = recording_finish
    deletion = asyncio.ensure_future(rm.delete_topic("t"))
    await asyncio.sleep(0)
    # Detached at once: no append or read finds the partitions, the name stays reserved.
    assert lm.get_log("t", 0) is None and "t" not in lm.metadata.topics and lm.metadata.is_being_deleted("t")
    await asyncio.wait_for(parked, 1.0)  # the parked fetch is woken (and will find no partition)
    renamed = await deletion
    assert flush.done() and not flush.exception()  # the flush in flight finished before the close
    assert finished_on and threading.main_thread().name not in finished_on
    assert sorted(p.name.split(".")[0] for p in renamed) == ["t-0", "t-1"]
    assert all(p.name.endswith("-delete") and p.is_dir() for p in renamed)
    assert not lm.metadata.is_being_deleted("t")
    lm.create_topic("t", 1, {})  # the name is free again
    assert lm.get_log("t", 0).log_end_offset == 0
