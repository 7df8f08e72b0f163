"""Kafka's own tools and Java clients, unchanged, against ``serve --processes 2`` (issue #26).

What tests/integration/test_processes.py does not already cover (it has kafka-topics.sh
--describe, kafka-delete-records.sh, and groups and transactions from librdkafka): kafka-topics.sh
--create through node 2 and --list/--describe through node 1; kafka-console-producer.sh and
kafka-console-consumer.sh over partitions led by both nodes, with a classic and a KIP-848 group,
then kafka-consumer-groups.sh --describe of each (its coordinator on one node, its partitions on
both); the Java transactional producer and consumer (Kafka's TransactionalMessageCopier, random
aborts on) copying from partitions on both nodes to partitions on both nodes, read back
read_committed by kafka-console-consumer.sh; kafka-dump-log.sh on each node's own files
(records, transaction markers and index check). One cluster for the module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from kafka_sidecar.server.cluster.placement import leader_of

from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing, running

pytestmark = pytest.mark.skipif(kafka_tool_missing("kafka-topics.sh") is not None, reason=str(kafka_tool_missing("kafka-topics.sh")))

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss1m -Djava.awt.headless=true"
TIMEOUT = 240


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    proc = SidecarProcess(tmp_path_factory.mktemp("processes-tools") / "data", processes=2, overrides={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "4"})
    with running(proc):
        yield proc


def _node(cluster: SidecarProcess, node: int) -> str:
    return f"127.0.0.1:{cluster.ports[node - 1]}"


def _tool(tmp: Path, script: str, *args: str, input: str | None = None, main_class: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "JMX_PORT")},
           "KAFKA_HEAP_OPTS": "-Xmx256m", "KAFKA_JVM_PERFORMANCE_OPTS": FAST_JVM, "LOG_DIR": str(tmp), "INCLUDE_TEST_JARS": "true"}
    cmd = [str(kafka_bin(script)), *([main_class] if main_class else []), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env, input=input)
    assert done.returncode == 0, f"{script} {args}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return done


def _records(stdout: str) -> list[str]:
    """The ``key:value`` lines a console consumer printed (not its notices)."""
    return [line for line in stdout.splitlines() if re.fullmatch(r"k\d+:\w+", line)]


def _rows(text: str, group: str) -> dict[int, list[str]]:
    """kafka-consumer-groups.sh --describe: partition -> its row's columns."""
    return {int(cols[2]): cols for cols in (line.split() for line in text.splitlines()) if cols and cols[0] == group}


def test_topics_tool_creates_through_node_2_and_describes_through_node_1(cluster: SidecarProcess, tmp_path: Path) -> None:
    out = _tool(tmp_path, "kafka-topics.sh", "--bootstrap-server", _node(cluster, 2), "--create", "--topic", "tools-made",
                "--partitions", "4", "--replication-factor", "1", "--config", "retention.ms=3600000").stdout
    assert out.strip() == "Created topic tools-made."
    listed = _tool(tmp_path, "kafka-topics.sh", "--bootstrap-server", _node(cluster, 1), "--list").stdout.split()
    assert "tools-made" in listed
    described = _tool(tmp_path, "kafka-topics.sh", "--bootstrap-server", _node(cluster, 1), "--describe", "--topic", "tools-made").stdout
    assert "PartitionCount: 4\tReplicationFactor: 1\tConfigs: retention.ms=3600000" in described, described
    rows = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)", described)
    assert {int(p): (int(lead), int(rep), int(isr)) for p, lead, rep, isr in rows} == {
        p: (leader_of("tools-made", p, 2),) * 3 for p in range(4)}
    assert {leader_of("tools-made", p, 2) for p in range(4)} == {1, 2}
    for p in range(4):  # each partition's files on its leader only
        lead = leader_of("tools-made", p, 2)
        assert (cluster.data_dir / f"node-{lead}" / f"tools-made-{p}").is_dir()
        assert not (cluster.data_dir / f"node-{3 - lead}" / f"tools-made-{p}").exists()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_console_tools_and_group_describe(cluster: SidecarProcess, tmp_path: Path, protocol: str) -> None:
    """Console producer through node 1, console consumer in a group (classic or KIP-848) through
    node 2, kafka-consumer-groups.sh --describe through node 1: every partition, on both nodes,
    committed to its end."""
    topic, group = f"console-{protocol}", f"console-group-{protocol}"
    _tool(tmp_path, "kafka-topics.sh", "--bootstrap-server", _node(cluster, 1), "--create", "--topic", topic, "--partitions", "4")
    lines = [f"k{i}:v{i}" for i in range(40)]
    _tool(tmp_path, "kafka-console-producer.sh", "--bootstrap-server", _node(cluster, 1), "--topic", topic,
          "--reader-property", "parse.key=true", "--reader-property", "key.separator=:", input="\n".join(lines) + "\n")
    consumed = _tool(tmp_path, "kafka-console-consumer.sh", "--bootstrap-server", _node(cluster, 2), "--topic", topic, "--group", group,
                     "--from-beginning", "--max-messages", "40", "--timeout-ms", "60000", "--command-property", f"group.protocol={protocol}",
                     "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:")
    assert sorted(_records(consumed.stdout)) == sorted(lines)
    described = _tool(tmp_path, "kafka-consumer-groups.sh", "--bootstrap-server", _node(cluster, 1), "--describe", "--group", group)
    rows = _rows(described.stdout, group)
    assert sorted(rows) == [0, 1, 2, 3], described.stdout
    assert sum(int(r[4]) for r in rows.values()) == 40
    for r in rows.values():
        assert r[1] == topic and r[3] == r[4] and r[5] == "0", r  # CURRENT-OFFSET = LOG-END-OFFSET, LAG 0
    filled = {p for p, r in rows.items() if int(r[4]) > 0}
    assert {leader_of(topic, p, 2) for p in filled} == {1, 2}  # the records went to both nodes
    state = _tool(tmp_path, "kafka-consumer-groups.sh", "--bootstrap-server", _node(cluster, 2), "--describe", "--group", group, "--state")
    assert re.search(rf"^{group}\s+\S+:\d+\s+\(\d\)\s+\S*\s+Empty\s+0\s*$", state.stdout, re.M), state.stdout


def test_java_transactions_across_nodes(cluster: SidecarProcess, tmp_path: Path) -> None:
    """Kafka's TransactionalMessageCopier (the Java producer's transactions with
    sendOffsetsToTransaction, random aborts on) copies each input partition (one per node) to the
    same partition of an output topic (one per node), its offsets to one group whose coordinator is
    on one node: one copier's transactions write to both nodes; kafka-console-consumer.sh read_committed sees
    every input record exactly once, the copiers' group has committed every input offset, and
    kafka-dump-log.sh finds the commit markers in each node's files."""
    src, dst, group = "copy-in", "copy-out", "copier"
    for topic, n in ((src, 2), (dst, 2)):
        _tool(tmp_path, "kafka-topics.sh", "--bootstrap-server", _node(cluster, 1), "--create", "--topic", topic, "--partitions", str(n))
    assert {leader_of(src, p, 2) for p in range(2)} == {leader_of(dst, p, 2) for p in range(2)} == {1, 2}
    lines = [f"k{i}:m{i}" for i in range(60)]
    _tool(tmp_path, "kafka-console-producer.sh", "--bootstrap-server", _node(cluster, 2), "--topic", src,
          "--reader-property", "parse.key=true", "--reader-property", "key.separator=:", input="\n".join(lines) + "\n")
    copied = 0
    for p in range(2):
        out = _tool(tmp_path, "kafka-run-class.sh", "--broker-list", cluster.bootstrap, "--input-topic", src, "--input-partition", str(p),
                    "--output-topic", dst, "--transactional-id", f"copier-{p}", "--consumer-group", group, "--transaction-size", "4",
                    "--enable-random-aborts", "--use-group-metadata", main_class="org.apache.kafka.tools.TransactionalMessageCopier").stdout
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert events and events[-1]["stage"] == "ShutdownComplete" and events[-1]["remaining"] == 0, out[-3000:]
        copied += events[-1]["totalProcessed"]
    assert copied == 60
    consumed = _tool(tmp_path, "kafka-console-consumer.sh", "--bootstrap-server", _node(cluster, 1), "--topic", dst, "--from-beginning",
                     "--isolation-level", "read_committed", "--timeout-ms", "15000", "--formatter-property", "print.key=true",
                     "--formatter-property", "key.separator=:")
    assert sorted(_records(consumed.stdout)) == sorted(lines)  # each once: aborted copies are not read
    described = _tool(tmp_path, "kafka-consumer-groups.sh", "--bootstrap-server", _node(cluster, 2), "--describe", "--group", group)
    rows = _rows(described.stdout, group)
    assert sorted(rows) == [0, 1] and sum(int(r[3]) for r in rows.values()) == 60, described.stdout
    assert all(r[3] == r[4] for r in rows.values()), described.stdout
    # Each node's own output partitions: data batches marked transactional, COMMIT markers, and
    # (random aborts) ABORT markers somewhere; the dump's record count matches what was read.
    seen_markers: set[str] = set()
    data_records = 0
    for p in range(2):  # the copier writes input partition p to output partition p
        lead = leader_of(dst, p, 2)
        seg = cluster.data_dir / f"node-{lead}" / f"{dst}-{p}" / "00000000000000000000.log"
        dump = _tool(tmp_path, "kafka-dump-log.sh", "--files", str(seg), "--print-data-log").stdout
        assert f"Dumping {seg}" in dump
        seen_markers |= set(re.findall(r"endTxnMarker: (\w+)", dump))
        data_records += len(re.findall(r"\| offset: \d+ .*payload: m\d+", dump))
        assert "isTransactional: true" in dump
    assert "COMMIT" in seen_markers
    assert data_records >= 60  # aborted copies stay in the log (hidden by the markers)


def test_dump_log_reads_each_nodes_files(cluster: SidecarProcess, tmp_path: Path) -> None:
    """kafka-dump-log.sh on every segment and offset index of a topic spread over both nodes,
    each read from its leader's node-<k> dir: every record at its offset, indexes sane."""
    topic = "dumped"
    _tool(tmp_path, "kafka-topics.sh", "--bootstrap-server", _node(cluster, 2), "--create", "--topic", topic, "--partitions", "2")
    lines = [f"key{i}:value{i}" for i in range(30)]
    _tool(tmp_path, "kafka-console-producer.sh", "--bootstrap-server", _node(cluster, 1), "--topic", topic,
          "--reader-property", "parse.key=true", "--reader-property", "key.separator=:", input="\n".join(lines) + "\n")
    files: list[str] = []
    for p in range(2):
        d = cluster.data_dir / f"node-{leader_of(topic, p, 2)}" / f"{topic}-{p}"
        files += [str(d / "00000000000000000000.log"), str(d / "00000000000000000000.index")]
    dump = _tool(tmp_path, "kafka-dump-log.sh", "--files", ",".join(files), "--print-data-log").stdout
    found = re.findall(r"\| offset: (\d+) .*?key: (\S+) payload: (\S+)", dump)
    assert sorted(f"{k}:{v}" for _, k, v in found) == sorted(lines)
    assert [f for f in files if f.endswith(".log")] == [f for f in files if f"Dumping {f}" in dump and f.endswith(".log")]
    checked = _tool(tmp_path, "kafka-dump-log.sh", "--files", ",".join(f for f in files if f.endswith(".index")), "--index-sanity-check").stdout
    assert checked.count("passed sanity check") == 2, checked
