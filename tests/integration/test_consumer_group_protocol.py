"""KIP-848 consumer groups (``group.protocol=consumer``) over real TCP against an embedded broker.

confluent-kafka consumers split a topic, a third joins and partitions move, one leaves and they
move back, offsets committed by members are resumed; raw ConsumerGroupHeartbeat requests check
the member epochs (revoke before assign, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), OffsetCommit's
member-epoch check, session timeouts, partition changes, and that a restart keeps the group.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.testing import EmbeddedBroker

from tests.conformance.wire import Wire
from tests.support import kafka_bin, kafka_tool_missing

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402

HEARTBEAT, DESCRIBE, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 68, 69, 8, 9, 10
UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND, INVALID_REQUEST = 25, 69, 42
FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH = 110, 113

FAST = {
    "group.consumer.heartbeat.interval.ms": 300, "group.consumer.min.heartbeat.interval.ms": 300,
    "group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 6000,
    "group.consumer.assignment.interval.ms": 0,  # every change assigned at once (one test checks the batching)
}


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(FAST) as b:
        yield b


def _consumer(bootstrap: str, group: str, name: str, topic: str) -> Any:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "client.id": name,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def _poll_until(consumers: list[Any], done: Callable[[list[list[int]]], bool], timeout: float = 30.0) -> list[list[int]]:
    deadline = time.monotonic() + timeout
    while True:
        for c in consumers:
            c.poll(0.05)
        got = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def _split(n: int, sizes: list[int]) -> Callable[[list[list[int]]], bool]:
    def check(got: list[list[int]]) -> bool:
        flat = [p for ps in got for p in ps]
        return sorted(flat) == list(range(n)) and sorted(len(ps) for ps in got) == sizes
    return check


def test_split_join_leave_commit_and_resume(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    with Wire(bs) as w:
        w.create_topic("kip848-t", partitions=4)
    p = Producer({"bootstrap.servers": bs})
    for i in range(40):
        p.produce("kip848-t", str(i).encode(), partition=i % 4)
    p.flush(10)

    cs = [_consumer(bs, "kip848-g", "c1", "kip848-t"), _consumer(bs, "kip848-g", "c2", "kip848-t")]
    assert _split(4, [2, 2])(_poll_until(cs, _split(4, [2, 2])))
    cs.append(_consumer(bs, "kip848-g", "c3", "kip848-t"))
    # a third member: partitions move to it only once revoked by their owner
    assert _split(4, [1, 1, 2])(_poll_until(cs, _split(4, [1, 1, 2])))

    desc = admin.describe_consumer_groups(["kip848-g"])["kip848-g"].result(10)
    assert desc.state == ConsumerGroupState.STABLE
    assert len(desc.members) == 3
    assert sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions) == [0, 1, 2, 3]
    listed = admin.list_consumer_groups().result(10)
    assert "kip848-g" in {g.group_id for g in listed.valid}

    cs[0].close()
    cs = cs[1:]
    assert _split(4, [2, 2])(_poll_until(cs, _split(4, [2, 2])))

    # commit (OffsetCommit with the member epoch) then resume in a new member
    cs[0].commit(offsets=[TopicPartition("kip848-t", p, 7) for p in range(4)], asynchronous=False)
    for c in cs:
        c.close()
    resumed = _consumer(bs, "kip848-g", "c4", "kip848-t")
    try:
        msgs = []
        deadline = time.monotonic() + 30
        while len(msgs) < 12 and time.monotonic() < deadline:
            m = resumed.poll(0.2)
            if m is not None and m.error() is None:
                msgs.append((m.partition(), m.offset()))
        # the new member starts each partition at the offset committed by the others
        assert sorted(msgs) == [(p, o) for p in range(4) for o in (7, 8, 9)]
        committed = resumed.committed([TopicPartition("kip848-t", p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [7, 7, 7, 7]
    finally:
        resumed.close()


class Member:
    """A consumer-protocol member speaking raw ConsumerGroupHeartbeat v1."""

    def __init__(self, w: Wire, group: str, topics: list[str]) -> None:
        self.w, self.group, self.topics = w, group, topics
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}

    def heartbeat(self, full: bool = False, epoch: int | None = None, owned: dict[uuid.UUID, list[int]] | None = None) -> dict[str, Any]:
        joining = self.epoch == 0 or full
        body = self.w.call(HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch if epoch is None else epoch,
            "instance_id": None, "rack_id": None, "rebalance_timeout": 30000 if joining else -1,
            "subscribed_topic_names": self.topics if joining else None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in (self.owned if owned is None else owned).items()],
        })
        if body["error_code"] == 0 and epoch is None:
            self.epoch = body["member_epoch"]
            if body["assignment"] is not None:
                self.owned = {t["topic_id"]: sorted(t["partitions"]) for t in body["assignment"]["topic_partitions"]}
        return body

    def partitions(self) -> list[int]:
        return sorted(p for ps in self.owned.values() for p in ps)


def _coordinator(w: Wire, group: str) -> None:
    assert w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]["error_code"] == 0


def test_epochs_revoke_before_assign_and_fencing(broker: EmbeddedBroker) -> None:
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic("kip848-raw", partitions=4)
        _coordinator(w, "raw-g")
        assert w.call(HEARTBEAT, 1, {"group_id": "raw-g", "member_id": "", "member_epoch": 0, "rebalance_timeout": 1000,
                                     "subscribed_topic_names": ["kip848-raw"], "topic_partitions": []})["error_code"] == INVALID_REQUEST
        a = Member(w, "raw-g", ["kip848-raw"])
        first = a.heartbeat()
        assert first["error_code"] == 0 and first["member_epoch"] == 2 and first["heartbeat_interval"] == 300
        assert a.partitions() == [0, 1, 2, 3]
        # a greater epoch, an unknown member
        assert a.heartbeat(epoch=9)["error_code"] == FENCED_MEMBER_EPOCH
        stranger = Member(w, "raw-g", ["kip848-raw"])
        stranger.epoch = 1
        assert stranger.heartbeat()["error_code"] == UNKNOWN_MEMBER_ID

        b = Member(w, "raw-g", ["kip848-raw"])
        joined = b.heartbeat()
        # b gets the group epoch 3 but nothing yet: its partitions are still a's
        assert joined["member_epoch"] == 3 and b.partitions() == []
        revoke = a.heartbeat()
        assert revoke["member_epoch"] == 2 and len(a.partitions()) == 2  # revoke first, same epoch
        assert b.heartbeat()["member_epoch"] == 3 and b.partitions() == []  # not released yet
        assert a.heartbeat()["member_epoch"] == 3  # a acknowledged by no longer owning them
        b.heartbeat()
        assert sorted(a.partitions() + b.partitions()) == [0, 1, 2, 3] and len(b.partitions()) == 2

        # OffsetCommit v9 checks the member epoch; an older epoch may commit the partitions the
        # member already had then (Kafka 4.3's KIP-1251 assignment epochs)
        def commit(member: Member, epoch: int, partition: int) -> int:
            body = w.call(OFFSET_COMMIT, 9, {"group_id": "raw-g", "generation_id_or_member_epoch": epoch, "member_id": member.member_id,
                                             "group_instance_id": None, "topics": [{"name": "kip848-raw", "partitions": [
                                                 {"partition_index": partition, "committed_offset": 5, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            return body["topics"][0]["partitions"][0]["error_code"]
        mine, theirs = a.partitions()[0], b.partitions()[0]
        assert commit(a, 2, mine) == 0
        assert commit(a, 2, theirs) == STALE_MEMBER_EPOCH
        assert commit(a, 4, mine) == STALE_MEMBER_EPOCH
        assert commit(a, 3, mine) == 0

        desc = w.call(DESCRIBE, 1, {"group_ids": ["raw-g", "nope"], "include_authorized_operations": False})["groups"]
        assert (desc[0]["error_code"], desc[0]["group_state"], desc[0]["group_epoch"], desc[0]["assignment_epoch"]) == (0, "Stable", 3, 3)
        assert desc[0]["assignor_name"] == "uniform"
        assert sorted(m["member_epoch"] for m in desc[0]["members"]) == [3, 3]
        assert desc[0]["members"][0]["member_type"] == 1
        assert desc[1]["error_code"] == GROUP_ID_NOT_FOUND

        # leaving gives a's partitions back to b at the next epoch
        left = w.call(HEARTBEAT, 1, {"group_id": "raw-g", "member_id": a.member_id, "member_epoch": -1, "topic_partitions": None})
        assert (left["error_code"], left["member_epoch"]) == (0, -1)
        assert b.heartbeat()["member_epoch"] == 4 and b.partitions() == [0, 1, 2, 3]


def test_partition_increase_and_session_timeout(broker: EmbeddedBroker) -> None:
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic("kip848-grow", partitions=2)
        _coordinator(w, "grow-g")
        a, b = Member(w, "grow-g", ["kip848-grow"]), Member(w, "grow-g", ["kip848-grow"])
        a.heartbeat()
        b.heartbeat()
        for _ in range(3):
            a.heartbeat()
            b.heartbeat()
        assert sorted(a.partitions() + b.partitions()) == [0, 1]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_partitions([NewPartitions("kip848-grow", 4)])["kip848-grow"].result(10)
        epoch = a.epoch
        for _ in range(3):
            a.heartbeat()
            b.heartbeat()
        assert a.epoch > epoch and sorted(a.partitions() + b.partitions()) == [0, 1, 2, 3]
        # b stops heartbeating: after the session timeout a owns everything
        deadline = time.monotonic() + 15
        while len(a.partitions()) < 4 and time.monotonic() < deadline:
            time.sleep(0.5)
            a.heartbeat()
        assert a.partitions() == [0, 1, 2, 3]
        assert b.heartbeat()["error_code"] == UNKNOWN_MEMBER_ID


def test_restart_keeps_the_group(tmp_path: Path) -> None:
    with EmbeddedBroker(FAST, data_dir=tmp_path) as b1, Wire(b1.bootstrap_servers) as w:
        w.create_topic("kip848-durable", partitions=3)
        _coordinator(w, "durable-g")
        a = Member(w, "durable-g", ["kip848-durable"])
        a.heartbeat()
        assert a.partitions() == [0, 1, 2]
        body = w.call(OFFSET_COMMIT, 9, {"group_id": "durable-g", "generation_id_or_member_epoch": a.epoch, "member_id": a.member_id,
                                         "group_instance_id": None, "topics": [{"name": "kip848-durable", "partitions": [
                                             {"partition_index": 1, "committed_offset": 42, "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
        assert body["topics"][0]["partitions"][0]["error_code"] == 0
        member_id, epoch = a.member_id, a.epoch
    with EmbeddedBroker(FAST, data_dir=tmp_path) as b2, Wire(b2.bootstrap_servers) as w:
        _coordinator(w, "durable-g")
        desc = w.call(DESCRIBE, 1, {"group_ids": ["durable-g"], "include_authorized_operations": False})["groups"][0]
        assert desc["error_code"] == 0 and desc["group_epoch"] == epoch
        (m,) = desc["members"]
        assert (m["member_id"], m["member_epoch"]) == (member_id, epoch)
        assert sorted(m["assignment"]["topic_partitions"][0]["partitions"]) == [0, 1, 2]
        a = Member(w, "durable-g", ["kip848-durable"])
        a.member_id, a.epoch = member_id, epoch
        a.owned = {m["assignment"]["topic_partitions"][0]["topic_id"]: [0, 1, 2]}
        assert a.heartbeat()["error_code"] == 0 and a.epoch == epoch
        fetched = w.call(OFFSET_FETCH, 9, {"groups": [{"group_id": "durable-g", "member_id": member_id, "member_epoch": epoch,
                                                       "topics": [{"name": "kip848-durable", "partition_indexes": [1]}]}],
                                            "require_stable": False})
        assert fetched["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 42


def test_regex_subscription_follows_new_topics(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    with Wire(bs) as w:
        w.create_topic("kip848-re-a", partitions=2)
        w.create_topic("kip848-re-b", partitions=1)
        w.create_topic("kip848-other", partitions=1)
        c = _consumer(bs, "regex-g", "r1", "^kip848-re-.*")
        try:
            got = _poll_until([c], lambda got: len(got[0]) == 3)
            assert {tp.topic for tp in c.assignment()} == {"kip848-re-a", "kip848-re-b"} and got == [[0, 0, 1]]
            w.create_topic("kip848-re-c", partitions=1)
            _poll_until([c], lambda got: len(got[0]) == 4)
            assert {tp.topic for tp in c.assignment()} == {"kip848-re-a", "kip848-re-b", "kip848-re-c"}
        finally:
            c.close()
        bad = w.call(HEARTBEAT, 1, {"group_id": "regex-g2", "member_id": "m", "member_epoch": 0, "rebalance_timeout": 1000,
                                    "subscribed_topic_regex": "(?=x)", "topic_partitions": []})
        assert bad["error_code"] == 128  # INVALID_REGULAR_EXPRESSION


def test_static_member_rejoins_with_its_assignment(broker: EmbeddedBroker) -> None:
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic("kip848-static", partitions=2)
        _coordinator(w, "static-g")

        def join(member_id: str) -> dict[str, Any]:
            return w.call(HEARTBEAT, 1, {"group_id": "static-g", "member_id": member_id, "member_epoch": 0, "instance_id": "i-1",
                                         "rebalance_timeout": 30000, "subscribed_topic_names": ["kip848-static"], "topic_partitions": []})
        first = join("m-1")
        assert first["error_code"] == 0 and first["member_epoch"] == 2
        # the instance id is taken while its member has not left
        assert join("m-2")["error_code"] == 111  # UNRELEASED_INSTANCE_ID
        left = w.call(HEARTBEAT, 1, {"group_id": "static-g", "member_id": "m-1", "member_epoch": -2, "instance_id": "i-1",
                                     "topic_partitions": None})
        assert (left["error_code"], left["member_epoch"]) == (0, -2)
        back = join("m-2")
        assert back["error_code"] == 0 and back["member_epoch"] == 2  # no rebalance: same epoch, same partitions
        assert sorted(back["assignment"]["topic_partitions"][0]["partitions"]) == [0, 1]
        desc = w.call(DESCRIBE, 1, {"group_ids": ["static-g"], "include_authorized_operations": False})["groups"][0]
        assert [(m["member_id"], m["instance_id"]) for m in desc["members"]] == [("m-2", "i-1")]


def test_topic_deletion_offset_fetch_epoch_and_classic_join(broker: EmbeddedBroker) -> None:
    with Wire(broker.bootstrap_servers) as w:
        w.create_topic("kip848-keep", partitions=1)
        w.create_topic("kip848-gone", partitions=1)
        _coordinator(w, "del-g")
        a = Member(w, "del-g", ["kip848-keep", "kip848-gone"])
        a.heartbeat()
        assert len(a.owned) == 2
        assert w.delete_topics(["kip848-gone"]) == {"kip848-gone": 0}
        epoch = a.epoch
        a.heartbeat()  # the deleted topic's partition is revoked
        a.heartbeat()
        assert a.epoch > epoch and len(a.owned) == 1 and a.partitions() == [0]

        def fetch(member_id: str | None, epoch: int) -> int:
            body = w.call(OFFSET_FETCH, 9, {"groups": [{"group_id": "del-g", "member_id": member_id, "member_epoch": epoch,
                                                        "topics": [{"name": "kip848-keep", "partition_indexes": [0]}]}], "require_stable": False})
            return body["groups"][0]["error_code"]
        assert fetch(a.member_id, a.epoch) == 0
        assert fetch(a.member_id, a.epoch - 1) == STALE_MEMBER_EPOCH
        assert fetch("who", a.epoch) == UNKNOWN_MEMBER_ID
        assert fetch(None, -1) == 0  # the admin client

        # a classic member may join a consumer group that has members (KIP-848's online migration):
        # first MEMBER_ID_REQUIRED, as Kafka 4.3.1 answers (tests/conformance: online_migration)
        join = {"group_id": "del-g", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "", "group_instance_id": None,
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None}
        assert w.call(11, 9, join)["error_code"] == 79  # MEMBER_ID_REQUIRED
        assert w.call(11, 9, {**join, "protocol_type": "other"})["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL
        groups = {g["group_id"]: g for g in w.call(16, 5, {"states_filter": [], "types_filter": []})["groups"]}
        assert (groups["del-g"]["group_type"], groups["del-g"]["protocol_type"], groups["del-g"]["group_state"]) == ("consumer", "consumer", "Stable")
        w.call(HEARTBEAT, 1, {"group_id": "del-g", "member_id": a.member_id, "member_epoch": -1, "topic_partitions": None})
        groups = {g["group_id"]: g for g in w.call(16, 5, {"states_filter": ["empty"], "types_filter": ["consumer"]})["groups"]}
        assert groups["del-g"]["group_state"] == "Empty"
        # once empty, the group becomes a classic group for a classic member (Kafka converts empty groups)
        assert w.call(11, 9, join)["error_code"] == 79  # MEMBER_ID_REQUIRED: the classic protocol's first answer
        assert w.call(DESCRIBE, 1, {"group_ids": ["del-g"], "include_authorized_operations": False})["groups"][0]["error_code"] == GROUP_ID_NOT_FOUND


def test_kafka_consumer_groups_tool_describes_a_consumer_group(broker: EmbeddedBroker) -> None:
    """Kafka 4.3.1's kafka-consumer-groups.sh: --list --type, --describe, --members --verbose, --state."""
    missing = kafka_tool_missing("kafka-consumer-groups.sh")
    if missing:
        pytest.skip(missing)
    bs = broker.bootstrap_servers
    stop = threading.Event()
    with Wire(bs) as w, Wire(bs) as keepalive:
        w.create_topic("kip848-tool", partitions=3)
        _coordinator(w, "tool-g")
        a = Member(keepalive, "tool-g", ["kip848-tool"])
        a.heartbeat()

        def beat() -> None:  # the tools take longer than the session timeout to start
            while not stop.wait(1.0):
                a.heartbeat()
        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        try:
            _describe_with_tool(bs, w, a)
        finally:
            stop.set()
            beater.join()


def _describe_with_tool(bs: str, w: Wire, a: Member) -> None:
    w.call(OFFSET_COMMIT, 9, {"group_id": "tool-g", "generation_id_or_member_epoch": a.epoch, "member_id": a.member_id,
                              "group_instance_id": None, "topics": [{"name": "kip848-tool", "partitions": [
                                  {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})

    def tool(*args: str) -> list[list[str]]:
        out = subprocess.run([str(kafka_bin("kafka-consumer-groups.sh")), "--bootstrap-server", bs, *args], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
        assert out.returncode == 0, out.stderr
        return [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert ["tool-g", "Consumer"] in tool("--list", "--type")
    rows = tool("--describe", "--group", "tool-g")
    assert [r[:5] for r in rows[1:]] == [["tool-g", "kip848-tool", "0", "0", "0"], ["tool-g", "kip848-tool", "1", "-", "0"],
                                         ["tool-g", "kip848-tool", "2", "-", "0"]]
    assert all(r[6] == a.member_id for r in rows[1:])
    (state,) = tool("--describe", "--group", "tool-g", "--state")[1:]
    assert state[-3:] == ["uniform", "Stable", "1"]
    (member,) = tool("--describe", "--group", "tool-g", "--members", "--verbose")[1:]
    assert member[1] == a.member_id and member[-4:] == [str(a.epoch), "kip848-tool:0,1,2", str(a.epoch), "kip848-tool:0,1,2"]


def test_transactional_offsets_of_a_consumer_protocol_member(broker: EmbeddedBroker) -> None:
    """sendOffsetsToTransaction with a consumer-protocol member's group metadata (TxnOffsetCommit
    checked against the member epoch): the offsets are visible once the transaction commits."""
    bs = broker.bootstrap_servers
    with Wire(bs) as w:
        w.create_topic("kip848-eos", partitions=1)
    c = _consumer(bs, "eos-g", "e1", "kip848-eos")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "kip848-eos-tx"})
    try:
        assert _poll_until([c], _split(1, [1])) == [[0]]
        p.init_transactions(20)
        p.begin_transaction()
        p.produce("kip848-eos", b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition("kip848-eos", 0, 5)], c.consumer_group_metadata(), 20)
        p.commit_transaction(20)
        assert [tp.offset for tp in c.committed([TopicPartition("kip848-eos", 0)], timeout=10)] == [5]
    finally:
        c.close()


def test_target_assignments_are_batched(tmp_path: Path) -> None:
    """Kafka 4.3's group.consumer.assignment.interval.ms: a member joining right after an assignment
    waits for the next one (it reconciles towards the current target, getting nothing)."""
    with EmbeddedBroker({**FAST, "group.consumer.assignment.interval.ms": 1500}, data_dir=tmp_path) as b, Wire(b.bootstrap_servers) as w:
        w.create_topic("kip848-batch", partitions=2)
        _coordinator(w, "batch-g")
        a, b2 = Member(w, "batch-g", ["kip848-batch"]), Member(w, "batch-g", ["kip848-batch"])
        assert a.heartbeat()["member_epoch"] == 2 and a.partitions() == [0, 1]  # the group's first assignment: at once
        joined = b2.heartbeat()
        assert (joined["member_epoch"], b2.partitions()) == (2, [])  # group epoch 3, assignment deferred
        desc = w.call(DESCRIBE, 1, {"group_ids": ["batch-g"], "include_authorized_operations": False})["groups"][0]
        assert (desc["group_state"], desc["group_epoch"], desc["assignment_epoch"]) == ("Assigning", 3, 2)
        assert a.heartbeat()["member_epoch"] == 2 and a.partitions() == [0, 1]
        time.sleep(1.8)
        desc = w.call(DESCRIBE, 1, {"group_ids": ["batch-g"], "include_authorized_operations": False})["groups"][0]
        assert desc["assignment_epoch"] == 3  # computed by the deferred assignment, without a heartbeat
        for _ in range(3):
            a.heartbeat()
            b2.heartbeat()
        assert (a.epoch, b2.epoch) == (3, 3) and sorted(a.partitions() + b2.partitions()) == [0, 1] and len(b2.partitions()) == 1
