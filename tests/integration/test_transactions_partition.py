"""Transactions, the partition side, over the wire: transactional batches keep the last stable
offset at the first offset of the open transaction; READ_COMMITTED fetches (raw Fetch v12 and
a real client, confluent-kafka with isolation.level=read_committed) get nothing past it, and
an empty (not null) aborted_transactions list; READ_UNCOMMITTED is unchanged (null list).
The LSO survives a clean restart (producer snapshot) and a crash (recovery from the log).
Markers written by the storage API (Log.append_transaction_marker, what the coordinator
calls) while the server is stopped are served after a restart: aborted_transactions lists
them, and a read_committed confluent-kafka consumer skips the aborted records.
Commit/abort over the wire (EndTxn, WriteTxnMarkers) are the transaction coordinator's tests.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig
from kio.schema.fetch.v12 import request as fetch
from kio.schema.list_offsets.v7 import request as list_offsets
from kio.schema.produce.v9 import request as produce

from tests.integration.test_bad_input import NONE, RawClient, create_topic, partition_results
from tests.integration.test_idempotence import init_pid, partition_dir
from tests.support import RECENT_TS

INVALID_RECORD = 87
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
READ_UNCOMMITTED, READ_COMMITTED = 0, 1

# These tests drive the partition side alone: transactional batches from raw producer ids that no
# transaction coordinator knows. Kafka's produce-time check against the coordinator (KIP-890) would
# refuse them (INVALID_PRODUCER_ID_MAPPING); the tests of tests/integration/test_transactions.py
# cover it with real transactions.
NO_VERIFICATION = {"transaction.partition.verification.enable": "false"}


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1, transactional: bool = False, control: bool = False) -> bytes:
    return encode_batch(
        [Record(i, RECENT_TS + i, b"k", v) for i, v in enumerate(values)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional, is_control=control,
    )


def produce_one(client: RawClient, topic: str, records: bytes, transactional_id: str | None = None) -> Any:
    resp = client.request(produce.ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(produce.TopicProduceData(name=topic, partition_data=(produce.PartitionProduceData(index=0, records=records),)),),
    ))
    return partition_results(resp)[0]


def fetch_at(client: RawClient, topic: str, offset: int, isolation: int) -> tuple[Any, list[Any]]:
    resp = client.request(fetch.FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
        session_id=0, session_epoch=-1,
        topics=(fetch.FetchTopic(topic=topic, partitions=(
            fetch.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),
        )),),
        forgotten_topics_data=(),
    ))
    assert resp.error_code == NONE
    (p,) = resp.responses[0].partitions
    assert p.error_code == NONE, p.error_code
    return p, decode_batches(bytes(p.records or b""), verify_crc=True)


def latest(client: RawClient, topic: str, isolation: int) -> int:
    resp = client.request(list_offsets.ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation,
        topics=(list_offsets.ListOffsetsTopic(name=topic, partitions=(list_offsets.ListOffsetsPartition(partition_index=0, timestamp=-1),)),),
    ))
    (p,) = resp.topics[0].partitions
    assert p.error_code == NONE
    return int(p.offset)


def check_open_transaction_view(port: int, topic: str) -> None:
    """Offsets 0-1 plain, 2-3 the open transaction, 4 plain: HW 5, LSO 2."""
    client = RawClient(port, client_id="txn-reader")
    try:
        p, batches = fetch_at(client, topic, 0, READ_UNCOMMITTED)
        assert (p.high_watermark, p.last_stable_offset) == (5, 2)
        assert p.aborted_transactions is None
        assert [r.offset for b in batches for r in b.records] == [0, 1, 2, 3, 4]
        p, batches = fetch_at(client, topic, 0, READ_COMMITTED)
        assert (p.high_watermark, p.last_stable_offset) == (5, 2)
        assert p.aborted_transactions == ()
        assert [r.offset for b in batches for r in b.records] == [0, 1]
        p, batches = fetch_at(client, topic, 2, READ_COMMITTED)
        assert batches == [] and p.last_stable_offset == 2 and p.aborted_transactions == ()
        p, batches = fetch_at(client, topic, 4, READ_COMMITTED)  # past the LSO: nothing either
        assert batches == []
        assert latest(client, topic, READ_COMMITTED) == 2
        assert latest(client, topic, READ_UNCOMMITTED) == 5
    finally:
        client.close()


def _open_transaction(port: int) -> tuple[str, int, int]:
    topic = f"txn-{uuid.uuid4().hex[:10]}"
    create_topic(port, topic)
    client = RawClient(port, client_id="txn-writer")
    try:
        pid, epoch = init_pid(client)
        # Transactional records need a transactional id (KafkaApis), even without an authorizer.
        r = produce_one(client, topic, batch([b"t0"], pid=pid, epoch=epoch, seq=0, transactional=True))
        assert (r.error_code, r.base_offset) == (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
        assert produce_one(client, topic, batch([b"a", b"b"])).base_offset == 0
        r = produce_one(client, topic, batch([b"t1", b"t2"], pid=pid, epoch=epoch, seq=0, transactional=True), "tx-1")
        assert (r.error_code, r.base_offset) == (NONE, 2)
        assert produce_one(client, topic, batch([b"c"])).base_offset == 4
        # Only the broker writes control batches (Kafka's LogValidator): INVALID_RECORD.
        r = produce_one(client, topic, batch([b"fake"], pid=pid, epoch=epoch, seq=2, transactional=True, control=True), "tx-1")
        assert r.error_code == INVALID_RECORD
        # A non-transactional write of the producer during its transaction: INVALID_TXN_STATE.
        r = produce_one(client, topic, batch([b"x"], pid=pid, epoch=epoch, seq=2))
        assert r.error_code == 48
    finally:
        client.close()
    return topic, pid, epoch


def test_read_committed_fetch_stops_at_the_open_transaction(sidecar_factory):
    server = sidecar_factory(NO_VERIFICATION)
    topic, _, _ = _open_transaction(server.port)
    check_open_transaction_view(server.port, topic)
    # The LSO is kept across a clean restart (snapshot with currentTxnFirstOffset) ...
    server.restart()
    check_open_transaction_view(server.port, topic)
    # ... and across a crash (rebuilt from the log).
    server.kill()
    server.start()
    check_open_transaction_view(server.port, topic)


def test_confluent_kafka_read_committed_consumer_sees_only_stable_records(sidecar_factory):
    from confluent_kafka import Consumer, TopicPartition

    server = sidecar_factory(NO_VERIFICATION)
    topic, _, _ = _open_transaction(server.port)

    def consume(isolation: str, want: int) -> list[int]:
        c = Consumer({
            "bootstrap.servers": server.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
        })
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got: list[int] = []
            deadline = time.monotonic() + (15 if want > len(got) else 3)
            while time.monotonic() < deadline and len(got) < want:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.offset())
            if isolation == "read_committed":
                # Nothing more shows up while the transaction is open.
                end = time.monotonic() + 2
                while time.monotonic() < end:
                    m = c.poll(0.3)
                    if m is not None and m.error() is None:
                        got.append(m.offset())
            low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
            assert high == (2 if isolation == "read_committed" else 5)
            return got
        finally:
            c.close()

    assert consume("read_uncommitted", 5) == [0, 1, 2, 3, 4]
    assert consume("read_committed", 2) == [0, 1]


def _consume_all(bootstrap: str, topic: str, isolation: str, want: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(got) < want:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
        end = time.monotonic() + 2  # and nothing more
        while time.monotonic() < end:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
        return got
    finally:
        c.close()


def test_markers_written_by_the_storage_api_are_served_with_aborted_transactions(sidecar_factory):
    server = sidecar_factory(NO_VERIFICATION)
    topic = f"txn-{uuid.uuid4().hex[:10]}"
    create_topic(server.port, topic)
    server.stop()
    lg = Log(partition_dir(server, topic), topic, 0, LogConfig(None, {}))
    seqs = {1000: 0, 1001: 0}

    def send(pid: int, values: list[bytes], transactional: bool = True) -> None:
        data = bytearray(batch(values, pid=pid if transactional else -1, epoch=0 if transactional else -1,
                               seq=seqs[pid] if transactional else -1, transactional=transactional))
        lg.append_as_leader(data, validate_batches(data))
        if transactional:
            seqs[pid] += len(values)

    send(1000, [b"c1", b"c2"])                       # 0-1 committed below
    send(1001, [b"a1"])                              # 2 aborted below
    lg.append_transaction_marker(1000, 0, 0, True)   # 3
    send(1001, [b"a2"])                              # 4
    lg.append_transaction_marker(1001, 0, 0, False)  # 5
    send(1000, [b"plain"], transactional=False)      # 6
    send(1001, [b"open"])                            # 7, left open
    lg.close()
    server.start()
    client = RawClient(server.port, client_id="txn-reader")
    try:
        p, batches = fetch_at(client, topic, 0, READ_COMMITTED)
        assert (p.high_watermark, p.last_stable_offset) == (8, 7)
        assert [(int(t.producer_id), int(t.first_offset)) for t in p.aborted_transactions] == [(1001, 2)]
        assert [b.base_offset for b in batches] == [0, 2, 3, 4, 5, 6]
        p, _ = fetch_at(client, topic, 6, READ_COMMITTED)
        assert p.aborted_transactions == ()  # the abort ended before offset 6
        p, _ = fetch_at(client, topic, 0, READ_UNCOMMITTED)
        assert p.aborted_transactions is None and p.last_stable_offset == 7
    finally:
        client.close()
    assert _consume_all(server.bootstrap, topic, "read_committed", 3) == [(0, b"c1"), (1, b"c2"), (6, b"plain")]
    got = _consume_all(server.bootstrap, topic, "read_uncommitted", 6)
    assert [o for o, _ in got] == [0, 1, 2, 4, 6, 7]
