"""PySpark data sources and pipelines against a real kafka-sidecar, with a real local Spark.

One SparkSession (``local[2]``) for the module. Data is produced and checked with
kafka-python; Spark's results are compared record by record (offsets, timestamps,
keys, values, headers). Skipped, with the reason, when pyspark, pyarrow or Java is missing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Java is not installed: PySpark needs a JVM (Java 17+)", allow_module_level=True)

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka_sidecar.spark import register  # noqa: E402
from kafka_sidecar.spark._wire import Broker  # noqa: E402
from kafka_sidecar.spark.pipelines import archive_then_trim, compaction_preview, stream_transform  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tests.integration.retention_helpers import create_topic  # noqa: E402
from tests.support import GOLDEN  # noqa: E402

FMT = "kafka-sidecar"
PYSPARK = tuple(int(x) for x in pyspark.__version__.split(".")[:2])
# Filter pushdown for Python data sources came in pyspark 4.1, admission control
# (maxOffsetsPerTrigger honoured by Trigger.AvailableNow) in 4.2.
PUSHDOWN = PYSPARK >= (4, 1)
ADMISSION_CONTROL = PYSPARK >= (4, 2)
NOW = int(time.time() * 1000)
DAY = 86_400_000


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-sidecar-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("OFF")  # expected failures below would print pages of JVM traces
    register(session)
    yield session
    session.stop()


# --------------------------------------------------------------------------- helpers


def produce(bootstrap: str, records: list[tuple], **config) -> list[tuple]:
    """Send (topic, partition|None, key, value, headers, timestamp_ms|None) with kafka-python;
    returns what the broker assigned: (topic, partition, offset, timestamp, key, value, headers)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, **config)
    futures = [
        (producer.send(t, key=k, value=v, headers=h or [], partition=p, timestamp_ms=ts), (k, v, h))
        for t, p, k, v, h, ts in records
    ]
    producer.flush()
    producer.close()
    out = []
    for future, (k, v, h) in futures:
        md = future.get(timeout=10)
        out.append((md.topic, md.partition, md.offset, md.timestamp, k, v, [tuple(x) for x in h] if h else None))
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


def consume_all(bootstrap: str, topic: str) -> list[tuple]:
    """Every record of ``topic`` with a plain kafka-python consumer."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=10_000)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        out: list = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in tps):
            for msgs in consumer.poll(timeout_ms=200).values():
                out += msgs
    finally:
        consumer.close()
    return sorted(
        ((m.topic, m.partition, m.offset, m.timestamp, m.key, m.value, [tuple(h) for h in m.headers] or None) for m in out),
        key=lambda r: (r[0], r[1], r[2]),
    )


def rows_of(df, *extra: str) -> list[tuple]:
    """Spark rows as (topic, partition, offset, timestamp ms, key, value, headers|None, *extra)."""
    cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.unix_millis("timestamp").alias("ts"), "key", "value"]
    if "headers" in df.columns:
        cols.append("headers")
    out = []
    for r in df.select(*cols, *extra).collect():
        headers = None
        if "headers" in df.columns and r["headers"] is not None:
            headers = [(h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in r["headers"]]
        key = bytes(r["key"]) if r["key"] is not None else None
        value = bytes(r["value"]) if r["value"] is not None else None
        out.append((r["topic"], r["partition"], r["offset"], r["ts"], key, value, headers, *(r[c] for c in extra)))
    return sorted(out, key=lambda x: (x[0], x[1], x[2]))


def kafka_read(spark, bootstrap: str, **options):
    reader = spark.read.format(FMT).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def earliest_latest(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    with Broker(bootstrap) as b:
        b.metadata([topic])
        tp = (topic, partition)
        return b.earliest([tp])[tp], b.latest([tp])[tp]


def delete_records(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    with Broker(bootstrap) as b:
        b.metadata([topic])
        code, low = b.delete_records({(topic, partition): offset})[(topic, partition)]
    assert code == 0, code
    return low


def mixed_records(topic: str, n: int, partitions: int, start_ts: int) -> list[tuple]:
    """Keys, null keys, null and empty values, headers (with a null value, duplicates)."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = None if i % 11 == 5 and key is not None else (b"" if i % 13 == 6 else f"value-{i}-".encode() * (1 + i % 5))
        headers = [("h1", f"v{i}".encode()), ("dup", b"a"), ("dup", b"b")] if i % 3 == 0 else None
        out.append((topic, i % partitions, key, value, headers, start_ts + i * 10))
    return out


# --------------------------------------------------------------------------- batch read


def test_batch_read_matches_produced_records(spark, sidecar, topic_name):
    b = sidecar.bootstrap
    create_topic(b, topic_name, {"retention.ms": "-1"}, partitions=3)
    appended = topic_name + "-lat"
    create_topic(b, appended, {"retention.ms": "-1", "message.timestamp.type": "LogAppendTime"})
    produced = produce(b, mixed_records(topic_name, 90, 3, NOW - 3600_000)[:45], compression_type="gzip")
    produced += produce(b, mixed_records(topic_name, 90, 3, NOW - 3600_000)[45:], compression_type="zstd")
    produced += produce(b, [(appended, 0, b"k", b"v", None, NOW - 1000), (appended, 0, None, b"w", None, None)])
    produced.sort(key=lambda r: (r[0], r[1], r[2]))
    expected = consume_all(b, topic_name) + consume_all(b, appended)
    # What the producer was told equals what a plain consumer reads (LogAppendTime: broker time).
    assert [r[:3] + r[4:] for r in expected] == [r[:3] + r[4:] for r in produced]

    df = kafka_read(spark, b, subscribePattern=f"{topic_name}.*", includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    full = rows_of(df, "timestampType")
    assert [r[:7] for r in full] == expected
    assert {(r[0], r[7]) for r in full} == {(topic_name, 0), (appended, 1)}  # CreateTime, LogAppendTime

    # Without includeHeaders: Spark's seven columns. One input partition per topic-partition,
    # split by maxRecordsPerPartition (30 records per partition here).
    plain = kafka_read(spark, b, subscribe=topic_name)
    assert plain.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert plain.rdd.getNumPartitions() == 3
    split = kafka_read(spark, b, subscribe=topic_name, maxRecordsPerPartition="7")
    assert split.rdd.getNumPartitions() == 3 * 5
    assert sorted(r[:3] for r in rows_of(split)) == sorted(r[:3] for r in expected if r[0] == topic_name)

    # assign + per-partition JSON offsets (-2 earliest, -1 latest), exclusive ends.
    ranged = kafka_read(
        spark, b, assign=json.dumps({topic_name: [0, 2]}),
        startingOffsets=json.dumps({topic_name: {"0": 5, "2": -2}}),
        endingOffsets=json.dumps({topic_name: {"0": 9, "2": -1}}),
    )
    got = {(r[1], r[2]) for r in rows_of(ranged)}
    assert got == {(0, o) for o in range(5, 9)} | {(2, o) for o in range(30)}

    # startingTimestamp: per partition, the first record with timestamp >= it.
    cut = [r for r in expected if r[0] == topic_name][40][3]
    by_ts = rows_of(kafka_read(spark, b, subscribe=topic_name, startingTimestamp=str(cut)))
    assert by_ts == [r[:6] + (None,) for r in expected if r[0] == topic_name and r[3] >= cut]

    # Spark's option errors.
    with pytest.raises(Exception, match="can't be latest for batch queries"):
        kafka_read(spark, b, subscribe=topic_name, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="must specify all TopicPartitions"):
        kafka_read(spark, b, subscribe=topic_name, startingOffsets=json.dumps({topic_name: {"0": 0}})).collect()
    with pytest.raises(Exception, match="One of the following options must be specified"):
        spark.read.format(FMT).option("kafka.bootstrap.servers", b).load().collect()


# --------------------------------------------------------------------------- write


def test_write_round_trip(spark, sidecar, topic_name):
    b = sidecar.bootstrap
    t1, t2, t3 = topic_name + "-a", topic_name + "-b", topic_name + "-c"
    create_topic(b, t1, partitions=3)
    create_topic(b, t2, partitions=2)
    headers = [("trace", b"t-1"), ("null", None)]
    data = [
        (t1 if i % 2 else t2, f"k{i}" if i % 5 else None, f"payload-{i}".encode(),
         (i % 2) if i % 4 == 0 else None, headers if i % 3 == 0 else None)
        for i in range(60)
    ]
    df = spark.createDataFrame(
        data, "topic string, key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    ).repartition(2)
    df.write.format(FMT).option("kafka.bootstrap.servers", b).mode("append").save()

    got = consume_all(b, t1) + consume_all(b, t2)
    assert len(got) == 60
    assert {r[5]: (r[0], r[4], r[6]) for r in got} == {
        v: (t, k.encode() if k else None, h) for t, k, v, _p, h in data
    }
    by_value = {r[5]: r for r in got}
    for t, k, v, p, _h in data:
        if p is not None:
            assert by_value[v][1] == p, (t, k, v, p)
    # Keyed records: Kafka's default partitioner (murmur2), so the same key always lands together.
    from kafka.partitioner.default import murmur2

    for t, k, v, p, _h in data:
        if k is not None and p is None:
            n = 3 if t == t1 else 2
            assert by_value[v][1] == (murmur2(k.encode()) & 0x7FFFFFFF) % n

    # The topic option overrides the column; a new topic is auto-created; compression.
    (spark.createDataFrame([("x", "one"), ("y", "two")], "key string, value string")
     .write.format(FMT).option("kafka.bootstrap.servers", b).option("topic", t3)
     .option("kafka.compression.type", "zstd").mode("append").save())
    assert sorted((r[4], r[5]) for r in consume_all(b, t3)) == [(b"x", b"one"), (b"y", b"two")]

    # Errors: Spark's schema checks, and a produce error surfaced as a task failure.
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        (spark.createDataFrame([("k",)], "key string").write.format(FMT)
         .option("kafka.bootstrap.servers", b).option("topic", t3).mode("append").save())
    with pytest.raises(Exception, match=r"Invalid partition given with record: 7 is not in the range \[0...3\)"):
        (spark.createDataFrame([("v", 7)], "value string, partition int").write.format(FMT)
         .option("kafka.bootstrap.servers", b).option("topic", t1).mode("append").save())
    with pytest.raises(Exception, match="topic option required"):
        (spark.createDataFrame([("v",)], "value string").write.format(FMT)
         .option("kafka.bootstrap.servers", b).mode("append").save())


# --------------------------------------------------------------------------- streaming


def test_stream_transform_restarts_from_checkpoint(spark, sidecar, topic_name, tmp_path):
    """The streaming example pipeline: two runs on one checkpoint write every source record once."""
    if not ADMISSION_CONTROL:
        pytest.skip(f"pyspark {pyspark.__version__}: Trigger.AvailableNow ignores maxOffsetsPerTrigger before 4.2")
    b = sidecar.bootstrap
    source, sink = topic_name + "-src", topic_name + "-dst"
    create_topic(b, source, partitions=2)
    create_topic(b, sink, partitions=2)
    first = produce(b, mixed_records(source, 30, 2, NOW))
    checkpoint = str(tmp_path / "ckpt")

    q = stream_transform.start(spark, bootstrap=b, source=source, sink=sink, checkpoint=checkpoint,
                               max_offsets_per_trigger=16, available_now=True)
    q.awaitTermination(120)
    assert q.exception() is None
    # maxOffsetsPerTrigger spread over the two partitions: 8 + 8, then 7 + 7.
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0] == [16, 14]
    # The checkpoint holds Spark's Kafka offset JSON: {"topic": {"partition": offset}}.
    offsets_dir = Path(checkpoint) / "offsets"
    last = max(int(f.name) for f in offsets_dir.iterdir() if f.name.isdigit())
    assert json.loads((offsets_dir / str(last)).read_text().splitlines()[-1]) == {source: {"0": 15, "1": 15}}

    second = produce(b, mixed_records(source, 50, 2, NOW)[30:])
    q = stream_transform.start(spark, bootstrap=b, source=source, sink=sink, checkpoint=checkpoint,
                               available_now=True)
    q.awaitTermination(120)
    assert q.exception() is None

    out = consume_all(b, sink)
    by_source = {}
    for r in out:
        hdrs = dict(r[6])
        by_source.setdefault(hdrs["source"].decode(), []).append(r)
    assert len(out) == 50 and all(len(v) == 1 for v in by_source.values())
    for t, p, o, _ts, k, v, h in first + second:
        (r,) = by_source[f"{t}-{p}@{o}"]
        assert r[4] == k
        assert r[5] == (v.decode().upper().encode() if v is not None else None)
        assert r[6] == (h or []) + [("source", f"{t}-{p}@{o}".encode())]


def test_streaming_fail_on_data_loss_both_ways(spark, sidecar, topic_name, tmp_path):
    """Records deleted under a running query: failOnDataLoss=true fails the query; restarted from
    its checkpoint with false it skips to the new log start. Stream output = batch read."""
    if not ADMISSION_CONTROL:
        pytest.skip(f"pyspark {pyspark.__version__}: Trigger.AvailableNow ignores maxOffsetsPerTrigger before 4.2")
    b = sidecar.bootstrap
    create_topic(b, topic_name)
    produce(b, [(topic_name, 0, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())], NOW + i) for i in range(40)])
    checkpoint = str(tmp_path / "ckpt")
    seen: list[tuple] = []

    def sink(batch_df, batch_id):
        seen.extend(rows_of(batch_df))
        if batch_id == 0:  # DeleteRecords while the query runs, past the next micro-batch's start
            assert delete_records(b, topic_name, 0, 25) == 25

    def run(fail_on_data_loss: str, max_offsets: int):
        return (spark.readStream.format(FMT).option("kafka.bootstrap.servers", b).option("subscribe", topic_name)
                .option("startingOffsets", "earliest").option("includeHeaders", "true")
                .option("maxOffsetsPerTrigger", str(max_offsets)).option("failOnDataLoss", fail_on_data_loss)
                .load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start())

    q = run("true", 10)  # batch 0: [0, 10), then DeleteRecords to 25; batch 1: [10, 20) is gone
    with pytest.raises(Exception, match=r"KAFKA_DATA_LOSS(?s:.*)\[10, 20\)"):
        q.awaitTermination(120)
    assert [r[2] for r in seen] == list(range(10))

    q = run("false", 100)  # replays batch 1 [10, 20) from the checkpoint: nothing; then [20, 40)
    q.awaitTermination(120)
    assert q.exception() is None
    assert [r[2] for r in seen] == list(range(10)) + list(range(25, 40))
    # What the stream read after the deletion is exactly what a batch read returns now.
    assert [r for r in seen if r[2] >= 25] == rows_of(kafka_read(spark, b, subscribe=topic_name, includeHeaders="true"))


# --------------------------------------------------------------------------- offline reader


def _b64(value: bytes | None):
    if value is None:
        return None
    if len(value) > 64:
        return {"len": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    return base64.b64encode(value).decode()


def test_offline_reader_on_golden_kafka_logdir(spark, tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(GOLDEN / "kafka-4.0.0-logdir", logdir)

    def log_df(**options):
        # A new DataFrame per query: pyspark 4.1-4.3 reuse the read planned for a filtered
        # query in the next unfiltered query on the same DataFrame (see spark/README.md).
        reader = spark.read.format("kafka-sidecar-log").option("includeHeaders", "true")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load(str(logdir))

    assert log_df().columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    counts = {r["topic"]: r["count"] for r in log_df().groupBy("topic").count().collect()}
    # No __cluster_metadata; nothing from golden-del, whose log-start-offset-checkpoint says 200
    # while its 14 segments (offsets 0-199) are still on disk.
    assert counts == {"golden": 322, "golden-compact": 192, "golden-del-compact": 10}
    # One input partition per non-empty segment: golden 3, golden-compact 2, golden-del-compact 1,
    # and of golden-del's 14 only the last (open-ended), the others being below its log start.
    assert log_df().rdd.getNumPartitions() == 3 + 2 + 1 + 1

    golden = log_df().filter("topic = 'golden'")
    assert golden.rdd.getNumPartitions() == (3 if PUSHDOWN else 7)  # segments 0, 158, 267
    got = [
        {"offset": o, "timestamp": ts, "key": _b64(k), "value": _b64(v), "headers": [[hk, _b64(hv)] for hk, hv in h or []]}
        for _t, _p, o, ts, k, v, h in rows_of(golden)
    ]
    expected = [
        {k: rec[k] for k in ("offset", "timestamp", "key", "value", "headers")}
        for rec in map(json.loads, (GOLDEN / "produce-fetch" / "records.jsonl").read_text().splitlines())
    ]
    assert got == expected  # every codec: none, gzip, snappy, lz4, zstd

    compacted = [(o, ts, k.decode(), v.decode() if v is not None else None)
                 for _t, _p, o, ts, k, v, _h in rows_of(log_df(subscribe="golden-compact"))]
    after = [(r["offset"], r["timestamp"], r["key"], r["value"])
             for r in map(json.loads, (GOLDEN / "compaction" / "after-clean.jsonl").read_text().splitlines())]
    assert compacted == after

    # Pushdown: offset and timestamp bounds prune segments (index / time index), same rows.
    tail = log_df().filter("topic = 'golden' and offset >= 300")
    assert tail.rdd.getNumPartitions() == (1 if PUSHDOWN else 7)
    assert [r[2] for r in rows_of(tail)] == list(range(300, 322))
    cut = expected[300]["timestamp"]
    by_ts = log_df().filter("topic = 'golden'").filter(F.col("timestamp") >= F.timestamp_millis(F.lit(cut)))
    assert by_ts.rdd.getNumPartitions() == (1 if PUSHDOWN else 7)
    assert [r[2] for r in rows_of(by_ts)] == list(range(300, 322))
    unpushed = log_df(pushdown="false").filter("topic = 'golden'").filter(F.unix_millis("timestamp") >= cut)
    assert [r[2] for r in rows_of(unpushed)] == list(range(300, 322))
    mid = log_df().filter("topic = 'golden' and offset between 150 and 160 and partition in (0, 5)")
    assert mid.rdd.getNumPartitions() == (2 if PUSHDOWN else 7)
    assert [r[2] for r in rows_of(mid)] == list(range(150, 161))


def test_offline_reader_on_our_data_dir_matches_wire_read(spark, sidecar, topic_name):
    b = sidecar.bootstrap
    create_topic(b, topic_name, {"retention.ms": "-1"}, partitions=2)
    produce(b, mixed_records(topic_name, 40, 2, NOW), compression_type="lz4")
    produce(b, mixed_records(topic_name, 40, 2, NOW + 1000), compression_type="snappy")
    wire = rows_of(kafka_read(spark, b, subscribe=topic_name, includeHeaders="true"))
    files = rows_of(spark.read.format("kafka-sidecar-log").option("includeHeaders", "true")
                    .option("subscribe", topic_name).load(str(sidecar.data_dir)))
    assert len(wire) == 80 and files == wire
    # After DeleteRecords the checkpointed log start hides the records still in the segment.
    delete_records(b, topic_name, 1, 25)
    sidecar_files = rows_of(spark.read.format("kafka-sidecar-log").load(str(sidecar.data_dir))
                            .filter(F.col("topic") == topic_name))
    assert [r[:3] for r in sidecar_files] == [r[:3] for r in wire if r[1] == 0 or r[2] >= 25]


# --------------------------------------------------------------------------- pipelines


def test_archive_then_trim(spark, sidecar, topic_name, tmp_path):
    b = sidecar.bootstrap
    create_topic(b, topic_name, {"retention.ms": "-1"}, partitions=2)
    day0 = (NOW // DAY - 3) * DAY
    produce(b, [(topic_name, i % 2, f"k{i}".encode(), f"v{i}".encode(), None, day0 + (i // 20) * DAY + i) for i in range(80)])
    output = str(tmp_path / "archive")

    def archived() -> list[tuple]:
        df = spark.read.parquet(output)
        return sorted((r["topic"], r["partition"], r["offset"], str(r["date"])) for r in df.collect())

    s = archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output,
                              until=json.dumps({topic_name: {"0": 15, "1": 10}}))
    assert s["records"] == 25 and s["trim_errors"] == {}
    assert earliest_latest(b, topic_name, 0) == (15, 40) and earliest_latest(b, topic_name, 1) == (10, 40)
    first = archived()
    assert [(p, o) for _t, p, o, _d in first] == [(0, o) for o in range(15)] + [(1, o) for o in range(10)]
    # Parquet partitioned by topic / partition / UTC date of the record timestamp.
    assert {d for *_x, d in first} == {time.strftime("%Y-%m-%d", time.gmtime(day0 / 1000)),
                                       time.strftime("%Y-%m-%d", time.gmtime((day0 + DAY) / 1000))}
    assert (Path(output) / f"topic={topic_name}" / "partition=0").is_dir()

    # Rerun with the same target: nothing archived twice, nothing more deleted.
    s = archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output,
                              until=json.dumps({topic_name: {"0": 15, "1": 10}}))
    assert s["run"] is None and archived() == first
    assert earliest_latest(b, topic_name, 0) == (15, 40)

    # A crash after the Spark write but before it was recorded: nothing trimmed, nothing visible.
    with pytest.raises(archive_then_trim.SimulatedCrash):
        archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output, until="30", _crash="after-write")
    assert archived() == first and earliest_latest(b, topic_name, 0) == (15, 40)
    # The rerun completes that write (its _SUCCESS marker is there) exactly once, then trims.
    s = archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output, until="30")
    assert s["recovered"].startswith("completed") and s["run"] is None
    assert earliest_latest(b, topic_name, 0) == (30, 40) and earliest_latest(b, topic_name, 1) == (30, 40)

    # A crash between recording the write and the commit, then a run to the end.
    with pytest.raises(archive_then_trim.SimulatedCrash):
        archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output, _crash="after-written")
    assert earliest_latest(b, topic_name, 0) == (30, 40)
    s = archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output)
    assert s["recovered"].startswith("completed")
    rows = archived()
    assert [(p, o) for _t, p, o, _d in rows] == [(0, o) for o in range(40)] + [(1, o) for o in range(40)]
    assert earliest_latest(b, topic_name, 0) == (40, 40) and earliest_latest(b, topic_name, 1) == (40, 40)
    values = {(r["partition"], r["offset"]): bytes(r["value"]) for r in spark.read.parquet(output).collect()}
    assert all(values[(i % 2, i // 2)] == f"v{i}".encode() for i in range(80))

    # Records deleted before being archived: refused unless asked to record the gap.
    produce(b, [(topic_name, 0, b"k", b"late", None, None) for _ in range(5)])
    delete_records(b, topic_name, 0, 43)
    with pytest.raises(Exception, match=r"records \[40, 43\) were deleted"):
        archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output)
    s = archive_then_trim.run(spark, bootstrap=b, topics=[topic_name], output=output, fail_on_data_loss=False)
    assert s["gaps"] == {f"{topic_name}:0": [40, 43]} and s["records"] == 2


def test_compaction_preview(spark, sidecar, topic_name):
    b = sidecar.bootstrap
    create_topic(b, topic_name, {"cleanup.policy": "compact"})
    produce(b, [
        (topic_name, 0, b"a", b"a1", None, None),
        (topic_name, 0, b"b", b"b1", None, None),
        (topic_name, 0, b"a", b"a2", None, None),
        (topic_name, 0, b"c", b"c1", None, None),
        (topic_name, 0, b"b", None, None, None),  # tombstone, latest for b
        (topic_name, 0, b"c", b"c2", None, None),
        (topic_name, 0, b"d", None, None, None),  # tombstone
        (topic_name, 0, b"d", b"d2", None, None),  # revives d
    ])
    marked = compaction_preview.preview(compaction_preview.load(spark, topic_name, bootstrap=b))
    got = sorted((r["offset"], r["action"], r["reason"]) for r in marked.collect())
    assert got == [
        (0, "drop", "superseded"), (1, "drop", "superseded"), (2, "keep", "latest"), (3, "drop", "superseded"),
        (4, "keep", "tombstone"), (5, "keep", "latest"), (6, "drop", "superseded"), (7, "keep", "latest"),
    ]
    summary = compaction_preview.summarize(marked)
    assert summary == {"records": 8, "keys": 4, "kept": 4, "dropped": 4, "tombstones": 1, "keyless": 0,
                       "bytes_before": 8 + 2 * 6, "bytes_after": 4 + 2 * 3}


@pytest.mark.parametrize("module", ["archive_then_trim", "compaction_preview", "stream_transform"])
def test_pipelines_run_as_modules(module):
    result = subprocess.run([sys.executable, "-m", f"kafka_sidecar.spark.pipelines.{module}", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--bootstrap-server" in result.stdout
