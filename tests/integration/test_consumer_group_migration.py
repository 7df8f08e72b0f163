"""KIP-848's online migration with real clients: a kafka-python classic consumer and a librdkafka
``group.protocol=consumer`` consumer in one group.

The classic consumer's group is upgraded when the consumer-protocol member joins; the classic member
stays (it rejoins through JoinGroup/SyncGroup); the two split the partitions, every record is read
once, offsets committed by either are the group's; when the consumer-protocol member leaves the group
is downgraded to a classic group and the classic consumer takes every partition back, resuming at the
committed offsets. ``group.consumer.migration.policy=disabled`` refuses the upgrade as Kafka does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire
from tests.integration.test_consumer_group_protocol import DESCRIBE, FAST, HEARTBEAT, _coordinator

PARTITIONS = 4
LIST_GROUPS = 16


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({**FAST, "group.initial.rebalance.delay.ms": 0}) as b:
        yield b


def _produce(bs: str, topic: str, tag: str, per_partition: int) -> None:
    p = Producer({"bootstrap.servers": bs})
    for part in range(PARTITIONS):
        for i in range(per_partition):
            p.produce(topic, f"{tag}-{part}-{i}".encode(), partition=part)
    p.flush(10)


def _group_type(bs: str, group: str) -> tuple[str, str] | None:
    with Wire(bs) as w:
        for g in w.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})["groups"]:
            if g["group_id"] == group:
                return g["group_type"], g["group_state"]
    return None


class Reader:
    """Polls both consumers, recording what each read."""

    def __init__(self, classic: KafkaConsumer, modern: Any | None) -> None:
        self.classic, self.modern = classic, modern
        self.read: dict[str, list[str]] = {"classic": [], "modern": []}

    def classic_parts(self) -> list[int]:
        return sorted(tp.partition for tp in self.classic.assignment())

    def modern_parts(self) -> list[int]:
        return sorted(tp.partition for tp in self.modern.assignment()) if self.modern is not None else []

    def poll_until(self, done: Callable[[], bool], timeout: float = 45.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in self.classic.poll(timeout_ms=50).values():
                self.read["classic"] += [r.value.decode() for r in records]
            if self.modern is not None:
                for m in self.modern.consume(num_messages=100, timeout=0.05):
                    if m.error() is None:
                        self.read["modern"].append(m.value().decode())
            if done():
                return True
        return False


def test_classic_and_consumer_protocol_members_share_a_group(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    topic, group = f"mig-{uuid.uuid4().hex[:6]}", f"mig-g-{uuid.uuid4().hex[:6]}"
    with Wire(bs) as w:
        w.create_topic(topic, partitions=PARTITIONS)
    _produce(bs, topic, "a", 5)
    classic = KafkaConsumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=10000, heartbeat_interval_ms=300, max_poll_interval_ms=30000, client_id="classic")
    deadline = time.monotonic() + 20
    while not classic.partitions_for_topic(topic) and time.monotonic() < deadline:  # its leader assigns from its metadata
        time.sleep(0.1)
    classic.subscribe([topic])
    modern = None
    try:
        r = Reader(classic, None)
        assert r.poll_until(lambda: len(r.read["classic"]) == 20)
        classic.commit()
        assert _group_type(bs, group) == ("classic", "Stable")

        # the consumer-protocol member joins: the group is upgraded, the classic member kept
        modern = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer", "client.id": "modern",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        modern.subscribe([topic])
        r = Reader(classic, modern)
        assert r.poll_until(lambda: len(r.classic_parts()) == 2 and len(r.modern_parts()) == 2), (r.classic_parts(), r.modern_parts())
        assert sorted(r.classic_parts() + r.modern_parts()) == list(range(PARTITIONS))
        assert _group_type(bs, group) == ("consumer", "Stable")
        with Wire(bs) as w:
            _coordinator(w, group)
            desc = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
        assert sorted((m["member_type"], m["client_id"]) for m in desc["members"]) == [(0, "classic"), (1, "modern")]
        assert r.read == {"classic": [], "modern": []}  # everything before was committed by the classic member

        _produce(bs, topic, "b", 5)
        assert r.poll_until(lambda: len(r.read["classic"]) + len(r.read["modern"]) >= 20)
        time.sleep(0.5)
        r.poll_until(lambda: False, timeout=0.5)
        both = r.read["classic"] + r.read["modern"]
        assert sorted(both) == sorted(f"b-{p}-{i}" for p in range(PARTITIONS) for i in range(5))  # each record once
        assert {int(v.split("-")[1]) for v in r.read["classic"]} <= set(r.classic_parts())
        assert {int(v.split("-")[1]) for v in r.read["modern"]} <= set(r.modern_parts())
        classic.commit()
        modern.commit(asynchronous=False)
        committed = modern.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS  # both members' commits are the group's

        # the consumer-protocol member leaves: the group is downgraded and the classic member takes everything
        modern.close()
        modern = None
        r = Reader(classic, None)
        assert r.poll_until(lambda: r.classic_parts() == list(range(PARTITIONS)))
        assert _group_type(bs, group) in (("classic", "Stable"), ("classic", "CompletingRebalance"), ("classic", "PreparingRebalance"))
        _produce(bs, topic, "c", 1)
        assert r.poll_until(lambda: len(r.read["classic"]) >= PARTITIONS)
        assert sorted(r.read["classic"]) == sorted(f"c-{p}-0" for p in range(PARTITIONS))  # resumed at the committed offsets
    finally:
        if modern is not None:
            modern.close()
        classic.close()


def test_migration_policy_disabled_refuses_the_upgrade(tmp_path: Path) -> None:
    with EmbeddedBroker({**FAST, "group.initial.rebalance.delay.ms": 0, "group.consumer.migration.policy": "DISABLED"},
                        data_dir=tmp_path) as b, Wire(b.bootstrap_servers) as w:
        w.create_topic("mig-off", partitions=1)
        classic = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="mig-off-g", heartbeat_interval_ms=300)
        try:
            deadline = time.monotonic() + 20
            while not classic.partitions_for_topic("mig-off") and time.monotonic() < deadline:  # its leader assigns from its metadata
                time.sleep(0.1)
            classic.subscribe(["mig-off"])
            deadline = time.monotonic() + 30
            while not classic.assignment() and time.monotonic() < deadline:
                classic.poll(timeout_ms=100)
            assert classic.assignment()
            _coordinator(w, "mig-off-g")
            body = w.call(HEARTBEAT, 1, {"group_id": "mig-off-g", "member_id": str(uuid.uuid4()), "member_epoch": 0, "rebalance_timeout": 30000,
                                         "subscribed_topic_names": ["mig-off"], "topic_partitions": []})
            assert (body["error_code"], body["error_message"]) == (  # GROUP_ID_NOT_FOUND, Kafka 4.3's message
                69, "Cannot upgrade classic group mig-off-g to consumer group because online upgrade is disabled.")
        finally:
            classic.close()


def test_upgraded_group_is_durable_and_kafka_reads_its_records(tmp_path: Path) -> None:
    """The upgraded group's records (classic member metadata as tagged field 0 of the member metadata)
    are read by Kafka 4.3.1's own dump-log decoder, and a restart restores the classic member, which
    carries on with its generation."""
    from tests.conformance.test_consumer_group_protocol import (
        consumer_assignment,
        consumer_subscription,
        decode_assignment,
    )

    def join(w: Wire, member_id: str) -> dict[str, Any]:
        return w.call(11, 9, {"group_id": "dur-mig", "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": member_id,
                              "group_instance_id": None, "protocol_type": "consumer",
                              "protocols": [{"name": "range", "metadata": consumer_subscription(["dur-mig-t"])}], "reason": None})

    with EmbeddedBroker({**FAST, "group.initial.rebalance.delay.ms": 0}, data_dir=tmp_path) as b, Wire(b.bootstrap_servers) as w:
        w.create_topic("dur-mig-t", partitions=2)
        _coordinator(w, "dur-mig")
        c = join(w, "")["member_id"]
        gen = join(w, c)["generation_id"]
        synced = w.call(14, 5, {"group_id": "dur-mig", "generation_id": gen, "member_id": c, "group_instance_id": None, "protocol_type": "consumer",
                                "protocol_name": "range", "assignments": [{"member_id": c, "assignment": consumer_assignment({"dur-mig-t": [0, 1]})}]})
        assert decode_assignment(synced["assignment"]) == [0, 1]
        up = w.call(HEARTBEAT, 1, {"group_id": "dur-mig", "member_id": str(uuid.uuid4()), "member_epoch": 0, "rebalance_timeout": 30000,
                                   "subscribed_topic_names": ["dur-mig-t"], "topic_partitions": []})
        assert up["error_code"] == 0 and up["member_epoch"] == gen + 1
        assert w.call(12, 4, {"group_id": "dur-mig", "generation_id": gen, "member_id": c, "group_instance_id": None})["error_code"] == 27
        rejoined = join(w, c)
        assert rejoined["error_code"] == 0
        cgen = rejoined["generation_id"]
        assert len(decode_assignment(w.call(14, 5, {"group_id": "dur-mig", "generation_id": cgen, "member_id": c, "group_instance_id": None,
                                                    "protocol_type": "consumer", "protocol_name": "range", "assignments": []})["assignment"])) == 1
    from tests.support import kafka_bin, kafka_tool_missing
    if not kafka_tool_missing("kafka-dump-log.sh"):
        import os
        import subprocess
        logs = [str(p) for p in sorted(tmp_path.glob("__consumer_offsets-*/*.log")) if p.stat().st_size]
        out = subprocess.run([str(kafka_bin("kafka-dump-log.sh")), "--offsets-decoder", "--files", ",".join(logs)],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
        assert out.returncode == 0, out.stderr[-2000:]
        member = [line for line in out.stdout.splitlines() if '"type":"5"' in line and f'"memberId":"{c}"' in line]
        assert member and '"classicMemberMetadata":{"sessionTimeoutMs":30000,"supportedProtocols":[{"name":"range","metadata":' in member[-1], member
    with EmbeddedBroker({**FAST, "group.initial.rebalance.delay.ms": 0}, data_dir=tmp_path) as b, Wire(b.bootstrap_servers) as w:
        _coordinator(w, "dur-mig")
        desc = w.call(DESCRIBE, 1, {"group_ids": ["dur-mig"], "include_authorized_operations": False})["groups"][0]
        classic_row = [m for m in desc["members"] if m["member_id"] == c]
        assert classic_row and classic_row[0]["member_type"] == 0 and classic_row[0]["member_epoch"] == cgen
        # the classic member carries on with its generation; only a stale one is refused
        assert w.call(12, 4, {"group_id": "dur-mig", "generation_id": cgen, "member_id": c, "group_instance_id": None})["error_code"] in (0, 27)
        assert w.call(12, 4, {"group_id": "dur-mig", "generation_id": cgen - 1, "member_id": c, "group_instance_id": None})["error_code"] == 22


def test_java_classic_consumer_and_a_consumer_protocol_member(broker: EmbeddedBroker) -> None:
    """Kafka 4.3.1's console consumer (the Java consumer, classic protocol: range and
    cooperative-sticky, subscription v3 with owned partitions) stays in its group when a librdkafka
    consumer-protocol member upgrades it; between them every record is read once."""
    import os
    import subprocess
    import threading

    from tests.support import kafka_bin, kafka_tool_missing

    missing = kafka_tool_missing("kafka-console-consumer.sh")
    if missing:
        pytest.skip(missing)
    bs = broker.bootstrap_servers
    topic, group = f"mig-java-{uuid.uuid4().hex[:6]}", f"mig-java-g-{uuid.uuid4().hex[:6]}"
    with Wire(bs) as w:
        w.create_topic(topic, partitions=PARTITIONS)
    java = subprocess.Popen(
        [str(kafka_bin("kafka-console-consumer.sh")), "--bootstrap-server", bs, "--topic", topic, "--group", group,
         "--command-property", "auto.offset.reset=earliest", "--command-property", "heartbeat.interval.ms=300",
         "--command-property", "metadata.max.age.ms=1000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    java_read: list[str] = []
    reader = threading.Thread(target=lambda: java_read.extend(line.strip() for line in java.stdout or []), daemon=True)
    reader.start()
    modern = None
    try:
        deadline = time.monotonic() + 60
        while _group_type(bs, group) != ("classic", "Stable") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _group_type(bs, group) == ("classic", "Stable")
        modern = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer", "client.id": "modern",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        modern.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(modern.assignment()) != 2 and time.monotonic() < deadline:
            modern.poll(0.1)
        assert len(modern.assignment()) == 2 and _group_type(bs, group) == ("consumer", "Stable")
        with Wire(bs) as w:
            _coordinator(w, group)
            desc = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
        parts = {m["member_type"]: sorted(p for t in m["assignment"]["topic_partitions"] for p in t["partitions"]) for m in desc["members"]}
        assert sorted(parts[0] + parts[1]) == list(range(PARTITIONS)) and len(parts[0]) == 2  # the Java member kept half
        _produce(bs, topic, "j", 5)
        modern_read: list[str] = []
        deadline = time.monotonic() + 60
        while len(modern_read) + len(java_read) < 20 and time.monotonic() < deadline:
            modern_read += [m.value().decode() for m in modern.consume(num_messages=100, timeout=0.1) if m.error() is None]
        time.sleep(1.0)
        assert sorted(modern_read + java_read) == sorted(f"j-{p}-{i}" for p in range(PARTITIONS) for i in range(5))
        assert {int(v.split("-")[1]) for v in java_read} == set(parts[0])
    finally:
        if modern is not None:
            modern.close()
        java.terminate()
        java.wait(30)
