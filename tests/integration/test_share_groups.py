"""Share groups (KIP-932) over TCP against an embedded broker: Kafka 4.3.1's own
kafka-console-share-consumer.sh, and raw ShareGroupHeartbeat/ShareFetch/ShareAcknowledge
requests for release, redelivery and the share session."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.testing import EmbeddedBroker

from bench.reference import find_java, find_kafka_home
from tests.conformance.wire import Wire, batch

ACCEPT, RELEASE, REJECT = 1, 2, 3
INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND, INVALID_RECORD_STATE = 123, 122, 121


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"group.share.record.lock.duration.ms": 1000}) as b:
        yield b


@pytest.fixture
def wire(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        yield w


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(w: Wire, topic: str, values: list[bytes], per_batch: int = 100) -> None:
    for i in range(0, len(values), per_batch):
        assert w.produce(topic, batch(values[i:i + per_batch]))["error"] == 0


def _describe(w: Wire, group: str) -> dict[str, Any]:
    return w.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]


def _join(w: Wire, group: str, member: str, topics: list[str]) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                          "subscribed_topic_names": topics})


def _group_configs(w: Wire, group: str, **configs: str) -> None:
    """Group configs (kafka-configs.sh --entity-type groups), e.g. share.auto.offset.reset=earliest."""
    ops = [{"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in configs.items()]
    answer = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": ops}], "validate_only": False})
    assert answer["responses"][0]["error_code"] == 0, answer


def _earliest(w: Wire, group: str) -> None:
    """The share-partitions start where the log starts when the first ShareFetch initializes them
    (the default, latest, would skip what is produced before it)."""
    _group_configs(w, group, share_auto_offset_reset="earliest")


def _share_fetch(w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID | None,
                 acks: list[dict[str, Any]] | None = None, max_records: int = 500, max_wait: int = 0) -> dict[str, Any]:
    topics = [] if topic_id is None else [{"topic_id": topic_id, "partitions": [
        {"partition_index": 0, "acknowledgement_batches": acks or []}]}]
    return w.call(78, 2, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": max_wait,
                          "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
                          "topics": topics, "forgotten_topics_data": []})


def _acquired(body: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for t in body["responses"] for p in t["partitions"] for a in p["acquired_records"]]


def test_api_versions_reports_share_version(wire: Wire) -> None:
    body = wire.call(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    assert [(f["name"], f["min_version_level"], f["max_version_level"]) for f in body["finalized_features"]
            if f["name"] == "share.version"] == [("share.version", 1, 1)]
    assert {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}[78] == (1, 2)


def test_heartbeat_assigns_and_shares_partitions(wire: Wire) -> None:
    topic, group = _topic("hb"), _topic("g")
    wire.create_topic(topic, partitions=1)
    _group_configs(wire, group, share_assignment_interval_ms="0")  # no batching of assignments
    # As Kafka 4.3: the group starts at epoch 1, the first member bumps it to 2 and gets nothing,
    # the partition not being initialized yet; its heartbeat initializes it.
    a = _join(wire, group, "member-a", [topic])
    assert (a["error_code"], a["member_epoch"], a["assignment"]) == (0, 2, {"topic_partitions": []})
    # The second member and the initialized partition: epoch 3. With more members than
    # partitions the one partition is shared: both members get it.
    b = _join(wire, group, "member-b", [topic])
    assert b["error_code"] == 0 and b["member_epoch"] == 3
    again = wire.call(76, 1, {"group_id": group, "member_id": "member-a", "member_epoch": a["member_epoch"],
                              "rack_id": None, "subscribed_topic_names": None})
    assert again["member_epoch"] == 3 and [tp["partitions"] for tp in again["assignment"]["topic_partitions"]] == [[0]]
    stale = wire.call(76, 1, {"group_id": group, "member_id": "member-a", "member_epoch": 1,
                              "rack_id": None, "subscribed_topic_names": None})
    assert stale["error_code"] == 110  # FENCED_MEMBER_EPOCH
    described = _describe(wire, group)
    assert (described["group_state"], described["assignor_name"], sorted(m["member_id"] for m in described["members"])) == \
        ("Stable", "simple", ["member-a", "member-b"])
    left = wire.call(76, 1, {"group_id": group, "member_id": "member-b", "member_epoch": -1,
                             "rack_id": None, "subscribed_topic_names": None})
    assert left["member_epoch"] == -1 and [m["member_id"] for m in _describe(wire, group)["members"]] == ["member-a"]
    assert _describe(wire, _topic("nogroup"))["error_code"] == 69


def test_release_redelivery_and_sessions(wire: Wire) -> None:
    topic, group = _topic("rel"), _topic("g")
    wire.create_topic(topic)
    topic_id = wire.metadata([topic])["topics"][0]["topic_id"]
    _earliest(wire, group)
    assert _join(wire, group, "m1", [topic])["error_code"] == 0
    assert _join(wire, group, "m2", [topic])["error_code"] == 0
    _produce(wire, topic, [b"v%d" % i for i in range(10)], per_batch=5)
    first = _share_fetch(wire, group, "m1", 0, topic_id, max_records=3)
    assert first["error_code"] == 0 and first["acquisition_lock_timeout"] == 1000
    assert _acquired(first) == [(0, 4, 1)]  # max_records is aligned to the batch (batch_optimized)
    # m2 gets what m1 does not hold.
    assert _acquired(_share_fetch(wire, group, "m2", 0, topic_id)) == [(5, 9, 1)]
    # m1: accept 0-1, release 2-4 (piggy-backed), in the same request the released ones come back.
    acks = [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [ACCEPT]},
            {"first_offset": 2, "last_offset": 4, "acknowledge_types": [RELEASE]}]
    again = _share_fetch(wire, group, "m1", 1, topic_id, acks)
    assert again["responses"][0]["partitions"][0]["acknowledge_error_code"] == 0
    assert _acquired(again) == [(2, 4, 2)]
    # A wrong session epoch, a missing session, acknowledging records another member holds.
    assert _share_fetch(wire, group, "m1", 7, topic_id)["error_code"] == INVALID_SHARE_SESSION_EPOCH
    assert _share_fetch(wire, group, "m3", 1, topic_id)["error_code"] == SHARE_SESSION_NOT_FOUND
    steal = wire.call(79, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": 2, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 5, "last_offset": 9, "acknowledge_types": [ACCEPT]}]}]}]})
    assert steal["responses"][0]["partitions"][0]["error_code"] == INVALID_RECORD_STATE
    ok = wire.call(79, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": 3, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 2, "last_offset": 4, "acknowledge_types": [REJECT]}]}]}]})
    assert ok["responses"][0]["partitions"][0]["error_code"] == 0
    # m2 lets its lock expire (1 s): the records come back to m1 with delivery count 2.
    time.sleep(1.2)
    assert _acquired(_share_fetch(wire, group, "m1", 4, topic_id)) == [(5, 9, 2)]
    # ShareAcknowledge with the final epoch accepts and closes the session.
    done = wire.call(79, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": -1, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 5, "last_offset": 9, "acknowledge_types": [ACCEPT]}]}]}]})
    assert done["responses"][0]["partitions"][0]["error_code"] == 0
    assert _share_fetch(wire, group, "m1", 5, topic_id)["error_code"] == SHARE_SESSION_NOT_FOUND
    _produce(wire, topic, [b"late"])
    assert _acquired(_share_fetch(wire, group, "m1", 0, topic_id)) == [(10, 10, 1)]


JAVA = find_java() is not None and find_kafka_home() is not None


def _share_consumer(home: Path, bootstrap: str, topic: str, group: str, tmp: Path, *extra: str,
                    timeout_ms: int = 10000) -> subprocess.Popen[str]:
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp)}
    return subprocess.Popen([str(home / "bin" / "kafka-console-share-consumer.sh"), "--bootstrap-server", bootstrap,
                             "--topic", topic, "--group", group, "--timeout-ms", str(timeout_ms), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _drain(stream: Any, into: list[str], last: list[float]) -> None:
    for line in stream:
        into.append(line.rstrip("\n"))
        last[0] = time.monotonic()


def _wait_members(w: Wire, group: str, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        g = _describe(w, group)
        if g["error_code"] == 0 and len(g["members"]) == n and all(m["assignment"]["topic_partitions"] for m in g["members"]):
            return
        time.sleep(0.2)
    raise AssertionError(f"{n} members never joined {group}: {g}")


@pytest.mark.skipif(not JAVA, reason="needs Java and Kafka 4.3.1 (KAFKA_HOME or make reference)")
def test_two_java_share_consumers_each_record_once(broker: EmbeddedBroker, wire: Wire, tmp_path: Path) -> None:
    """The issue's scenario: two kafka-console-share-consumer.sh on a one-partition topic together
    receive every one of 2,000 records exactly once.

    Two things a loaded machine showed (the JVMs ~20 s to their first heartbeat). The group reads
    from the log start: the start offset is resolved at the first ShareFetch, which a member sends
    only once a heartbeat brought its assignment, so with the default, latest, records produced
    before it were skipped (as in Kafka: r0-r199 missing, the start offset resolved to 200). And
    --timeout-ms counts from a consumer's first poll, the join included (its second heartbeat,
    5 s after the first, brings the assignment): 10 s ran out before any record. So the consumers
    get a long timeout and are stopped once every record arrived and none came for 10 s (records
    locked and not delivered, or delivered twice, would show in that time: 1 s locks)."""
    home = find_kafka_home()
    assert home is not None
    topic, group = _topic("java-share"), _topic("jg")
    wire.create_topic(topic)
    _earliest(wire, group)
    values = [b"r%d" % i for i in range(2000)]
    procs = [_share_consumer(home, broker.bootstrap_servers, topic, group, tmp_path, timeout_ms=120_000) for _ in range(2)]
    outs: list[list[str]] = [[] for _ in procs]
    errs: list[list[str]] = [[] for _ in procs]
    last, last_err = [time.monotonic()], [0.0]  # when the last record was printed
    readers = [threading.Thread(target=_drain, args=(stream, into, at), daemon=True)
               for p, out, err in zip(procs, outs, errs, strict=True)
               for stream, into, at in ((p.stdout, out, last), (p.stderr, err, last_err))]
    for r in readers:
        r.start()
    try:
        _wait_members(wire, group, 2)
        _produce(wire, topic, values)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            received = sum(1 for out in outs for line in out if line.startswith("r"))
            if received >= len(values) and time.monotonic() - last[0] > 10:
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()  # its shutdown hook closes the consumer
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for r in readers:
            r.join(10)
    got = [line for out in outs for line in out if line.startswith("r")]
    dupes = [v for v, c in Counter(got).items() if c > 1]
    assert dupes == [] and sorted(got) == sorted(v.decode() for v in values), \
        (len(got), [len(out) for out in outs], "\n".join(errs[0][-20:] + errs[1][-20:]))


def _leave(w: Wire, group: str, member: str) -> None:
    assert w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": -1, "rack_id": None,
                          "subscribed_topic_names": None})["error_code"] == 0


def test_share_groups_in_list_describe_delete_and_offset_apis(wire: Wire) -> None:
    topic, group = _topic("adm"), _topic("g")
    wire.create_topic(topic)
    topic_id = wire.metadata([topic])["topics"][0]["topic_id"]
    _earliest(wire, group)
    assert _join(wire, group, "m1", [topic])["error_code"] == 0
    _produce(wire, topic, [b"v%d" % i for i in range(6)], per_batch=3)
    assert _acquired(_share_fetch(wire, group, "m1", 0, topic_id)) == [(0, 5, 1)]
    ack = [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [ACCEPT]},
           {"first_offset": 3, "last_offset": 3, "acknowledge_types": [ACCEPT]}]
    assert wire.call(79, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": 1, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": ack}]}]})["error_code"] == 0
    listed = {g["group_id"]: g for g in wire.call(16, 5, {"states_filter": [], "types_filter": ["share"]})["groups"]}
    assert listed[group] == {"group_id": group, "protocol_type": "share", "group_state": "Stable", "group_type": "share"}
    assert group not in {g["group_id"] for g in wire.call(16, 5, {"states_filter": [], "types_filter": ["classic"]})["groups"]}
    described = wire.call(15, 6, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    assert (described["error_code"], described["error_message"]) == (69, f"Group {group} is not a classic group.")
    # As Kafka 4.3.1 answers (checked against it): the start offset as the share coordinator last
    # wrote it, from before that acknowledgement (0), and 0-1 and 3 done: 3 left of 6.
    offsets = wire.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]
    assert [(t["topic_name"], [(p["partition_index"], p["start_offset"], p["lag"]) for p in t["partitions"]])
            for t in offsets["topics"]] == [(topic, [(0, 0, 3)])]
    assert wire.call(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
        {"partition_index": 0, "start_offset": 0}]}]})["error_code"] == 68  # NON_EMPTY_GROUP
    assert wire.call(42, 2, {"groups_names": [group]})["results"][0]["error_code"] == 68
    _leave(wire, group, "m1")
    altered = wire.call(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
        {"partition_index": 0, "start_offset": 1}]}, {"topic_name": "nope-" + topic, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]})
    assert [[p["error_code"] for p in t["partitions"]] for t in altered["responses"]] == [[0], [3]]
    offsets = wire.call(90, 1, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
    assert [(p["start_offset"], p["lag"]) for p in offsets["groups"][0]["topics"][0]["partitions"]] == [(1, 5)]
    deleted = wire.call(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
    assert (deleted["error_code"], [t["error_code"] for t in deleted["responses"]]) == (0, [0])
    assert wire.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["topics"] == []
    assert wire.call(42, 2, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 0}]
    assert wire.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["error_code"] == 69


def _share_groups_tool(home: Path, bootstrap: str, tmp: Path, *args: str) -> str:
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp)}
    out = subprocess.run([str(home / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", bootstrap, *args],
                         capture_output=True, text=True, env=env, timeout=120)
    return out.stdout + out.stderr


@pytest.mark.skipif(not JAVA, reason="needs Java and Kafka 4.3.1 (KAFKA_HOME or make reference)")
def test_kafka_share_groups_tool(broker: EmbeddedBroker, wire: Wire, tmp_path: Path) -> None:
    """kafka-share-groups.sh --list, --describe (--members, --state, --offsets), --reset-offsets, --delete."""
    home = find_kafka_home()
    assert home is not None
    topic, group = _topic("tool"), _topic("tg")
    wire.create_topic(topic)
    topic_id = wire.metadata([topic])["topics"][0]["topic_id"]
    _earliest(wire, group)
    assert _join(wire, group, "m1", [topic])["error_code"] == 0
    _produce(wire, topic, [b"v%d" % i for i in range(4)])
    assert _acquired(_share_fetch(wire, group, "m1", 0, topic_id)) == [(0, 3, 1)]
    bs = broker.bootstrap_servers

    def run(*args: str) -> list[list[str]]:
        return [line.split() for line in _share_groups_tool(home, bs, tmp_path, *args).splitlines() if line.strip()]

    assert [group, "Stable"] in run("--list", "--state")
    # Records acquired, none acknowledged: no state written since the partition was initialized,
    # so no start offset yet (Kafka prints -1 as "-").
    assert run("--describe", "--group", group, "--offsets")[1:] == [[group, topic, "0", "-", "-"]]
    assert run("--describe", "--group", group, "--members")[1][:2] == [group, "m1"]
    assert run("--describe", "--group", group, "--state")[1][-2:] == ["Stable", "1"]
    assert "not" in " ".join(run("--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")[0])
    _leave(wire, group, "m1")
    assert run("--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")[1:] == [[group, topic, "0", "4"]]
    assert run("--describe", "--group", group)[1:] == [[group, topic, "0", "4", "0"]]
    assert "successful" in " ".join(run("--delete", "--group", group)[0])
    assert [group] not in run("--list")


def test_share_group_metrics(tmp_path: Path) -> None:
    """/metrics: share groups by state, in-flight records per share-partition, acknowledgements by type."""
    from tests.integration.test_client_telemetry import MetricsSidecar

    server = MetricsSidecar(tmp_path / "data", {})
    try:
        with Wire(server.bootstrap) as w:
            topic, group = _topic("met"), _topic("g")
            w.create_topic(topic)
            topic_id = w.metadata([topic])["topics"][0]["topic_id"]
            _earliest(w, group)
            assert _join(w, group, "m1", [topic])["error_code"] == 0
            _produce(w, topic, [b"v%d" % i for i in range(4)])
            assert _acquired(_share_fetch(w, group, "m1", 0, topic_id)) == [(0, 3, 1)]
            acks = [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [ACCEPT]},
                    {"first_offset": 2, "last_offset": 2, "acknowledge_types": [RELEASE]}]
            assert w.call(79, 2, {"group_id": group, "member_id": "m1", "share_session_epoch": 1, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}]})["error_code"] == 0
            # Scraped while the share session's connection is open (its closing releases record 3).
            text = server.scrape()
    finally:
        server.stop()
    lines = set(text.splitlines())
    assert 'kafka_server_group_coordinator_metrics_group_count{protocol="share"} 1.0' in lines
    assert 'kafka_server_group_coordinator_metrics_share_group_count{state="stable"} 1.0' in lines
    labels = f'group="{group}",partition="0",topic="{topic}"'
    assert f"kafka_server_sharepartitionmetrics_inflightmessagecount{{{labels}}} 1.0" in lines
    assert f"kafka_server_sharepartitionmetrics_inflightbatchcount{{{labels}}} 1.0" in lines
    assert 'kafka_server_sharegroupmetrics_recordacknowledgement_total{ack_type="Accept"} 2.0' in lines
    assert 'kafka_server_sharegroupmetrics_recordacknowledgement_total{ack_type="Release"} 1.0' in lines
