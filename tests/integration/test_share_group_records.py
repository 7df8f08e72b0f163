"""Share groups' metadata in __consumer_offsets (server/share/group_records.py) over TCP: a clean
restart and a kill -9 keep the group, its epochs, its members' assignments and which
share-partitions are initialized (kafka-share-groups.sh --describe --members --verbose the same
before and after); Kafka 4.3.1's kafka-dump-log.sh --offsets-decoder reads our records as its
own; a deleted group's records are tombstoned and it does not come back."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.testing import EmbeddedBroker

from bench.reference import find_java, find_kafka_home
from tests.conformance.wire import Wire
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing

JAVA = find_java() is not None and find_kafka_home() is not None


def _heartbeat(w: Wire, group: str, member: str, epoch: int, topics: list[str] | None) -> dict[str, Any]:
    return w.call(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                          "subscribed_topic_names": topics})


def _describe(w: Wire, group: str) -> dict[str, Any]:
    d = w.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    members = sorted((m["member_id"], m["member_epoch"], m["client_id"], m["subscribed_topic_names"],
                      sorted((t["topic_name"], sorted(t["partitions"])) for t in m["assignment"]["topic_partitions"]))
                     for m in d["members"])
    return {"state": d["group_state"], "group_epoch": d["group_epoch"], "assignment_epoch": d["assignment_epoch"],
            "members": members}


def _two_members(w: Wire, group: str, topic: str) -> dict[str, int]:
    """Two members on a 3-partition topic, heartbeating until both have their share of it."""
    w.create_topic(topic, partitions=3)
    epochs = {"m1": 0, "m2": 0}
    owned: dict[str, int] = {}
    deadline = time.monotonic() + 20
    while sorted(owned.values()) != [1, 2] and time.monotonic() < deadline:
        for m in epochs:
            hb = _heartbeat(w, group, m, epochs[m], [topic] if epochs[m] == 0 else None)
            assert hb["error_code"] == 0, hb
            epochs[m] = hb["member_epoch"]
            if hb["assignment"] is not None:
                owned[m] = sum(len(t["partitions"]) for t in hb["assignment"]["topic_partitions"])
        time.sleep(0.2)  # share.assignment.interval.ms batches the target assignments
    assert sorted(owned.values()) == [1, 2], owned
    return epochs


def _tool_members(home: Path, bootstrap: str, group: str, tmp: Path) -> list[list[str]]:
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp)}
    out = subprocess.run([str(home / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", bootstrap, "--describe",
                          "--group", group, "--members", "--verbose"], capture_output=True, text=True, env=env, timeout=120)
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert rows and rows[0][0] == "GROUP", out.stdout + out.stderr
    return rows


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_restart_keeps_the_share_group(tmp_path: Path, how: str) -> None:
    group, topic = "sg-" + uuid.uuid4().hex[:6], "st-" + uuid.uuid4().hex[:6]
    server = SidecarProcess(tmp_path / "data").start()
    try:
        with Wire(server.bootstrap) as w:
            epochs = _two_members(w, group, topic)
            before = _describe(w, group)
        home = find_kafka_home() if JAVA else None
        tool_before = _tool_members(home, server.bootstrap, group, tmp_path) if home else None
        assert before["state"] == "Stable" and len(before["members"]) == 2
        assert sorted(len(p) for m in before["members"] for _, p in m[4]) == [1, 2]
        if how == "restart":
            server.stop()
        else:
            server.kill()
        server.start()
        with Wire(server.bootstrap) as w:
            assert _describe(w, group) == before
            if home:
                assert _tool_members(home, server.bootstrap, group, tmp_path) == tool_before
            # The members heartbeat on at their epochs: nothing moves.
            for m, e in epochs.items():
                hb = _heartbeat(w, group, m, e, None)
                assert (hb["error_code"], hb["member_epoch"], hb["assignment"]) == (0, e, None), hb
            assert _describe(w, group) == before
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


def _offsets_decoded(data_dir: Path) -> list[str]:
    logs = [str(p) for p in sorted(data_dir.glob("__consumer_offsets-*/*.log")) if p.stat().st_size]
    out = subprocess.run([str(kafka_bin("kafka-dump-log.sh")), "--offsets-decoder", "--files", ",".join(logs)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    assert out.returncode == 0, out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "payload" in line or "key:" in line]


def test_kafka_decodes_the_records_and_a_deleted_group_stays_deleted(tmp_path: Path) -> None:
    group, topic = "dg-" + uuid.uuid4().hex[:6], "dt-" + uuid.uuid4().hex[:6]
    b = EmbeddedBroker(data_dir=tmp_path).start()
    try:
        with Wire(b.bootstrap_servers) as w:
            epochs = _two_members(w, group, topic)
            for m in epochs:
                assert _heartbeat(w, group, m, -1, None)["error_code"] == 0
            assert w.call(42, 2, {"groups_names": [group]})["results"][0]["error_code"] == 0
        b.restart()
        with Wire(b.bootstrap_servers) as w:
            d = w.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
            assert d["error_code"] == 69, d
    finally:
        b.stop()
    if kafka_tool_missing("kafka-dump-log.sh"):
        return
    lines = [line for line in _offsets_decoded(tmp_path) if group in line]
    text = "\n".join(lines)
    for record_type in range(10, 16):
        assert f'"type":"{record_type}"' in text, text[-3000:]
    assert f'"subscribedTopicNames":["{topic}"]' in text, text[-3000:]
    assert f'"topicName":"{topic}","partitions":[0,1,2]' in text, text[-3000:]
    assert '"state":0,"assignedPartitions":[{"topicId":' in text, text[-3000:]
    # DeleteGroups: the group's last records are its tombstones, Kafka's order.
    tail = [line.split(" key: ")[1] for line in lines[-3:]]
    assert tail == [f'{{"type":"{t}","data":{{"groupId":"{group}"}}}} payload: <DELETE>' for t in (12, 11, 15)], tail
