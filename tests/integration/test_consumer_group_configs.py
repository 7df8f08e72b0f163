"""Group configs of KIP-848 consumer groups over TCP: consumer.heartbeat.interval.ms is the interval
a ConsumerGroupHeartbeat answers, consumer.session.timeout.ms fences a silent consumer-protocol
member, consumer.assignment.interval.ms batches (or not) the group's target assignments, as in
Kafka 4.3.1's GroupMetadataManager (consumerGroupHeartbeatIntervalMs(groupId) and siblings). Set
with Kafka's kafka-configs.sh --entity-type groups where Java is available, else with raw
IncrementalAlterConfigs; compared with the reference in tests/conformance/test_consumer_group_protocol.py."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire
from tests.integration.test_consumer_group_protocol import UNKNOWN_MEMBER_ID, Member, _coordinator
from tests.support import kafka_bin, kafka_tool_missing

GROUP_RESOURCE, SET = 32, 0
DESCRIBE = 69


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # Lower bounds so a group may have a short session; the broker's own values stay long.
    with EmbeddedBroker({
        "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 5000,
        "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 45000,
    }) as b:
        yield b


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _set_with_tool(bootstrap: str, group: str, config: str) -> None:
    out = subprocess.run([str(kafka_bin("kafka-configs.sh")), "--bootstrap-server", bootstrap, "--entity-type", "groups",
                          "--entity-name", group, "--alter", "--add-config", config],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    assert f"Completed updating config for group {group}." in out.stdout, out.stdout + out.stderr


def _members(w: Wire, group: str) -> list[str]:
    desc = w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    return sorted(m["member_id"] for m in desc["members"])


@pytest.mark.skipif(bool(kafka_tool_missing("kafka-configs.sh")), reason=str(kafka_tool_missing("kafka-configs.sh")))
def test_kafka_configs_sets_heartbeat_interval_and_session_timeout(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    topic, group, plain = _name("gcc-t"), _name("gcc-g"), _name("gcc-plain")
    with Wire(bs) as w:
        w.create_topic(topic, partitions=2)
        _coordinator(w, group)
        _set_with_tool(bs, group, "consumer.heartbeat.interval.ms=700")
        a = Member(w, group, [topic])
        assert a.heartbeat()["heartbeat_interval"] == 700
        _set_with_tool(bs, group, "consumer.heartbeat.interval.ms=400,consumer.session.timeout.ms=1500")
        assert a.heartbeat()["heartbeat_interval"] == 400  # the next heartbeat already follows the change
        other = Member(w, plain, [topic])
        assert other.heartbeat()["heartbeat_interval"] == 5000  # a group without configs: the broker's

        # b goes silent: fenced after the group's 1.5 s session while a keeps heartbeating; the
        # member of the group without configs (45 s session) stays
        b = Member(w, group, [topic])
        assert b.heartbeat()["error_code"] == 0
        deadline = time.monotonic() + 10
        while b.member_id in _members(w, group) and time.monotonic() < deadline:
            a.heartbeat()
            time.sleep(0.2)
        assert _members(w, group) == [a.member_id]
        assert b.heartbeat()["error_code"] == UNKNOWN_MEMBER_ID
        assert _members(w, plain) == [other.member_id]


def test_incremental_alter_configs_session_timeout_and_assignment_interval(broker: EmbeddedBroker) -> None:
    with Wire(broker.bootstrap_servers) as w:
        topic, eager, batched = _name("gcc-t"), _name("gcc-eager"), _name("gcc-batched")
        w.create_topic(topic, partitions=4)
        _coordinator(w, eager)
        assert w.incremental_alter_configs(GROUP_RESOURCE, eager, [
            ("consumer.assignment.interval.ms", SET, "0"), ("consumer.session.timeout.ms", SET, "1200"),
            ("consumer.heartbeat.interval.ms", SET, "300")])["error"] == 0
        # group.consumer.assignment.interval.ms is 1000 on the broker: the second member's epoch-3
        # target waits, so it reconciles towards epoch 2; with the group's 0 it is computed at once
        for group, second_epoch in ((eager, 3), (batched, 2)):
            a, b = Member(w, group, [topic]), Member(w, group, [topic])
            assert a.heartbeat()["member_epoch"] == 2
            assert b.heartbeat()["member_epoch"] == second_epoch
        a = Member(w, eager, [topic])
        assert a.heartbeat()["heartbeat_interval"] == 300
        # every member of the eager group but none of the batched one is fenced after 1.2 s
        deadline = time.monotonic() + 10
        while _members(w, eager) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _members(w, eager) == [] and len(_members(w, batched)) == 2
