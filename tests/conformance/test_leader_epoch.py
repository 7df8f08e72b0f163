"""Conformance: OffsetForLeaderEpoch (API 23), raw and as librdkafka uses it.

Raw: the answer for the current epoch (the log end offset), an undefined (-1), a later and an
earlier epoch, fenced and unknown current leader epochs, an unknown partition and topic, a
follower's replica id, and each version Kafka 4.1 serves (v2-v4); on an empty partition, after
appends and after DeleteRecords moved the log start offset (the epoch's start offset moves
with it).

librdkafka: a seek carrying a leader epoch is validated with OffsetForLeaderEpoch (KIP-320). A
seek past the end of the log in the current epoch is "log truncation": the consumer goes on at
the epoch's end offset (Kafka) rather than fetching out of range and resetting to the start.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import TopicPartition as CkTopicPartition

from tests.conformance.clients import ck_consumer, ck_produce
from tests.conformance.harness import Ctx
from tests.conformance.wire import Wire, batch

OFFSET_FOR_LEADER_EPOCH = 23
VERSIONS = (2, 3, 4)

# (label, partition, current_leader_epoch, leader_epoch)
CASES = [
    ("current_epoch", 0, -1, 0),
    ("current_leader_epoch_matches", 0, 0, 0),
    ("undefined_epoch", 0, -1, -1),
    ("later_epoch", 0, -1, 1),
    ("earlier_epoch", 0, -1, -5),
    ("current_leader_epoch_unknown", 0, 1, 0),
    ("current_leader_epoch_fenced", 0, -2, 0),
    ("other_partition", 1, -1, 0),
    ("unknown_partition", 7, -1, 0),
]


def offset_for_leader_epoch(w: Wire, topic: str, cases: list[tuple[str, int, int, int]], version: int = 4,
                            replica_id: int = -1) -> dict[str, Any]:
    body = {"replica_id": replica_id, "topics": [{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch} for _, p, current, epoch in cases]}]}
    r = w.call(OFFSET_FOR_LEADER_EPOCH, version, body)
    assert [t["topic"] for t in r["topics"]] == [topic], r
    parts = r["topics"][0]["partitions"]
    assert len(parts) == len(cases), r
    return {label: [p["partition"], p["error_code"], p["leader_epoch"], p["end_offset"]] for (label, *_), p in zip(cases, parts, strict=True)}


def scenario_offset_for_leader_epoch(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, missing = ctx.topic("t"), ctx.topic("missing")
    w.create_topic(t, partitions=2)
    obs: dict[str, Any] = {}
    obs["empty"] = offset_for_leader_epoch(w, t, CASES)
    for i in range(3):
        r = w.produce(t, batch([f"v{i}a".encode(), f"v{i}b".encode()]))
        assert r["error"] == 0, r
    obs["after_6"] = {v: offset_for_leader_epoch(w, t, CASES, version=v) for v in VERSIONS}
    obs["delete_records"] = w.delete_records(t, 0, 4)
    obs["after_delete_records"] = offset_for_leader_epoch(w, t, CASES)
    obs["follower_replica_id"] = offset_for_leader_epoch(w, t, CASES[:1], replica_id=1)
    obs["unknown_topic"] = offset_for_leader_epoch(w, missing, [("p0", 0, -1, 0)])
    return obs


def test_offset_for_leader_epoch(conform):
    obs = conform(scenario_offset_for_leader_epoch)
    assert obs["empty"]["current_epoch"] == [0, 0, 0, 0]
    assert obs["after_6"][4]["current_epoch"] == [0, 0, 0, 6]
    assert obs["after_6"][4]["undefined_epoch"] == [0, 0, -1, -1]
    assert obs["after_6"][4]["current_leader_epoch_fenced"] == [0, 74, -1, -1]  # FENCED_LEADER_EPOCH
    assert obs["after_6"][4]["current_leader_epoch_unknown"] == [0, 75, -1, -1]  # UNKNOWN_LEADER_EPOCH
    assert obs["after_6"][4]["unknown_partition"] == [7, 3, -1, -1]
    assert obs["after_delete_records"]["earlier_epoch"] == [0, 0, -5, 4]
    assert obs["unknown_topic"] == {"p0": [0, 3, -1, -1]}


# --------------------------------------------------------------------------- librdkafka


def read(c: Any, count: int, timeout: float) -> tuple[list[int], list[str]]:
    """Offsets (and error names) consumed until ``count`` offsets, bounded; then a short quiet look."""
    offsets: list[int] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while len(offsets) < count and time.monotonic() < deadline:
        for m in c.consume(num_messages=50, timeout=0.1):
            if m.error() is None:
                offsets.append(m.offset())
            else:
                errors.append(m.error().name())
    for m in c.consume(num_messages=50, timeout=0.3):
        if m.error() is None:
            offsets.append(m.offset())
    return offsets, errors


def scenario_seek_with_epoch(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t)
    ck_produce(ctx.bootstrap, t, [(0, None, f"first-{i}".encode()) for i in range(6)])
    c = ck_consumer(ctx.bootstrap)
    ctx.on_close(c.close)
    c.assign([CkTopicPartition(t, 0, 0)])
    obs: dict[str, Any] = {}
    obs["first"], _ = read(c, 6, 20)
    # Beyond the log end (6) in the current epoch: validated with OffsetForLeaderEpoch (end offset 6).
    c.seek(CkTopicPartition(t, 0, 10, leader_epoch=0))
    obs["after_seek"], obs["after_seek_errors"] = read(c, 1, 2)
    ck_produce(ctx.bootstrap, t, [(0, None, f"second-{i}".encode()) for i in range(3)])
    obs["after_produce"], obs["after_produce_errors"] = read(c, 3, 20)
    return obs


def test_seek_with_leader_epoch(conform):
    obs = conform(scenario_seek_with_epoch)
    assert obs["first"] == list(range(6))
    assert obs["after_seek"] == []  # truncation detected: on at the epoch's end offset (6), not from the start
    assert obs["after_produce"] == [6, 7, 8]
