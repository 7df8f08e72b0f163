"""kafka-python, aiokafka and confluent-kafka (librdkafka) against kafka-sidecar.

Every client produces and consumes a few thousand records over several
partitions, with each codec, and the test checks what Kafka guarantees: offsets
0..n-1 per partition in produce order, keys/values/headers/timestamps exactly as
sent (null and empty keys and values, duplicate header keys, empty header
values), earliest/latest offsets, LogAppendTime topics, and ListOffsets by
timestamp. Consumer groups are not implemented by the broker yet, so consumers
use assign() with explicit start offsets and never commit.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    Producer,
)
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
CREATE_TIME = 0
LOG_APPEND_TIME = 1
DEADLINE_S = 12.0


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Rec:
    """One record as sent, or as read back (offset/timestamp_type filled on read)."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    offset: int = -1
    timestamp_type: int = CREATE_TIME


def make_records(n: int, base_ts: int, *, partitions: int = PARTITIONS, null_header_values: bool = False) -> list[Rec]:
    """``n`` varied records spread over ``partitions`` in runs (explicit partition choice).

    Timestamps are explicit CreateTime values, strictly increasing: base_ts + 7 * i.
    """
    out = []
    for i in range(n):
        partition = (i // 5 + i % 2) % partitions
        key: bytes | None = f"key-{i}".encode()
        value: bytes | None = (f"value-{i}-".encode() * (i % 17)) + bytes(range(i % 256))
        headers: list[tuple[str, bytes | None]] = [("seq", str(i).encode())]
        kind = i % 9
        if kind == 0:
            key = None
        elif kind == 1:
            value = None
        elif kind == 2:
            key, value = b"", b""
        elif kind == 3:
            headers = [("dup", b"first"), ("dup", b"second"), ("empty", b""), ("dup", b"")]
        elif kind == 4:
            headers = []
        elif kind == 5:
            headers = [("ключ-ü", "wert-ü".encode()), ("bin", bytes(range(256)))]
        elif kind == 6 and null_header_values:
            headers = [("null", None), ("dup", None), ("dup", b"x")]
        if i % 997 == 500:
            value = bytes((i * 31 + j) % 251 for j in range(40_000))  # bigger than a default batch
        out.append(Rec(partition, key, value, tuple(headers), base_ts + 7 * i))
    return out


def expected_offsets(records: list[Rec]) -> list[Rec]:
    """The records with the offsets Kafka assigns: 0..n-1 per partition, in produce order."""
    counts: dict[int, int] = defaultdict(int)
    out = []
    for r in records:
        out.append(Rec(r.partition, r.key, r.value, r.headers, r.timestamp, counts[r.partition], r.timestamp_type))
        counts[r.partition] += 1
    return out


def by_partition(records: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def end_offsets_of(records: list[Rec], partitions: int = PARTITIONS) -> dict[int, int]:
    counts = {p: 0 for p in range(partitions)}
    for r in records:
        counts[r.partition] += 1
    return counts


def assert_same_records(got: list[Rec], want: list[Rec]) -> None:
    """Per partition, the exact sequence; a compact diff on mismatch."""
    got_p, want_p = by_partition(got), by_partition(want)
    assert sorted(got_p) == sorted(want_p), f"partitions read {sorted(got_p)} != {sorted(want_p)}"
    for p in sorted(want_p):
        g, w = got_p[p], want_p[p]
        assert [r.offset for r in g] == [r.offset for r in w], f"partition {p}: offsets differ"
        for a, b in zip(g, w, strict=True):
            assert a == b, f"partition {p} offset {b.offset}: got {_short(a)} want {_short(b)}"


def _short(r: Rec) -> str:
    def s(b: bytes | None) -> str:
        return "None" if b is None else repr(b[:40]) + (f"...({len(b)})" if len(b) > 40 else "")

    return f"Rec(p={r.partition}, off={r.offset}, key={s(r.key)}, value={s(r.value)}, headers={r.headers!r:.120}, ts={r.timestamp}, tstype={r.timestamp_type})"


def now_ms() -> int:
    return int(time.time() * 1000)


def fresh_base_ts() -> int:
    """Recent CreateTime base (10 minutes ago), far from retention limits."""
    return now_ms() - 600_000


# --------------------------------------------------------------------------- admin


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    futures[name].result(timeout=10)


# --------------------------------------------------------------------------- kafka-python


@pytest.fixture
def kafka_python_codecs() -> Callable[[str], None]:
    """Check kafka-python can use a codec (python-snappy, lz4, zstandard: dev extras)."""

    def enable(codec: str) -> None:
        if codec in ("none", "gzip"):
            return
        import kafka.codec as kp_codec

        assert getattr(kp_codec, f"has_{codec}")(), f"kafka-python lacks {codec}: install the dev extras"

    return enable


def kp_produce(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[Any]:
    """Produce with kafka-python; returns the RecordMetadata of each record, in order."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=10_000,
    )
    try:
        futures = [
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition, timestamp_ms=r.timestamp)
            for r in records
        ]
        producer.flush(timeout=DEADLINE_S)
        return [f.get(timeout=DEADLINE_S) for f in futures]
    finally:
        producer.close(timeout=5)


def kp_consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", request_timeout_ms=10_000)


def kp_consume(bootstrap: str, topic: str, counts: dict[int, int]) -> list[Rec]:
    """Read ``counts[p]`` records from each partition from the beginning, with kafka-python."""
    consumer = kp_consumer(bootstrap)
    try:
        tps = [KpTopicPartition(topic, p) for p in counts]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Rec] = []
        total = sum(counts.values())
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < total and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                out.extend(Rec(tp.partition, m.key, m.value, tuple(m.headers), m.timestamp, m.offset, m.timestamp_type) for m in msgs)
        assert len(out) >= total, f"kafka-python read {len(out)} of {total} records before the deadline"
        return out
    finally:
        consumer.close()


# --------------------------------------------------------------------------- aiokafka


async def aio_produce(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[Any]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, linger_ms=5, request_timeout_ms=10_000)
    await producer.start()
    try:
        futures = []
        for r in records:
            futures.append(await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition, timestamp_ms=r.timestamp))
        return await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
    finally:
        await producer.stop()


async def aio_consume(bootstrap: str, topic: str, counts: dict[int, int]) -> list[Rec]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", request_timeout_ms=10_000)
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in counts]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Rec] = []
        total = sum(counts.values())
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < total and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for tp, msgs in batches.items():
                out.extend(Rec(tp.partition, m.key, m.value, tuple(tuple(h) for h in m.headers), m.timestamp, m.offset, m.timestamp_type) for m in msgs)
        assert len(out) >= total, f"aiokafka read {len(out)} of {total} records before the deadline"
        return out
    finally:
        await consumer.stop()


# --------------------------------------------------------------------------- confluent-kafka


def _ck_tstype(t: int) -> int:
    return {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}.get(t, -1)


def ck_produce(bootstrap: str, topic: str, records: list[Rec], codec: str, **extra: Any) -> list[tuple[int, int, int, int]]:
    """Produce with librdkafka; returns (partition, offset, timestamp type, timestamp) per record, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "message.timeout.ms": 10_000, **extra})
    reports: dict[int, tuple[int, int, int, int]] = {}
    errors: list[Any] = []

    def on_delivery(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append((i, err))
            else:
                tstype, ts = msg.timestamp()
                reports[i] = (msg.partition(), msg.offset(), _ck_tstype(tstype), ts)

        return cb

    deadline = time.monotonic() + DEADLINE_S
    for i, r in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp, headers=list(r.headers), on_delivery=on_delivery(i))
                break
            except BufferError:
                assert time.monotonic() < deadline, "librdkafka queue stayed full"
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(max(0.1, deadline - time.monotonic()))
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, f"delivery errors: {errors[:5]}"
    return [reports[i] for i in range(len(records))]


def ck_consumer(bootstrap: str, **extra: Any) -> Consumer:
    # librdkafka needs a group.id even for assign(); nothing is committed or joined.
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "sidecar-tests-unused", "enable.auto.commit": False, "enable.auto.offset.store": False, **extra})


def ck_consume(bootstrap: str, topic: str, counts: dict[int, int]) -> list[Rec]:
    consumer = ck_consumer(bootstrap)
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in counts])
        out: list[Rec] = []
        total = sum(counts.values())
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < total and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                assert m.error() is None, f"consume error: {m.error()}"
                tstype, ts = m.timestamp()
                out.append(Rec(m.partition(), m.key(), m.value(), tuple(m.headers() or ()), ts, m.offset(), _ck_tstype(tstype)))
        assert len(out) >= total, f"confluent-kafka read {len(out)} of {total} records before the deadline"
        return out
    finally:
        consumer.close()


# --------------------------------------------------------------------------- checks shared by the clients


def check_offsets_kafka_python(bootstrap: str, topic: str, want_end: dict[int, int]) -> None:
    consumer = kp_consumer(bootstrap)
    try:
        tps = [KpTopicPartition(topic, p) for p in want_end]
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert consumer.end_offsets(tps) == {tp: want_end[tp.partition] for tp in tps}
    finally:
        consumer.close()


async def check_offsets_aiokafka(bootstrap: str, topic: str, want_end: dict[int, int]) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in want_end]
        assert await consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert await consumer.end_offsets(tps) == {tp: want_end[tp.partition] for tp in tps}
    finally:
        await consumer.stop()


def check_offsets_confluent(bootstrap: str, topic: str, want_end: dict[int, int]) -> None:
    consumer = ck_consumer(bootstrap)
    try:
        for p, end in want_end.items():
            assert consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10) == (0, end), f"partition {p}"
    finally:
        consumer.close()


# --------------------------------------------------------------------------- per-client round trips, every codec

N = 3000


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(sidecar, topic_name, codec, kafka_python_codecs):
    kafka_python_codecs(codec)
    create_topic(sidecar.bootstrap, topic_name)
    records = make_records(N, fresh_base_ts())
    want = expected_offsets(records)

    metas = kp_produce(sidecar.bootstrap, topic_name, records, codec)
    assert [(m.partition, m.offset) for m in metas] == [(r.partition, r.offset) for r in want]
    assert [m.timestamp for m in metas] == [r.timestamp for r in records]

    counts = end_offsets_of(records)
    assert_same_records(kp_consume(sidecar.bootstrap, topic_name, counts), want)
    check_offsets_kafka_python(sidecar.bootstrap, topic_name, counts)


@pytest.mark.parametrize("codec", CODECS)
async def test_aiokafka_roundtrip(sidecar, topic_name, codec):
    create_topic(sidecar.bootstrap, topic_name)
    records = make_records(N, fresh_base_ts())
    want = expected_offsets(records)

    metas = await aio_produce(sidecar.bootstrap, topic_name, records, codec)
    assert [(m.partition, m.offset) for m in metas] == [(r.partition, r.offset) for r in want]
    # (aiokafka 0.14 reports the first record's CreateTime for every record of a batch
    # -- a client quirk in MessageBatch.done -- so per-record timestamps are checked on read.)
    assert {m.timestamp_type for m in metas} == {CREATE_TIME}

    counts = end_offsets_of(records)
    assert_same_records(await aio_consume(sidecar.bootstrap, topic_name, counts), want)
    await check_offsets_aiokafka(sidecar.bootstrap, topic_name, counts)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_roundtrip(sidecar, topic_name, codec):
    create_topic(sidecar.bootstrap, topic_name)
    records = make_records(N, fresh_base_ts(), null_header_values=True)
    want = expected_offsets(records)

    reports = ck_produce(sidecar.bootstrap, topic_name, records, codec)
    assert [(p, o) for p, o, _, _ in reports] == [(r.partition, r.offset) for r in want]
    assert [(t, ts) for _, _, t, ts in reports] == [(CREATE_TIME, r.timestamp) for r in records]

    counts = end_offsets_of(records)
    assert_same_records(ck_consume(sidecar.bootstrap, topic_name, counts), want)
    check_offsets_confluent(sidecar.bootstrap, topic_name, counts)


# --------------------------------------------------------------------------- cross-client


CROSS = [
    ("confluent", "kafka-python", "zstd"),
    ("confluent", "aiokafka", "snappy"),
    ("kafka-python", "confluent", "lz4"),
    ("kafka-python", "aiokafka", "gzip"),
    ("aiokafka", "confluent", "snappy"),
    ("aiokafka", "kafka-python", "none"),
]


@pytest.mark.parametrize(("producer", "consumer", "codec"), CROSS, ids=[f"{p}-to-{c}-{z}" for p, c, z in CROSS])
def test_cross_client(sidecar, topic_name, producer, consumer, codec, kafka_python_codecs):
    kafka_python_codecs(codec)
    create_topic(sidecar.bootstrap, topic_name)
    # null header values: only librdkafka can send them; kafka-python and aiokafka must read them.
    records = make_records(2000, fresh_base_ts(), null_header_values=producer == "confluent")
    want = expected_offsets(records)
    b = sidecar.bootstrap

    if producer == "kafka-python":
        got = [(m.partition, m.offset) for m in kp_produce(b, topic_name, records, codec)]
    elif producer == "aiokafka":
        got = [(m.partition, m.offset) for m in asyncio.run(aio_produce(b, topic_name, records, codec))]
    else:
        got = [(p, o) for p, o, _, _ in ck_produce(b, topic_name, records, codec)]
    assert got == [(r.partition, r.offset) for r in want]

    counts = end_offsets_of(records)
    if consumer == "kafka-python":
        read = kp_consume(b, topic_name, counts)
    elif consumer == "aiokafka":
        read = asyncio.run(aio_consume(b, topic_name, counts))
    else:
        read = ck_consume(b, topic_name, counts)
    assert_same_records(read, want)


# --------------------------------------------------------------------------- LogAppendTime


def _log_append_time_records(n: int) -> list[Rec]:
    # CreateTime values far in the past: the broker must overwrite them all.
    return make_records(n, 1_500_000_000_000)


def _check_log_append_time(read: list[Rec], records: list[Rec], t0: int, t1: int) -> None:
    want = expected_offsets(records)
    assert len(read) == len(want)
    for got in read:
        assert got.timestamp_type == LOG_APPEND_TIME, _short(got)
        assert t0 <= got.timestamp <= t1, f"{_short(got)} not in broker time window [{t0}, {t1}]"
    # Everything but the timestamp is as sent.
    strip = [Rec(r.partition, r.key, r.value, r.headers, 0, r.offset, LOG_APPEND_TIME) for r in read]
    assert_same_records(strip, [Rec(r.partition, r.key, r.value, r.headers, 0, r.offset, LOG_APPEND_TIME) for r in want])
    # Broker time never goes backwards within a partition.
    for p, recs in by_partition(read).items():
        ts = [r.timestamp for r in recs]
        assert ts == sorted(ts), f"partition {p}: LogAppendTime went backwards"


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_log_append_time_kafka_python(sidecar, topic_name, codec, kafka_python_codecs):
    kafka_python_codecs(codec)
    create_topic(sidecar.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    records = _log_append_time_records(2000)
    t0 = now_ms()
    metas = kp_produce(sidecar.bootstrap, topic_name, records, codec)
    read = kp_consume(sidecar.bootstrap, topic_name, end_offsets_of(records))
    t1 = now_ms()
    _check_log_append_time(read, records, t0, t1)
    # The produce response's log_append_time is the time written into the batch.
    by_offset = {(r.partition, r.offset): r.timestamp for r in read}
    assert [m.timestamp for m in metas] == [by_offset[(m.partition, m.offset)] for m in metas]
    # ListOffsets by timestamp uses broker time on such a topic.
    consumer = kp_consumer(sidecar.bootstrap)
    try:
        tps = [KpTopicPartition(topic_name, p) for p in range(PARTITIONS)]
        found = consumer.offsets_for_times({tp: t0 - 1 for tp in tps})
        for tp in tps:
            assert found[tp] is not None and found[tp].offset == 0
            assert found[tp].timestamp == by_offset[(tp.partition, 0)]
        assert consumer.offsets_for_times({tp: t1 + 60_000 for tp in tps}) == {tp: None for tp in tps}
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "lz4"])
async def test_log_append_time_aiokafka(sidecar, topic_name, codec):
    create_topic(sidecar.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    records = _log_append_time_records(2000)
    t0 = now_ms()
    metas = await aio_produce(sidecar.bootstrap, topic_name, records, codec)
    read = await aio_consume(sidecar.bootstrap, topic_name, end_offsets_of(records))
    t1 = now_ms()
    _check_log_append_time(read, records, t0, t1)
    by_offset = {(r.partition, r.offset): r.timestamp for r in read}
    assert {m.timestamp_type for m in metas} == {LOG_APPEND_TIME}
    assert [m.timestamp for m in metas] == [by_offset[(m.partition, m.offset)] for m in metas]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_log_append_time_confluent(sidecar, topic_name, codec):
    create_topic(sidecar.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    records = _log_append_time_records(2000)
    t0 = now_ms()
    reports = ck_produce(sidecar.bootstrap, topic_name, records, codec)
    read = ck_consume(sidecar.bootstrap, topic_name, end_offsets_of(records))
    t1 = now_ms()
    _check_log_append_time(read, records, t0, t1)
    by_offset = {(r.partition, r.offset): r.timestamp for r in read}
    assert {t for _, _, t, _ in reports} == {LOG_APPEND_TIME}
    assert [ts for _, _, _, ts in reports] == [by_offset[(p, o)] for p, o, _, _ in reports]


def test_topic_config_create_time_overrides_broker_log_append_time(sidecar_factory, topic_name):
    """log.message.timestamp.type=LogAppendTime on the broker; a topic may set CreateTime back."""
    server = sidecar_factory({"log.message.timestamp.type": "LogAppendTime"})
    create_topic(server.bootstrap, topic_name, config={"message.timestamp.type": "CreateTime"})
    other = topic_name + "-broker-default"
    create_topic(server.bootstrap, other)
    records = make_records(500, fresh_base_ts())
    want = expected_offsets(records)
    counts = end_offsets_of(records)
    t0 = now_ms()
    ck_produce(server.bootstrap, topic_name, records, "zstd")
    ck_produce(server.bootstrap, other, records, "zstd")
    assert_same_records(ck_consume(server.bootstrap, topic_name, counts), want)
    _check_log_append_time(ck_consume(server.bootstrap, other, counts), records, t0, now_ms())


# --------------------------------------------------------------------------- ListOffsets by timestamp


def _timestamp_queries(records: list[Rec], samples: int = 25) -> list[tuple[int, int, int | None]]:
    """(partition, target timestamp, expected offset or None) covering before/exact/between/after."""
    queries: list[tuple[int, int, int | None]] = []
    for p, recs in by_partition(expected_offsets(records)).items():
        first, last = recs[0], recs[-1]
        queries.append((p, 0, 0))
        queries.append((p, first.timestamp - 1, 0))
        queries.append((p, first.timestamp, 0))
        for r in recs[1 :: max(1, len(recs) // samples)]:
            queries.append((p, r.timestamp, r.offset))  # exact
            queries.append((p, r.timestamp - 1, r.offset))  # between the previous record and this one
        queries.append((p, last.timestamp, last.offset))
        queries.append((p, last.timestamp + 1, None))
    return queries


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_offsets_for_times_kafka_python(sidecar, topic_name, codec, kafka_python_codecs):
    kafka_python_codecs(codec)
    create_topic(sidecar.bootstrap, topic_name)
    records = make_records(3000, fresh_base_ts())
    kp_produce(sidecar.bootstrap, topic_name, records, codec)
    ts_of = {(r.partition, r.offset): r.timestamp for r in expected_offsets(records)}
    consumer = kp_consumer(sidecar.bootstrap)
    try:
        for p, target, want in _timestamp_queries(records):
            tp = KpTopicPartition(topic_name, p)
            got = consumer.offsets_for_times({tp: target})[tp]
            if want is None:
                assert got is None, f"partition {p} ts {target}: {got}"
            else:
                assert got is not None, f"partition {p} ts {target}: None, want offset {want}"
                assert (got.offset, got.timestamp) == (want, ts_of[(p, want)]), f"partition {p} ts {target}"
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_offsets_for_times_confluent(sidecar, topic_name, codec):
    create_topic(sidecar.bootstrap, topic_name)
    records = make_records(3000, fresh_base_ts())
    ck_produce(sidecar.bootstrap, topic_name, records, codec)
    queries = _timestamp_queries(records, samples=8)
    consumer = ck_consumer(sidecar.bootstrap)
    try:
        # One request holds one target per partition: ask round by round, all partitions at once.
        per_partition: dict[int, list[tuple[int, int | None]]] = defaultdict(list)
        for p, target, want in queries:
            per_partition[p].append((target, want))
        rounds = max(len(v) for v in per_partition.values())
        for i in range(rounds):
            ask = {p: v[i] for p, v in per_partition.items() if i < len(v)}
            found = consumer.offsets_for_times([CkTopicPartition(topic_name, p, t) for p, (t, _) in ask.items()], timeout=10)
            assert sorted(tp.partition for tp in found) == sorted(ask)
            for tp in found:
                target, want = ask[tp.partition]
                assert tp.error is None, f"partition {tp.partition} ts {target}: {tp.error}"
                assert tp.offset == (-1 if want is None else want), f"partition {tp.partition} ts {target}"
    finally:
        consumer.close()


def test_list_offsets_admin_confluent(sidecar, topic_name):
    """AdminClient.list_offsets: earliest, latest, max timestamp (-3) and by timestamp."""
    create_topic(sidecar.bootstrap, topic_name, partitions=2)
    base = fresh_base_ts()
    # Out-of-order CreateTime values: the max timestamp is not on the last record.
    stamps = [base + d for d in (50, 10, 90, 30, 70, 20, 60)]
    records = [Rec(p, b"k%d" % i, b"v%d" % i, (), ts) for p in (0, 1) for i, ts in enumerate(stamps)]
    ck_produce(sidecar.bootstrap, topic_name, records, "gzip")
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})

    def ask(spec: OffsetSpec) -> dict[int, tuple[int, int]]:
        tps = {CkTopicPartition(topic_name, p): spec for p in (0, 1)}
        result = admin.list_offsets(tps, request_timeout=10)
        out = {}
        for tp, fut in result.items():
            info = fut.result(timeout=10)
            out[tp.partition] = (info.offset, info.timestamp)
        return out

    assert {p: o for p, (o, _) in ask(OffsetSpec.earliest()).items()} == {0: 0, 1: 0}
    assert {p: o for p, (o, _) in ask(OffsetSpec.latest()).items()} == {0: 7, 1: 7}
    assert ask(OffsetSpec.max_timestamp()) == {0: (2, base + 90), 1: (2, base + 90)}
    # First offset (in log order) whose timestamp >= target.
    assert ask(OffsetSpec.for_timestamp(base + 55)) == {0: (2, base + 90), 1: (2, base + 90)}
    assert ask(OffsetSpec.for_timestamp(base + 40)) == {0: (0, base + 50), 1: (0, base + 50)}
    assert {p: o for p, (o, _) in ask(OffsetSpec.for_timestamp(base + 91)).items()} == {0: -1, 1: -1}


async def test_offsets_for_times_aiokafka(sidecar, topic_name):
    create_topic(sidecar.bootstrap, topic_name)
    records = make_records(2000, fresh_base_ts())
    await aio_produce(sidecar.bootstrap, topic_name, records, "snappy")
    ts_of = {(r.partition, r.offset): r.timestamp for r in expected_offsets(records)}
    consumer = AIOKafkaConsumer(bootstrap_servers=sidecar.bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        for p, target, want in _timestamp_queries(records)[::3]:
            tp = AioTopicPartition(topic_name, p)
            got = (await consumer.offsets_for_times({tp: target}))[tp]
            if want is None:
                assert got is None
            else:
                assert got is not None and (got.offset, got.timestamp) == (want, ts_of[(p, want)]), f"partition {p} ts {target}: {got}"
    finally:
        await consumer.stop()


def test_many_segments_fetch_and_offsets_for_times(sidecar_factory, topic_name, kafka_python_codecs):
    """Small segments and a dense index: reads and timestamp lookups cross segment boundaries."""
    server = sidecar_factory({"log.segment.bytes": "65536", "log.index.interval.bytes": "512"})
    kafka_python_codecs("zstd")
    create_topic(server.bootstrap, topic_name)
    records = make_records(4000, fresh_base_ts())
    want = expected_offsets(records)
    counts = end_offsets_of(records)
    # 3000 uncompressed via librdkafka, 1000 zstd via kafka-python: many batches, many segments.
    first, second = records[:3000], records[3000:]
    # (A batch larger than segment.bytes is refused with RECORD_LIST_TOO_LARGE, as in Kafka.)
    ck_produce(server.bootstrap, topic_name, first, "none", **{"batch.size": 16384})
    metas = kp_produce(server.bootstrap, topic_name, second, "zstd")
    assert [(m.partition, m.offset) for m in metas] == [(r.partition, r.offset) for r in want[3000:]]
    for p in range(PARTITIONS):
        segments = list((server.data_dir / f"{topic_name}-{p}").glob("*.log"))
        assert len(segments) >= 4, f"partition {p}: only {len(segments)} segments"

    assert_same_records(kp_consume(server.bootstrap, topic_name, counts), want)
    assert_same_records(ck_consume(server.bootstrap, topic_name, counts), want)
    check_offsets_kafka_python(server.bootstrap, topic_name, counts)
    check_offsets_confluent(server.bootstrap, topic_name, counts)

    ts_of = {(r.partition, r.offset): r.timestamp for r in want}
    consumer = kp_consumer(server.bootstrap)
    try:
        for p, target, expect in _timestamp_queries(records, samples=20):
            tp = KpTopicPartition(topic_name, p)
            got = consumer.offsets_for_times({tp: target})[tp]
            if expect is None:
                assert got is None, f"partition {p} ts {target}: {got}"
            else:
                assert got is not None and (got.offset, got.timestamp) == (expect, ts_of[(p, expect)]), f"partition {p} ts {target}: {got}, want offset {expect}"
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent"])
def test_seek_into_compressed_batch(sidecar, topic_name, client, kafka_python_codecs):
    """Starting mid-batch: the broker returns the whole batch, the client skips to the offset."""
    kafka_python_codecs("zstd")
    create_topic(sidecar.bootstrap, topic_name, partitions=1)
    records = make_records(1000, fresh_base_ts(), partitions=1)
    ck_produce(sidecar.bootstrap, topic_name, records, "zstd", **{"batch.size": 1_000_000})
    want = expected_offsets(records)
    b = sidecar.bootstrap
    for start in (1, 333, 998):
        if client == "kafka-python":
            consumer = kp_consumer(b)
            try:
                tp = KpTopicPartition(topic_name, 0)
                consumer.assign([tp])
                consumer.seek(tp, start)
                msgs: list[Any] = []
                deadline = time.monotonic() + DEADLINE_S
                while len(msgs) < 2 and time.monotonic() < deadline:
                    msgs.extend(m for ms in consumer.poll(timeout_ms=200).values() for m in ms)
                first = msgs[0]
                got = Rec(0, first.key, first.value, tuple(first.headers), first.timestamp, first.offset, first.timestamp_type)
            finally:
                consumer.close()
        elif client == "aiokafka":

            async def first_from(start: int) -> Rec:
                consumer = AIOKafkaConsumer(bootstrap_servers=b, group_id=None, enable_auto_commit=False)
                await consumer.start()
                try:
                    tp = AioTopicPartition(topic_name, 0)
                    consumer.assign([tp])
                    consumer.seek(tp, start)
                    m = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
                    return Rec(0, m.key, m.value, tuple(tuple(h) for h in m.headers), m.timestamp, m.offset, m.timestamp_type)
                finally:
                    await consumer.stop()

            got = asyncio.run(first_from(start))
        else:
            consumer = ck_consumer(b)
            try:
                consumer.assign([CkTopicPartition(topic_name, 0, start)])
                msgs = []
                deadline = time.monotonic() + DEADLINE_S
                while not msgs and time.monotonic() < deadline:
                    msgs = consumer.consume(10, 0.2)
                m = msgs[0]
                assert m.error() is None, m.error()
                tstype, ts = m.timestamp()
                got = Rec(0, m.key(), m.value(), tuple(m.headers() or ()), ts, m.offset(), _ck_tstype(tstype))
            finally:
                consumer.close()
        assert got == want[start], f"seek to {start}: got {_short(got)}"
