"""KIP-848 consumer groups across a kill -9, and Kafka 4.3.1's Java consumer with group.protocol=consumer.

After a SIGKILL (no clean shutdown) the group is rebuilt from its ``__consumer_offsets`` records:
the members, their epochs and assignments, the target assignment and the committed offsets are
what they were when the heartbeats and commits were answered, and the members carry on at their
epochs without a rebalance. The Java consumer of the reference distribution
(``kafka-console-consumer.sh --consumer-property group.protocol=consumer``) joins a consumer group
here, reads every record and commits, as it does against Kafka.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.wire import Wire
from tests.integration.test_consumer_group_protocol import (
    DESCRIBE,
    FAST,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    Member,
    _coordinator,
)
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing

_OVERRIDES = {k: str(v) for k, v in FAST.items()}


def _describe(w: Wire, group: str) -> dict[str, Any]:
    return w.call(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]


def _commit(w: Wire, m: Member, topic: str, partition: int, offset: int) -> int:
    body = w.call(OFFSET_COMMIT, 9, {"group_id": m.group, "generation_id_or_member_epoch": m.epoch, "member_id": m.member_id,
                                     "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                         {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                                          "committed_metadata": f"o{offset}"}]}]})
    return body["topics"][0]["partitions"][0]["error_code"]


def _members(desc: dict[str, Any]) -> dict[str, tuple[int, list[int], list[int]]]:
    def parts(a: dict[str, Any]) -> list[int]:
        return sorted(p for t in a["topic_partitions"] for p in t["partitions"])
    return {m["member_id"]: (m["member_epoch"], parts(m["assignment"]), parts(m["target_assignment"])) for m in desc["members"]}


def test_kill_9_keeps_members_epochs_assignments_and_offsets(tmp_path: Path) -> None:
    server = SidecarProcess(tmp_path / "data", _OVERRIDES).start()
    try:
        with Wire(server.bootstrap) as w:
            w.create_topic("kip848-crash", partitions=4)
            _coordinator(w, "crash-g")
            a, b = Member(w, "crash-g", ["kip848-crash"]), Member(w, "crash-g", ["kip848-crash"])
            a.heartbeat()
            b.heartbeat()
            for _ in range(3):
                a.heartbeat()
                b.heartbeat()
            assert sorted(a.partitions() + b.partitions()) == [0, 1, 2, 3] and len(a.partitions()) == 2
            assert _commit(w, a, "kip848-crash", a.partitions()[0], 11) == 0
            assert _commit(w, b, "kip848-crash", b.partitions()[0], 22) == 0
            before = _describe(w, "crash-g")
            assert before["group_state"] == "Stable"
            owned_a, owned_b = dict(a.owned), dict(b.owned)
        server.kill()
        assert not (server.data_dir / ".kafka_cleanshutdown").exists()
        server.start()
        with Wire(server.bootstrap) as w:
            _coordinator(w, "crash-g")
            after = _describe(w, "crash-g")
            assert (after["error_code"], after["group_state"], after["group_epoch"], after["assignment_epoch"]) == (
                0, "Stable", before["group_epoch"], before["assignment_epoch"])
            assert _members(after) == _members(before)
            assert _members(after)[a.member_id] == (a.epoch, a.partitions(), a.partitions())
            # the members carry on at their epochs: no rebalance, same partitions
            for m, owned in ((a, owned_a), (b, owned_b)):
                m.w = w
                epoch = m.epoch
                assert m.heartbeat()["error_code"] == 0 and m.epoch == epoch and m.owned == owned
            fetched = w.call(OFFSET_FETCH, 9, {"groups": [{"group_id": "crash-g", "member_id": a.member_id, "member_epoch": a.epoch,
                                                           "topics": [{"name": "kip848-crash", "partition_indexes": [0, 1, 2, 3]}]}],
                                                "require_stable": True})
            rows = {p["partition_index"]: (p["committed_offset"], p["metadata"]) for p in fetched["groups"][0]["topics"][0]["partitions"]}
            assert rows[a.partitions()[0]] == (11, "o11") and rows[b.partitions()[0]] == (22, "o22")
            assert sorted(o for o, _ in rows.values()) == [-1, -1, 11, 22]
            # a commit with the restored member epoch is accepted
            assert _commit(w, b, "kip848-crash", b.partitions()[1], 33) == 0
    finally:
        server.kill()


def test_java_consumer_with_the_consumer_protocol(tmp_path: Path) -> None:
    """Kafka 4.3.1's console consumer (the Java consumer, group.protocol=consumer) reads every record
    of a 3-partition topic through a KIP-848 consumer group and commits its offsets."""
    missing = kafka_tool_missing("kafka-console-consumer.sh")
    if missing:
        pytest.skip(missing)
    confluent_kafka = pytest.importorskip("confluent_kafka")
    server = SidecarProcess(tmp_path / "data", _OVERRIDES).start()
    try:
        bs = server.bootstrap
        with Wire(bs) as w:
            w.create_topic("kip848-java", partitions=3)
        p = confluent_kafka.Producer({"bootstrap.servers": bs})
        for i in range(30):
            p.produce("kip848-java", f"v{i}".encode(), partition=i % 3)
        p.flush(10)
        out = subprocess.run(
            [str(kafka_bin("kafka-console-consumer.sh")), "--bootstrap-server", bs, "--topic", "kip848-java", "--group", "java-g",
             "--consumer-property", "group.protocol=consumer", "--consumer-property", "auto.offset.reset=earliest",
             "--max-messages", "30", "--timeout-ms", "60000"],
            capture_output=True, text=True, timeout=180, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
        assert out.returncode == 0, out.stderr[-3000:]
        records = [line for line in out.stdout.splitlines() if line.startswith("v")]  # (4.3 prints a deprecation note)
        assert sorted(records) == sorted(f"v{i}" for i in range(30))
        with Wire(bs) as w:
            _coordinator(w, "java-g")
            groups = {g["group_id"]: g for g in w.call(16, 5, {"states_filter": [], "types_filter": []})["groups"]}
            assert groups["java-g"]["group_type"] == "consumer"
            fetched = w.call(OFFSET_FETCH, 9, {"groups": [{"group_id": "java-g", "member_id": None, "member_epoch": -1,
                                                           "topics": [{"name": "kip848-java", "partition_indexes": [0, 1, 2]}]}],
                                                "require_stable": False})
            assert [r["committed_offset"] for r in fetched["groups"][0]["topics"][0]["partitions"]] == [10, 10, 10]
    finally:
        server.kill()
