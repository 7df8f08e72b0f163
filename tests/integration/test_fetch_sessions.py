"""Fetch sessions (KIP-227) over TCP: the cache's size setting, a throttled answer inside a session,
and librdkafka (which fetches without sessions) next to them.

The session's life and its error codes, compared with the reference Kafka, and Kafka's Java
consumer using sessions are tests/conformance/test_fetch_sessions.py; the cache's rules driven
directly are tests/unit/test_fetch_session.py.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer
from kafka_sidecar.protocol.records import decode_batches

from tests.conformance.wire import Wire, batch


def _records(body: dict) -> list[tuple[int, int]]:
    """(partition, first offset) of each batch in a Fetch answer."""
    return [(p["partition_index"], b.base_offset) for t in body["responses"] for p in t["partitions"]
            for b in decode_batches(p["records"] or b"")]


def test_no_slots_means_sessionless_answers(sidecar_factory):
    server = sidecar_factory({"max.incremental.fetch.session.cache.slots": "7"})  # 7 // 8 shards = 0 each
    with Wire(server.bootstrap) as w:
        w.create_topic("t")
        assert w.produce("t", batch([b"a"]))["error"] == 0
        body = w.fetch_session(12, 0, 0, [("t", [(0, 0)])])
        assert body["error_code"] == 0 and body["session_id"] == 0 and _records(body) == [(0, 0)]
        # The client goes on with full requests; an incremental one names no session.
        assert w.fetch_session(12, 0, 1, [])["error_code"] == 70


def test_a_full_cache_evicts_by_kafkas_rules(sidecar_factory):
    server = sidecar_factory({"max.incremental.fetch.session.cache.slots": "8"})  # one per shard
    with Wire(server.bootstrap) as w:
        w.create_topic("t", partitions=3)
        # Shards are given sessions in turn: 8 sessions fill the 8 slots ...
        ids = [w.fetch_session(12, 0, 0, [("t", [(0, 0)])])["session_id"] for _ in range(8)]
        assert all(ids) and len(set(ids)) == 8
        # ... and the next one (shard 0 again) has no room: its sessions are young and as large.
        assert w.fetch_session(12, 0, 0, [("t", [(0, 0)])])["session_id"] == 0
        # Each session still works.
        for sid in ids:
            assert w.fetch_session(12, sid, 1, [])["session_id"] == sid


def test_a_throttled_answer_keeps_the_session(sidecar_factory):
    server = sidecar_factory()
    with Wire(server.bootstrap) as w:
        w.create_topic("q", partitions=2)
        for _ in range(40):
            assert w.produce("q", batch([b"y" * 1000] * 10))["error"] == 0  # 400 KB in partition 0
        body = w.fetch_session(12, 0, 0, [("q", [(0, 0), (1, 0)])], partition_max_bytes=1)  # one batch
        sid, epoch = body["session_id"], 1
        assert sid and _records(body)
        offset = max(o for _, o in _records(body)) + 10
        body = w.call(49, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "user", "entity_name": None}, {"entity_type": "client-id", "entity_name": None}],
            "ops": [{"key": "consumer_byte_rate", "value": 20_000.0, "remove": False}]}]})
        assert body["entries"][0]["error_code"] == 0
        seen: list[int] = []
        throttled = None
        for _ in range(40):
            body = w.fetch_session(12, sid, epoch, [("q", [(0, offset)])])
            epoch += 1
            assert body["error_code"] == 0 and body["session_id"] == sid, body
            if body["throttle_time"]:
                throttled = body
                break
            got = _records(body)
            if got:
                seen += [o for _, o in got]
                offset = max(o for _, o in got) + 10
        assert throttled is not None and throttled["responses"] == []
        # The session goes on at the next epoch (the wire waits out the mute), from where it was.
        body = w.fetch_session(12, sid, epoch, [])
        assert body["error_code"] == 0 and body["session_id"] == sid
        got = _records(body)
        assert got and got[0] == (0, offset), (got, offset)


def test_librdkafka_consumes_without_sessions_next_to_a_session(sidecar):
    """librdkafka 2.x asks for no session (epoch -1 on every Fetch): it is served as before,
    while a session of another client on the same partitions goes on."""
    with Wire(sidecar.bootstrap) as w:
        topic = f"rdk-{time.monotonic_ns()}"
        w.create_topic(topic, partitions=3)
        for p in range(3):
            assert w.produce(topic, batch([f"{p}-{i}".encode() for i in range(5)]), partition=p)["error"] == 0
        body = w.fetch_session(12, 0, 0, [(topic, [(0, 5), (1, 5), (2, 5)])])
        sid = body["session_id"]
        assert sid
        c = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(got) < 15 and time.monotonic() < deadline:
                m = c.poll(1.0)
                if m is not None and m.error() is None:
                    got.append(m.value())
        finally:
            c.close()
        assert sorted(got) == sorted(f"{p}-{i}".encode() for p in range(3) for i in range(5))
        # Nothing changed for the session's client: an empty incremental answer.
        body = w.fetch_session(12, sid, 1, [])
        assert (body["error_code"], body["session_id"], body["responses"]) == (0, sid, [])
