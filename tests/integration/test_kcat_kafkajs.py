"""kcat (librdkafka CLI) and kafkajs (Node.js) against kafka-sidecar.

kcat: produce (-P, -K key delimiter, -H headers, -Z nulls, every codec), consume
(-C with a -f format printing partition/offset/key/value/headers/timestamp, from
the beginning, from an offset, relative to the end, from a timestamp) and the
metadata listing (-L, plain and JSON).

kafkajs: produce (keys, headers, gzip) and the admin API (createTopics,
listTopics, fetchTopicOffsets, fetchTopicOffsetsByTimestamp, deleteTopics);
what kafkajs produced is read back with a Python client. The kafkajs consumer
is not exercised: it always joins a consumer group (FindCoordinator, JoinGroup,
SyncGroup, ...), which the broker does not implement yet.

The tools are installed by tests/tools/install-tools.sh; a test skips only when
its tool is missing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import REPO

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
NODE = shutil.which("node")
NODE_DIR = REPO / "tests" / "tools" / "node"
ROUNDTRIP_JS = NODE_DIR / "roundtrip.js"
KAFKAJS_INSTALLED = (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists()

needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat not installed (run tests/tools/install-tools.sh)")
needs_kafkajs = pytest.mark.skipif(
    NODE is None or not KAFKAJS_INSTALLED,
    reason="node or kafkajs missing (install Node.js, then run tests/tools/install-tools.sh)",
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TOOL_TIMEOUT_S = 15.0
DEADLINE_S = 10.0

# kcat -f: one line per record; key/value lengths (-1 = null) tell null from empty.
KCAT_FORMAT = r"%p\t%o\t%K\t%k\t%S\t%s\t%h\t%T\n"


def now_ms() -> int:
    return int(time.time() * 1000)


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)[name].result(timeout=10)


def python_read(bootstrap: str, topic: str, counts: dict[int, int]) -> dict[int, list[Any]]:
    """All records of each partition (from offset 0) with aiokafka (no consumer group; its
    cramjam codecs read every compression), plus earliest/latest offsets checked."""

    async def run() -> dict[int, list[Any]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in counts]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            out: dict[int, list[Any]] = {p: [] for p in counts}
            deadline = time.monotonic() + DEADLINE_S
            while sum(map(len, out.values())) < sum(counts.values()) and time.monotonic() < deadline:
                for tp, msgs in (await consumer.getmany(timeout_ms=200)).items():
                    out[tp.partition].extend(msgs)
            got = {p: len(v) for p, v in out.items()}
            assert got == counts, f"read {got}, want {counts}"
            assert await consumer.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
            assert await consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


# =========================================================================== kcat


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=TOOL_TIMEOUT_S)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
    return proc


def kcat_consume(bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    """Records printed by ``kcat -C`` with KCAT_FORMAT, parsed."""
    out = kcat("-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", KCAT_FORMAT, *args).stdout.decode()
    records = []
    for line in out.split("\n")[:-1]:
        p, o, klen, k, vlen, v, h, ts = line.split("\t")
        records.append({
            "partition": int(p),
            "offset": int(o),
            "key": None if int(klen) == -1 else k,
            "value": None if int(vlen) == -1 else v,
            "headers": h,
            "timestamp": int(ts),
        })
    assert out.endswith("\n") or not out
    return records


# Lines for kcat -P -K: (line, key, value) without -Z, and (key, value) with -Z (empty -> null).
KCAT_LINES = [
    ("plain-key:plain value", "plain-key", "plain value"),
    ("no delimiter at all", None, "no delimiter at all"),
    (":empty key", "", "empty key"),
    ("empty value:", "empty value", ""),
    (":", "", ""),
    ("k:v:with:colons", "k", "v:with:colons"),
    ("ünï:cödé ✓", "ünï", "cödé ✓"),
]


def _kcat_batch(n: int, tag: str) -> list[tuple[str, str | None, str]]:
    rows = []
    for i in range(n):
        line, key, value = KCAT_LINES[i % len(KCAT_LINES)]
        if i % len(KCAT_LINES) == 0:
            line, key, value = f"key-{tag}-{i}:value-{tag}-{i}", f"key-{tag}-{i}", f"value-{tag}-{i}"
        rows.append((line, key, value))
    return rows


@needs_kcat
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume_roundtrip(sidecar, topic_name, codec):
    b = sidecar.bootstrap
    create_topic(b, topic_name, 2)
    rows0 = _kcat_batch(700, "p0")
    rows1 = _kcat_batch(350, "p1")
    t0 = now_ms()
    headers = ["-H", "trace=abc-123", "-H", "dup=first", "-H", "dup=second", "-H", "empty="]
    kcat("-P", "-b", b, "-t", topic_name, "-p", "0", "-K:", "-z", codec, *headers,
         stdin="".join(line + "\n" for line, _, _ in rows0).encode())
    # -Z: empty keys and values are sent as null; no headers on this partition.
    kcat("-P", "-b", b, "-t", topic_name, "-p", "1", "-K:", "-Z", "-z", codec,
         stdin="".join(line + "\n" for line, _, _ in rows1).encode())
    t1 = now_ms()

    def nullify(s: str | None) -> str | None:
        return None if s == "" else s

    want = {
        0: [(i, k, v, "trace=abc-123,dup=first,dup=second,empty=") for i, (_, k, v) in enumerate(rows0)],
        1: [(i, nullify(k), nullify(v), "") for i, (_, k, v) in enumerate(rows1)],
    }

    # kcat reads it back: exact offsets, keys, values, headers; CreateTime set by librdkafka.
    got = kcat_consume(b, topic_name, "-o", "beginning")
    for p in (0, 1):
        recs = [r for r in got if r["partition"] == p]
        assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in recs] == want[p], f"partition {p}"
        assert all(t0 <= r["timestamp"] <= t1 for r in recs), f"partition {p}: timestamps outside [{t0}, {t1}]"

    # A Python client sees the same bytes and the same header list (duplicates and empty value kept).
    read = python_read(b, topic_name, {0: len(rows0), 1: len(rows1)})

    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    for p in (0, 1):
        assert [(m.offset, m.key, m.value) for m in read[p]] == [(o, enc(k), enc(v)) for o, k, v, _ in want[p]]
    assert {tuple(map(tuple, m.headers)) for m in read[0]} == {(("trace", b"abc-123"), ("dup", b"first"), ("dup", b"second"), ("empty", b""))}
    assert {tuple(map(tuple, m.headers)) for m in read[1]} == {()}
    kcat_ts = {(r["partition"], r["offset"]): r["timestamp"] for r in got}
    assert all(m.timestamp == kcat_ts[(p, m.offset)] and m.timestamp_type == 0 for p in (0, 1) for m in read[p])


@needs_kcat
def test_kcat_consume_positions(sidecar, topic_name):
    """-o <offset> -c <count>, -o -<n> (relative to the end), -o s@<timestamp> (ListOffsets by time)."""
    b = sidecar.bootstrap
    create_topic(b, topic_name, 1)
    kcat("-P", "-b", b, "-t", topic_name, "-p", "0", "-K:", "-z", "lz4",
         stdin="".join(f"k{i}:v{i}\n" for i in range(100)).encode())
    kcat("-P", "-b", b, "-t", topic_name, "-p", "0", "-K:", stdin=b"late:record\n")
    everything = kcat_consume(b, topic_name, "-p", "0", "-o", "beginning")
    assert [r["offset"] for r in everything] == list(range(101))
    assert [(r["key"], r["value"]) for r in everything] == [(f"k{i}", f"v{i}") for i in range(100)] + [("late", "record")]

    mid = kcat_consume(b, topic_name, "-p", "0", "-o", "37", "-c", "5")
    assert [(r["offset"], r["key"]) for r in mid] == [(37 + i, f"k{37 + i}") for i in range(5)]

    tail = kcat_consume(b, topic_name, "-p", "0", "-o", "-3")
    assert [(r["offset"], r["key"]) for r in tail] == [(98, "k98"), (99, "k99"), (100, "late")]

    # From a timestamp: the first record whose timestamp >= the target.
    late_ts = everything[-1]["timestamp"]
    expected_first = min(r["offset"] for r in everything if r["timestamp"] >= late_ts)
    from_ts = kcat_consume(b, topic_name, "-p", "0", "-o", f"s@{late_ts}")
    assert [r["offset"] for r in from_ts] == list(range(expected_first, 101))
    assert kcat_consume(b, topic_name, "-p", "0", "-o", f"s@{late_ts + 3_600_000}") == []


@needs_kcat
def test_kcat_metadata_listing(sidecar, topic_name):
    b = sidecar.bootstrap
    create_topic(b, topic_name, 3)
    other = topic_name + "-other"
    create_topic(b, other, 1)

    listing = json.loads(kcat("-L", "-J", "-b", b).stdout)
    assert listing["brokers"] == [{"id": 1, "name": f"127.0.0.1:{sidecar.port}"}]
    assert listing["controllerid"] == 1
    topics = {t["topic"]: t for t in listing["topics"]}
    assert {topic_name, other} <= set(topics)
    for name, n in ((topic_name, 3), (other, 1)):
        t = topics[name]
        assert "error" not in t, t
        assert sorted(t["partitions"], key=lambda p: p["partition"]) == [
            {"partition": i, "leader": 1, "replicas": [{"id": 1}], "isrs": [{"id": 1}]} for i in range(n)
        ]

    one = json.loads(kcat("-L", "-J", "-b", b, "-t", topic_name).stdout)
    assert [t["topic"] for t in one["topics"]] == [topic_name]

    text = kcat("-L", "-b", b, "-t", topic_name).stdout.decode()
    assert f"broker 1 at 127.0.0.1:{sidecar.port} (controller)" in text
    assert f'topic "{topic_name}" with 3 partitions:' in text
    for i in range(3):
        assert f"partition {i}, leader 1, replicas: 1, isrs: 1" in text


# =========================================================================== kafkajs


def kafkajs(command: str, spec: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    assert NODE is not None
    spec_path = tmp_path / f"kafkajs-{command}-{time.monotonic_ns()}.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    proc = subprocess.run([NODE, str(ROUNDTRIP_JS), command, str(spec_path)], cwd=NODE_DIR, env=env,
                          capture_output=True, timeout=TOOL_TIMEOUT_S)
    assert proc.returncode == 0, f"roundtrip.js {command} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-3000:]}"
    return json.loads(proc.stdout)


def kafkajs_admin(bootstrap: str, tmp_path: Path, *ops: tuple[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    out = kafkajs("admin", {"brokers": [bootstrap], "ops": [{"op": op, "args": args} for op, args in ops]}, tmp_path)
    return out["results"]


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _kafkajs_records(n: int, base_ts: int) -> list[dict[str, Any]]:
    """Records as kafkajs can send them. kafkajs groups headers by key (object of arrays), so
    the expected header order is: keys in first-appearance order, each key's values in order.
    kafkajs cannot send null header values (it calls Buffer.byteLength(null))."""
    out = []
    for i in range(n):
        key: bytes | None = f"js-key-{i}".encode()
        value: bytes | None = f"js-value-{i}|".encode() * (1 + i % 11)
        headers: list[tuple[str, bytes]] = [("seq", str(i).encode())]
        kind = i % 6
        if kind == 0:
            key = None
        elif kind == 1:
            value = None
        elif kind == 2:
            key, value = b"", b""
        elif kind == 3:
            headers = [("dup", b"one"), ("dup", b"two"), ("dup", b""), ("empty", b"")]
        elif kind == 4:
            headers = []
        out.append({"partition": (i // 4) % 2, "key": key, "value": value, "headers": headers, "timestamp": base_ts + 3 * i})
    return out


@needs_kafkajs
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kafkajs_produce_read_by_python(sidecar, topic_name, compression, tmp_path):
    b = sidecar.bootstrap
    create_topic(b, topic_name, 2)
    records = _kafkajs_records(2000, now_ms() - 600_000)
    chunk = 250
    sends = [
        {
            "topic": topic_name,
            "compression": compression,
            "messages": [
                {"partition": r["partition"], "key": _b64(r["key"]), "value": _b64(r["value"]),
                 "headers": [[k, _b64(v)] for k, v in r["headers"]], "timestamp": r["timestamp"]}
                for r in records[i : i + chunk]
            ],
        }
        for i in range(0, len(records), chunk)
    ]
    results = kafkajs("produce", {"brokers": [b], "sends": sends}, tmp_path)["results"]

    # Expected offsets: 0..n-1 per partition in send order; each send is one batch per partition.
    counts = {0: 0, 1: 0}
    expected: dict[int, list[tuple[int, dict[str, Any]]]] = {0: [], 1: []}
    for send_index, i in enumerate(range(0, len(records), chunk)):
        firsts = {}
        for r in records[i : i + chunk]:
            firsts.setdefault(r["partition"], counts[r["partition"]])
            expected[r["partition"]].append((counts[r["partition"]], r))
            counts[r["partition"]] += 1
        got = {int(m["partition"]): (int(m["baseOffset"]), m["errorCode"], m["logAppendTime"]) for m in results[send_index]}
        assert got == {p: (o, 0, "-1") for p, o in firsts.items()}, f"send {send_index}"

    read = python_read(b, topic_name, counts)
    for p in (0, 1):
        assert [m.offset for m in read[p]] == [o for o, _ in expected[p]]
        for m, (o, r) in zip(read[p], expected[p], strict=True):
            got = (m.key, m.value, [tuple(h) for h in m.headers], m.timestamp, m.timestamp_type)
            assert got == (r["key"], r["value"], r["headers"], r["timestamp"], 0), f"partition {p} offset {o}"


@needs_kafkajs
def test_kafkajs_admin_ops(sidecar, topic_name, tmp_path):
    b = sidecar.bootstrap
    other = topic_name + "-validate-only"
    bad = topic_name + "-bad-config"
    res = kafkajs_admin(
        b, tmp_path,
        ("createTopics", {"topics": [{"topic": topic_name, "numPartitions": 3,
                                      "configEntries": [{"name": "retention.ms", "value": "86400000"}]}]}),
        ("createTopics", {"topics": [{"topic": topic_name, "numPartitions": 3}]}),
        ("createTopics", {"validateOnly": True, "waitForLeaders": False, "topics": [{"topic": other, "numPartitions": 2}]}),
        ("createTopics", {"topics": [{"topic": bad, "numPartitions": 1,
                                      "configEntries": [{"name": "cleanup.policy", "value": "bogus"}]}]}),
        ("listTopics", None),
        ("fetchTopicMetadata", {"topics": [topic_name]}),
        ("fetchTopicOffsets", {"topic": topic_name}),
    )
    create, create_again, validate_only, create_bad, listed, meta, empty_offsets = res
    assert create == {"op": "createTopics", "ok": True, "value": True}
    assert create_again == {"op": "createTopics", "ok": True, "value": False}  # TOPIC_ALREADY_EXISTS is not an error for kafkajs
    assert validate_only["ok"], validate_only
    assert not create_bad["ok"], create_bad
    assert [e["type"] for e in create_bad["error"]["errors"]] == ["INVALID_CONFIG"], create_bad
    assert listed["ok"]
    assert topic_name in listed["value"]
    assert other not in listed["value"], "validateOnly created the topic"
    assert bad not in listed["value"]
    [tmeta] = meta["value"]["topics"]
    assert tmeta["name"] == topic_name
    assert sorted((p["partitionId"], p["leader"], p["replicas"], p["isr"], p["partitionErrorCode"]) for p in tmeta["partitions"]) == [
        (i, 1, [1], [1], 0) for i in range(3)
    ]
    assert sorted(empty_offsets["value"], key=lambda x: x["partition"]) == [
        {"partition": i, "offset": "0", "high": "0", "low": "0"} for i in range(3)
    ]

    # Data with known CreateTimes, written by a Python client: partition p gets 10*(p+1) records.
    from kafka import KafkaProducer

    base = now_ms() - 600_000
    producer = KafkaProducer(bootstrap_servers=b, linger_ms=5)
    stamps: dict[int, list[int]] = {}
    for p in range(3):
        stamps[p] = [base + 100 * i + p for i in range(10 * (p + 1))]
        for i, ts in enumerate(stamps[p]):
            producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i, partition=p, timestamp_ms=ts)
    producer.flush(timeout=DEADLINE_S)
    producer.close(timeout=5)

    target = base + 550  # record i of partition p has ts base+100*i+p: the first at or after it is i=6
    res = kafkajs_admin(
        b, tmp_path,
        ("fetchTopicOffsets", {"topic": topic_name}),
        ("fetchTopicOffsetsByTimestamp", {"topic": topic_name, "timestamp": target}),
        ("fetchTopicOffsetsByTimestamp", {"topic": topic_name, "timestamp": base - 1}),
        ("fetchTopicOffsetsByTimestamp", {"topic": topic_name, "timestamp": base + 10_000}),
        ("deleteTopics", {"topics": [topic_name]}),
        ("listTopics", None),
        ("fetchTopicOffsets", {"topic": topic_name}),
    )
    offsets, by_ts, by_ts_before, by_ts_after, deleted, listed_after, offsets_after = res
    assert sorted(offsets["value"], key=lambda x: x["partition"]) == [
        {"partition": p, "offset": str(10 * (p + 1)), "high": str(10 * (p + 1)), "low": "0"} for p in range(3)
    ]
    want_mid = {p: min(i for i, ts in enumerate(stamps[p]) if ts >= target) for p in range(3)}
    assert want_mid == {0: 6, 1: 6, 2: 6}
    assert {x["partition"]: int(x["offset"]) for x in by_ts["value"]} == want_mid
    assert {x["partition"]: int(x["offset"]) for x in by_ts_before["value"]} == {0: 0, 1: 0, 2: 0}
    # Past the last timestamp the broker answers -1 and kafkajs substitutes the high watermark.
    assert {x["partition"]: int(x["offset"]) for x in by_ts_after["value"]} == {0: 10, 1: 20, 2: 30}
    assert deleted == {"op": "deleteTopics", "ok": True, "value": None}
    assert topic_name not in listed_after["value"]
    assert not offsets_after["ok"], offsets_after
