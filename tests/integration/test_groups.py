"""Consumer groups (classic protocol) with real clients: kafka-python, aiokafka,
confluent-kafka (librdkafka) and kafkajs.

- Two, then three members of one group share a topic's partitions without
  overlap; a member that leaves (clean close: LeaveGroup) and one that dies
  (SIGKILL, found by its session timeout) hand their partitions to the others,
  and every record is consumed. Each member is its own process
  (tests/tools/group_consumer.py, tests/tools/node/group_consumer.js) printing
  its assignments as JSON lines.
- Committed offsets and groups survive a server restart (they are records in
  ``__consumer_offsets``, replayed at start).
- kafka-python's admin client lists, describes, reads offsets of, alters and
  deletes groups, removes members and deletes offsets; Kafka's own
  ``kafka-consumer-groups.sh`` lists and describes a group (when the reference
  Kafka distribution and Java are there).

The servers run with ``group.initial.rebalance.delay.ms=0`` and a 1 s minimum
session timeout, so rebalances take well under a second and a dead member is
noticed after its 3 s session timeout. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, MemberToRemove, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.support import REPO, SidecarProcess, kafka_bin, wait_until

NODE = shutil.which("node")
NODE_DIR = REPO / "tests" / "tools" / "node"
KAFKAJS_INSTALLED = (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists()
PY_MEMBER = REPO / "tests" / "tools" / "group_consumer.py"
KAFKA_CONSUMER_GROUPS = kafka_bin("kafka-consumer-groups.sh")
JS_MEMBER = NODE_DIR / "group_consumer.js"

GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
SESSION_MS = 3000
HEARTBEAT_MS = 300
PARTITIONS = 6
RECORDS_PER_PARTITION = 5
REBALANCE_TIMEOUT_S = 60.0  # generous: consumers are separate processes on a busy 2-core machine

CLIENTS = [
    "kafka-python",
    "aiokafka",
    "confluent",
    pytest.param("kafkajs", marks=pytest.mark.skipif(
        NODE is None or not KAFKAJS_INSTALLED,
        reason="node or kafkajs missing (install Node.js, then run tests/tools/install-tools.sh)",
    )),
]


@pytest.fixture(scope="module")
def group_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidecarProcess]:
    server = SidecarProcess(tmp_path_factory.mktemp("groups") / "data", GROUP_OVERRIDES).start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> set[tuple[int, int]]:
    """``per_partition`` records into every partition; returns their (partition, offset)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    futures = [
        producer.send(topic, key=b"k%d" % i, value=b"v%d-%d" % (p, i), partition=p)
        for p in range(partitions) for i in range(start, start + per_partition)
    ]
    producer.flush()
    out = {(m.partition, m.offset) for m in (f.get(timeout=10) for f in futures)}
    producer.close()
    return out


class Member:
    """One group member in a child process; a thread records what it prints."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, name: str, log_dir: Path) -> None:
        self.name = name
        self.assigned: list[int] | None = None  # latest assignment; None while revoked / not joined
        self.records: set[tuple[int, int]] = set()
        self.closed = False
        self._lock = threading.Lock()
        if client == "kafkajs":
            spec = {"brokers": [bootstrap], "topic": topic, "group": group, "sessionMs": SESSION_MS,
                    "heartbeatMs": HEARTBEAT_MS, "maxSeconds": 120, "clientId": name}
            cmd = [NODE or "node", str(JS_MEMBER), json.dumps(spec)]
        else:
            spec = {"client": client, "bootstrap": bootstrap, "topic": topic, "group": group,
                    "session_ms": SESSION_MS, "heartbeat_ms": HEARTBEAT_MS, "max_seconds": 120, "client_id": name}
            cmd = [sys.executable, str(PY_MEMBER), json.dumps(spec)]
        self._stderr = open(log_dir / f"{name}.stderr", "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=NODE_DIR if client == "kafkajs" else REPO)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if ev["event"] == "assigned":
                    self.assigned = ev["partitions"]
                elif ev["event"] == "revoked":
                    self.assigned = None
                elif ev["event"] == "record":
                    self.records.add((ev["partition"], ev["offset"]))
                elif ev["event"] == "closed":
                    self.closed = True

    def assignment(self) -> list[int] | None:
        with self._lock:
            return None if self.assigned is None else list(self.assigned)

    def consumed(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self.records)

    def leave(self) -> None:
        """Clean close: the client sends LeaveGroup."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)
        self._reader.join(5)

    def kill(self) -> None:
        """A crash: no LeaveGroup, the coordinator notices the session timeout."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self._stderr.close()


def wait_for_split(members: list[Member], partitions: int, what: str) -> list[list[int]]:
    """Until the members' assignments are all non-empty, disjoint and cover every partition."""

    def split() -> list[list[int]] | None:
        assignments = [m.assignment() for m in members]
        if any(not a for a in assignments):
            return None
        flat = [p for a in assignments for p in a]  # type: ignore[union-attr]
        if len(flat) != len(set(flat)) or set(flat) != set(range(partitions)):
            return None
        return assignments  # type: ignore[return-value]

    return wait_until(split, timeout=REBALANCE_TIMEOUT_S, interval=0.05, message=what)


@pytest.mark.parametrize("client", CLIENTS)
def test_members_share_partitions_and_take_over_from_leaving_and_dead_members(group_server, client, topic_name, tmp_path):
    bootstrap = group_server.bootstrap
    create_topic(bootstrap, topic_name, PARTITIONS)
    produced = produce(bootstrap, topic_name, PARTITIONS, RECORDS_PER_PARTITION)
    group = f"group-{topic_name}"
    members: list[Member] = []

    def start(name: str) -> Member:
        m = Member(client, bootstrap, topic_name, group, name, tmp_path)
        members.append(m)
        return m

    try:
        a, b = start("member-a"), start("member-b")
        two = wait_for_split([a, b], PARTITIONS, f"{client}: two members sharing {PARTITIONS} partitions")
        assert sorted(len(x) for x in two) == [3, 3]

        c = start("member-c")
        three = wait_for_split([a, b, c], PARTITIONS, f"{client}: three members sharing {PARTITIONS} partitions")
        assert sorted(len(x) for x in three) == [2, 2, 2]

        c.leave()  # LeaveGroup: the others rebalance at once
        assert c.closed, f"{client} member did not close cleanly"
        wait_for_split([a, b], PARTITIONS, f"{client}: partitions of the member that left moving to the other two")

        b.kill()  # no LeaveGroup: the member is removed when its session times out
        wait_for_split([a], PARTITIONS, f"{client}: partitions of the killed member moving to the last one")

        wait_until(
            lambda: produced <= (a.consumed() | b.consumed() | c.consumed()),
            timeout=REBALANCE_TIMEOUT_S, message=f"{client}: every record consumed by the group",
        )
    finally:
        for m in members:
            m.stop()


def group_consumer(bootstrap: str, topic: str, group: str, **kw) -> KafkaConsumer:
    """A kafka-python group member that knows the topic's partitions before it joins (kafka-python
    3.0.12 can lose the assignment of a leader that rejoins for new metadata while poll() times out)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, **kw,
    )
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    return consumer


def test_committed_offsets_and_groups_survive_restart(sidecar_factory, topic_name):
    server = sidecar_factory(GROUP_OVERRIDES)
    create_topic(server.bootstrap, topic_name, 3)
    produce(server.bootstrap, topic_name, 3, 10)
    group = f"restart-{topic_name}"

    consumer = group_consumer(server.bootstrap, topic_name, group)
    seen: list = []
    deadline = time.monotonic() + REBALANCE_TIMEOUT_S
    while len(seen) < 20 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000, max_records=20 - len(seen)).values():
            seen.extend(records)
    assert len(seen) == 20
    consumer.commit()
    committed = {TopicPartition(topic_name, p): consumer.committed(TopicPartition(topic_name, p)) for p in range(3)}
    consumer.close()
    by_partition = {p: sum(1 for r in seen if r.partition == p) for p in range(3)}
    # commit() commits the position of every assigned partition, 0 for one not read yet.
    assert {tp.partition: off for tp, off in committed.items()} == by_partition

    assert server.stop() == 0
    server.start()

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == by_partition
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Empty" and described["protocol_type"] == "consumer"
        assert any(g["group_id"] == group for g in admin.list_groups())
    finally:
        admin.close()

    # A member of the same group resumes from the committed offsets: exactly the 10 records not read yet.
    consumer = group_consumer(server.bootstrap, topic_name, group)
    rest: list = []
    deadline = time.monotonic() + REBALANCE_TIMEOUT_S
    while len(rest) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            rest.extend(records)
    consumer.close()
    assert sorted((r.partition, r.offset) for r in rest) == sorted(
        (p, o) for p in range(3) for o in range(by_partition[p], 10)
    )

    # Deleting the topic deletes its committed offsets in every group (Kafka's onPartitionsDeleted),
    # for good: a topic created again under the name is not read from stale positions.
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        assert admin.list_group_offsets(group)[group]
        admin.delete_topics([topic_name])
        wait_until(lambda: not admin.list_group_offsets(group)[group], message="offsets of the deleted topic gone")
    finally:
        admin.close()
    assert server.stop() == 0
    server.start()
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        assert admin.list_group_offsets(group)[group] == {}
    finally:
        admin.close()


def test_admin_client_lists_describes_and_deletes_groups(group_server, topic_name):
    bootstrap = group_server.bootstrap
    create_topic(bootstrap, topic_name, 2)
    produce(bootstrap, topic_name, 2, 3)
    group = f"admin-{topic_name}"
    consumer = group_consumer(bootstrap, topic_name, group, client_id="admin-test-member")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        got = 0
        deadline = time.monotonic() + REBALANCE_TIMEOUT_S
        while got < 6 and time.monotonic() < deadline:
            got += sum(len(r) for r in consumer.poll(timeout_ms=1000).values())
        assert got == 6
        consumer.commit()

        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        assert listed[group]["group_state"] == "Stable"
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}

        d = admin.describe_groups([group])[group]
        assert d["error"] is None and d["group_state"] == "Stable" and d["protocol_type"] == "consumer"
        assert d["protocol_data"] in ("range", "roundrobin", "sticky", "cooperative-sticky")
        (member,) = d["members"]
        assert member["client_id"] == "admin-test-member"
        assert member["client_host"] == "/127.0.0.1"
        assert member["member_metadata"]["topics"] == [topic_name]
        assignment = {(t["topic"], p) for t in member["member_assignment"]["assigned_partitions"] for p in t["partitions"]}
        assert assignment == {(topic_name, 0), (topic_name, 1)}
        assert set(d["authorized_operations"]) == {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}

        offsets = admin.list_group_offsets(group)[group]
        assert {tp: om.offset for tp, om in offsets.items()} == {TopicPartition(topic_name, 0): 3, TopicPartition(topic_name, 1): 3}

        # A group with members can be neither deleted nor lose offsets of a topic it subscribes to.
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        errs = admin.delete_group_offsets(group, [TopicPartition(topic_name, 0)])
        assert errs[TopicPartition(topic_name, 0)].__name__ == "GroupSubscribedToTopicError"

        # Removing the member (LeaveGroup v3+ batch) empties the group.
        removed = admin.remove_group_members(group, [MemberToRemove(member_id=member["member_id"]), MemberToRemove(member_id="nobody")])
        assert {k: v.__name__ for k, v in removed.items()} == {member["member_id"]: "NoError", "nobody": "UnknownMemberIdError"}
        wait_until(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", message="group empty after removal")

        altered = admin.alter_group_offsets(group, {TopicPartition(topic_name, 0): OffsetAndMetadata(1, "m", -1)})
        assert {tp: e.__name__ for tp, e in altered.items()} == {TopicPartition(topic_name, 0): "NoError"}
        errs = admin.delete_group_offsets(group, [TopicPartition(topic_name, 1)])
        assert {tp: e.__name__ for tp, e in errs.items()} == {TopicPartition(topic_name, 1): "NoError"}
        offsets = admin.list_group_offsets(group)[group]
        assert {tp: (om.offset, om.metadata) for tp, om in offsets.items()} == {TopicPartition(topic_name, 0): (1, "m")}

        assert admin.delete_groups([group, f"{group}-unknown"]) == {group: "OK", f"{group}-unknown": "GroupIdNotFoundError"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets(group)[group] == {}
        d = admin.describe_groups([group])[group]
        assert d["group_state"] == "Dead"
    finally:
        consumer.close()
        admin.close()


@pytest.mark.skipif(
    not KAFKA_CONSUMER_GROUPS.exists() or shutil.which("java") is None,
    reason="Kafka's kafka-consumer-groups.sh (the reference distribution: `make reference`) or java missing",
)
def test_kafka_consumer_groups_tool_lists_and_describes(group_server, topic_name):
    bootstrap = group_server.bootstrap
    create_topic(bootstrap, topic_name, 2)
    produce(bootstrap, topic_name, 2, 3)
    group = f"tool-{topic_name}"
    consumer = group_consumer(bootstrap, topic_name, group, client_id="tool-test-member")
    try:
        got = 0
        deadline = time.monotonic() + REBALANCE_TIMEOUT_S
        while got < 6 and time.monotonic() < deadline:
            got += sum(len(r) for r in consumer.poll(timeout_ms=1000).values())
        consumer.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(2, "", -1), TopicPartition(topic_name, 1): OffsetAndMetadata(3, "", -1)})
        env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx128m")

        def tool(*args: str) -> list[list[str]]:
            out = subprocess.run([str(KAFKA_CONSUMER_GROUPS), "--bootstrap-server", bootstrap, *args], capture_output=True, text=True, timeout=60, env=env)
            assert out.returncode == 0, out.stderr
            return [line.split() for line in out.stdout.splitlines() if line.strip()]

        assert [group] in tool("--list")
        rows = tool("--describe", "--group", group)
        assert rows[0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        body = sorted(r[:6] + r[7:] for r in rows[1:])
        assert body == [
            [group, topic_name, "0", "2", "3", "1", "/127.0.0.1", "tool-test-member"],
            [group, topic_name, "1", "3", "3", "0", "/127.0.0.1", "tool-test-member"],
        ]
    finally:
        consumer.close()
