"""Conformance: retention, DeleteRecords and compaction outcomes, as clients see them.

Both brokers run with ``log.retention.check.interval.ms=1000``, ``log.initial.task.delay.ms=0``,
``log.segment.delete.delay.ms=1000`` and ``log.cleaner.backoff.ms=500`` (``BROKER_OVERRIDES``).
Records are produced as raw batches with fixed sizes and timestamps, so both brokers see the
same bytes and roll segments at the same offsets (``segment.bytes`` = 1 MiB, Kafka 4's minimum:
ten 100 kB batches per segment). Each scenario waits (bounded) for the background work to
reach the outcome Kafka's rules give, then observes; a broker that gets somewhere else shows
up in the comparison.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka_sidecar.protocol.records import decode_batches

from tests.conformance.clients import ck_read, kp_read
from tests.conformance.harness import Ctx, wait_for
from tests.conformance.wire import DELETE_RECORDS, LIST_OFFSETS, TOPIC_RESOURCE, Wire, batch, now_ms

SEGMENT_BYTES = 1_048_576
RECORD = b"x" * 10_000  # 10 records a batch: ~100 kB, so ten batches fill a 1 MiB segment
DAY_MS = 86_400_000
SETTLE_S = 2.5  # two retention checks after the outcome was first seen: nothing more may change


def big_batches(w: Wire, topic: str, count: int, timestamp: int) -> list[int]:
    offsets = []
    for i in range(count):
        r = w.produce(topic, batch([RECORD] * 10, keys=[f"b{i}-{j}".encode() for j in range(10)], timestamp=timestamp))
        assert r["error"] == 0, r
        offsets.append(r["base_offset"])
    return offsets


def log_view(ctx: Ctx, w: Wire, topic: str) -> dict[str, Any]:
    first, last = w.offsets(topic)
    at0 = w.fetch(topic, 0, 0)
    at_first = w.fetch(topic, 0, first)
    batches = decode_batches(at_first["records"])
    return {
        "earliest": first, "latest": last,
        "fetch_0": {"error": at0["error"], "log_start_offset": at0["log_start_offset"], "high_watermark": at0["high_watermark"]},
        "fetch_earliest": {"error": at_first["error"], "log_start_offset": at_first["log_start_offset"],
                           "first_batch": batches[0].base_offset if batches else None},
    }


# --------------------------------------------------------------------------- retention


def scenario_retention(ctx: Ctx) -> dict[str, Any]:
    ctx.target.require_fast_timers()
    w = ctx.wire()
    mixed, all_old, by_size, keep = ctx.topic("time-mixed"), ctx.topic("time-all-old"), ctx.topic("size"), ctx.topic("infinite")
    hour = "3600000"
    # Created without limits, limited once everything is written: a retention check in the middle of
    # producing (every second) would otherwise see an all-expired log and delete it whole.
    for t in (mixed, all_old, by_size, keep):
        w.create_topic(t, configs={"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1"})
    old, now = now_ms() - 2 * DAY_MS, now_ms()
    obs: dict[str, Any] = {"produced": {}}
    # 20 two-day-old batches then 6 new ones: the two full old segments go, the active one stays.
    obs["produced"]["time-mixed"] = big_batches(w, mixed, 20, old) + big_batches(w, mixed, 6, now)
    # Everything old: Kafka rolls the active segment and deletes all of it.
    obs["produced"]["time-all-old"] = big_batches(w, all_old, 25, old)
    # retention.bytes = one segment: the oldest segments go while the rest stays above it.
    obs["produced"]["size"] = big_batches(w, by_size, 35, now)
    # Old records, no time limit: nothing goes.
    obs["produced"]["infinite"] = big_batches(w, keep, 15, old)
    obs["limits_set"] = [
        w.incremental_alter_configs(TOPIC_RESOURCE, mixed, [("retention.ms", 0, hour)]),
        w.incremental_alter_configs(TOPIC_RESOURCE, all_old, [("retention.ms", 0, hour)]),
        w.incremental_alter_configs(TOPIC_RESOURCE, by_size, [("retention.ms", 1, None), ("retention.bytes", 0, str(SEGMENT_BYTES))]),
    ]

    def moved() -> bool:
        return all(w.offsets(t)[0] > 0 for t in (mixed, all_old, by_size))

    obs["log_start_moved"] = bool(wait_for(moved, timeout=30, interval=0.25))
    time.sleep(SETTLE_S)
    obs["after"] = {ctx.names[t]: log_view(ctx, w, t) for t in (mixed, all_old, by_size, keep)}
    # After everything expired, new records continue the offsets and are kept.
    r = w.produce(all_old, batch([b"fresh"]))
    obs["all_old_then_produce"] = {"error": r["error"], "base_offset": r["base_offset"], "log_start_offset": r["log_start_offset"]}
    obs["all_old_then_offsets"] = w.offsets(all_old)
    first, last = w.offsets(mixed)
    got = kp_read(ctx.bootstrap, mixed, 0, last - first)
    obs["mixed_consumed"] = {"count": len(got), "first": got[0][0] if got else None, "last": got[-1][0] if got else None}
    return obs


def test_retention(conform):
    obs = conform(scenario_retention)
    assert obs["log_start_moved"]
    assert obs["after"]["time-mixed"]["earliest"] == 200 and obs["after"]["time-mixed"]["latest"] == 260
    assert obs["after"]["time-all-old"]["earliest"] == obs["after"]["time-all-old"]["latest"] == 250
    assert obs["after"]["time-mixed"]["fetch_0"]["error"] == 1  # below the log start: OFFSET_OUT_OF_RANGE
    assert obs["after"]["infinite"]["earliest"] == 0
    assert obs["all_old_then_produce"]["base_offset"] == 250


# --------------------------------------------------------------------------- DeleteRecords


def scenario_delete_records(ctx: Ctx) -> dict[str, Any]:
    ctx.target.require_fast_timers()
    w = ctx.wire()
    t = ctx.topic("t")
    group = ctx.group("g")
    w.create_topic(t, partitions=2, configs={"segment.bytes": str(SEGMENT_BYTES)})
    base = now_ms() - 60_000
    obs: dict[str, Any] = {}
    for i in range(15):  # partition 0: 150 records over two segments
        assert w.produce(t, batch([RECORD] * 10, timestamps=[base + 10 * i + j for j in range(10)]))["error"] == 0
    for i in range(3):  # partition 1: 3 small records
        assert w.produce(t, batch([f"p1-{i}".encode()], timestamp=base + i), partition=1)["error"] == 0

    # One request for both partitions: p0 to 135 (in the second segment), p1 to its high watermark;
    # right behind it (same write, before the next retention check can remove the first segment)
    # ListOffsets by a timestamp older than every record.
    body, by_old_ts = w.pipeline([
        (DELETE_RECORDS, 2, {"topics": [{"name": t, "partitions": [
            {"partition_index": 0, "offset": 135}, {"partition_index": 1, "offset": -1}]}], "timeout": 15_000}),
        (LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": base - 1000}]}]}),
    ])
    obs["list_offsets_by_old_timestamp"] = by_old_ts["topics"][0]["partitions"][0]["offset"]
    obs["delete_both"] = sorted((p["partition_index"], p["error_code"], p["low_watermark"]) for p in body["topics"][0]["partitions"])
    obs["offsets_p0"], obs["offsets_p1"] = w.offsets(t, 0), w.offsets(t, 1)
    obs["fetch_p0_at_20"] = {k: v for k, v in w.fetch(t, 0, 20).items() if k != "records"}
    p = w.fetch(t, 0, 135)
    obs["fetch_p0_at_135"] = {"error": p["error"], "log_start_offset": p["log_start_offset"],
                              "first_batch_base": decode_batches(p["records"])[0].base_offset}
    obs["lower_than_before"] = w.delete_records(t, 0, 20)
    obs["equal_to_before"] = w.delete_records(t, 0, 135)
    obs["kafka_python_from_earliest"] = [o for o, _, _ in kp_read(ctx.bootstrap, t, 0, 15)][:3]
    obs["confluent_from_beginning"] = [(p_, o) for p_, o, _, _ in ck_read(ctx.bootstrap, t, [0], 15)][:3]

    # A committed offset below the log start: the consumer resets (auto.offset.reset=earliest).
    c = Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        _commit_retrying(c, [CkTopicPartition(t, 0, 10)])
        c.assign([CkTopicPartition(t, 0)])
        got = None
        deadline = time.monotonic() + 20
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got = m.offset()
        obs["group_resumes_below_log_start_at"] = got
    finally:
        c.close()

    # Retention then removes the segments below the log start; clients see no change.
    time.sleep(SETTLE_S)
    obs["offsets_p0_after_retention_check"] = w.offsets(t, 0)
    obs["to_hw"] = w.delete_records(t, 0, -1)
    obs["fetch_at_new_start"] = {k: v for k, v in w.fetch(t, 0, 150).items() if k != "records"}
    r = w.produce(t, batch([b"after"]))
    obs["produce_after"] = {"error": r["error"], "base_offset": r["base_offset"], "log_start_offset": r["log_start_offset"]}
    obs["offsets_final"] = w.offsets(t, 0)
    obs["beyond_hw"] = w.delete_records(t, 0, 152)
    return obs


def test_delete_records(conform):
    obs = conform(scenario_delete_records)
    assert obs["delete_both"] == [[0, 0, 135], [1, 0, 3]]
    assert obs["fetch_p0_at_20"]["error"] == 1
    assert obs["fetch_p0_at_135"]["first_batch_base"] == 130
    assert obs["lower_than_before"] == {"error": 0, "low_watermark": 135}
    assert obs["group_resumes_below_log_start_at"] == 135
    assert obs["produce_after"]["base_offset"] == 150


# --------------------------------------------------------------------------- compaction

KEYS = [f"k{i:02d}" for i in range(20)]
# Each round is one or two batches with timestamps one second after the previous round's, so
# segment.ms=100 rolls a new segment at every round; the last round stays in the active segment.
ROUNDS: list[list[tuple[str, str | None]]] = [
    [(k, f"r0-{k}") for k in KEYS],
    [(k, f"r1-{k}") for k in KEYS[:10]],
    [(k, f"r2-{k}") for k in KEYS[::2]],
    [(k, f"r3-{k}") for k in KEYS[::5]] + [("k01", None), ("k02", None)],
    [("k03", "r4-k03"), ("k04", "r4-k04"), ("k05", None)],
]


def expected_survivors() -> list[tuple[int, str, str | None]]:
    """Kafka's rule: below the active segment a record stays iff it is its key's latest there."""
    flat = [(i, k, v, r) for i, (r, k, v) in enumerate((r, k, v) for r, rnd in enumerate(ROUNDS) for k, v in rnd)]
    last_round = len(ROUNDS) - 1
    latest = {k: i for i, k, _, r in flat if r < last_round}
    return [(i, k, v) for i, k, v, r in flat if r == last_round or latest[k] == i]


def scenario_compaction(ctx: Ctx) -> dict[str, Any]:
    ctx.target.require_fast_timers()
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t, configs={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100",
                               "min.compaction.lag.ms": "0"})
    base = now_ms() - 60_000
    produced = []
    for r, rnd in enumerate(ROUNDS):
        halves = [rnd[:10], rnd[10:]] if len(rnd) > 10 else [rnd]
        for h, part in enumerate(halves):
            res = w.produce(t, batch([None if v is None else v.encode() for _, v in part], keys=[k.encode() for k, _ in part],
                                     timestamps=[base + 1000 * r + 10 * h + j for j in range(len(part))]))
            produced.append((res["error"], res["base_offset"]))
    expected = expected_survivors()

    def survivors() -> list[tuple[int, str, str | None]]:
        return [(rec.offset, rec.key.decode(), text(rec.value)) for rec in w.records(t)]

    reached = wait_for(lambda: survivors() == expected, timeout=30, interval=0.25)
    time.sleep(1.5)  # three cleaner backoffs: nothing more may happen
    batches = w.fetch_all(t)
    final = survivors()
    view: dict[str, str | None] = {}
    for _, k, v in final:
        view[k] = v
    return {
        "produced": produced,
        "reached_kafka_outcome": bool(reached),
        "survivors": final,
        "key_value_map": {k: v for k, v in sorted(view.items()) if v is not None},
        "tombstones_kept": sorted(k for k, v in view.items() if v is None),
        "offsets": w.offsets(t),
        "batches": [(b.base_offset, b.last_offset_delta, b.record_count, b.has_delete_horizon) for b in batches],
        "consumed_by_confluent": len(ck_read(ctx.bootstrap, t, [0], len(final))),
    }


def text(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def test_compaction(conform):
    obs = conform(scenario_compaction)
    assert obs["reached_kafka_outcome"], obs["survivors"]
    assert obs["survivors"] == [list(s) for s in expected_survivors()]
    assert obs["key_value_map"]["k03"] == "r4-k03" and "k05" not in obs["key_value_map"]
    assert obs["offsets"] == [0, 49]


def _commit_retrying(consumer: Consumer, offsets: list[CkTopicPartition], timeout: float = 30.0) -> None:
    """A synchronous commit, retried while the group coordinator is not ready: a freshly started
    Kafka answers the first commits NOT_COORDINATOR while it creates and loads __consumer_offsets,
    which librdkafka hands back from a synchronous commit instead of retrying."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as e:
            retriable = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                             KafkaError.COORDINATOR_NOT_AVAILABLE)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
