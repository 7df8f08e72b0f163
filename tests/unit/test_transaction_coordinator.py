"""The transaction coordinator (server/transactions) without a server: Kafka's
``__transaction_state`` record formats byte for byte, the state machine, and the coordinator's
paths (InitProducerId, AddPartitionsToTxn, EndTxn, timeouts, expiration, replay at start with
Prepare* transactions completed) over an in-memory stand-in for the logs."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from kafka_sidecar.protocol.record_batch import read_header
from kafka_sidecar.server.replica_manager import ReplicaManager
from kafka_sidecar.server.transactions.coordinator import TransactionCoordinator
from kafka_sidecar.server.transactions.records import (
    TRANSACTION_STATE_TOPIC,
    decode_key,
    decode_value,
    iter_records_and_markers,
    key_bytes,
    transaction_partition_for,
    value_bytes,
)
from kafka_sidecar.server.transactions.state import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
)

S = TransactionState


# ---- records ---------------------------------------------------------------------------------


def test_key_bytes() -> None:
    assert key_bytes("my-txn") == b"\x00\x00\x00\x06my-txn"
    assert decode_key(key_bytes("my-txn")) == "my-txn"
    assert decode_key(b"\x00\x07\x00\x01x") is None


def test_value_bytes_version_0() -> None:
    m = TransactionMetadata("t", 1234, 5, 60000, S.ONGOING, {("b", 1), ("a", 3), ("b", 0)}, 1000, 2000)
    expected = (
        struct.pack(">hqhib", 0, 1234, 5, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 3)
        + struct.pack(">h", 1) + b"b" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 2000, 1000)
    )
    assert value_bytes(m) == expected
    back = decode_value("t", expected)
    assert (back.producer_id, back.producer_epoch, back.txn_timeout_ms, back.state, back.topic_partitions,
            back.txn_start_timestamp, back.txn_last_update_timestamp) == (1234, 5, 60000, S.ONGOING, m.topic_partitions, 1000, 2000)


def test_empty_value_has_null_partitions() -> None:
    m = TransactionMetadata("t", 7, 0, 60000, S.EMPTY, set(), -1, 99)
    assert value_bytes(m) == struct.pack(">hqhib", 0, 7, 0, 60000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 99, -1)
    m.topic_partitions = {("a", 0)}
    with pytest.raises(ValueError):
        value_bytes(m)


def test_value_version_1_with_tagged_fields() -> None:
    # Flexible: compact arrays/strings (length + 1), tagged fields per struct and at the end.
    value = (
        struct.pack(">hqhib", 1, 42, 3, 1000, 4)
        + bytes([2])  # one topic
        + bytes([2]) + b"x" + bytes([3]) + struct.pack(">ii", 0, 2) + bytes([0])
        + struct.pack(">qq", 5, 4)
        + bytes([3])  # three tagged fields
        + bytes([0, 8]) + struct.pack(">q", 41)
        + bytes([1, 8]) + struct.pack(">q", 43)
        + bytes([2, 2]) + struct.pack(">h", 2)
    )
    m = decode_value("t", value)
    assert (m.producer_id, m.producer_epoch, m.state, m.topic_partitions) == (42, 3, S.COMPLETE_COMMIT, {("x", 0), ("x", 2)})
    assert (m.previous_producer_id, m.next_producer_id, m.client_transaction_version) == (41, 43, 2)


def test_partition_for_matches_java_hash() -> None:
    # "hello".hashCode() == 99162322
    assert transaction_partition_for("hello", 50) == 99162322 % 50


# ---- state machine ---------------------------------------------------------------------------


def test_valid_previous_states_are_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS_STATES[S.PREPARE_EPOCH_FENCE] == {S.ONGOING}
    assert S.PREPARE_EPOCH_FENCE in VALID_PREVIOUS_STATES[S.PREPARE_ABORT]
    assert [s.id for s in S] == list(range(8))
    m = TransactionMetadata("t", 1, 0, 1000, S.EMPTY)
    with pytest.raises(IllegalTransition):
        m.check_transition(S.PREPARE_COMMIT)


# ---- the coordinator over in-memory logs ----------------------------------------------------------


class FakeLog:
    def __init__(self, topic: str = "t", partition: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self.batches: list[bytearray] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.markers: list[tuple[int, int, int, bool]] = []
        self.flush_due = False  # flush.messages never reached

    def append_as_leader(self, batch: bytearray, headers: Any, now_ms: int | None = None) -> Any:
        first = self.log_end_offset
        struct.pack_into(">q", batch, 0, first)
        self.batches.append(batch)
        self.log_end_offset += headers[0].last_offset_delta + 1
        return SimpleNamespace(first_offset=first, needs_flush=False)

    def read(self, offset: int, max_bytes: int, *_: Any) -> Any:
        data = b"".join(bytes(b) for b in self.batches if read_header(b).last_offset >= offset)
        return SimpleNamespace(read=lambda: data)

    def append_transaction_marker(self, pid: int, epoch: int, coordinator_epoch: int, commit: bool) -> int:
        self.markers.append((pid, epoch, coordinator_epoch, commit))
        self.log_end_offset += 1
        return self.log_end_offset - 1


class FakeLogManager:
    def __init__(self) -> None:
        self.topics: dict[str, Any] = {}
        self.logs: dict[tuple[str, int], FakeLog] = {}
        self.next_pid = 1000

    def create_topic(self, name: str, partitions: int, configs: Any = None) -> None:
        self.topics[name] = SimpleNamespace(partitions=partitions, configs=configs)
        for p in range(partitions):
            self.logs[(name, p)] = FakeLog(name, p)

    def get_log(self, topic: str, partition: int) -> FakeLog | None:
        return self.logs.get((topic, partition))

    def allocate_producer_id(self) -> int:
        self.next_pid += 1
        return self.next_pid


class FakeBroker:
    def __init__(self, lm: FakeLogManager | None = None, **config: Any) -> None:
        self.cfg = {"transaction.state.log.num.partitions": 3, "transaction.state.log.segment.bytes": 1 << 20,
                    "transaction.max.timeout.ms": 900000, "transactional.id.expiration.ms": 604800000, **config}
        self.config = SimpleNamespace(get=self.cfg.__getitem__)
        self.log_manager = lm or FakeLogManager()
        self.metadata = self.log_manager  # its topics map
        self.producer_ids = SimpleNamespace(allocate=self.log_manager.allocate_producer_id)
        self.completed: list[tuple[int, bool, int]] = []
        self.group_coordinator = SimpleNamespace(complete_transaction=lambda *a: self.completed.append(a))
        self.replica_manager = ReplicaManager(self.log_manager)  # type: ignore[arg-type]

    async def run_blocking(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def schedule_blocking(self, fn: Any, *args: Any) -> None:
        fn(*args)

    def notify_append(self, topic: str, partition: int) -> None:
        pass


def persisted_states(broker: FakeBroker, txn_id: str) -> list[tuple[str, int, int, list[tuple[str, int]]]]:
    tc_partitions = broker.metadata.topics[TRANSACTION_STATE_TOPIC].partitions
    lg = broker.log_manager.get_log(TRANSACTION_STATE_TOPIC, transaction_partition_for(txn_id, tc_partitions))
    out = []
    for _off, _pid, _epoch, key, value, _marker in iter_records_and_markers(lg.read(0, 1 << 20).read()):
        if decode_key(key) == txn_id:
            m = decode_value(txn_id, value)
            out.append((m.state.state_name, m.producer_id, m.producer_epoch, sorted(m.topic_partitions)))
    return out


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def started(broker: FakeBroker) -> TransactionCoordinator:
    tc = TransactionCoordinator(broker)
    run(tc.start())
    return tc


def with_topic(broker: FakeBroker, name: str = "t", partitions: int = 2) -> FakeBroker:
    broker.log_manager.create_topic(name, partitions)
    return broker


def test_commit_writes_prepare_markers_complete() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    assert run(tc.init_producer_id("tx", 60000)) == (0, 1001, 0)
    assert tc.add_partitions("tx", 1001, 0, [("t", 0), ("t", 1)]) == 0
    assert tc.end_transaction("tx", 1001, 0, True) == 0
    assert persisted_states(broker, "tx") == [
        ("Empty", 1001, 0, []),
        ("Ongoing", 1001, 0, [("t", 0), ("t", 1)]),
        ("PrepareCommit", 1001, 0, [("t", 0), ("t", 1)]),
        ("CompleteCommit", 1001, 0, []),
    ]
    for p in (0, 1):
        assert broker.log_manager.get_log("t", p).markers == [(1001, 0, 0, True)]
    assert tc.end_transaction("tx", 1001, 0, True) == 0  # a retried commit
    assert tc.end_transaction("tx", 1001, 0, False) == INVALID_TXN_STATE


def test_error_checks() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    assert run(tc.init_producer_id("tx", 900001))[0] == INVALID_TRANSACTION_TIMEOUT
    run(tc.init_producer_id("tx", 60000))
    assert tc.add_partitions("tx", 999, 0, [("t", 0)]) == INVALID_PRODUCER_ID_MAPPING
    assert tc.add_partitions("nope", 1001, 0, [("t", 0)]) == INVALID_PRODUCER_ID_MAPPING
    assert tc.end_transaction("tx", 1001, 0, True) == INVALID_TXN_STATE  # Empty
    assert run(tc.init_producer_id("tx", 60000)) == (0, 1001, 1)
    assert tc.add_partitions("tx", 1001, 0, [("t", 0)]) == PRODUCER_FENCED


def test_init_during_ongoing_fences_and_aborts() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    run(tc.init_producer_id("tx", 60000))
    tc.add_partitions("tx", 1001, 0, [("t", 1)])
    assert run(tc.init_producer_id("tx", 60000))[0] == CONCURRENT_TRANSACTIONS
    assert broker.log_manager.get_log("t", 1).markers == [(1001, 1, 0, False)]  # the abort, with the fenced epoch
    assert tc.transactions["tx"].state == S.COMPLETE_ABORT
    assert run(tc.init_producer_id("tx", 60000)) == (0, 1001, 2)
    assert tc.end_transaction("tx", 1001, 0, True) == PRODUCER_FENCED


def test_exhausted_epoch_gets_a_new_producer_id() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    run(tc.init_producer_id("tx", 60000))
    tc.transactions["tx"].producer_epoch = 32766
    assert run(tc.init_producer_id("tx", 60000)) == (0, 1002, 0)
    assert tc.transactions["tx"].previous_producer_id == 1001


def test_timeout_aborts_and_fences() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    run(tc.init_producer_id("tx", 1000))
    tc.add_partitions("tx", 1001, 0, [("t", 0)])
    start = tc.transactions["tx"].txn_start_timestamp
    assert tc.abort_timed_out_transactions(start + 500) == 0
    assert tc.abort_timed_out_transactions(start + 1001) == 1
    assert tc.transactions["tx"].state == S.COMPLETE_ABORT
    assert tc.transactions["tx"].producer_epoch == 1
    assert broker.log_manager.get_log("t", 0).markers == [(1001, 1, 0, False)]
    assert tc.end_transaction("tx", 1001, 0, True) == PRODUCER_FENCED


def test_offsets_partition_completes_group_offsets() -> None:
    broker = with_topic(with_topic(FakeBroker()), "__consumer_offsets", 5)
    tc = started(broker)
    run(tc.init_producer_id("tx", 60000))
    tc.add_partitions("tx", 1001, 0, [("__consumer_offsets", 3), ("t", 0)])
    tc.end_transaction("tx", 1001, 0, False)
    assert broker.completed == [(1001, False, 3)]
    assert broker.log_manager.get_log("__consumer_offsets", 3).markers == [(1001, 0, 0, False)]


def test_replay_and_complete_prepared_transactions_at_start() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    run(tc.init_producer_id("done", 60000))
    tc.add_partitions("done", 1001, 0, [("t", 0)])
    tc.end_transaction("done", 1001, 0, True)
    run(tc.init_producer_id("ongoing", 60000))
    tc.add_partitions("ongoing", 1002, 0, [("t", 1)])
    # A crash between PrepareCommit and the markers: only the PrepareCommit record is there.
    run(tc.init_producer_id("prepared", 60000))
    tc.add_partitions("prepared", 1003, 0, [("t", 0), ("t", 1)])
    prepared = tc.transactions["prepared"].copy()
    prepared.state = S.PREPARE_COMMIT
    tc._persist(prepared)
    for p in (0, 1):
        broker.log_manager.get_log("t", p).markers.clear()

    again = started(FakeBroker(broker.log_manager))
    assert {t: (m.state, m.producer_id, m.producer_epoch) for t, m in again.transactions.items()} == {
        "done": (S.COMPLETE_COMMIT, 1001, 0), "ongoing": (S.ONGOING, 1002, 0), "prepared": (S.COMPLETE_COMMIT, 1003, 0),
    }
    assert again.transactions["ongoing"].topic_partitions == {("t", 1)}
    for p in (0, 1):
        assert broker.log_manager.get_log("t", p).markers == [(1003, 0, 0, True)]
    assert persisted_states(broker, "prepared")[-2:] == [
        ("PrepareCommit", 1003, 0, [("t", 0), ("t", 1)]), ("CompleteCommit", 1003, 0, [])]


def test_expiration_writes_a_tombstone() -> None:
    broker = with_topic(FakeBroker(**{"transactional.id.expiration.ms": 1000}))
    tc = started(broker)
    run(tc.init_producer_id("idle", 60000))
    run(tc.init_producer_id("busy", 60000))
    tc.add_partitions("busy", 1002, 0, [("t", 0)])
    last = tc.transactions["idle"].txn_last_update_timestamp
    assert tc.expire_transactional_ids(last + 999) == 0
    assert tc.expire_transactional_ids(last + 5000) == 1  # an ongoing transaction does not expire
    assert set(tc.transactions) == {"busy"}
    again = started(FakeBroker(broker.log_manager))
    assert set(again.transactions) == {"busy"}


def test_list_and_describe() -> None:
    broker = with_topic(FakeBroker())
    tc = started(broker)
    run(tc.init_producer_id("a", 60000))
    run(tc.init_producer_id("b", 60000))
    tc.add_partitions("b", 1002, 0, [("t", 1), ("t", 0)])
    error, unknown, states = tc.list_transactions(["Ongoing", "Nope"], [])
    assert (error, unknown, states) == (0, ["Nope"], [{"transactional_id": "b", "producer_id": 1002, "transaction_state": "Ongoing"}])
    assert [s["transactional_id"] for s in tc.list_transactions([], [], pattern="a.*")[2]] == ["a"]
    assert [s["transactional_id"] for s in tc.list_transactions([], [1001])[2]] == ["a"]
    d = tc.describe("b")
    assert (d["transaction_state"], d["topics"]) == ("Ongoing", [{"topic": "t", "partitions": [0, 1]}])
    assert tc.describe("zzz")["error_code"] == 105
