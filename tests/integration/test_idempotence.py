"""The idempotent producer against a running kafka-sidecar.

- confluent-kafka (``enable.idempotence=true``), kafka-python (idempotent by default) and
  aiokafka (``enable_idempotence=True``) produce a few thousand records each: exact offsets,
  every batch carries the producer id and gapless sequences, no record twice;
- a retried batch -- the same Produce request bytes sent again on a raw socket -- is
  answered with the first answer's base offset and written once; also after a clean
  restart and after kill -9 (state from the snapshots and the log);
- a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45), a stale epoch INVALID_PRODUCER_EPOCH
  (47); InitProducerId ids are distinct and increase across restarts.

Expected answers were checked against Apache Kafka 4.1.0.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import re
import shutil
import subprocess
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kafka import KafkaProducer
from kafka_sidecar.protocol.records import Record, RecordBatch, decode_batches, encode_batch
from kio.schema.init_producer_id.v4 import request as init_producer_id
from kio.schema.produce.v9 import response as produce_response

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    create_topic,
    fetch_once,
    list_offset,
    partition_results,
    produce_request,
)
from tests.integration.test_python_clients import (
    Rec,
    by_partition,
    ck_produce,
    expected_offsets,
    fresh_base_ts,
    make_records,
)
from tests.support import SidecarProcess, kafka_bin

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
PRODUCE = 0
PARTITIONS = 3
N = 3000
DEADLINE_S = 20.0
DUMP_LOG = kafka_bin("kafka-dump-log.sh")


# --------------------------------------------------------------------------- raw helpers


def init_pid(client: RawClient, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
    """InitProducerId v4 without a transactional id: (producer id, epoch)."""
    resp = client.request(init_producer_id.InitProducerIdRequest(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=producer_id, producer_epoch=producer_epoch,
    ))
    assert resp.error_code == NONE, resp.error_code
    return int(resp.producer_id), int(resp.producer_epoch)


def idem(pid: int, epoch: int, seq: int, n: int = 3, tag: str = "r") -> bytes:
    """A client batch of ``n`` records, sequences ``seq``..``seq+n-1``, values naming them."""
    ts = int(time.time() * 1000)
    return encode_batch(
        [Record(i, ts + i, b"k%d" % i, f"{tag}-{pid}-{epoch}-{seq + i}".encode()) for i in range(n)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


_CORRELATION = iter(range(1000, 10**9))


def produce_frame(client: RawClient, topic: str, batch: bytes, partition: int = 0) -> bytes:
    """The exact bytes of one Produce v9 request (acks=all), to send as often as wanted."""
    return client.encode(produce_request(topic, {partition: batch}), next(_CORRELATION))


def send_frame(client: RawClient, frame: bytes) -> Any:
    """Send ``frame``; the partition response of its answer."""
    client.send_raw(frame)
    return answer(client, frame)


def answer(client: RawClient, frame: bytes) -> Any:
    raw = client.recv_frame()
    assert raw is not None, "the server closed the connection instead of answering Produce"
    correlation_id, resp = RawClient.decode(raw, PRODUCE, produce_response.ProduceResponse.__version__)
    assert correlation_id == int.from_bytes(frame[8:12], "big")
    (result,) = partition_results(resp).values()
    return result


def code_and_offset(result: Any) -> tuple[int, int]:
    return int(result.error_code), int(result.base_offset)


def fetch_batches(client: RawClient, topic: str, partition: int) -> list[RecordBatch]:
    """Every batch from offset 0 to the high watermark (CRC-checked)."""
    out: list[RecordBatch] = []
    offset = 0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        p, raw = fetch_once(client, topic, partition, offset)
        assert p.error_code == NONE, (topic, partition, offset, p.error_code)
        for b in decode_batches(raw, verify_crc=True):
            if b.next_offset > offset:
                out.append(b)
                offset = b.next_offset
        if offset >= p.high_watermark:
            return out
        assert time.monotonic() < deadline, f"fetching {topic}-{partition} stalled at {offset}"


def values(client: RawClient, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for b in fetch_batches(client, topic, partition) for r in b.records]


def check_idempotent_log(port: int, topic: str, want: list[Rec], partitions: int = PARTITIONS) -> None:
    """Every partition holds exactly ``want`` (offsets 0..n-1, keys/values in order) in
    batches of one idempotent producer, with gapless sequences from 0."""
    client = RawClient(port, client_id="idempotence-check")
    try:
        want_p = by_partition(want)
        pids = set()
        for p in range(partitions):
            batches = fetch_batches(client, topic, p)
            records = [r for b in batches for r in b.records]
            assert [r.offset for r in records] == list(range(len(want_p.get(p, [])))), f"partition {p}: offsets"
            assert [(r.key, r.value) for r in records] == [(w.key, w.value) for w in want_p.get(p, [])], f"partition {p}: records"
            next_seq: dict[tuple[int, int], int] = defaultdict(int)
            for b in batches:
                assert b.producer_id >= 0 and b.producer_epoch >= 0, f"partition {p}: batch at {b.base_offset} is not idempotent"
                key = (b.producer_id, b.producer_epoch)
                assert b.base_sequence == next_seq[key], f"partition {p}: batch at {b.base_offset} has sequence {b.base_sequence}, want {next_seq[key]}"
                next_seq[key] = b.base_sequence + b.last_offset_delta + 1
                pids.add(b.producer_id)
        assert len(pids) == 1, f"one producer id expected, got {sorted(pids)}"
    finally:
        client.close()


def partition_dir(server: SidecarProcess, topic: str, partition: int = 0):
    return server.data_dir / f"{topic}-{partition}"


def new_topic(port: int, partitions: int = 1) -> str:
    name = f"idem-{uuid.uuid4().hex[:10]}"
    create_topic(port, name, partitions=partitions)
    return name


# =========================================================================== real clients


def test_confluent_kafka_idempotent_producer(sidecar, topic_name):
    create_topic(sidecar.port, topic_name, partitions=PARTITIONS)
    records = make_records(N, fresh_base_ts(), null_header_values=True)
    want = expected_offsets(records)
    reports = ck_produce(sidecar.bootstrap, topic_name, records, "lz4", **{"enable.idempotence": True, "max.in.flight.requests.per.connection": 5})
    assert [(p, o) for p, o, _, _ in reports] == [(r.partition, r.offset) for r in want]
    check_idempotent_log(sidecar.port, topic_name, want)


def test_kafka_python_idempotent_producer(sidecar, topic_name):
    create_topic(sidecar.port, topic_name, partitions=PARTITIONS)
    records = make_records(N, fresh_base_ts())
    want = expected_offsets(records)
    # kafka-python 3 is idempotent by default (acks=all, retries): nothing to set.
    producer = KafkaProducer(bootstrap_servers=sidecar.bootstrap, linger_ms=5, request_timeout_ms=10_000, compression_type="gzip")
    try:
        futures = [
            producer.send(topic_name, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition, timestamp_ms=r.timestamp)
            for r in records
        ]
        producer.flush(timeout=DEADLINE_S)
        metas = [f.get(timeout=DEADLINE_S) for f in futures]
    finally:
        producer.close(timeout=5)
    assert [(m.partition, m.offset) for m in metas] == [(r.partition, r.offset) for r in want]
    check_idempotent_log(sidecar.port, topic_name, want)


async def test_aiokafka_idempotent_producer(sidecar, topic_name):
    create_topic(sidecar.port, topic_name, partitions=PARTITIONS)
    records = make_records(N, fresh_base_ts())
    want = expected_offsets(records)
    producer = AIOKafkaProducer(bootstrap_servers=sidecar.bootstrap, enable_idempotence=True, linger_ms=5, request_timeout_ms=10_000, compression_type="snappy")

    def stuck(what: str) -> None:
        errors = [line for line in sidecar.log_text().splitlines() if "Error" in line or "ERROR" in line]
        pytest.fail(f"aiokafka's idempotent producer: {what} did not complete in {DEADLINE_S}s; last server errors: {errors[-3:]}")

    # Bounded: aiokafka retries InitProducerId (v0) for ever if the broker never answers it.
    try:
        await asyncio.wait_for(producer.start(), DEADLINE_S)
    except TimeoutError:
        await asyncio.wait_for(producer.stop(), 10)
        stuck("start()")

    async def produce_all() -> list[Any]:
        futures = [
            await producer.send(topic_name, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition, timestamp_ms=r.timestamp)
            for r in records
        ]
        return await asyncio.gather(*futures)

    ok = False
    try:
        try:
            metas = await asyncio.wait_for(produce_all(), DEADLINE_S)
        except TimeoutError:
            stuck("delivery")
        ok = True
    finally:
        try:
            await asyncio.wait_for(producer.stop(), 10)
        except TimeoutError:
            if ok:
                raise
    assert [(m.partition, m.offset) for m in metas] == [(r.partition, r.offset) for r in want]
    check_idempotent_log(sidecar.port, topic_name, want)


# =========================================================================== retried requests


def test_replayed_produce_request_is_answered_with_its_offset_and_written_once(sidecar):
    topic = new_topic(sidecar.port)
    client = RawClient(sidecar.port, client_id="idem-producer")
    other = RawClient(sidecar.port, client_id="idem-producer-2")
    try:
        pid, epoch = init_pid(client)
        frames = [produce_frame(client, topic, idem(pid, epoch, 3 * i)) for i in range(4)]
        assert code_and_offset(send_frame(client, frames[0])) == (NONE, 0)
        assert code_and_offset(send_frame(client, frames[0])) == (NONE, 0)
        assert code_and_offset(send_frame(client, frames[1])) == (NONE, 3)
        assert code_and_offset(send_frame(client, frames[0])) == (NONE, 0)
        assert code_and_offset(send_frame(client, frames[2])) == (NONE, 6)
        # A retry pipelined right behind the original (the client timed out and resent).
        client.send_raw(frames[3] + frames[3])
        assert [code_and_offset(answer(client, frames[3])) for _ in range(2)] == [(NONE, 9), (NONE, 9)]
        # The same bytes on another connection (a producer that reconnected).
        assert [code_and_offset(send_frame(other, f)) for f in frames] == [(NONE, 0), (NONE, 3), (NONE, 6), (NONE, 9)]
        assert list_offset(other, topic, 0) == 12
        want = [(3 * i + j, f"r-{pid}-{epoch}-{3 * i + j}".encode()) for i in range(4) for j in range(3)]
        assert values(other, topic) == want
    finally:
        client.close()
        other.close()


def test_sequence_gap_is_out_of_order_sequence_number(sidecar):
    topic = new_topic(sidecar.port)
    client = RawClient(sidecar.port)
    try:
        pid, epoch = init_pid(client)
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 0)))) == (NONE, 0)
        result = send_frame(client, produce_frame(client, topic, idem(pid, epoch, 5)))
        assert code_and_offset(result) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        # Overlapping the last batch without being it: out of order too.
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 1)))) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert list_offset(client, topic, 0) == 3
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 3)))) == (NONE, 3)
        assert [v for _, v in values(client, topic)] == [f"r-{pid}-{epoch}-{s}".encode() for s in range(6)]
    finally:
        client.close()


def test_stale_epoch_is_invalid_producer_epoch(sidecar):
    topic = new_topic(sidecar.port)
    client = RawClient(sidecar.port)
    try:
        pid, epoch = init_pid(client)
        first = produce_frame(client, topic, idem(pid, epoch, 0))
        assert code_and_offset(send_frame(client, first)) == (NONE, 0)
        # The producer bumps its epoch (KIP-360: Kafka's idempotent producer does it itself
        # after an unresolved sequence) and starts again at sequence 0.
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch + 1, 0)))) == (NONE, 3)
        # Anything still coming from the old epoch is fenced, a retry of an old batch included.
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 3)))) == (INVALID_PRODUCER_EPOCH, -1)
        assert code_and_offset(send_frame(client, first)) == (INVALID_PRODUCER_EPOCH, -1)
        # A newer epoch must start at sequence 0.
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch + 2, 3)))) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert list_offset(client, topic, 0) == 6
    finally:
        client.close()


def test_unknown_producer_id_is_accepted_at_any_sequence(sidecar):
    # Kafka 4 (before transactions v2): a producer with no state in the partition starts anywhere.
    topic = new_topic(sidecar.port)
    client = RawClient(sidecar.port)
    try:
        pid, epoch = init_pid(client)
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 42)))) == (NONE, 0)
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 45)))) == (NONE, 3)
    finally:
        client.close()


# =========================================================================== restarts


def test_dedup_survives_a_clean_restart(sidecar_factory):
    server = sidecar_factory()
    topic = new_topic(server.port)
    client = RawClient(server.port, client_id="idem-restart")
    pid, epoch = init_pid(client)
    frames = [produce_frame(client, topic, idem(pid, epoch, 3 * i)) for i in range(4)]
    assert [code_and_offset(send_frame(client, f)) for f in frames] == [(NONE, 0), (NONE, 3), (NONE, 6), (NONE, 9)]
    client.close()
    server.stop()
    # Kafka's snapshot at the log end, written on clean shutdown.
    assert (partition_dir(server, topic) / f"{12:020d}.snapshot").exists()
    server.start()
    client = RawClient(server.port, client_id="idem-restart")
    try:
        assert code_and_offset(send_frame(client, frames[3])) == (NONE, 9)
        # The snapshot keeps each producer's last batch only: an older retry is out of order
        # (Kafka 4.1 answers the same after a restart).
        assert code_and_offset(send_frame(client, frames[2])) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert list_offset(client, topic, 0) == 12
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 12)))) == (NONE, 12)
        assert [v for _, v in values(client, topic)] == [f"r-{pid}-{epoch}-{s}".encode() for s in range(15)]
        # Ids handed out before the restart are never handed out again.
        assert init_pid(client)[0] > pid
    finally:
        client.close()


def _retry_all(client: RawClient, frames: list[bytes], offsets: list[int]) -> None:
    """Replay every frame, newest first: the newest is a duplicate; no older one may be
    written again (a duplicate answer with its offset, or 45 as Kafka 4.1 answers after a
    kill -9, where it remembers only each producer's last batch)."""
    assert code_and_offset(send_frame(client, frames[-1])) == (NONE, offsets[-1])
    for f, off in reversed(list(zip(frames[:-1], offsets[:-1], strict=True))):
        assert code_and_offset(send_frame(client, f)) in ((NONE, off), (OUT_OF_ORDER_SEQUENCE_NUMBER, -1))


def test_dedup_survives_kill_9(sidecar_factory):
    server = sidecar_factory()
    x = new_topic(server.port)
    client = RawClient(server.port, client_id="idem-kill")
    pid, epoch = init_pid(client)
    xs = [produce_frame(client, x, idem(pid, epoch, 3 * i)) for i in range(3)]
    assert [code_and_offset(send_frame(client, f)) for f in xs] == [(NONE, 0), (NONE, 3), (NONE, 6)]
    client.close()
    server.stop()  # a snapshot at 9 for x
    server.start()
    client = RawClient(server.port, client_id="idem-kill")
    xs += [produce_frame(client, x, idem(pid, epoch, 3 * i)) for i in (3, 4)]
    assert [code_and_offset(send_frame(client, f)) for f in xs[3:]] == [(NONE, 9), (NONE, 12)]
    # y: created after the restart, so no snapshot at all: its state comes from the log only.
    y = new_topic(server.port)
    pid2, epoch2 = init_pid(client)
    ys = [produce_frame(client, y, idem(pid2, epoch2, 2 * i, 2)) for i in range(7)]
    assert [code_and_offset(send_frame(client, f)) for f in ys] == [(NONE, 2 * i) for i in range(7)]
    client.close()
    server.kill()
    server.start()
    client = RawClient(server.port, client_id="idem-kill")
    try:
        _retry_all(client, xs, [0, 3, 6, 9, 12])
        _retry_all(client, ys, [2 * i for i in range(7)])
        assert (list_offset(client, x, 0), list_offset(client, y, 0)) == (15, 14)
        # The producers go on where they were.
        assert code_and_offset(send_frame(client, produce_frame(client, x, idem(pid, epoch, 15)))) == (NONE, 15)
        assert code_and_offset(send_frame(client, produce_frame(client, y, idem(pid2, epoch2, 14, 2)))) == (NONE, 14)
        assert [v for _, v in values(client, x)] == [f"r-{pid}-{epoch}-{s}".encode() for s in range(18)]
        assert [v for _, v in values(client, y)] == [f"r-{pid2}-{epoch2}-{s}".encode() for s in range(16)]
        # A gap is still refused: the state is there, not forgotten.
        assert code_and_offset(send_frame(client, produce_frame(client, x, idem(pid, epoch, 30)))) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    finally:
        client.close()


def test_init_producer_id_ids_are_distinct_and_increase_across_restarts(sidecar_factory):
    server = sidecar_factory()
    seen: list[int] = []

    def take(count: int) -> None:
        client = RawClient(server.port)
        try:
            for _ in range(count):
                pid, epoch = init_pid(client)
                assert epoch == 0
                seen.append(pid)
        finally:
            client.close()

    take(5)
    server.stop()
    server.start()
    take(3)
    server.kill()
    server.start()
    take(3)
    assert all(pid >= 0 for pid in seen)
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


@pytest.mark.parametrize("version", range(5))
def test_init_producer_id_every_version(sidecar, version):
    """InitProducerId v0-v4 without a transactional id (aiokafka 0.14 sends v0; producerId
    and producerEpoch exist in the request from v3 on): a new id, epoch 0, each time."""
    schema = importlib.import_module(f"kio.schema.init_producer_id.v{version}.request")
    client = RawClient(sidecar.port, client_id=f"init-pid-v{version}")
    try:
        ids = []
        for _ in range(2):
            resp = client.request(schema.InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60)))
            assert (resp.error_code, resp.producer_epoch) == (NONE, 0)
            ids.append(int(resp.producer_id))
        assert 0 <= ids[0] < ids[1], ids
    finally:
        client.close()


def test_init_producer_id_with_the_current_id_gives_a_new_producer_id(sidecar):
    """Without a transactional id Kafka's coordinator ignores the producer id and epoch sent
    (TransactionCoordinator.handleInitProducerId: "if the transactional id is null, then
    always blindly accept the request and return a new producerId"): Kafka 4.1 answers a
    new, larger id with epoch 0, and the old id's batches are not fenced."""
    client = RawClient(sidecar.port)
    try:
        pid, epoch = init_pid(client)
        new_pid, new_epoch = init_pid(client, pid, epoch)
        assert (new_pid > pid, new_epoch) == (True, 0), (pid, epoch, new_pid, new_epoch)
    finally:
        client.close()


# =========================================================================== Kafka's tools


@pytest.mark.skipif(
    shutil.which("java") is None or not DUMP_LOG.exists(),
    reason=f"needs java on PATH and Kafka's kafka-dump-log.sh at {DUMP_LOG}",
)
def test_kafka_dump_log_reads_the_snapshot_written_at_shutdown(sidecar_factory):
    server = sidecar_factory()
    topic = new_topic(server.port)
    client = RawClient(server.port)
    pid, epoch = init_pid(client)
    for i in range(3):
        assert code_and_offset(send_frame(client, produce_frame(client, topic, idem(pid, epoch, 4 * i, 4)))) == (NONE, 4 * i)
    client.close()
    server.stop()
    d = partition_dir(server, topic)
    name = f"{12:020d}.snapshot"
    proc = subprocess.run([str(DUMP_LOG), "--files", name], cwd=d, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Dumping {name}"
    m = re.fullmatch(
        rf"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        r"lastTimestamp: (\d+) firstSequence: 8 lastSequence: 11 lastOffset: 11 offsetDelta: 3 timestamp: (\d+)",
        lines[1],
    )
    assert m is not None and m.group(1) == m.group(2), proc.stdout
    assert abs(int(m.group(1)) - int(time.time() * 1000)) < 600_000
    assert len(lines) == 2, proc.stdout
