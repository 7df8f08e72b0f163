"""Share groups (KIP-932) across the nodes of ``serve --processes 2``, over TCP.

The group's coordinator is the node leading its ``__consumer_offsets`` partition, ShareFetch and
ShareAcknowledge go to each partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere), and each
share-partition's state is kept by the leader of its ``__share_group_state`` partition, which the
partition's leader reads and writes with Kafka's inter-broker share-state APIs. librdkafka's
ShareConsumer receives every record of partitions led by both nodes once; acknowledgements
survive a node killed with SIGKILL and a restart of the whole cluster (accepted records never
come back, released ones do); ``kafka-share-groups.sh --describe`` answers from either node.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka_sidecar.server.cluster.placement import leader_of
from kafka_sidecar.server.groups.records import java_string_hash
from kafka_sidecar.server.share.records import kafka_uuid_string, partition_for

from tests.conformance.wire import Wire, batch
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing, running

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NODES, OFFSETS_PARTITIONS, STATE_PARTITIONS = 2, 4, 4
ACCEPT, RELEASE, REJECT = 1, 2, 3
NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, INVALID_REQUEST = 6, 16, 42
FIND_COORDINATOR, SHARE_HEARTBEAT, SHARE_FETCH, DESCRIBE_OFFSETS, ALTER_CONFIGS = 10, 76, 78, 90, 44


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    proc = SidecarProcess(tmp_path_factory.mktemp("processes-share") / "data", processes=NODES, overrides={
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS)})
    with running(proc):
        yield proc


def _bootstrap(cluster: SidecarProcess, node: int) -> str:
    return f"127.0.0.1:{cluster.ports[node - 1]}"


def _group_node(group: str) -> int:
    h = java_string_hash(group)
    return leader_of("__consumer_offsets", (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS, NODES)


def _state_node(group: str, topic_id: uuid.UUID, partition: int) -> int:
    return leader_of("__share_group_state", partition_for(group, topic_id, partition, STATE_PARTITIONS), NODES)


def _topic(cluster: SidecarProcess, name: str, partitions: int) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster, 1), "log_level": 3})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    with Wire(_bootstrap(cluster, 2)) as w:
        md = w.metadata([name])["topics"][0]
    assert {p["leader_id"] for p in md["partitions"]} == {1, 2}, md  # led by both nodes
    return md["topic_id"]


def _group_where_state_is_elsewhere(prefix: str, topic: str, topic_id: uuid.UUID, partitions: int) -> str:
    """A group whose share-partitions' state is kept by the node not leading them, and whose
    coordinator does not lead every partition: every inter-node path is taken."""
    for i in range(1000):
        group = f"{prefix}-{i}"
        if all(_state_node(group, topic_id, p) != leader_of(topic, p, NODES) for p in range(partitions)):
            return group
    raise AssertionError("no such group name")


def _earliest(cluster: SidecarProcess, group: str) -> None:
    """share.auto.offset.reset=earliest for the group, on every node (group configs are each node's)."""
    for node in (1, 2):
        with Wire(_bootstrap(cluster, node)) as w:
            answer = w.call(ALTER_CONFIGS, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
        assert answer["responses"][0]["error_code"] == 0, answer


def _offsets(cluster: SidecarProcess, node: int, group: str) -> dict[int, tuple[int, int]]:
    """DescribeShareGroupOffsets v1 through ``node``'s coordinator lookup: partition -> (start offset, lag)."""
    with Wire(_bootstrap(cluster, node)) as w:
        coordinator = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]["node_id"]
    with Wire(_bootstrap(cluster, coordinator)) as w:
        answer = w.call(DESCRIBE_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]
    assert answer["error_code"] == 0, answer
    return {p["partition_index"]: (p["start_offset"], p["lag"]) for t in answer["topics"] for p in t["partitions"]}


def _until(what: Any, want: Any, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    got = what()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = what()
    return got


def _share_tool(*args: str, tmp: Path) -> str:
    env = {**{k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "JMX_PORT")},
           "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp)}
    done = subprocess.run([str(kafka_bin("kafka-share-groups.sh")), *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.skipif(not hasattr(confluent_kafka, "ShareConsumer"), reason="the installed confluent-kafka has no ShareConsumer")
@pytest.mark.skipif(kafka_tool_missing("kafka-share-groups.sh") is not None, reason=str(kafka_tool_missing("kafka-share-groups.sh")))
def test_share_consumers_receive_every_record_once_across_nodes(cluster: SidecarProcess, tmp_path: Path) -> None:
    topic, partitions = "shared", 4
    topic_id = _topic(cluster, topic, partitions)
    group = _group_where_state_is_elsewhere("sc", topic, topic_id, partitions)
    _earliest(cluster, group)
    values = [b"s%d" % i for i in range(400)]
    with Wire(_bootstrap(cluster, 1)) as w:
        leaders = {p["partition_index"]: p["leader_id"] for p in w.metadata([topic])["topics"][0]["partitions"]}
    for p in range(partitions):
        with Wire(_bootstrap(cluster, leaders[p])) as w:
            assert w.produce(topic, batch(values[p::partitions]), partition=p)["error"] == 0
    consumers = [confluent_kafka.ShareConsumer({"bootstrap.servers": _bootstrap(cluster, n), "group.id": group,
                                                "share.acknowledgement.mode": "implicit", "log_level": 3}) for n in (1, 2)]
    got: list[bytes] = []
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 90
        quiet_since = None
        while time.monotonic() < deadline:
            polled = 0
            for c in consumers:
                for m in c.poll(0.3):
                    assert m.error() is None, m.error()
                    got.append(m.value())
                    polled += 1
            if len(got) >= len(values) and polled == 0:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 2:  # a duplicate delivery would show here
                    break
    finally:
        for c in consumers:
            c.commit_sync(10)  # implicit mode: the last poll's records are accepted now
            c.close()
    assert [v for v, k in Counter(got).items() if k > 1] == []
    assert sorted(got) == sorted(values)
    # Every record acknowledged, as the group's coordinator reads the state kept on the other node.
    assert _until(lambda: {p: lag for p, (_, lag) in _offsets(cluster, 1, group).items()}, dict.fromkeys(range(partitions), 0)) \
        == dict.fromkeys(range(partitions), 0)
    for node in (1, 2):
        out = _share_tool("--bootstrap-server", _bootstrap(cluster, node), "--describe", "--group", group, tmp=tmp_path)
        rows = {int(p): lag for p, _start, lag in re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(-?\d+)\s+(-?\d+)", out)}
        assert rows == {p: "0" for p in range(partitions)}, out


def _join(w: Wire, group: str, member: str, topic: str) -> None:
    answer = w.call(SHARE_HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                                         "subscribed_topic_names": [topic]})
    assert answer["error_code"] == 0, answer


def _fetch(w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID, partition: int,
           acks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = w.call(SHARE_FETCH, 2, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 0,
                                   "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                                   "topics": [{"topic_id": topic_id, "partitions": [
                                       {"partition_index": partition, "acknowledgement_batches": acks or []}]}],
                                   "forgotten_topics_data": []})
    assert body["error_code"] == 0, body
    (t,) = body["responses"]
    (p,) = t["partitions"]
    return {**p, "node_endpoints": body["node_endpoints"]}


def _acquired(p: dict[str, Any]) -> list[tuple[int, int, int]]:
    assert p["error_code"] == 0 and p["acknowledge_error_code"] == 0, p
    return [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]


def _ack(first: int, last: int, kind: int) -> dict[str, Any]:
    return {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}


def test_acknowledgements_survive_a_killed_node_and_a_cluster_restart(cluster: SidecarProcess) -> None:
    """Raw ShareFetches on each partition's leader: 0-3 accepted, 4 rejected, 5-6 released once,
    7-9 acquired when the connection closes (released again). After the leader of partition 0 is
    killed (SIGKILL, restarted by the supervisor) and after the whole cluster restarts, each
    partition's leader reads the state back from the other node: 5-9 are delivered again, 0-4
    never; once 5-9 are accepted nothing is left, as the group's coordinator says from either node."""
    topic = "shared-restart"
    topic_id = _topic(cluster, topic, 2)
    group = _group_where_state_is_elsewhere("sr", topic, topic_id, 2)
    _earliest(cluster, group)
    leaders = {p: leader_of(topic, p, NODES) for p in range(2)}
    # FindCoordinator's SHARE key (KIP-932, v6) names the node keeping each share-partition's state.
    keys = [f"{group}:{kafka_uuid_string(topic_id)}:{p}" for p in range(2)]
    for node in (1, 2):
        with Wire(_bootstrap(cluster, node)) as w:
            found = w.call(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [*keys, "no-such-key"]})["coordinators"]
        assert [(c["node_id"], c["error_code"]) for c in found] == \
            [(_state_node(group, topic_id, 0), 0), (_state_node(group, topic_id, 1), 0), (-1, INVALID_REQUEST)], found
    for p, node in leaders.items():
        with Wire(_bootstrap(cluster, node)) as w:
            assert w.produce(topic, batch([b"r%d-%d" % (p, i) for i in range(10)]), partition=p)["error"] == 0
    with Wire(_bootstrap(cluster, 3 - _group_node(group))) as w:  # not the group's coordinator
        answer = w.call(SHARE_HEARTBEAT, 1, {"group_id": group, "member_id": "m1", "member_epoch": 0, "rack_id": None,
                                             "subscribed_topic_names": [topic]})
        assert answer["error_code"] == NOT_COORDINATOR, answer
        offsets = w.call(DESCRIBE_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"][0]
        assert offsets["error_code"] == NOT_COORDINATOR, offsets
    with Wire(_bootstrap(cluster, _group_node(group))) as w:
        _join(w, group, "m1", topic)
    for p, node in leaders.items():
        # The other node is not the partition's leader: it says so, and names the leader.
        with Wire(_bootstrap(cluster, 3 - node)) as w:
            wrong = _fetch(w, group, "m1", 0, topic_id, p)
        assert wrong["error_code"] == NOT_LEADER_OR_FOLLOWER and wrong["current_leader"]["leader_id"] == node, wrong
        assert [e["node_id"] for e in wrong["node_endpoints"]] == [node], wrong
        with Wire(_bootstrap(cluster, node)) as w:
            assert _acquired(_fetch(w, group, "m1", 0, topic_id, p)) == [(0, 9, 1)]
            acks = [_ack(0, 3, ACCEPT), _ack(4, 4, REJECT), _ack(5, 6, RELEASE)]
            assert _acquired(_fetch(w, group, "m1", 1, topic_id, p, acks)) == [(5, 6, 2)]
        # The connection closed: 5-9 released, the state written with start offset 5 on the other node.
    assert _until(lambda: _offsets(cluster, 1, group), {0: (5, 5), 1: (5, 5)}) == {0: (5, 5), 1: (5, 5)}
    assert _offsets(cluster, 2, group) == {0: (5, 5), 1: (5, 5)}

    pids = cluster.node_pids()
    killed = leaders[0]
    os.kill(pids[killed], signal.SIGKILL)
    assert _until(lambda: cluster.node_pids().get(killed) not in (None, pids[killed]), True, 120), "not restarted"

    def first_fetch(p: int, member: str) -> list[tuple[int, int, int]]:
        with Wire(_bootstrap(cluster, _group_node(group))) as w:
            _join(w, group, member, topic)
        with Wire(_bootstrap(cluster, leaders[p])) as w:
            return _acquired(_fetch(w, group, member, 0, topic_id, p))

    # The restarted leader reads partition 0's state from the other node; 5-6 at their third delivery.
    assert _until(lambda: _try(first_fetch, 0, "m2"), [(5, 6, 3), (7, 9, 2)], 60) == [(5, 6, 3), (7, 9, 2)]
    # m2's connection closed: the release is written on the node keeping the state (ReadShareGroupState).
    state_node = _state_node(group, topic_id, 0)
    assert state_node != killed
    released = (5, [(5, 6, 0, 3), (7, 9, 0, 2)])
    assert _until(lambda: _read_state(cluster, state_node, group, topic_id, 0), released) == released

    assert cluster.stop(timeout=60) == 0
    cluster.start(timeout=120)
    for p in range(2):
        with Wire(_bootstrap(cluster, _group_node(group))) as w:
            _join(w, group, "m3", topic)
        with Wire(_bootstrap(cluster, leaders[p])) as w:
            want = [(5, 6, 4), (7, 9, 3)] if p == 0 else [(5, 6, 3), (7, 9, 2)]
            assert _acquired(_fetch(w, group, "m3", 0, topic_id, p)) == want
            assert _acquired(_fetch(w, group, "m3", 1, topic_id, p, [_ack(5, 9, ACCEPT)])) == []
    for node in (1, 2):
        assert _until(lambda node=node: {p: lag for p, (_, lag) in _offsets(cluster, node, group).items()}, {0: 0, 1: 0}) == {0: 0, 1: 0}


def _read_state(cluster: SidecarProcess, node: int, group: str, topic_id: uuid.UUID, partition: int) -> Any:
    """ReadShareGroupState (84) of one share-partition from the node keeping it: (start offset,
    [(first, last, state, delivery count)])."""
    with Wire(_bootstrap(cluster, node)) as w:
        answer = w.call(84, 0, {"group_id": group, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": 0}]}]})
    (r,) = answer["results"][0]["partitions"]
    assert r["error_code"] == 0, r
    return r["start_offset"], [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"]) for b in r["state_batches"]]


def _try(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or the exception's text while a restarted node is not serving yet."""
    try:
        return fn(*args)
    except (OSError, AssertionError) as e:
        return repr(e)
