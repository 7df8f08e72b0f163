"""``serve --processes 2``: one Kafka cluster of two node processes, over TCP with real clients.

One cluster for the module (its start is the slow part): topics made through either node seen
by the other at once, partitions led by both nodes, records produced and consumed across them,
a wrong node answering NOT_LEADER_OR_FOLLOWER on the wire, a consumer group spanning both nodes,
a node killed with SIGKILL restarted by the supervisor with every acknowledged record, and
SIGTERM stopping the whole cluster cleanly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.conformance.wire import Wire, batch
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing, running, sidecar_command

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NOT_LEADER_OR_FOLLOWER = 6
PRODUCE, FETCH, LIST_OFFSETS, FIND_COORDINATOR, INIT_PRODUCER_ID = 0, 1, 2, 10, 22
QUIET = {"log_level": 3}  # librdkafka: errors only (its telemetry notices are not test output)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    proc = SidecarProcess(tmp_path_factory.mktemp("processes") / "data", processes=2,
                          overrides={"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"})
    with running(proc):
        yield proc


def _bootstrap(cluster: SidecarProcess, node: int) -> str:
    return f"127.0.0.1:{cluster.ports[node - 1]}"


def _create(cluster: SidecarProcess, node: int, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster, node), **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _leaders(bootstrap: str, topic: str) -> tuple[dict[int, int], dict[int, tuple[str, int]]]:
    with Wire(bootstrap) as w:
        md = w.metadata([topic])
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
    (t,) = md["topics"]
    assert t["error_code"] == 0, t
    return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}, brokers


def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> int:
    delivered = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **QUIET})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions,
                         on_delivery=lambda err, msg: delivered.append(err is None))
    assert producer.flush(60) == 0
    assert all(delivered)
    return len(delivered)


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int, group: str | None = None,
                 protocol: str = "classic") -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"read-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol, **QUIET})
    if group is None:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    else:
        consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
        if group is not None:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_topic_from_node_2_seen_by_node_1_with_leaders_on_both(cluster: SidecarProcess) -> None:
    _create(cluster, 2, "spread", 4)
    leaders, brokers = _leaders(_bootstrap(cluster, 1), "spread")  # at once, no wait
    assert sorted(brokers) == [1, 2]
    assert [brokers[k][1] for k in (1, 2)] == cluster.ports
    assert sorted(leaders) == [0, 1, 2, 3]
    assert set(leaders.values()) == {1, 2}
    leaders_2, _ = _leaders(_bootstrap(cluster, 2), "spread")
    assert leaders_2 == leaders
    # Each node holds the logs of the partitions it leads, and only those, in Kafka's layout.
    for p, node in leaders.items():
        assert (cluster.data_dir / f"node-{node}" / f"spread-{p}" / "partition.metadata").exists()
        assert not (cluster.data_dir / f"node-{3 - node}" / f"spread-{p}").exists()


def test_produce_and_consume_across_both_nodes(cluster: SidecarProcess) -> None:
    _create(cluster, 1, "across", 4)
    assert _produce(_bootstrap(cluster, 1), "across", 4, 400) == 400
    got = _consume_all(_bootstrap(cluster, 2), "across", 4, 400)
    assert sorted(got) == sorted(b"v%d" % i for i in range(400))


def test_wrong_node_answers_not_leader_or_follower(cluster: SidecarProcess) -> None:
    _create(cluster, 1, "wrong-node", 2)
    leaders, _ = _leaders(_bootstrap(cluster, 1), "wrong-node")
    for p, leader in leaders.items():
        other = 3 - leader
        with Wire(_bootstrap(cluster, other)) as w:
            assert w.produce("wrong-node", batch([b"x"]), partition=p)["error"] == NOT_LEADER_OR_FOLLOWER
            assert w.fetch("wrong-node", p, 0)["error"] == NOT_LEADER_OR_FOLLOWER
            lo = w.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "wrong-node", "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}]}]})
            assert lo["topics"][0]["partitions"][0]["error_code"] == NOT_LEADER_OR_FOLLOWER
            # A partition the topic does not have stays UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
            assert w.produce("wrong-node", batch([b"x"]), partition=7)["error"] == 3
        with Wire(_bootstrap(cluster, leader)) as w:
            assert w.produce("wrong-node", batch([b"x"]), partition=p)["error"] == 0


def test_wrong_node_names_the_leader_kip_951(cluster: SidecarProcess) -> None:
    """KIP-951, as Kafka's KafkaApis answers: NOT_LEADER_OR_FOLLOWER carries the partition's current
    leader (id, epoch) and that node's endpoint on the request's listener, in Produce from v10
    and Fetch from v16; older versions carry neither. Decoded with Kafka's schemas (kio)."""
    _create(cluster, 2, "leader-hints", 4)
    with Wire(_bootstrap(cluster, 1)) as w:
        md = w.metadata(["leader-hints"])
    (t,) = md["topics"]
    topic_id = t["topic_id"]
    leaders = {p["partition_index"]: (p["leader_id"], p["leader_epoch"]) for p in t["partitions"]}
    endpoints = {b["node_id"]: {"node_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                 for b in md["brokers"]}
    assert set(leaders.values()) == {(1, 0), (2, 0)}, leaders
    for node in (1, 2):
        elsewhere = sorted(p for p, (leader, _) in leaders.items() if leader != node)
        led_here = next(p for p, (leader, _) in leaders.items() if leader == node)
        with Wire(_bootstrap(cluster, node)) as w:
            for version in (9, 10, 11, 12):
                body = w.call(PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout": 15_000, "topic_data": [
                    {"name": "leader-hints", "partition_data": [{"index": p, "records": batch([b"x"])} for p in [*elsewhere, led_here]]}]})
                parts = body["responses"][0]["partition_responses"]
                assert [p["error_code"] for p in parts] == [NOT_LEADER_OR_FOLLOWER] * len(elsewhere) + [0]
                if version >= 10:
                    assert [(p["current_leader"]["leader_id"], p["current_leader"]["leader_epoch"]) for p in parts[:-1]] == \
                        [leaders[p] for p in elsewhere]
                    assert body["node_endpoints"] == [endpoints[3 - node]]
                else:
                    assert "node_endpoints" not in body and all("current_leader" not in p for p in parts)
            for version in (15, 16, 17):
                body = w.call(FETCH, version, {
                    "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                    "topics": [{"topic_id": topic_id, "partitions": [{
                        "partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                        "log_start_offset": -1, "partition_max_bytes": 1 << 20, "replica_directory_id": None}
                        for p in [*elsewhere, led_here]]}]})
                assert body["error_code"] == 0
                # (Kafka answers the partitions it could read first, the refused ones after.)
                parts = {p["partition_index"]: p for r in body["responses"] for p in r["partitions"]}
                assert {i: p["error_code"] for i, p in parts.items()} == {
                    **{i: NOT_LEADER_OR_FOLLOWER for i in elsewhere}, led_here: 0}
                hinted = {i: (p["current_leader"]["leader_id"], p["current_leader"]["leader_epoch"]) for i, p in parts.items()}
                if version >= 16:
                    assert hinted == {**{i: leaders[i] for i in elsewhere}, led_here: (-1, -1)}
                    assert body["node_endpoints"] == [endpoints[3 - node]]
                else:  # the field exists from v12 as a tagged field; Kafka fills it from v16 only
                    assert set(hinted.values()) == {(-1, -1)}
                    assert "node_endpoints" not in body


def test_produce_right_after_create_finds_the_topic_on_every_node(cluster: SidecarProcess) -> None:
    """CreateTopics through one node, then at once Produce and Fetch to each partition's leader:
    the leader holds the topic already (it catches up when a request names a topic it lacks)."""
    for i in range(6):
        name = f"fresh-{i}"
        _create(cluster, 1 + i % 2, name, 2)
        leaders, _ = _leaders(_bootstrap(cluster, 1 + i % 2), name)
        for p, leader in leaders.items():
            with Wire(_bootstrap(cluster, leader)) as w:
                assert w.produce(name, batch([b"x"]), partition=p)["error"] == 0, (name, p, leader)
                assert w.fetch(name, p, 0)["error"] == 0


def test_producer_ids_are_unique_across_nodes(cluster: SidecarProcess) -> None:
    """Each node hands out its own producer ids (node k: ids k - 1 mod N): an idempotent producer
    initialised through one node never shares its id with one initialised through the other."""
    ids: dict[int, list[int]] = {1: [], 2: []}
    for _ in range(3):
        for node in (1, 2):
            with Wire(_bootstrap(cluster, node)) as w:
                r = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                 "producer_id": -1, "producer_epoch": -1})
            assert r["error_code"] == 0, r
            ids[node].append(r["producer_id"])
    assert all(i % 2 == 0 for i in ids[1]) and all(i % 2 == 1 for i in ids[2]), ids
    assert len(set(ids[1] + ids[2])) == 6


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consumer_group_across_nodes(cluster: SidecarProcess, protocol: str) -> None:
    """A group (classic, or KIP-848's consumer protocol) reading partitions led by both nodes,
    its coordinator wherever FindCoordinator points; its commits read back through the other node."""
    topic, group = f"grouped-{protocol}", f"spanning-{protocol}"
    _create(cluster, 2, topic, 4)
    _produce(_bootstrap(cluster, 2), topic, 4, 100)
    got = _consume_all(_bootstrap(cluster, 1), topic, 4, 100, group=group, protocol=protocol)
    assert sorted(got) == sorted(b"v%d" % i for i in range(100))
    with Wire(_bootstrap(cluster, 1)) as w:
        found = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
    assert found["error_code"] == 0 and found["port"] == cluster.ports[found["node_id"] - 1]
    consumer = Consumer({"bootstrap.servers": _bootstrap(cluster, 2), "group.id": group, **QUIET})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(4)], timeout=30)
    finally:
        consumer.close()
    assert sum(tp.offset for tp in committed) == 100


def _kafka_tool(script: str, *args: str, tmp: Path) -> str:
    env = {**{k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "JMX_PORT")},
           "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(tmp), "INCLUDE_TEST_JARS": "true"}
    done = subprocess.run([str(kafka_bin(script)), *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{script} {args}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.skipif(kafka_tool_missing("kafka-topics.sh") is not None, reason=str(kafka_tool_missing("kafka-topics.sh")))
def test_kafka_tools_describe_and_delete_records(cluster: SidecarProcess, tmp_path: Path) -> None:
    """Kafka's own tools, unchanged: kafka-topics.sh creates through node 2 and describes each
    partition's leader (DescribeTopicPartitions) as Metadata does; kafka-delete-records.sh
    deletes on both nodes (the admin client sends each partition to its leader)."""
    _create(cluster, 2, "tools", 4)
    leaders, _ = _leaders(_bootstrap(cluster, 1), "tools")
    described = _kafka_tool("kafka-topics.sh", "--bootstrap-server", _bootstrap(cluster, 2), "--describe", "--topic", "tools", tmp=tmp_path)
    found = {int(p): int(lead) for p, lead in re.findall(r"Partition: (\d+)\s+Leader: (\d+)", described)}
    assert found == leaders, described
    _produce(_bootstrap(cluster, 1), "tools", 4, 40)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": "tools", "partition": p, "offset": 4} for p in range(4)]}))
    out = _kafka_tool("kafka-delete-records.sh", "--bootstrap-server", _bootstrap(cluster, 1), "--offset-json-file", str(offsets), tmp=tmp_path)
    assert out.count("low_watermark: 4") == 4, out
    for p, leader in leaders.items():
        with Wire(_bootstrap(cluster, leader)) as w:
            lo = w.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "tools", "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -2}]}]})
        assert lo["topics"][0]["partitions"][0]["offset"] == 4


@pytest.mark.parametrize("txn_id", ["txn-a", "txn-b"])
def test_transactions_across_nodes(cluster: SidecarProcess, txn_id: str) -> None:
    """A transaction over partitions led by both nodes, its offsets sent to a group: the
    coordinator's markers reach the other node (WriteTxnMarkers) and the other node's writes are
    verified with the coordinator (AddPartitionsToTxn verify_only, KIP-890). Committed records
    are read, aborted ones are not; the group's offset commits only with the transaction."""
    topic, group = f"txn-{txn_id}", f"txn-group-{txn_id}"
    _create(cluster, 1, topic, 4)
    with Wire(_bootstrap(cluster, 1)) as w:
        coordinators = {k: w.call(FIND_COORDINATOR, 4, {"key_type": t, "coordinator_keys": [k]})["coordinators"][0]["node_id"]
                        for k, t in ((txn_id, 1), (group, 0))}
    producer = Producer({"bootstrap.servers": _bootstrap(cluster, 1), "transactional.id": txn_id, **QUIET})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(40):
        producer.produce(topic, value=b"c%d" % i, partition=i % 4)
    consumer = Consumer({"bootstrap.servers": _bootstrap(cluster, 2), "group.id": group, **QUIET})
    producer.send_offsets_to_transaction([TopicPartition(topic, p, 10) for p in range(4)], consumer.consumer_group_metadata(), 60)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(12):
        producer.produce(topic, value=b"a%d" % i, partition=i % 4)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"last", partition=3)
    producer.commit_transaction(60)
    reader = Consumer({"bootstrap.servers": _bootstrap(cluster, 2), "group.id": f"r-{txn_id}", "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET})
    reader.assign([TopicPartition(topic, p, 0) for p in range(4)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 41 and time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    # Nothing more after the last committed record (the aborted ones stay hidden).
    end = time.monotonic() + 1
    while time.monotonic() < end:
        m = reader.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    reader.close()
    assert sorted(got) == sorted([b"c%d" % i for i in range(40)] + [b"last"]), (coordinators, got)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(4)], timeout=30)
    consumer.close()
    assert [tp.offset for tp in committed] == [10] * 4


def test_killed_node_is_restarted_without_losing_acknowledged_records(cluster: SidecarProcess) -> None:
    _create(cluster, 1, "survive", 4)
    assert _produce(_bootstrap(cluster, 1), "survive", 4, 200) == 200
    pids = cluster.node_pids()
    os.kill(pids[2], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = cluster.node_pids()
        if now.get(2) not in (None, pids[2]) and now.get(1) == pids[1]:
            break
        time.sleep(0.2)
    assert cluster.node_pids().get(2) not in (None, pids[2]), "node 2 was not restarted"
    got = _consume_all(_bootstrap(cluster, 1), "survive", 4, 200)
    assert sorted(got) == sorted(b"v%d" % i for i in range(200))


def test_sigterm_stops_every_node(cluster: SidecarProcess) -> None:
    """Last: it ends the module's cluster."""
    pids = cluster.node_pids()
    assert sorted(pids) == [1, 2]
    assert cluster.stop(timeout=60) == 0
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert "stopped cleanly" in cluster.log_text()


def test_data_dir_keeps_its_number_of_processes(cluster: SidecarProcess) -> None:
    """After the cluster stopped: its data dir is refused to one process (its node-<k> dirs are
    not partitions) and to another N (its partitions are placed for 2), one line, exit 2."""
    assert cluster.proc is not None and cluster.proc.poll() is not None
    for extra, expected in (([], "holds a cluster of several processes"), (["--processes", "3"], "start it with --processes 2")):
        done = subprocess.run([*sidecar_command(), "serve", "--data-dir", str(cluster.data_dir), "--listen", "127.0.0.1:0", *extra],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert not (cluster.data_dir / "meta.properties").exists()
