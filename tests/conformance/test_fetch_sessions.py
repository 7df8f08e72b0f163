"""Conformance: incremental fetch sessions (KIP-227), raw and through Kafka's Java consumer.

Raw Fetch requests (v16 by topic id, v12 by name) walk a session's life: a full fetch opens it
(a nonzero session id), incremental fetches add, update and forget partitions and are answered
with only the partitions that changed, then the session's errors: a stale or future epoch
(INVALID_FETCH_SESSION_EPOCH), an unknown id (FETCH_SESSION_ID_NOT_FOUND), a session made with
topic ids continued by name (FETCH_SESSION_TOPIC_ID_ERROR), a session id no cache shard covers,
and epoch -1 closing the session. Session ids are random: the observation says only whether
one is 0 and whether it is the session opened. Kafka's Java consumer (kafka-console-consumer.sh,
its FetchSessionHandler's DEBUG lines) reports the session it was given and its incremental answers.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.protocol.records import decode_batches

from tests.conformance.clients import java_fetch_sessions
from tests.conformance.harness import Ctx
from tests.conformance.wire import batch

INT32_MAX = 2**31 - 1


def _view(body: dict[str, Any], names: dict[Any, str], opened: int | None = None) -> dict[str, Any]:
    """A Fetch answer without its random session id: the error, whether the session id is 0, the
    session opened (``opened``) or another one, and per partition (topic, index, error, high
    watermark, records)."""
    sid = body["session_id"]
    parts = []
    for t in body["responses"]:
        topic = names.get(t.get("topic_id"), t.get("topic"))
        for p in t["partitions"]:
            records = p["records"] or b""
            count = sum(len(b.records) for b in decode_batches(records)) if records else 0
            parts.append([topic, p["partition_index"], p["error_code"], p["high_watermark"], count])
    return {"error": body["error_code"], "session": "none" if sid == 0 else ("opened" if sid == opened else "other"),
            "partitions": parts}


def scenario_fetch_sessions(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t, u = ctx.topic("t"), ctx.topic("u")
    w.create_topic(t, partitions=3)
    w.create_topic(u)
    ids = {x["name"]: x["topic_id"] for x in w.metadata([t, u])["topics"]}
    names = {ids[t]: t, ids[u]: u}
    assert w.produce(t, batch([b"a", b"b"]), partition=0)["error"] == 0
    assert w.produce(t, batch([b"c"]), partition=1)["error"] == 0
    obs: dict[str, Any] = {}

    def fetch(version: int, sid: int, epoch: int, topics=(), forgotten=None, opened: int | None = None) -> dict[str, Any]:
        return _view(w.fetch_session(version, sid, epoch, list(topics), forgotten), names, opened)

    body = w.fetch_session(16, 0, 0, [(ids[t], [(0, 0), (1, 0), (2, 0)])])
    sid = body["session_id"]
    obs["full_opens"] = _view(body, names, sid)
    # The client moves its offsets to the ends: listed but unchanged, the partitions are left out.
    obs["incremental_offsets_moved"] = fetch(16, sid, 1, [(ids[t], [(0, 2), (1, 1)])], opened=sid)
    obs["incremental_nothing_new"] = fetch(16, sid, 2, opened=sid)
    assert w.produce(t, batch([b"d"]), partition=2)["error"] == 0
    obs["incremental_new_record"] = fetch(16, sid, 3, opened=sid)
    obs["incremental_adds_a_topic"] = fetch(16, sid, 4, [(ids[u], [(0, 0)])], opened=sid)
    obs["incremental_forgets"] = fetch(16, sid, 5, [], [(ids[t], [0, 1, 2])], opened=sid)
    obs["stale_epoch"] = fetch(16, sid, 5, opened=sid)
    obs["future_epoch"] = fetch(16, sid, 99, opened=sid)
    obs["unknown_session"] = fetch(16, sid - 1 if sid > 1 else sid + 1, 6, opened=sid)
    obs["session_0_incremental"] = fetch(16, 0, 1, opened=sid)
    obs["by_name_on_an_id_session"] = fetch(12, sid, 6, opened=sid)
    obs["still_there_after_errors"] = fetch(16, sid, 6, [(ids[u], [(0, 0)])], opened=sid)
    obs["session_id_past_the_shards"] = fetch(16, INT32_MAX, 1, opened=sid)
    obs["final_epoch_closes"] = fetch(16, sid, -1, [(ids[u], [(0, 0)])], opened=sid)
    obs["closed_session"] = fetch(16, sid, 7, opened=sid)
    # By name (v12): its own session; topic ids on it are the mismatch the other way.
    body = w.fetch_session(12, 0, 0, [(t, [(0, 2)])])
    sid12 = body["session_id"]
    obs["v12_full_opens"] = _view(body, names, sid12)
    obs["v12_incremental"] = fetch(12, sid12, 1, opened=sid12)
    obs["ids_on_a_name_session"] = fetch(16, sid12, 2, opened=sid12)
    obs["v12_forget_all_is_sessionless"] = fetch(12, sid12, 2, [], [(t, [0])], opened=sid12)
    obs["v12_after_forget_all"] = fetch(12, sid12, 3, opened=sid12)
    return obs


def test_fetch_sessions_raw(conform):
    obs = conform(scenario_fetch_sessions)
    assert obs["full_opens"]["session"] == "opened"
    assert [p[:2] + p[4:] for p in obs["full_opens"]["partitions"]] == [["<t>", 0, 2], ["<t>", 1, 1], ["<t>", 2, 0]]
    assert obs["incremental_offsets_moved"] == {"error": 0, "session": "opened", "partitions": []}
    assert obs["incremental_new_record"]["partitions"] == [["<t>", 2, 0, 1, 1]]
    assert obs["stale_epoch"] == {"error": 71, "session": "none", "partitions": []}
    assert obs["unknown_session"]["error"] == 70 and obs["session_0_incremental"]["error"] == 70
    assert obs["by_name_on_an_id_session"]["error"] == 106 and obs["ids_on_a_name_session"]["error"] == 106
    assert obs["still_there_after_errors"]["session"] == "opened"
    assert obs["final_epoch_closes"]["session"] == "none" and obs["closed_session"]["error"] == 70


def scenario_java_consumer(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    t = ctx.topic("t")
    w.create_topic(t, partitions=3)

    def produce_one(i: int) -> None:
        assert w.produce(t, batch([f"r{i}".encode()]), partition=i % 3)["error"] == 0

    with tempfile.TemporaryDirectory(prefix="java-fetch-sessions-") as tmp:
        run = java_fetch_sessions(ctx.bootstrap, t, Path(tmp), 9, produce_one)
    created, incremental = run["created"], run["incremental"]
    return {
        "records": sorted(run["records"]),
        "sessions_created": len(created) >= 1,
        "session_ids_nonzero": bool(created) and all(c != 0 for c in created),
        "incremental_answers": len(incremental) >= 2,
        "incremental_on_created_sessions": bool(incremental) and set(incremental) <= set(created),
    }


def test_java_consumer_uses_fetch_sessions(conform):
    from tests.support import kafka_tool_missing

    missing = kafka_tool_missing("kafka-console-consumer.sh")
    if missing:
        pytest.skip(missing)
    obs = conform(scenario_java_consumer)
    assert obs["records"] == [f"r{i}" for i in range(9)]
    assert obs["sessions_created"] and obs["session_ids_nonzero"]
    assert obs["incremental_answers"] and obs["incremental_on_created_sessions"]
