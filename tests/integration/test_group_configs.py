"""Group configs over TCP (resource type GROUP): Kafka's kafka-configs.sh --entity-type groups sets
and describes them, they survive a restart, and share groups follow them (record lock duration,
share.auto.offset.reset latest/earliest/by_duration, delivery count limit, heartbeat interval,
session timeout, read_committed isolation). The messages themselves are compared with Kafka
4.3.1 in tests/conformance/test_share_group_tools.py."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.testing import EmbeddedBroker

from bench.reference import find_java, find_kafka_home
from tests.conformance.wire import Wire, batch

ACCEPT, RELEASE = 1, 2


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # Lower broker bounds so that a short share.session.timeout.ms is allowed for a group.
    with EmbeddedBroker({"group.share.min.session.timeout.ms": 1000, "group.share.min.heartbeat.interval.ms": 500}) as b:
        yield b


@pytest.fixture
def wire(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        yield w


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _set(w: Wire, group: str, **configs: str) -> tuple[int, str | None]:
    ops = [{"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in configs.items()]
    r = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": ops}], "validate_only": False})
    return r["responses"][0]["error_code"], r["responses"][0]["error_message"]


def _described(w: Wire, group: str, keys: list[str]) -> dict[str, tuple[str, int]]:
    r = w.call(32, 4, {"resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": keys}],
                       "include_synonyms": False, "include_documentation": False})
    return {c["name"]: (c["value"], c["config_source"]) for c in r["results"][0]["configs"]}


def _join(w: Wire, group: str, member: str, topic: str) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                          "subscribed_topic_names": [topic]})


def _fetch(w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID,
           acks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = w.call(78, 2, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 0,
                          "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                          "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks or []}]}],
                          "forgotten_topics_data": []})
    assert body["error_code"] == 0, body
    return body


def _acquired(body: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for t in body["responses"] for p in t["partitions"] for a in p["acquired_records"]]


def _values(body: dict[str, Any]) -> list[bytes | None]:
    """The values of the acquired data records (what a share consumer hands out)."""
    out = []
    for t in body["responses"]:
        for p in t["partitions"]:
            ranges = [(a["first_offset"], a["last_offset"]) for a in p["acquired_records"]]
            for b in decode_batches(bytes(p["records"] or b"")):
                if not b.is_control:
                    out += [r.value for r in b.records if any(f <= r.offset <= last for f, last in ranges)]
    return out


def _topic(w: Wire) -> tuple[str, uuid.UUID]:
    topic = _name("gc")
    w.create_topic(topic)
    return topic, w.metadata([topic])["topics"][0]["topic_id"]


JAVA = find_java() is not None and find_kafka_home() is not None


@pytest.mark.skipif(not JAVA, reason="needs Java and Kafka 4.3.1's kafka-configs.sh (KAFKA_HOME or make reference)")
def test_kafka_configs_tool_and_restart(tmp_path: Path) -> None:
    home = find_kafka_home()
    assert home is not None
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp_path)}

    def tool(bootstrap: str, *args: str) -> str:
        out = subprocess.run([str(home / "bin" / "kafka-configs.sh"), "--bootstrap-server", bootstrap, "--entity-type", "groups", *args],
                             capture_output=True, text=True, env=env, timeout=120)
        return out.stdout + out.stderr

    group = _name("g")
    b = EmbeddedBroker().start()
    try:
        out = tool(b.bootstrap_servers, "--entity-name", group, "--alter", "--add-config", "share.auto.offset.reset=earliest")
        assert f"Completed updating config for group {group}." in out
        refused = tool(b.bootstrap_servers, "--entity-name", group, "--alter", "--add-config", "share.record.lock.duration.ms=100000")
        assert "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms" in refused
        b.restart()
        described = tool(b.bootstrap_servers, "--entity-name", group, "--describe")
        assert described.splitlines()[:2] == [
            f"Dynamic configs for group {group} are:",
            "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
            "DEFAULT_CONFIG:share.auto.offset.reset=latest}"]
        assert f"Dynamic configs for group {group} are:" in tool(b.bootstrap_servers, "--describe")
        # And the restarted broker applies it: the share-partition starts at the log start.
        with Wire(b.bootstrap_servers) as w:
            topic, topic_id = _topic(w)
            assert w.produce(topic, batch([b"a", b"b"]))["error"] == 0
            assert _join(w, group, "m", topic)["error_code"] == 0
            assert _acquired(_fetch(w, group, "m", 0, topic_id)) == [(0, 1, 1)]
    finally:
        b.stop()


def test_describe_sources_and_persisted_values(wire: Wire) -> None:
    group = _name("g")
    assert _described(wire, group, ["share.record.lock.duration.ms"]) == {"share.record.lock.duration.ms": ("30000", 5)}
    assert _set(wire, group, share_record_lock_duration_ms="20000", share_isolation_level="read_committed") == (0, None)
    assert _described(wire, group, ["share.record.lock.duration.ms", "share.isolation.level"]) == {
        "share.record.lock.duration.ms": ("20000", 8), "share.isolation.level": ("read_committed", 8)}
    assert _set(wire, group, share_delivery_count_limit="1") == (
        40, "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2")


def test_auto_offset_reset_latest_earliest_by_duration(wire: Wire) -> None:
    """Resolved at the first ShareFetch, not at join: latest skips what was produced before it."""
    topic, topic_id = _topic(wire)
    latest, earliest, recent = _name("lat"), _name("ear"), _name("dur")
    assert _set(wire, earliest, share_auto_offset_reset="earliest") == (0, None)
    assert _set(wire, recent, share_auto_offset_reset="by_duration:PT1H") == (0, None)
    for g in (latest, earliest, recent):
        assert _join(wire, g, "m", topic)["error_code"] == 0
    old = int(time.time() * 1000) - 2 * 3600 * 1000
    assert wire.produce(topic, batch([b"old0", b"old1"], timestamp=old))["error"] == 0
    assert wire.produce(topic, batch([b"new2", b"new3"]))["error"] == 0
    assert _acquired(_fetch(wire, latest, "m", 0, topic_id)) == []
    assert _acquired(_fetch(wire, earliest, "m", 0, topic_id)) == [(0, 3, 1)]
    assert _acquired(_fetch(wire, recent, "m", 0, topic_id)) == [(2, 3, 1)]
    assert wire.produce(topic, batch([b"new4"]))["error"] == 0
    assert _acquired(_fetch(wire, latest, "m", 1, topic_id)) == [(4, 4, 1)]


def test_lock_duration_delivery_limit_and_heartbeat_interval(wire: Wire) -> None:
    topic, topic_id = _topic(wire)
    group, plain = _name("g"), _name("p")
    assert _set(wire, group, share_record_lock_duration_ms="15000", share_delivery_count_limit="2",
                share_heartbeat_interval_ms="6000", share_auto_offset_reset="earliest") == (0, None)
    assert _join(wire, group, "m", topic)["heartbeat_interval"] == 6000
    assert _join(wire, plain, "m", topic)["heartbeat_interval"] == 5000
    assert wire.produce(topic, batch([b"x"]))["error"] == 0
    first = _fetch(wire, group, "m", 0, topic_id)
    assert first["acquisition_lock_timeout"] == 15000 and _acquired(first) == [(0, 0, 1)]
    assert _fetch(wire, plain, "m", 0, topic_id)["acquisition_lock_timeout"] == 30000
    release = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [RELEASE]}]
    assert _acquired(_fetch(wire, group, "m", 1, topic_id, release)) == [(0, 0, 2)]
    # Released at the second delivery, the limit of 2: archived, never delivered again.
    assert _acquired(_fetch(wire, group, "m", 2, topic_id, release)) == []
    offsets = wire.call(90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]["topics"][0]["partitions"]
    assert [(p["start_offset"], p["lag"]) for p in offsets] == [(0, 0)]


def test_session_timeout_per_group(wire: Wire) -> None:
    topic, _ = _topic(wire)
    group = _name("g")
    assert _set(wire, group, share_session_timeout_ms="1500", share_heartbeat_interval_ms="1000") == (0, None)
    assert _join(wire, group, "m", topic)["error_code"] == 0
    time.sleep(1.8)
    g = wire.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    assert (g["group_state"], g["members"]) == ("Empty", [])


def test_read_committed_share_group(broker: EmbeddedBroker, wire: Wire) -> None:
    """share.isolation.level=read_committed: nothing past the last stable offset, and the records of
    an aborted transaction are archived instead of delivered."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, topic_id = _topic(wire)
    committed, uncommitted = _name("rc"), _name("ru")
    assert _set(wire, committed, share_isolation_level="read_committed", share_auto_offset_reset="earliest") == (0, None)
    assert _set(wire, uncommitted, share_auto_offset_reset="earliest") == (0, None)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": _name("tx")})
    try:
        producer.init_transactions(20)
        producer.begin_transaction()
        for v in (b"a0", b"a1"):
            producer.produce(topic, v, partition=0)
        producer.flush(20)
        producer.abort_transaction(20)
        producer.begin_transaction()
        producer.produce(topic, b"c", partition=0)
        producer.flush(20)  # the transaction is still open
        for g in (committed, uncommitted):
            assert _join(wire, g, "m", topic)["error_code"] == 0
        assert _values(_fetch(wire, committed, "m", 0, topic_id)) == []
        assert _values(_fetch(wire, uncommitted, "m", 0, topic_id)) == [b"a0", b"a1", b"c"]
        producer.commit_transaction(20)
    finally:
        producer.flush(5)
        del producer
    assert _values(_fetch(wire, committed, "m", 1, topic_id)) == [b"c"]
    assert _values(_fetch(wire, committed, "m", 2, topic_id)) == []
