"""Share groups (KIP-932) with real share-consumer clients over TCP: librdkafka's ShareConsumer
(confluent-kafka 2.16, implicit and explicit acknowledgement) and Kafka 4.3.1's own Java
KafkaShareConsumer with explicit acknowledgement (tests/tools/share_consumer/ShareAck.java)."""

from __future__ import annotations

import json
import os
import subprocess
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

confluent_kafka = pytest.importorskip("confluent_kafka")
HAS_SHARE_CONSUMER = hasattr(confluent_kafka, "ShareConsumer")
TOOL = Path(__file__).resolve().parents[1] / "tools" / "share_consumer" / "ShareAck.java"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # The default 30 s acquisition lock: a redelivery seen here comes from RELEASE, never from a lock timing out.
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def wire(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        yield w


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _prepare(w: Wire, topic: str, group: str, n: int) -> list[bytes]:
    """A one-partition topic holding ``n`` records, and a share group that starts at the log start
    (share.auto.offset.reset=earliest: the default, latest, would skip records produced before the join)."""
    w.create_topic(topic)
    ops = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
    answer = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": ops}], "validate_only": False})
    assert answer["responses"][0]["error_code"] == 0, answer
    values = [b"r%d" % i for i in range(n)]
    for i in range(0, n, 100):
        assert w.produce(topic, batch(values[i:i + 100]))["error"] == 0
    return values


def _lag(w: Wire, group: str, topic: str) -> int:
    """The share-partition's lag (DescribeShareGroupOffsets v1): records neither acknowledged nor archived.
    (Its start offset lags one state write behind, as Kafka's does, so it is not the measure here.)"""
    answer = w.call(90, 1, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
    return answer["groups"][0]["topics"][0]["partitions"][0]["lag"]


def _share_consumer(bootstrap: str, group: str, topic: str, mode: str) -> Any:
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": mode, "log_level": 3})
    c.subscribe([topic])
    return c


@pytest.mark.skipif(not HAS_SHARE_CONSUMER, reason="the installed confluent-kafka has no ShareConsumer")
def test_two_librdkafka_share_consumers_each_record_once(broker: EmbeddedBroker, wire: Wire) -> None:
    """Two librdkafka share consumers (implicit acknowledgement) on one partition: together they
    receive each of 1,000 records exactly once, and the group ends with all of them acknowledged."""
    topic, group = _topic("rdk-share"), _topic("rg")
    values = _prepare(wire, topic, group, 1000)
    consumers = [_share_consumer(broker.bootstrap_servers, group, topic, "implicit") for _ in range(2)]
    got: list[list[bytes]] = [[], []]
    try:
        deadline = time.monotonic() + 60
        quiet_since = None
        while time.monotonic() < deadline:
            polled = 0
            for c, mine in zip(consumers, got, strict=True):
                for m in c.poll(0.3):
                    assert m.error() is None, m.error()
                    mine.append(m.value())
                    polled += 1
            if sum(map(len, got)) >= len(values) and polled == 0:
                # Everything arrived; a few more quiet polls would show a duplicate delivery.
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 2:
                    break
    finally:
        for c in consumers:
            # Implicit mode accepts a poll's records on the next poll or commit; librdkafka 2.16's close()
            # sends its final ShareAcknowledge without them (they would be released), so commit first.
            c.commit_sync(10)
            c.close()
    received = got[0] + got[1]
    assert [v for v, k in Counter(received).items() if k > 1] == []
    assert sorted(received) == sorted(values), (len(got[0]), len(got[1]))
    assert _lag(wire, group, topic) == 0


@pytest.mark.skipif(not HAS_SHARE_CONSUMER, reason="the installed confluent-kafka has no ShareConsumer")
def test_librdkafka_explicit_release_reject_accept(broker: EmbeddedBroker, wire: Wire) -> None:
    """Explicit acknowledgement: a RELEASEd record comes back with delivery count 2, a REJECTed one
    and an ACCEPTed one never again; once the released ones are accepted the partition is done."""
    topic, group = _topic("rdk-ack"), _topic("ra")
    _prepare(wire, topic, group, 30)
    c = _share_consumer(broker.bootstrap_servers, group, topic, "explicit")
    kinds = confluent_kafka.AcknowledgeType
    deliveries: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msgs = c.poll(0.5)
            for m in msgs:
                assert m.error() is None, m.error()
                deliveries.append((m.offset(), m.delivery_count()))
                first = m.delivery_count() == 1
                kind = kinds.RELEASE if first and m.offset() % 3 == 0 else kinds.REJECT if first and m.offset() % 3 == 1 else kinds.ACCEPT
                c.acknowledge(m, kind)
            if msgs:
                assert all(v is None for v in c.commit_sync(10).values())
            if len(deliveries) >= 40 and not msgs:
                break
    finally:
        c.close()
    released = [o for o in range(30) if o % 3 == 0]
    assert sorted(deliveries) == sorted([(o, 1) for o in range(30)] + [(o, 2) for o in released]), deliveries
    assert _lag(wire, group, topic) == 0


JAVA = find_java() is not None and find_kafka_home() is not None


@pytest.fixture(scope="module")
def share_ack_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ShareAck.java compiled against the reference distribution's client jars (one javac per session)."""
    home = find_kafka_home()
    assert home is not None
    out = tmp_path_factory.mktemp("share_ack")
    subprocess.run(["javac", "-d", str(out), "-cp", f"{home / 'libs'}/*", str(TOOL)], check=True, timeout=120)
    return out


@pytest.mark.skipif(not JAVA, reason="needs Java and Kafka 4.3.1 (KAFKA_HOME or make reference)")
def test_java_share_consumer_explicit_acknowledgement(broker: EmbeddedBroker, wire: Wire, share_ack_classes: Path) -> None:
    """Kafka's KafkaShareConsumer with share.acknowledgement.mode=explicit: acknowledge(record,
    RELEASE/REJECT/ACCEPT) then commitSync. Released records are redelivered (delivery count 2),
    rejected and accepted ones never again."""
    home = find_kafka_home()
    assert home is not None
    topic, group = _topic("java-ack"), _topic("ja")
    _prepare(wire, topic, group, 30)
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    cmd = ["java", "-Xmx256m", "-cp", f"{home / 'libs'}/*:{share_ack_classes}", "ShareAck",
           broker.bootstrap_servers, group, topic, "40"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    deliveries = [(d["offset"], d["deliveryCount"]) for d in lines]
    released = [o for o in range(30) if o % 3 == 0]
    assert sorted(deliveries) == sorted([(o, 1) for o in range(30)] + [(o, 2) for o in released]), deliveries
    commits = [d for d in lines if "commitError" in d]
    assert commits == [], commits
    assert _lag(wire, group, topic) == 0


# ---- librdkafka's own share-consumer tests, as scenarios (issue 25) ------------------------------


def _poll_until(c: Any, want: int, seconds: float = 60) -> list[Any]:
    """Poll until a non-empty batch arrives (or ``want`` records in all); the batch."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        msgs = c.poll(1.0)
        if msgs:
            for m in msgs:
                assert m.error() is None, m.error()
            return list(msgs)
    raise AssertionError(f"no records within {seconds} s (wanted {want})")


@pytest.mark.skipif(not HAS_SHARE_CONSUMER, reason="the installed confluent-kafka has no ShareConsumer")
def test_librdkafka_destroy_with_explicit_ack(broker: EmbeddedBroker, wire: Wire) -> None:
    """librdkafka 0179 do_test_destroy_with_explicit_ack, ack half: 2 partitions x 50 records; the
    first poll returns one partition's 50 (the first share-partition loaded, as Kafka answers),
    the second the other's; half of the second batch acknowledged, then close: its final
    ShareAcknowledge applies them, and a second consumer gets exactly the other 25 again."""
    topic, group = _topic("rdk-destroy"), _topic("rd")
    wire.create_topic(topic, partitions=2)
    ops = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
    answer = wire.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": ops}], "validate_only": False})
    assert answer["responses"][0]["error_code"] == 0, answer
    for p in (0, 1):
        assert wire.produce(topic, batch([b"p%d-%d" % (p, i) for i in range(50)]), partition=p)["error"] == 0
    c = _share_consumer(broker.bootstrap_servers, group, topic, "explicit")
    try:
        first = _poll_until(c, 100)
        assert len(first) == 50 and len({m.partition() for m in first}) == 1, [(m.partition(), m.offset()) for m in first]
        for m in first:
            c.acknowledge(m)
        second = _poll_until(c, 50)
        assert len(second) == 50 and {m.partition() for m in second} == {1 - first[0].partition()}
        for m in second[:25]:
            c.acknowledge(m)
    finally:
        c.close()
    c2 = _share_consumer(broker.bootstrap_servers, group, topic, "explicit")
    try:
        again = _poll_until(c2, 25)
        assert sorted((m.partition(), m.offset(), m.delivery_count()) for m in again) == \
            [(second[0].partition(), o, 2) for o in range(25, 50)]
        for m in again:
            c2.acknowledge(m)
        assert all(v is None for v in c2.commit_sync(10).values())
    finally:
        c2.close()


@pytest.mark.skipif(not HAS_SHARE_CONSUMER, reason="the installed confluent-kafka has no ShareConsumer")
def test_librdkafka_commit_sync_after_topic_deletion(broker: EmbeddedBroker, wire: Wire) -> None:
    """librdkafka 0176 do_test_commit_sync_after_topic_deletion: records consumed (implicit
    acknowledgement), the topic deleted, commit_sync: the partition's result is an error
    (UNKNOWN_TOPIC_ID, Kafka's answer to acknowledgements of a deleted topic)."""
    topic, group = _topic("rdk-deleted"), _topic("rx")
    _prepare(wire, topic, group, 5)
    c = _share_consumer(broker.bootstrap_servers, group, topic, "implicit")
    try:
        assert _poll_until(c, 5)
        assert wire.delete_topics([topic])[topic] == 0
        results = c.commit_sync(30)
        errors_seen = {tp.partition: err for tp, err in results.items()}
        assert errors_seen and all(err is not None for err in errors_seen.values()), errors_seen
        assert {err.args[0].code() for err in errors_seen.values()} == {confluent_kafka.KafkaError.UNKNOWN_TOPIC_ID}, errors_seen
    finally:
        c.close()
