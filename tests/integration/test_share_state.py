"""Share-partition state survives the broker (KIP-932's durable state in __share_group_state):
a clean restart and a kill -9 keep acknowledged records acknowledged and delivery counts, and
redeliver only what was not acknowledged. Raw requests over TCP."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire, batch
from tests.support import SidecarProcess

ACCEPT, RELEASE, REJECT = 1, 2, 3
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110


def _join(w: Wire, group: str, member: str, topic: str) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                          "subscribed_topic_names": [topic]})


def _earliest(w: Wire, group: str) -> None:
    """Group config share.auto.offset.reset=earliest: the first ShareFetch starts at the log start."""
    answer = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    assert answer["responses"][0]["error_code"] == 0, answer


def _fetch(w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID,
           acks: list[dict[str, Any]] | None = None) -> list[tuple[int, int, int]]:
    body = w.call(78, 2, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 0,
                          "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                          "topics": [{"topic_id": topic_id, "partitions": [
                              {"partition_index": 0, "acknowledgement_batches": acks or []}]}],
                          "forgotten_topics_data": []})
    assert body["error_code"] == 0, body
    for t in body["responses"]:
        for p in t["partitions"]:
            assert p["acknowledge_error_code"] == 0, p
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for t in body["responses"] for p in t["partitions"] for a in p["acquired_records"]]


def _ack(first: int, last: int, kind: int) -> dict[str, Any]:
    return {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}


def _scenario_before(w: Wire, topic: str, group: str) -> uuid.UUID:
    """10 records: 0-3 accepted, 4 rejected, 5-6 released once, 7-9 acquired and never acknowledged."""
    w.create_topic(topic)
    topic_id = w.metadata([topic])["topics"][0]["topic_id"]
    _earliest(w, group)
    assert _join(w, group, "m1", topic)["error_code"] == 0
    assert w.produce(topic, batch([b"v%d" % i for i in range(10)]))["error"] == 0
    assert _fetch(w, group, "m1", 0, topic_id) == [(0, 9, 1)]
    acks = [_ack(0, 3, ACCEPT), _ack(4, 4, REJECT), _ack(5, 6, RELEASE)]
    assert _fetch(w, group, "m1", 1, topic_id, acks) == [(5, 6, 2)]  # released ones come straight back
    return topic_id


def _start_offsets(w: Wire, group: str) -> list[tuple[int, int]]:
    offsets = w.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["topics"][0]["partitions"]
    return [(p["start_offset"], p["lag"]) for p in offsets]


def _scenario_after(w: Wire, topic: str, group: str, released: bool = False) -> None:
    """After the restart. ``released``: the client's connection closed before the broker went,
    which (as in Kafka) released its acquired records (5-6 at their second delivery, 7-9 at
    their first), a state write with the start offset it then had (5)."""
    topic_id = w.metadata([topic])["topics"][0]["topic_id"]
    # The member is kept (its records in __consumer_offsets) at the epoch it had: a heartbeat at an
    # older one is fenced, as Kafka answers; it rejoins.
    hb = w.call(76, 1, {"group_id": group, "member_id": "m1", "member_epoch": 1, "rack_id": None, "subscribed_topic_names": None})
    assert hb["error_code"] == FENCED_MEMBER_EPOCH
    assert _join(w, group, "m1", topic)["error_code"] == 0
    if released:
        assert _start_offsets(w, group) == [(5, 5)]
        assert _fetch(w, group, "m1", 0, topic_id) == [(5, 6, 3), (7, 9, 2)]
    else:
        # The start offset as last written (Kafka writes it from before the acknowledgement it writes): 0.
        assert _start_offsets(w, group) == [(0, 5)]
        # 5-6 were released once (durable), their second delivery was in flight: delivered as the
        # second again, as Kafka persists nothing at acquisition; 7-9 were never acknowledged: first.
        assert _fetch(w, group, "m1", 0, topic_id) == [(5, 6, 2), (7, 9, 1)]
    assert _fetch(w, group, "m1", 1, topic_id, [_ack(5, 9, ACCEPT)]) == []
    offsets = w.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["topics"][0]["partitions"]
    assert [(p["start_offset"], p["lag"]) for p in offsets] == [(5, 0)]


def test_restart_keeps_acknowledgements_and_redelivers_the_rest() -> None:
    topic, group = f"st-{uuid.uuid4().hex[:6]}", "sg"
    b = EmbeddedBroker().start()
    try:
        with Wire(b.bootstrap_servers) as w, Wire(b.bootstrap_servers) as watcher:
            _scenario_before(w, topic, group)
            w.close()  # the share session's connection closes: its acquired records are released
            deadline = time.monotonic() + 20
            while _start_offsets(watcher, group) != [(5, 5)] and time.monotonic() < deadline:
                time.sleep(0.1)
        b.restart()
        with Wire(b.bootstrap_servers) as w:
            _scenario_after(w, topic, group, released=True)
        b.restart()  # and again: the state written after the first restart is read back too
        with Wire(b.bootstrap_servers) as w:
            assert _join(w, group, "m1", topic)["error_code"] == 0
            topic_id = w.metadata([topic])["topics"][0]["topic_id"]
            assert _fetch(w, group, "m1", 0, topic_id) == []
            assert w.produce(topic, batch([b"late"]))["error"] == 0
            assert _fetch(w, group, "m1", 1, topic_id) == [(10, 10, 1)]
    finally:
        b.stop()


def test_kill_9_keeps_acknowledgements(tmp_path) -> None:
    topic, group = "killed", "kg"
    server = SidecarProcess(tmp_path / "data").start()
    try:
        w = Wire(server.bootstrap)
        _scenario_before(w, topic, group)
        server.kill()  # the client's connection still open: nothing was released
        w.close()
        server.start()
        with Wire(server.bootstrap) as w:
            _scenario_after(w, topic, group)
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


def test_state_topic_is_pruned_below_the_snapshots() -> None:
    """A ShareSnapshot every 2 updates: the state topic's log start moves up to the oldest snapshot
    still needed, and a restart reads the state back from what is left."""
    from kafka_sidecar.server.share.records import partition_for

    topic, group = f"pr-{uuid.uuid4().hex[:6]}", "pg"
    b = EmbeddedBroker({"share.coordinator.snapshot.update.records.per.snapshot": 2,
                        "share.coordinator.state.topic.num.partitions": 3}).start()
    try:
        with Wire(b.bootstrap_servers) as w:
            w.create_topic(topic)
            topic_id = w.metadata([topic])["topics"][0]["topic_id"]
            _earliest(w, group)
            assert _join(w, group, "m1", topic)["error_code"] == 0
            assert w.produce(topic, batch([b"v%d" % i for i in range(20)]))["error"] == 0
            assert _fetch(w, group, "m1", 0, topic_id) == [(0, 19, 1)]
            for i in range(10):  # one acknowledgement, one state write, each time
                _fetch(w, group, "m1", i + 1, topic_id, [_ack(i, i, ACCEPT)])
            # The session closes (final epoch): 10-19 are released, one more state write.
            closed = w.call(79, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": -1, "topics": []})
            assert closed["error_code"] == 0, closed
            state = partition_for(group, topic_id, 0, 3)
            start, end = w.offsets("__share_group_state", state)
            assert 0 < start < end, (start, end)
        b.restart()
        with Wire(b.bootstrap_servers) as w:
            assert _join(w, group, "m1", topic)["error_code"] == 0
            assert _fetch(w, group, "m1", 0, topic_id) == [(10, 19, 2)]
    finally:
        b.stop()


def test_java_share_consumer_after_a_restart(tmp_path) -> None:
    """Kafka's own kafka-console-share-consumer.sh: records it received (and so acknowledged) before a
    broker restart are not delivered again after it; records produced since are, once."""
    import pytest

    from bench.reference import find_java, find_kafka_home
    from tests.integration.test_share_groups import _share_consumer

    home = find_kafka_home()
    if find_java() is None or home is None:
        pytest.skip("needs Java and Kafka 4.3.1 (KAFKA_HOME or make reference)")
    topic, group = "jr", "jrg"
    b = EmbeddedBroker().start()
    try:
        with Wire(b.bootstrap_servers) as w:
            w.create_topic(topic)
            topic_id = w.metadata([topic])["topics"][0]["topic_id"]
            # The share-partition starts at offset 0: the group reads from the log start (its first
            # ShareFetch comes after the records; with the default, latest, it would skip them).
            _earliest(w, group)
            assert w.produce(topic, batch([b"a%d" % i for i in range(200)]))["error"] == 0
        first = _share_consumer(home, b.bootstrap_servers, topic, group, tmp_path)
        out, _ = first.communicate(timeout=120)
        assert sorted(line for line in out.splitlines() if line.startswith("a")) == sorted(f"a{i}" for i in range(200))
        b.restart()
        with Wire(b.bootstrap_servers) as w:
            assert w.produce(topic, batch([b"b%d" % i for i in range(5)]))["error"] == 0
            offsets = w.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["topics"]
            # The state as last written: the acknowledgement of 0-199, from start offset 0.
            assert [(t["topic_id"], [(p["start_offset"], p["lag"]) for p in t["partitions"]]) for t in offsets] == [(topic_id, [(0, 5)])]
        second = _share_consumer(home, b.bootstrap_servers, topic, group, tmp_path)
        out, _ = second.communicate(timeout=120)
        assert [line for line in out.splitlines() if line[:1] in ("a", "b")] == [f"b{i}" for i in range(5)]
    finally:
        b.stop()
