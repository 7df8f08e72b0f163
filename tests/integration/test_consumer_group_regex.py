"""Regex subscriptions of KIP-848 consumer groups: persisted and authorized as Kafka 4.3 does.

A regex's resolution is a ConsumerGroupRegularExpression record (type 16) in ``__consumer_offsets``
(read back by Kafka 4.3.1's own ``kafka-dump-log.sh --offsets-decoder`` when available), kept over
a restart; a topic created later that matches re-assigns the group. With an authorizer a regex only
resolves to the topics the member may DESCRIBE, and a subscription naming a topic it may not
DESCRIBE is refused with TOPIC_AUTHORIZATION_FAILED (Kafka's KafkaApis).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka_sidecar.server.groups.consumer_records import (
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    decode_consumer_key,
    decode_regex_value,
)
from kafka_sidecar.server.groups.records import iter_records
from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire
from tests.integration.test_consumer_group_protocol import DESCRIBE, FAST, HEARTBEAT, _coordinator
from tests.integration.test_security_auth import PLAIN_MODULE, SecureServer
from tests.support import kafka_bin, kafka_tool_missing

TIMEOUT = 20.0


class RegexMember:
    """A consumer-protocol member subscribed with a regex, speaking raw ConsumerGroupHeartbeat v1."""

    def __init__(self, w: Wire, group: str, regex: str) -> None:
        self.w, self.group, self.regex = w, group, regex
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}

    def heartbeat(self) -> dict[str, Any]:
        joining = self.epoch == 0
        body = self.w.call(HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch, "rebalance_timeout": 30000 if joining else -1,
            "subscribed_topic_names": None, "subscribed_topic_regex": self.regex if joining else None,
            "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in self.owned.items()],
        })
        assert body["error_code"] == 0, body
        self.epoch = body["member_epoch"]
        if body["assignment"] is not None:
            self.owned = {t["topic_id"]: sorted(t["partitions"]) for t in body["assignment"]["topic_partitions"]}
        return body

    def count(self) -> int:
        return sum(len(ps) for ps in self.owned.values())


def _regex_records(data_dir: Path) -> list[tuple[str, str, list[str] | None]]:
    """(group, regex, topics or None for a tombstone) of every type-16 record in __consumer_offsets."""
    out = []
    for log in sorted(data_dir.glob("__consumer_offsets-*/*.log")):
        for _offset, _ts, key, value in iter_records(log.read_bytes()):
            k = decode_consumer_key(key) if key else None
            if k is not None and k.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
                out.append((k.group, k.regex or "", None if value is None else sorted(decode_regex_value(value).topics)))
    return out


def test_regex_resolution_is_a_record_kept_over_a_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(FAST, data_dir=tmp_path) as b, Wire(b.bootstrap_servers) as w:
        w.create_topic("rx-a", partitions=2)
        w.create_topic("rx-b", partitions=1)
        w.create_topic("other-rx", partitions=1)
        _coordinator(w, "rx-g")
        m = RegexMember(w, "rx-g", "rx-.*")
        m.heartbeat()
        assert m.count() == 3
        epoch = m.epoch
        w.create_topic("rx-c", partitions=2)  # a topic created later that matches: the group is re-assigned
        m.heartbeat()
        m.heartbeat()
        assert m.count() == 5 and m.epoch > epoch
        member_id, epoch = m.member_id, m.epoch
    records = [r for r in _regex_records(tmp_path) if r[0] == "rx-g"]
    assert records == [("rx-g", "rx-.*", ["rx-a", "rx-b"]), ("rx-g", "rx-.*", ["rx-a", "rx-b", "rx-c"])]
    _kafka_decodes_the_regex_record(tmp_path)
    with EmbeddedBroker(FAST, data_dir=tmp_path) as b, Wire(b.bootstrap_servers) as w:
        _coordinator(w, "rx-g")
        desc = w.call(DESCRIBE, 1, {"group_ids": ["rx-g"], "include_authorized_operations": False})["groups"][0]
        assert (desc["group_state"], desc["group_epoch"]) == ("Stable", epoch)
        assert desc["members"][0]["subscribed_topic_regex"] == "rx-.*"
        m = RegexMember(w, "rx-g", "rx-.*")
        m.member_id, m.epoch = member_id, epoch
        m.owned = {t["topic_id"]: t["partitions"] for t in desc["members"][0]["assignment"]["topic_partitions"]}
        m.heartbeat()
        assert (m.epoch, m.count()) == (epoch, 5)  # same resolution: no new record, no rebalance
        # the last member using the regex leaves: its resolution is tombstoned
        assert w.call(HEARTBEAT, 1, {"group_id": "rx-g", "member_id": member_id, "member_epoch": -1, "topic_partitions": None})["error_code"] == 0
    assert [r for r in _regex_records(tmp_path) if r[0] == "rx-g"][-1] == ("rx-g", "rx-.*", None)


def _kafka_decodes_the_regex_record(data_dir: Path) -> None:
    """Kafka 4.3.1's kafka-dump-log.sh --offsets-decoder reads our type-16 record as its own."""
    if kafka_tool_missing("kafka-dump-log.sh"):
        return
    logs = [str(p) for p in sorted(data_dir.glob("__consumer_offsets-*/*.log")) if p.stat().st_size]
    out = subprocess.run([str(kafka_bin("kafka-dump-log.sh")), "--offsets-decoder", "--files", ",".join(logs)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if '"regularExpression":"rx-.*"' in line]
    assert len(lines) == 2, out.stdout[-3000:]
    assert '"type":"16"' in lines[0] and '{"topics":["rx-a","rx-b"],"version":1,"timestamp":' in lines[0]
    assert '{"topics":["rx-a","rx-b","rx-c"],"version":2,"timestamp":' in lines[1]


# ---------------------------------------------------------------- ACLs

JAAS = f'{PLAIN_MODULE} required user_admin="admin-secret" user_carol="carol-secret";'


def _sasl(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory):
    srv = SecureServer(tmp_path_factory.mktemp("cg-authz") / "data", {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:admin",
        **{k: str(v) for k, v in FAST.items()},
    }).start()
    yield srv
    srv.stop()


def test_regex_resolves_only_to_topics_the_member_may_describe(secure: SecureServer) -> None:
    bs = secure.bootstrap
    admin = AdminClient({"bootstrap.servers": bs, **_sasl("admin")})
    for _topic, fut in admin.create_topics([NewTopic(t, 2, 1) for t in ("acl-rx-open", "acl-rx-closed")]).items():
        fut.result(TIMEOUT)
    acls = [AclBinding(ResourceType.TOPIC, "acl-rx-open", ResourcePatternType.LITERAL, "User:carol", "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.DESCRIBE, AclOperation.READ)]
    acls += [AclBinding(ResourceType.GROUP, g, ResourcePatternType.LITERAL, "User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW)
             for g in ("acl-rx-g", "acl-names-g")]
    for acl, fut in admin.create_acls(acls).items():
        assert fut.result(TIMEOUT) is None, acl

    c = Consumer({"bootstrap.servers": bs, **_sasl("carol"), "group.id": "acl-rx-g", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(["^acl-rx-.*"])
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(0.1)
        time.sleep(1.0)
        c.poll(0.1)
        assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == [("acl-rx-open", 0), ("acl-rx-open", 1)]
    finally:
        c.close()
    desc = admin.describe_consumer_groups(["acl-rx-g"])["acl-rx-g"].result(TIMEOUT)
    assert desc.members == [] or all(tp.topic == "acl-rx-open" for m in desc.members for tp in m.assignment.topic_partitions)

    # naming a topic carol may not DESCRIBE: the heartbeat is refused
    c = Consumer({"bootstrap.servers": bs, **_sasl("carol"), "group.id": "acl-names-g", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(["acl-rx-open", "acl-rx-closed"])
        deadline = time.monotonic() + 30
        seen = None
        while seen is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is not None:
                seen = msg.error().code()
        assert seen == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert c.assignment() == []
    finally:
        c.close()
