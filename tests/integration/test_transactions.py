"""Transactions with real clients over TCP: the transaction coordinator (server/transactions)
and the transaction APIs, with the partition side's markers and read_committed fetches.

- confluent-kafka (librdkafka 2.16) transactional producer: commit, then a read_committed
  consumer sees the records; abort, then it sees none and a read_uncommitted one does.
- consume-transform-produce: ``send_offsets_to_transaction`` commits the group's offsets only
  with the transaction (aborted: the group has none).
- a second producer with the same transactional.id fences the first (fatal error).
- a hung transaction is aborted after its transaction.timeout.ms.
- a restart keeps a committed transaction and the state of a pending one.
- ``kafka-transactions.sh list``/``describe`` (Kafka 4.1's tool) against our server, and the
  same steps against the reference broker, compared; raw requests (error paths: wrong state,
  fencing, timeout above the maximum, OffsetFetch require_stable) answered as Kafka answers.

librdkafka runs the classic transaction protocol (transaction version 1) against both brokers;
our ApiVersions finalizes no transaction.version feature, so the Java client does too.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_sidecar.client.blocking import _BrokerConnection, parse_bootstrap
from kafka_sidecar.protocol.records import Record, encode_batch

from bench.reference import ReferenceKafka, find_kafka_home, unavailable_reason
from tests.support import SidecarProcess, wait_until

QUIET = {"log.connection.close": False, "log_level": 0}
OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "transaction.state.log.replication.factor": "1",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidecarProcess]:
    s = SidecarProcess(tmp_path_factory.mktemp("txn") / "data", OVERRIDES).start()
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.stop()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(timeout=30)

    def ready() -> bool:
        md = admin.list_topics(name, timeout=5).topics.get(name)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(ready, 20, message=f"topic {name}")


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **QUIET, **extra})
    p.init_transactions(30)
    return p


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int, settle: float = 1.0,
            timeout: float = 20.0) -> list[bytes]:
    """Values read from the start of every partition (in partition order), until ``expect`` were
    read and nothing more came for ``settle`` seconds, or ``timeout``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}", "isolation.level": isolation,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", **QUIET})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.setdefault(m.partition(), []).append(m.value())
                last = time.monotonic()
            elif sum(map(len, got.values())) >= expect and time.monotonic() - last >= settle:
                break
    finally:
        c.close()
    return [v for p in sorted(got) for v in got[p]]


# ---- commit, abort, read_committed ---------------------------------------------------------


def test_commit_and_abort(server: SidecarProcess) -> None:
    topic = _topic("txn-basic")
    create_topic(server.bootstrap, topic)
    p = txn_producer(server.bootstrap, _topic("tx-basic"))
    p.begin_transaction()
    p.produce(topic, b"c0", partition=0)
    p.produce(topic, b"c1", partition=1)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"a0", partition=0)
    p.produce(topic, b"a1", partition=1)
    p.flush(10)  # sent, so the partitions hold the aborted records
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"d0", partition=0)
    p.commit_transaction(30)
    assert consume(server.bootstrap, topic, 2, "read_committed", 3) == [b"c0", b"d0", b"c1"]
    assert consume(server.bootstrap, topic, 2, "read_uncommitted", 5) == [b"c0", b"a0", b"d0", b"c1", b"a1"]


def test_ongoing_transaction_hidden_from_read_committed(server: SidecarProcess) -> None:
    topic = _topic("txn-lso")
    create_topic(server.bootstrap, topic, 1)
    p = txn_producer(server.bootstrap, _topic("tx-lso"))
    p.begin_transaction()
    p.produce(topic, b"pending", partition=0)
    p.flush(10)
    assert consume(server.bootstrap, topic, 1, "read_uncommitted", 1) == [b"pending"]
    assert consume(server.bootstrap, topic, 1, "read_committed", 0, settle=1.5, timeout=3) == []
    p.commit_transaction(30)
    assert consume(server.bootstrap, topic, 1, "read_committed", 1) == [b"pending"]


# ---- consume-transform-produce ----------------------------------------------------------------


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)]
    finally:
        c.close()


def test_send_offsets_to_transaction(server: SidecarProcess) -> None:
    src, dst, group = _topic("txn-src"), _topic("txn-dst"), _topic("txn-group")
    create_topic(server.bootstrap, src, 1)
    create_topic(server.bootstrap, dst, 1)
    plain = Producer({"bootstrap.servers": server.bootstrap, **QUIET})
    for i in range(4):
        plain.produce(src, f"in{i}".encode(), partition=0)
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "session.timeout.ms": 6000, **QUIET})
    consumer.subscribe([src])
    p = txn_producer(server.bootstrap, _topic("tx-ctp"))
    try:
        records: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(records) < 4 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                records.append(m.value())
        assert records == [b"in0", b"in1", b"in2", b"in3"]
        # Aborted: the transformed records and the offsets go.
        p.begin_transaction()
        for v in records:
            p.produce(dst, v.upper(), partition=0)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert _committed(server.bootstrap, group, src, 1) == [-1001]
        # Committed: both at once.
        p.begin_transaction()
        for v in records:
            p.produce(dst, v.upper(), partition=0)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert _committed(server.bootstrap, group, src, 1) == [4]
        assert consume(server.bootstrap, dst, 1, "read_committed", 4) == [b"IN0", b"IN1", b"IN2", b"IN3"]
    finally:
        consumer.close()


# ---- fencing, timeout ---------------------------------------------------------------------------


def test_second_producer_fences_the_first(server: SidecarProcess) -> None:
    topic, txn_id = _topic("txn-fence"), _topic("tx-fence")
    create_topic(server.bootstrap, topic, 1)
    first = txn_producer(server.bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    first.flush(10)
    second = txn_producer(server.bootstrap, txn_id)  # aborts the first one's transaction, new epoch
    second.begin_transaction()
    second.produce(topic, b"live", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        first.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal(), err
    assert "fenced" in err.str().lower(), err
    assert consume(server.bootstrap, topic, 1, "read_committed", 1) == [b"live"]


def test_timed_out_transaction_is_aborted(server: SidecarProcess) -> None:
    topic, txn_id = _topic("txn-timeout"), _topic("tx-timeout")
    create_topic(server.bootstrap, topic, 1)
    p = txn_producer(server.bootstrap, txn_id, **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, b"hung", partition=0)
    p.flush(10)
    wait_until(lambda: describe_raw(server.bootstrap, txn_id)["transaction_state"] == "CompleteAbort", 15,
               message="the coordinator aborts the transaction")
    assert consume(server.bootstrap, topic, 1, "read_committed", 0, settle=1.0, timeout=3) == []
    assert consume(server.bootstrap, topic, 1, "read_uncommitted", 1) == [b"hung"]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def group_metadata(bootstrap: str, group: str) -> Any:
    """The group metadata of a consumer that never joins (generation -1: a simple group)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


def stable_offsets(bootstrap: str, group: str, topic: str, partition: int = 1) -> list[tuple[int, int]]:
    """OffsetFetch v8 with require_stable: (offset, error) of one partition."""
    raw = Raw(bootstrap)
    try:
        r = raw(9, 8, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [partition]}]}], "require_stable": True})
        return [(x["committed_offset"], x["error_code"]) for t in r["groups"][0]["topics"] for x in t["partitions"]]
    finally:
        raw.close()


def listed(bootstrap: str) -> dict[str, str]:
    raw = Raw(bootstrap)
    try:
        return {s["transactional_id"]: s["transaction_state"]
                for s in raw(66, 0, {"state_filters": [], "producer_id_filters": []})["transaction_states"]}
    finally:
        raw.close()


def test_transactional_id_expiration(tmp_path: Path) -> None:
    """transactional.id.expiration.ms: an idle id is removed (a tombstone in __transaction_state),
    an ongoing transaction's id is not; the removal survives a restart."""
    s = SidecarProcess(tmp_path / "data", {**OVERRIDES, "transactional.id.expiration.ms": "1500",
                                           "transaction.remove.expired.transaction.cleanup.interval.ms": "200"}).start()
    try:
        topic = _topic("txn-expire")
        create_topic(s.bootstrap, topic, 1)
        idle = txn_producer(s.bootstrap, "tx-idle")
        idle.begin_transaction()
        idle.produce(topic, b"x", partition=0)
        idle.commit_transaction(30)
        busy = txn_producer(s.bootstrap, "tx-busy", **{"transaction.timeout.ms": 600000})
        busy.begin_transaction()
        busy.produce(topic, b"y", partition=0)
        busy.flush(10)
        wait_until(lambda: "tx-idle" not in listed(s.bootstrap), 15, interval=0.2, message="tx-idle expires")
        assert listed(s.bootstrap) == {"tx-busy": "Ongoing"}
        s.stop()
        s.start()
        assert listed(s.bootstrap) == {"tx-busy": "Ongoing"}
    finally:
        s.stop()


# ---- restart ------------------------------------------------------------------------------------------


def test_restart_keeps_transactions(tmp_path: Path) -> None:
    s = SidecarProcess(tmp_path / "data", OVERRIDES).start()
    try:
        topic = _topic("txn-restart")
        create_topic(s.bootstrap, topic, 2)
        done_id, pending_id = _topic("tx-done"), _topic("tx-pending")
        done_group, pending_group = _topic("g-done"), _topic("g-pending")
        p = txn_producer(s.bootstrap, done_id)
        p.begin_transaction()
        p.produce(topic, b"committed", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], group_metadata(s.bootstrap, done_group), 30)
        p.commit_transaction(30)
        q = txn_producer(s.bootstrap, pending_id, **{"transaction.timeout.ms": 600000})
        q.begin_transaction()
        q.produce(topic, b"pending", partition=1)
        q.send_offsets_to_transaction([TopicPartition(topic, 1, 1)], group_metadata(s.bootstrap, pending_group), 30)
        q.flush(10)
        assert stable_offsets(s.bootstrap, pending_group, topic) == [(-1, 88)]  # UNSTABLE_OFFSET_COMMIT
        before = {t: describe_raw(s.bootstrap, t) for t in (done_id, pending_id)}
        assert before[pending_id]["transaction_state"] == "Ongoing"
        s.stop()
        s.start()
        after = {t: describe_raw(s.bootstrap, t) for t in (done_id, pending_id)}
        assert after == before
        # Transactional offsets are replayed: committed ones visible, pending ones still pending.
        assert _committed(s.bootstrap, done_group, topic, 1) == [1]
        assert stable_offsets(s.bootstrap, pending_group, topic) == [(-1, 88)]
        assert stable_offsets(s.bootstrap, done_group, topic, 0) == [(1, 0)]
        assert consume(s.bootstrap, topic, 2, "read_committed", 1) == [b"committed"]
        # The producer id and epoch are kept: a new producer for the id fences on top of them.
        p2 = txn_producer(s.bootstrap, done_id)
        p2.begin_transaction()
        p2.produce(topic, b"again", partition=0)
        p2.flush(10)
        now = describe_raw(s.bootstrap, done_id)
        assert (now["producer_id"], now["producer_epoch"]) == (before[done_id]["producer_id"], before[done_id]["producer_epoch"] + 1)
        p2.commit_transaction(30)
        assert consume(s.bootstrap, topic, 2, "read_committed", 2) == [b"committed", b"again"]
    finally:
        s.stop()


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_java_transactional_producer(server: SidecarProcess, tmp_path: Path) -> None:
    """Kafka 4.1's Java producer (kafka-producer-perf-test.sh, a transaction every 100 ms): with no
    transaction.version feature finalized by us it runs the classic protocol (AddPartitionsToTxn, EndTxn v4)."""
    topic = _topic("txn-java")
    create_topic(server.bootstrap, topic, 2)
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp_path)}
    r = subprocess.run([str(home / "bin" / "kafka-producer-perf-test.sh"), "--topic", topic, "--num-records", "2000",
                        "--record-size", "100", "--throughput", "2000", "--transactional-id", _topic("tx-java"),
                        "--transaction-duration-ms", "100", "--producer-props", f"bootstrap.servers={server.bootstrap}"],
                       capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "2000 records sent" in r.stdout
    assert len(consume(server.bootstrap, topic, 2, "read_committed", 2000)) == 2000


# ---- raw requests --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    import dataclasses
    import datetime

    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and type(value).__name__ == "ErrorCode":
        return value.value
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return value


class Raw:
    def __init__(self, bootstrap: str) -> None:
        self.conn = _BrokerConnection(*parse_bootstrap(bootstrap), "txn-test", 15.0)

    def __call__(self, api_key: int, version: int, data: dict[str, Any]) -> dict[str, Any]:
        _, body = self.conn._send(api_key, version, data)
        return _plain(body)

    def close(self) -> None:
        self.conn.close()


def describe_raw(bootstrap: str, txn_id: str) -> dict[str, Any]:
    raw = Raw(bootstrap)
    try:
        return raw(65, 0, {"transactional_ids": [txn_id]})["transaction_states"][0]
    finally:
        raw.close()


def _find_coordinator(raw: Raw, key: str, key_type: int = 1) -> None:
    deadline = time.monotonic() + 30
    while True:
        r = raw(10, 4, {"key_type": key_type, "coordinator_keys": [key]})["coordinators"][0]
        if r["error_code"] == 0:
            return
        assert r["error_code"] in (14, 15), r
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def error_paths(bootstrap: str) -> list[Any]:
    """Requests a client would not send in this order, and Kafka's answers (error codes)."""
    topic, txn_id, group = _topic("txn-raw"), _topic("tx-raw"), _topic("g-raw")
    create_topic(bootstrap, topic, 1)
    raw = Raw(bootstrap)
    out: list[Any] = []
    try:
        _find_coordinator(raw, txn_id)
        _find_coordinator(raw, group, 0)
        # The group coordinator is ready when OffsetFetch stops answering NOT_COORDINATOR/loading.
        wait_until(lambda: raw(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})["groups"][0]["error_code"]
                   not in (14, 15, 16), 30, interval=0.2, message="group coordinator")
        out.append(("timeout above max", raw(22, 4, {"transactional_id": txn_id, "transaction_timeout": 900001})["error_code"]))

        def init(version: int = 4, **kw: Any) -> dict[str, Any]:
            deadline = time.monotonic() + 30
            while True:
                r = raw(22, version, {"transactional_id": txn_id, "transaction_timeout": 60000, **kw})
                if r["error_code"] not in (14, 15, 51) or time.monotonic() > deadline:
                    return r
                time.sleep(0.1)

        r = init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        out.append(("init", r["error_code"], epoch))

        def produce_txn(version: int) -> tuple[int, Any]:
            """A transactional batch for a partition not added to the transaction (KIP-890 verification)."""
            batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")], producer_id=pid, producer_epoch=epoch,
                                 base_sequence=0, is_transactional=True)
            r = raw(0, version, {"transactional_id": txn_id, "acks": -1, "timeout": 5000,
                                 "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            p = r["responses"][0]["partition_responses"][0]
            return p["error_code"], p["error_message"]

        out.append(("produce before add v9", produce_txn(9)))
        out.append(("produce before add v11", produce_txn(11)))

        def add(version: int, partitions: list[tuple[str, int]], e: int | None = None, p: int | None = None) -> Any:
            topics: dict[str, list[int]] = {}
            for t, n in partitions:
                topics.setdefault(t, []).append(n)
            r = raw(24, version, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid if p is None else p,
                                  "v3_and_below_producer_epoch": epoch if e is None else e,
                                  "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
            return sorted((t["name"].replace(topic, "<t>"), x["partition_index"], x["partition_error_code"])
                          for t in r["results_by_topic_v3_and_below"] for x in t["results_by_partition"])

        def end(version: int, commit: bool, e: int | None = None, p: int | None = None) -> int:
            return raw(26, version, {"transactional_id": txn_id, "producer_id": pid if p is None else p,
                                     "producer_epoch": epoch if e is None else e, "committed": commit})["error_code"]

        out.append(("end in Empty", end(3, True)))
        out.append(("add unknown", add(3, [(topic, 0), (topic, 7), ("txn-no-such-topic", 0)])))
        out.append(("add internal topic", add(3, [(topic, 0), ("__consumer_offsets", 0)])))
        out.append(("add wrong pid", add(3, [(topic, 0)], p=pid + 1000)))
        out.append(("add old epoch v1", add(1, [(topic, 0)], e=epoch - 1)))
        out.append(("add old epoch v3", add(3, [(topic, 0)], e=epoch - 1)))
        out.append(("add", add(3, [(topic, 0)])))
        out.append(("add again", add(3, [(topic, 0)])))

        def verify(partitions: list[tuple[str, int]], e: int | None = None) -> Any:
            r = raw(24, 5, {"transactions": [{"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch if e is None else e,
                                              "verify_only": True, "topics": [{"name": t, "partitions": [n]} for t, n in partitions]}]})
            return r["error_code"], sorted((t["name"].replace(topic, "<t>"), x["partition_index"], x["partition_error_code"])
                                           for res in r["results_by_transaction"] for t in res["topic_results"] for x in t["results_by_partition"])

        out.append(("verify v5", verify([(topic, 0)])))
        out.append(("verify v5 other partition", verify([("__consumer_offsets", 0)])))
        out.append(("verify v5 old epoch", verify([(topic, 0)], epoch - 1)))
        out.append(("offsets", raw(25, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": group})["error_code"]))
        r = raw(28, 3, {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                        "generation_id": -1, "member_id": "", "group_instance_id": None,
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        out.append(("txn offset commit", [x["error_code"] for t in r["topics"] for x in t["partitions"]]))
        r = raw(28, 3, {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                        "generation_id": 5, "member_id": "nobody", "group_instance_id": None,
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]},
                                   {"name": "txn-no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        out.append(("txn offset commit bad member", sorted((t["name"].replace(topic, "<t>"), x["error_code"]) for t in r["topics"] for x in t["partitions"])))

        def fetch(stable: bool) -> list[Any]:
            r = raw(9, 8, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": stable})
            g = r["groups"][0]
            return [g["error_code"], [(x["committed_offset"], x["error_code"]) for t in g["topics"] for x in t["partitions"]]]

        out.append(("fetch stable pending", fetch(True)))
        out.append(("fetch unstable pending", fetch(False)))
        out.append(("end old epoch v1", end(1, True, e=epoch - 1)))
        out.append(("end old epoch v3", end(3, True, e=epoch - 1)))
        out.append(("commit", end(3, True)))

        def state() -> str:
            states = raw(66, 0, {"state_filters": [], "producer_id_filters": [pid]})["transaction_states"]
            return next(s["transaction_state"] for s in states if s["transactional_id"] == txn_id)

        # Kafka answers EndTxn once PrepareCommit is written and completes it asynchronously.
        wait_until(lambda: state() == "CompleteCommit", 30, interval=0.1, message="CompleteCommit")
        out.append(("fetch stable committed", fetch(True)))
        out.append(("commit again", end(3, True)))
        out.append(("abort after commit", end(3, False)))
        out.append(("list", [(s["transaction_state"], s["producer_id"] == pid) for s in raw(66, 1, {
            "state_filters": ["CompleteCommit", "Bogus"], "producer_id_filters": [pid], "duration_filter": -1})["transaction_states"]]))
        out.append(("list unknown", raw(66, 0, {"state_filters": ["Bogus"], "producer_id_filters": []})["unknown_state_filters"]))
        d = raw(65, 0, {"transactional_ids": [txn_id, "no-such-" + txn_id]})["transaction_states"]
        out.append(("describe", [(s["error_code"], s["transaction_state"], s["producer_epoch"] - epoch if s["error_code"] == 0 else s["producer_epoch"],
                                  s["transaction_timeout"], [t["topic"] for t in s["topics"]],
                                  s["transaction_start_time"] if s["error_code"] else None, s["producer_id"] if s["error_code"] else None)
                                 for s in d]))
        # A new producer for the id: epoch + 1; the old epoch is fenced (PRODUCER_FENCED from v4 of InitProducerId on).
        r = init(4)
        out.append(("re-init", r["error_code"], r["producer_epoch"] - epoch, r["producer_id"] == pid))
        out.append(("init with stale epoch v4", init(4, producer_id=pid, producer_epoch=epoch - 5)["error_code"]))
        out.append(("init with stale epoch v3", init(3, producer_id=pid, producer_epoch=epoch - 5)["error_code"]))
        out.append(("add fenced", add(3, [(topic, 0)])))
        # Ongoing, then a new producer: the transaction is aborted first (CONCURRENT_TRANSACTIONS until it is).
        epoch = r["producer_epoch"]
        out.append(("add", add(3, [(topic, 0)])))
        first = raw(22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000})
        out.append(("init during ongoing", first["error_code"]))
        wait_until(lambda: state() == "CompleteAbort", 30, interval=0.1, message="CompleteAbort")
        r = init(4)
        out.append(("init after abort", r["error_code"], r["producer_epoch"] - epoch))
        out.append(("list after fence", [s["transaction_state"] for s in raw(66, 0, {"state_filters": [], "producer_id_filters": [pid]})["transaction_states"]
                                         if s["transactional_id"] == txn_id]))
    finally:
        raw.close()
    return out


def test_error_paths(server: SidecarProcess) -> None:
    out = dict((x[0], x[1:]) for x in error_paths(server.bootstrap))
    assert out["timeout above max"] == (50,)  # INVALID_TRANSACTION_TIMEOUT
    assert out["init"] == (0, 0)
    # Produce before AddPartitionsToTxn: the coordinator's verification refuses it, in the error
    # the request version knows (INVALID_TXN_STATE before v11, TRANSACTION_ABORTABLE from v11).
    assert out["produce before add v9"] == ((48, "Partition was not added to the transaction"),)
    assert out["produce before add v11"] == ((120, None),)
    assert out["end in Empty"] == (48,)  # INVALID_TXN_STATE
    # UNKNOWN_TOPIC_OR_PARTITION for the missing ones, OPERATION_NOT_ATTEMPTED for the rest
    assert out["add unknown"] == ([("<t>", 0, 55), ("<t>", 7, 3), ("txn-no-such-topic", 0, 3)],)
    assert out["add internal topic"] == ([("<t>", 0, 55), ("__consumer_offsets", 0, 29)],)
    assert out["add wrong pid"] == ([("<t>", 0, 49)],)  # INVALID_PRODUCER_ID_MAPPING
    assert out["add old epoch v1"] == ([("<t>", 0, 47)],)  # INVALID_PRODUCER_EPOCH before v2
    assert out["add old epoch v3"] == ([("<t>", 0, 90)],)  # PRODUCER_FENCED
    assert out["txn offset commit"] == ([0],)
    assert out["fetch stable pending"] == ([0, [(-1, 88)]],)  # UNSTABLE_OFFSET_COMMIT
    assert out["fetch stable committed"] == ([0, [(0, 0)]],)
    assert out["commit again"] == (0,)
    assert out["abort after commit"] == (48,)


# ---- authorization ------------------------------------------------------------------------------------------

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def test_authorization(tmp_path: Path) -> None:
    """KafkaApis' checks: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    WRITE on each topic for AddPartitionsToTxn (TOPIC_AUTHORIZATION_FAILED, the others
    OPERATION_NOT_ATTEMPTED), READ on the group for AddOffsetsToTxn/TxnOffsetCommit
    (GROUP_AUTHORIZATION_FAILED), DESCRIBE for FindCoordinator, DescribeTransactions and ListTransactions."""
    topic, other = "txn-acl-topic", "txn-acl-other"
    data = tmp_path / "data"
    s = SidecarProcess(data, {**OVERRIDES, "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}).start()
    try:
        create_topic(s.bootstrap, topic, 1)
        create_topic(s.bootstrap, other, 1)
        raw = Raw(s.bootstrap)
        grants = [(5, "tx-ok", 4), (5, "tx-ok", 8), (2, topic, 4), (2, topic, 8), (2, topic, 3)]
        r = raw(30, 3, {"creations": [{"resource_type": rt, "resource_name": name, "resource_pattern_type": 3, "principal": "User:ANONYMOUS",
                                       "host": "*", "operation": op, "permission_type": 3} for rt, name, op in grants]})
        assert [x["error_code"] for x in r["results"]] == [0] * len(grants)
        raw.close()
        s.stop()
        s.overrides.pop("super.users")
        s.start()
        raw = Raw(s.bootstrap)
        try:
            assert raw(10, 4, {"key_type": 1, "coordinator_keys": ["tx-no"]})["coordinators"][0]["error_code"] == 53
            _find_coordinator(raw, "tx-ok")
            assert raw(22, 4, {"transactional_id": "tx-no", "transaction_timeout": 60000})["error_code"] == 53
            r = raw(22, 4, {"transactional_id": "tx-ok", "transaction_timeout": 60000})
            assert r["error_code"] == 0
            pid, epoch = r["producer_id"], r["producer_epoch"]
            r = raw(24, 3, {"v3_and_below_transactional_id": "tx-ok", "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
                            "v3_and_below_topics": [{"name": topic, "partitions": [0]}, {"name": other, "partitions": [0]}]})
            assert sorted((t["name"], x["partition_error_code"]) for t in r["results_by_topic_v3_and_below"] for x in t["results_by_partition"]) == [
                (other, 29), (topic, 55)]
            r = raw(24, 3, {"v3_and_below_transactional_id": "tx-no", "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
                            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
            assert [x["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for x in t["results_by_partition"]] == [53]
            assert raw(25, 3, {"transactional_id": "tx-ok", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"})["error_code"] == 30
            assert raw(25, 3, {"transactional_id": "tx-no", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"})["error_code"] == 53
            offsets = [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}]
            for txn_id, code in (("tx-ok", 30), ("tx-no", 53)):
                r = raw(28, 3, {"transactional_id": txn_id, "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                                "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": offsets})
                assert [x["error_code"] for t in r["topics"] for x in t["partitions"]] == [code]
            assert raw(26, 3, {"transactional_id": "tx-no", "producer_id": pid, "producer_epoch": epoch, "committed": True})["error_code"] == 53
            assert raw(26, 3, {"transactional_id": "tx-ok", "producer_id": pid, "producer_epoch": epoch, "committed": True})["error_code"] == 48
            r = raw(65, 0, {"transactional_ids": ["tx-no"]})["transaction_states"]
            assert [(x["transactional_id"], x["error_code"]) for x in r] == [("tx-no", 53)]
            r = raw(66, 0, {"state_filters": [], "producer_id_filters": []})
            assert [x["transactional_id"] for x in r["transaction_states"]] == ["tx-ok"]
        finally:
            raw.close()
    finally:
        s.stop()


# ---- against the reference broker -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference() -> Iterator[ReferenceKafka]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    kafka = ReferenceKafka(heap_opts="-Xmx512m", start_timeout=150)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def test_error_paths_like_reference(server: SidecarProcess, reference: ReferenceKafka) -> None:
    assert error_paths(server.bootstrap) == error_paths(reference.bootstrap)


def _kafka_transactions(bootstrap: str, *args: str) -> tuple[int, str, str]:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(Path(os.environ.get("TMPDIR", "/tmp")))}
    r = subprocess.run([str(home / "bin" / "kafka-transactions.sh"), "--bootstrap-server", bootstrap, *args],
                       capture_output=True, text=True, env=env, timeout=120)
    return r.returncode, r.stdout, r.stderr


def tools_scenario(bootstrap: str, suffix: str) -> list[tuple[int, str, str]]:
    """The same names on both brokers (the tool prints a HashSet of partitions: its order
    follows the topic name's hash)."""
    import re

    topic, txn_id = f"txn-tool-{suffix}", f"tx-tool-{suffix}"
    create_topic(bootstrap, topic, 2)
    p = txn_producer(bootstrap, txn_id, **{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    p.produce(topic, b"x", partition=0)
    p.produce(topic, b"y", partition=1)
    p.flush(10)
    runs = [_kafka_transactions(bootstrap, "describe", "--transactional-id", txn_id),
            _kafka_transactions(bootstrap, "describe", "--transactional-id", "no-such-" + txn_id)]
    p.commit_transaction(30)
    runs += [_kafka_transactions(bootstrap, "describe", "--transactional-id", txn_id)]
    listed = _kafka_transactions(bootstrap, "list")
    # Other tests' transactional ids differ between the brokers: keep the header and this id's line.
    lines = listed[1].splitlines()
    runs.append((listed[0], "\n".join(lines[:1] + [x for x in lines if x.startswith(txn_id)]), listed[2]))

    def norm(text: str) -> str:
        text = text.replace(txn_id, "<id>").replace(topic, "<topic>")
        text = re.sub(r"\t\d{13}\s*\t\d+\s*\t", "\t<start>\t<duration>\t", text)
        text = re.sub(r"[ ]+\t", "\t", text)
        return re.sub(r"^(1\t<id>|<id>\t1)\t\d+\t", r"\1\t<pid>\t", text, flags=re.M)

    return [(rc, norm(out), norm(err)) for rc, out, err in runs]


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_kafka_transactions_tool(server: SidecarProcess) -> None:
    ours = tools_scenario(server.bootstrap, uuid.uuid4().hex[:8])
    assert ours[0][0] == 0 and "\tOngoing\t" in ours[0][1] and "<topic>-0" in ours[0][1] and "<topic>-1" in ours[0][1], ours[0]
    assert ours[1][0] == 1 and "could not be found" in ours[1][2], ours[1]
    assert ours[2][0] == 0 and "\tCompleteCommit\t" in ours[2][1], ours[2]
    assert ours[3][0] == 0 and "<id>\t1\t<pid>\t" in ours[3][1] and "\tCompleteCommit" in ours[3][1], ours[3]


def test_kafka_transactions_tool_like_reference(server: SidecarProcess, reference: ReferenceKafka) -> None:
    suffix = uuid.uuid4().hex[:8]
    assert tools_scenario(server.bootstrap, suffix) == tools_scenario(reference.bootstrap, suffix)
