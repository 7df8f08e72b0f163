"""Kafka's own tools and Java clients against kafka-sidecar, compared with the reference Apache Kafka (4.3.1).

Every tool of issue 11 runs, unchanged, as a subprocess (``bin/*.sh`` of the reference
distribution, ``KAFKA_HEAP_OPTS=-Xmx256m``, ``LOG_DIR`` in a temp dir, a timeout each) against
our server and against the reference broker (``bench/reference.py``, started once per session),
with the same scenario on both, both halves at once. Outputs are compared after replacing what
differs by nature (topic and cluster ids, timestamps, addresses, data dir paths).

Without Java or the Kafka distribution these tests skip, saying why (the tools are the
distribution's); where they are present (CI here) nothing skips.

The perf tools run on one broker after the other (their figures go to
``.cache/bench/tools.json``); the requests the tools needed from us (CreatePartitions,
DescribeTopicPartitions, DescribeCluster, DescribeLogDirs) are also sent raw to both brokers,
edge cases included, and the answers compared field by field.

Speed: each tool is a JVM start. The tool JVMs use C1 only, the serial GC and a class-data
archive dumped by the first tool run (a kafka-configs.sh, ``-XX:ArchiveClassesAtExit``), and
``INCLUDE_TEST_JARS`` spares kafka-run-class.sh its per-jar greps, which takes a tool from
~2.5 s to well under 1 s on an idle machine; the perf tools keep Kafka's default JIT and GC.
These options change nothing the tools print. ``TOOLS_TIMING=1`` (with ``-s``) prints each
tool run's wall time.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import os
import platform
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_sidecar.client.blocking import _BrokerConnection, parse_bootstrap
from kafka_sidecar.server.dispatch import SUPPORTED_APIS

from bench.reference import ReferenceKafka, find_kafka_home, kafka_version, unavailable_reason
from tests.support import RECENT_TS, REPO, SidecarProcess

# Broker settings of the reference launcher that our server knows too, so both brokers run with
# the same static configuration (they show up in DescribeConfigs as STATIC_BROKER_CONFIG).
SHARED_BROKER_CONFIG = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}
TOOL_TIMEOUT = 60.0
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss1m -Djava.awt.headless=true"
# Kafka's default KAFKA_JVM_PERFORMANCE_OPTS (kafka-run-class.sh), for the perf tools.
KAFKA_JVM = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
             "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
TOOLS_JSON = REPO / ".cache" / "bench" / "tools.json"  # ignored: a test run changes no tracked file
PERF_RECORDS, PERF_RECORD_SIZE = 100_000, 100
BIG_RECORDS = 100_000
BASE_TS = RECENT_TS  # not older than retention.ms: both brokers live for the whole module


# ---- running the tools ----------------------------------------------------------------------


@dataclass
class Run:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


@dataclass
class Tools:
    """Kafka's ``bin/`` scripts, run with a small heap, LOG_DIR in a temp dir and a timeout."""

    home: Path
    log_dir: Path
    archive: Path | None = None

    def env(self, fast: bool = True) -> dict[str, str]:
        opts = FAST_JVM if fast else KAFKA_JVM
        if self.archive is not None and self.archive.is_file():
            # -Xlog:disable: a stale or unusable archive must not print warnings into the output.
            opts += f" -XX:SharedArchiveFile={self.archive} -Xlog:disable"
        env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "KAFKA_LOG4J_OPTS", "JMX_PORT", "KAFKA_DEBUG")}
        env.update(KAFKA_HEAP_OPTS="-Xmx256m", LOG_DIR=str(self.log_dir), KAFKA_JVM_PERFORMANCE_OPTS=opts,
                   # kafka-run-class.sh greps every jar name for test/source jars (a process pair per jar,
                   # ~0.5 s a start); with this it skips that (the distribution has none: only the
                   # connect-file jar joins the classpath).
                   INCLUDE_TEST_JARS="true")
        return env

    def run(self, script: str, *args: str, input: str | None = None, timeout: float = TOOL_TIMEOUT,
            fast: bool = True, env: dict[str, str] | None = None) -> Run:
        cmd = [str(self.home / "bin" / script), *args]
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, input=input if input is not None else "", capture_output=True, text=True,
                                  timeout=timeout, env=env or self.env(fast))
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise AssertionError(f"{script} {' '.join(args)} timed out after {timeout}s\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}") from None
        run = Run([script, *args], done.returncode, done.stdout, done.stderr, time.monotonic() - started)
        if os.environ.get("TOOLS_TIMING"):
            print(f"TIMING {run.seconds:6.2f}s {script} {' '.join(a for a in args if not a.startswith('127.0.0.1'))[:100]}", flush=True)
        return run

    def ok(self, script: str, *args: str, **kw: Any) -> Run:
        r = self.run(script, *args, **kw)
        assert r.returncode == 0, f"{script} {' '.join(args)} exited {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}"
        return r

    def ok_dumping_archive(self, path: Path, script: str, *args: str) -> Run:
        """Run a tool (it must succeed) and dump the classes it loaded into a CDS archive that the
        later runs map (kafka-configs.sh: the admin client, Scala and the tools' common classes)."""
        env = self.env()
        env["KAFKA_JVM_PERFORMANCE_OPTS"] = f"{FAST_JVM} -XX:ArchiveClassesAtExit={path} -Xlog:disable"
        # the dump at exit is slow on a loaded machine (over 60 s at load 20): more time for this one run
        run = self.run(script, *args, env=env, timeout=3 * TOOL_TIMEOUT)
        if run.returncode == 0 and path.is_file():
            self.archive = path
            return run
        return self.ok(script, *args)  # a JVM that cannot dump an archive: the run without it


@dataclass
class Target:
    """One broker the scenarios run against."""

    name: str  # "ours" or "reference"
    bootstrap: str
    data_dir: Path
    tools: Tools
    extra: dict[str, Any] = field(default_factory=dict)

    def tool(self, script: str, *args: str, **kw: Any) -> Run:
        return self.tools.ok(script, "--bootstrap-server", self.bootstrap, *args, **kw)

    def tool_any(self, script: str, *args: str, **kw: Any) -> Run:
        return self.tools.run(script, "--bootstrap-server", self.bootstrap, *args, **kw)

    def normalize(self, text: str) -> str:
        """What differs between two brokers for the same scenario, replaced by placeholders."""
        text = text.replace(self.bootstrap, "<bootstrap>").replace(str(self.data_dir), "<logdir>")
        text = re.sub(r"TopicId: \S+", "TopicId: <id>", text)
        text = re.sub(r"CreateTime:\s?\d+", "CreateTime:<ts>", text)
        text = re.sub(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", "[<time>]", text)
        return text


@dataclass
class Brokers:
    ours: Target
    reference: Target
    pool: ThreadPoolExecutor

    def both(self, scenario: Callable[[Target], Any]) -> tuple[Any, Any]:
        """Run ``scenario`` on both brokers at once; (ours, reference)."""
        a = self.pool.submit(scenario, self.ours)
        b = self.pool.submit(scenario, self.reference)
        return a.result(timeout=300), b.result(timeout=300)

    def compare(self, scenario: Callable[[Target], list[Run]], stderr: bool = True) -> tuple[list[Run], list[Run]]:
        """Run on both; every step's exit status, stdout (and stderr) must match after normalizing."""
        ours, ref = self.both(scenario)
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref, strict=True):
            where = " ".join(o.args[:1] + [a for a in o.args[1:] if a != self.ours.bootstrap])
            assert o.returncode == r.returncode, f"{where}: exit {o.returncode} != reference {r.returncode}\n{o.stdout}{o.stderr}\n---\n{r.stdout}{r.stderr}"
            assert self.ours.normalize(o.stdout) == self.reference.normalize(r.stdout), f"{where}: stdout differs"
            if stderr:
                assert self.ours.normalize(o.stderr) == self.reference.normalize(r.stderr), f"{where}: stderr differs"
        return ours, ref


# ---- fixtures -------------------------------------------------------------------------------


def _skip_reason() -> str | None:
    reason = unavailable_reason()
    if reason:
        return reason.replace("reference unavailable", "Kafka's tools unavailable")
    return None


@pytest.fixture(scope="session")
def kafka_tools(tmp_path_factory: pytest.TempPathFactory) -> Tools:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    home = find_kafka_home()
    assert home is not None
    return Tools(home, tmp_path_factory.mktemp("kafka-tool-logs"))


@pytest.fixture(scope="session")
def reference_kafka(kafka_tools: Tools) -> Iterator[Future[ReferenceKafka]]:
    """The reference broker, started once per session (in the background: callers wait on it)."""
    kafka = ReferenceKafka(heap_opts="-Xmx512m", start_timeout=150)
    with ThreadPoolExecutor(1, thread_name_prefix="reference-start") as ex:
        started = ex.submit(kafka.start)
        yield started
        try:
            started.result(timeout=200)
        except Exception:
            pass
        kafka.stop()


@pytest.fixture(scope="module")
def brokers(reference_kafka: Future[ReferenceKafka], kafka_tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    work = tmp_path_factory.mktemp("kafka-tools")
    ours = SidecarProcess(work / "data", SHARED_BROKER_CONFIG).start()
    try:
        # A Kafka 4.1 cluster is formatted with the cluster-wide dynamic default
        # min.insync.replicas (from the static config); give ours the same state.
        kafka_tools.ok_dumping_archive(work / "kafka-tools.jsa", "kafka-configs.sh", "--bootstrap-server", ours.bootstrap,
                                       "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "min.insync.replicas=1")
        reference = reference_kafka.result(timeout=200)
        pool = ThreadPoolExecutor(2, thread_name_prefix="tools")
        b = Brokers(
            Target("ours", ours.bootstrap, ours.data_dir.resolve(), kafka_tools, {"server": ours}),
            Target("reference", reference.bootstrap, reference.data_dir.resolve(), kafka_tools),
            pool,
        )
        yield b
        pool.shutdown(wait=True)
    finally:
        ours.stop()


# librdkafka clients of these tests: quiet about the connections the brokers close at the end.
QUIET = {"log.connection.close": False, "log_level": 0}


def admin(t: Target) -> AdminClient:
    return AdminClient({"bootstrap.servers": t.bootstrap, **QUIET})


def create_topic(t: Target, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    client = admin(t)  # kept referenced until the future is done (librdkafka destroys the handle with it)
    futures = client.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=30)
    futures[name].result(timeout=30)
    wait_for_leaders(t, name, partitions)


def wait_for_leaders(t: Target, name: str, partitions: int, timeout: float = 30.0) -> None:
    """Until Metadata shows a leader for every partition (Kafka's broker learns of a new topic
    from its metadata log a moment after CreateTopics answers)."""
    deadline = time.monotonic() + timeout
    a = admin(t)
    while True:
        md = a.list_topics(name, timeout=10)
        tm = md.topics.get(name)
        if tm is not None and tm.error is None and len(tm.partitions) == partitions and all(p.leader >= 0 for p in tm.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} has no leaders on {t.name} after {timeout}s")
        time.sleep(0.1)


def produce_one_per_batch(t: Target, topic: str, records: list[tuple[int, bytes, bytes, int]]) -> None:
    """(partition, key, value, timestamp) each in a batch of its own: the same bytes on both brokers."""
    p = Producer({"bootstrap.servers": t.bootstrap, "linger.ms": 0, "enable.idempotence": False, "acks": "all", **QUIET})
    errors: list[Any] = []
    for partition, key, value, ts in records:
        p.produce(topic, value, key, partition=partition, timestamp=ts, on_delivery=lambda err, _m: err and errors.append(err))
        assert p.flush(30) == 0
    assert not errors, errors


# ---- the tools ------------------------------------------------------------------------------

_API_LINE = re.compile(r"^\s+(\w+)\((\d+)\): (.*?),?$")


def _api_lines(text: str) -> dict[int, tuple[str, str]]:
    return {int(m.group(2)): (m.group(1), m.group(3)) for line in text.splitlines() if (m := _API_LINE.match(line))}


def _range(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+)(?: to (\d+))? \[usable: (\d+)\]", text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or m.group(1))


TELEMETRY_APIS = (71, 72)  # GetTelemetrySubscriptions, PushTelemetry


def test_broker_api_versions(brokers: Brokers) -> None:
    ours, ref = brokers.both(lambda t: t.tool("kafka-broker-api-versions.sh"))
    head_ours, head_ref = (t.normalize(r.stdout.splitlines()[0]) for t, r in ((brokers.ours, ours), (brokers.reference, ref)))
    assert head_ours == head_ref == "<bootstrap> (id: 1 rack: null isFenced: false) -> ("
    lines_ours, lines_ref = _api_lines(ours.stdout), _api_lines(ref.stdout)
    assert lines_ours.keys() == lines_ref.keys()  # the client lists the same APIs for both
    for key, spec in SUPPORTED_APIS.items():
        name, text = lines_ours[key]
        assert name == spec.name
        assert text != "UNSUPPORTED", f"{name}({key}) is advertised but the tool says UNSUPPORTED"
        assert _range(text) == (spec.min_version, spec.max_version), f"{name}: {text}"
        # Every version we serve is one the reference serves: the client would pick it with Kafka too.
        ref_range = _range(lines_ref[key][1])
        if key in TELEMETRY_APIS:
            # On purpose (tests/conformance/known_differences.py): Kafka advertises KIP-714's APIs only
            # with a ClientTelemetry metrics reporter plugin, which the reference does not have.
            assert lines_ref[key][1] == "UNSUPPORTED"
            continue
        assert ref_range is not None and ref_range[0] <= spec.min_version and spec.max_version <= ref_range[1], (name, text, lines_ref[key])
    for key, (name, text) in lines_ours.items():
        if key not in SUPPORTED_APIS:
            assert text == "UNSUPPORTED", f"{name}({key}): {text} but not in SUPPORTED_APIS"
    assert ours.stderr == ref.stderr == ""
    # The README's "Works with" row names exactly the APIs the tool shows UNSUPPORTED for us.
    row = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `kafka-broker-api-versions.sh`"))
    named = {int(k): n for n, k in re.findall(r"(\w+) \((\d+)\)", row.split("`UNSUPPORTED`", 1)[1])}
    assert named == {key: name for key, (name, text) in lines_ours.items() if text == "UNSUPPORTED"}, row


def test_cluster_id(brokers: Brokers) -> None:
    """kafka-cluster.sh cluster-id: DescribeCluster."""
    ours, ref = brokers.both(lambda t: t.tools.ok("kafka-cluster.sh", "cluster-id", "--bootstrap-server", t.bootstrap))
    server: SidecarProcess = brokers.ours.extra["server"]
    meta = (server.data_dir / "meta.properties").read_text()
    ours_id = re.search(r"cluster\.id=(\S+)", meta).group(1)  # type: ignore[union-attr]
    assert ours.stdout == f"Cluster ID: {ours_id}\n"
    assert re.fullmatch(r"Cluster ID: [\w-]{22}\n", ref.stdout)


def test_topics(brokers: Brokers) -> None:
    a, b = "tools-topics-a", "tools-topics-b"

    def scenario(t: Target) -> list[Run]:
        runs = [
            t.tool("kafka-topics.sh", "--create", "--topic", a, "--partitions", "3",
                   "--config", "retention.ms=3600000", "--config", "cleanup.policy=delete"),
            t.tool("kafka-topics.sh", "--create", "--topic", b),
        ]
        wait_for_leaders(t, a, 3)
        wait_for_leaders(t, b, 1)
        runs += [
            t.tool("kafka-topics.sh", "--list", "--topic", "tools-topics-.*"),
            t.tool("kafka-topics.sh", "--alter", "--topic", a, "--partitions", "5"),
        ]
        wait_for_leaders(t, a, 5)
        runs += [
            t.tool("kafka-topics.sh", "--describe", "--topic", "tools-topics-.*"),
            t.tool_any("kafka-topics.sh", "--alter", "--topic", a, "--partitions", "2"),  # not an increase: an error
            t.tool("kafka-topics.sh", "--delete", "--topic", b),
        ]
        # The reference's broker learns of the deletion from its metadata log: bounded wait.
        for _ in range(20):
            listed = t.tool("kafka-topics.sh", "--list", "--topic", "tools-topics-.*")
            if b not in listed.stdout:
                break
            time.sleep(0.25)
        runs.append(listed)
        return runs

    ours, ref = brokers.compare(scenario)
    assert [r.stdout for r in ours[:3]] == [f"Created topic {a}.\n", f"Created topic {b}.\n", f"{a}\n{b}\n"]
    describe = brokers.ours.normalize(ours[4].stdout)
    assert (f"Topic: {a}\tTopicId: <id>\tPartitionCount: 5\tReplicationFactor: 1\t"
            "Configs: min.insync.replicas=1,cleanup.policy=delete,retention.ms=3600000\n") in describe
    for p in range(5):
        assert f"\tTopic: {a}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: \n" in describe
    assert f"Topic: {b}\tTopicId: <id>\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: min.insync.replicas=1\n" in describe
    assert ours[5].returncode == 1
    assert f"The topic {a} currently has 5 partition(s); 2 would not be an increase." in ours[5].stdout
    assert ours[-1].stdout == f"{a}\n"


def test_configs(brokers: Brokers) -> None:
    topic = "tools-configs"
    big_line = "x" * 300 + "\n"

    def scenario(t: Target) -> list[Run]:
        def configs(*args: str) -> Run:
            return t.tool("kafka-configs.sh", *args)

        create_topic(t, topic, 1, {"retention.ms": "3600000"})
        runs = [
            configs("--entity-type", "topics", "--entity-name", topic, "--alter",
                    "--add-config", "max.message.bytes=200,segment.bytes=2000000", "--delete-config", "retention.ms"),
            configs("--entity-type", "topics", "--entity-name", topic, "--describe"),
        ]
        # max.message.bytes=200 in effect: a 300-byte record is refused (the tool logs the error)...
        refused = t.tools.run("kafka-console-producer.sh", "--bootstrap-server", t.bootstrap, "--topic", topic, input=big_line)
        # Compared: the exception. Its text is the error's default message with Kafka (the broker sends
        # none), ours adds the sizes (tests/conformance/known_differences.py, "error_codes").
        refused.stderr = "\n".join(re.findall(r"org\.apache\.kafka\.common\.errors\.\w+", refused.stderr))
        runs += [
            refused,
            configs("--entity-type", "topics", "--entity-name", topic, "--alter", "--delete-config", "max.message.bytes"),
        ]
        # ...and accepted once the override is gone: one record in the log, not two.
        t.tools.ok("kafka-console-producer.sh", "--bootstrap-server", t.bootstrap, "--topic", topic, input=big_line)
        runs += [
            t.tool("kafka-get-offsets.sh", "--topic", topic, "--time", "-1"),
            configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.ms=7200000"),
            configs("--entity-type", "brokers", "--entity-name", "1", "--describe"),
        ]
        every = configs("--entity-type", "topics", "--entity-name", topic, "--describe", "--all")
        # The broker's dynamic log.retention.ms is the topic's retention.ms now (it has no override).
        every.stdout = "".join(line for line in every.stdout.splitlines(keepends=True) if line.strip().startswith("retention.ms="))
        runs += [
            every,
            configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config", "log.retention.ms"),
            configs("--entity-type", "brokers", "--entity-name", "1", "--describe"),
        ]
        return runs

    ours, _ = brokers.compare(scenario)
    assert "segment.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=2000000" in ours[1].stdout
    assert "retention.ms" not in ours[1].stdout
    assert "RecordTooLargeException" in ours[2].stderr
    assert ours[4].stdout == f"{topic}:0:1\n"
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000" in ours[6].stdout
    assert "retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000" in ours[7].stdout
    assert ours[9].stdout == "Dynamic configs for broker 1 are:\n"


# What Kafka 4.3's consumer prints on stderr when a group uses the classic protocol (a client-side
# notice, whatever the broker).
KIP_848_NOTICE = "The consumer rebalance protocol (KIP-848) is production-ready!"


def _without_notice(stderr: str) -> str:
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith(KIP_848_NOTICE))


CONSUMER_PRINT = ["--formatter-property", "print.key=true", "--formatter-property", "print.timestamp=true", "--formatter-property", "print.headers=true"]


def test_console_producer_and_consumer(brokers: Brokers) -> None:
    topic, group = "tools-console", "tools-console-group"

    def scenario(t: Target) -> list[Run]:
        create_topic(t, topic)
        runs = [
            t.tool("kafka-console-producer.sh", "--topic", topic, "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                   input="k1:v1\nk2:value:with:colons\n:empty-key\n"),
            t.tool("kafka-console-producer.sh", "--topic", topic, "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                   "--reader-property", "parse.headers=true", input="h1:a,h2:b\tk4:v4\n"),
            t.tool("kafka-console-consumer.sh", "--topic", topic, "--from-beginning", "--group", group, "--max-messages", "4",
                   "--timeout-ms", "30000", *CONSUMER_PRINT),
            t.tool("kafka-consumer-groups.sh", "--describe", "--group", group),
        ]
        return runs

    ours, _ = brokers.compare(scenario)
    assert brokers.ours.normalize(ours[2].stdout) == (
        "CreateTime:<ts>\tNO_HEADERS\tk1\tv1\n"
        "CreateTime:<ts>\tNO_HEADERS\tk2\tvalue:with:colons\n"
        "CreateTime:<ts>\tNO_HEADERS\t\tempty-key\n"
        "CreateTime:<ts>\th1:a,h2:b\tk4\tv4\n"
    )
    assert _without_notice(ours[2].stderr) == "Processed a total of 4 messages\n"


def _group_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.startswith("tools-")]


def test_consumer_groups(brokers: Brokers) -> None:
    topic, group = "tools-groups", "tools-groups-group"

    def scenario(t: Target) -> list[Run]:
        create_topic(t, topic, 2)
        produce_one_per_batch(t, topic, [(i % 2, b"k%d" % i, b"v%d" % i, BASE_TS + i) for i in range(10)])
        t.tool("kafka-console-consumer.sh", "--topic", topic, "--from-beginning", "--group", group, "--max-messages", "10",
               "--timeout-ms", "30000")
        listed = t.tool("kafka-consumer-groups.sh", "--list")
        listed.stdout = "".join(line for line in listed.stdout.splitlines(keepends=True) if line.startswith("tools-groups"))
        runs = [
            listed,
            t.tool("kafka-consumer-groups.sh", "--describe", "--group", group),
            t.tool("kafka-consumer-groups.sh", "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic),
            t.tool("kafka-consumer-groups.sh", "--describe", "--group", group),
            t.tool("kafka-consumer-groups.sh", "--delete", "--group", group),
        ]
        return runs

    ours, _ = brokers.compare(scenario)
    assert ours[0].stdout == f"{group}\n"
    assert "Consumer group 'tools-groups-group' has no active members." in ours[1].stderr
    assert sorted(_group_rows(ours[1].stdout)) == [[group, topic, str(p), "5", "5", "0", "-", "-", "-"] for p in range(2)]
    assert sorted(_group_rows(ours[2].stdout)) == [[group, topic, str(p), "0"] for p in range(2)]
    assert sorted(_group_rows(ours[3].stdout)) == [[group, topic, str(p), "0", "5", "5", "-", "-", "-"] for p in range(2)]
    assert ours[4].stdout.strip() == f"Deletion of requested consumer groups ('{group}') was successful."


def test_get_offsets(brokers: Brokers) -> None:
    topic = "tools-offsets"
    # Partition 0: timestamps rise by 1 s except offset 5, the largest; partition 1: 4 records.
    records = [(0, b"k%d" % i, b"v%d" % i, BASE_TS + (100_000 if i == 5 else i * 1000)) for i in range(10)]
    records += [(1, b"k%d" % i, b"v%d" % i, BASE_TS + i * 1000) for i in range(4)]
    times = ["-1", "-2", "-3", str(BASE_TS + 2500)]

    def scenario(t: Target) -> list[Run]:
        create_topic(t, topic, 2)
        produce_one_per_batch(t, topic, records)
        return [t.tool("kafka-get-offsets.sh", "--topic", topic, "--time", ts) for ts in times]

    ours, _ = brokers.compare(scenario)
    assert [r.stdout for r in ours] == [
        f"{topic}:0:10\n{topic}:1:4\n",
        f"{topic}:0:0\n{topic}:1:0\n",
        f"{topic}:0:5\n{topic}:1:3\n",
        f"{topic}:0:3\n{topic}:1:3\n",
    ]


def test_delete_records(brokers: Brokers, tmp_path: Path) -> None:
    topic = "tools-delete"
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [
        {"topic": topic, "partition": 0, "offset": 4},
        {"topic": topic, "partition": 1, "offset": 99},  # above the high watermark: an error line
    ], "version": 1}))

    def scenario(t: Target) -> list[Run]:
        create_topic(t, topic, 2)
        produce_one_per_batch(t, topic, [(i % 2, b"k", b"v%d" % i, BASE_TS + i) for i in range(12)])
        return [
            t.tool("kafka-delete-records.sh", "--offset-json-file", str(spec)),
            t.tool("kafka-get-offsets.sh", "--topic", topic, "--time", "-2"),
        ]

    ours, ref = brokers.both(scenario)
    # Byte for byte, as Kafka prints it (nothing normalized); the partition lines come in the
    # iteration order of the admin client's immutable result map, which Java randomizes per JVM
    # (the same command against Kafka alone prints them in either order): compared as a multiset.
    lines, ref_lines = ours[0].stdout.splitlines(keepends=True), ref[0].stdout.splitlines(keepends=True)
    assert lines[:2] == ref_lines[:2] == ["Executing records delete operation\n", "Records delete operation completed:\n"]
    assert sorted(lines) == sorted(ref_lines)
    assert ours[0].returncode == ref[0].returncode == 0
    assert f"partition: {topic}-0\tlow_watermark: 4\n" in ours[0].stdout
    assert f"partition: {topic}-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in ours[0].stdout
    assert ours[1].stdout == ref[1].stdout == f"{topic}:0:4\n{topic}:1:0\n"


def test_log_dirs(brokers: Brokers) -> None:
    """kafka-log-dirs.sh --describe: DescribeLogDirs (sizes and offset lag) and DescribeCluster."""
    topic = "tools-logdirs"

    def scenario(t: Target) -> tuple[Run, dict[str, int]]:
        create_topic(t, topic, 3)
        produce_one_per_batch(t, topic, [(i % 2, b"key-%d" % i, b"value-%d" % i * 10, BASE_TS + i * 10) for i in range(9)])
        run = t.tool("kafka-log-dirs.sh", "--describe", "--topic-list", topic)
        on_disk = {f"{topic}-{p}": sum(f.stat().st_size for f in (t.data_dir / f"{topic}-{p}").glob("*.log")) for p in range(3)}
        return run, on_disk

    (ours, ours_disk), (ref, ref_disk) = brokers.both(scenario)

    def parsed(t: Target, r: Run) -> dict[str, Any]:
        lines = r.stdout.splitlines()
        assert lines[:2] == ["Querying brokers for log directories information", "Received log directory information from brokers 1"]
        data = json.loads(t.normalize(lines[2]))
        for b in data["brokers"]:
            for d in b["logDirs"]:
                d["partitions"].sort(key=lambda p: p["partition"])
        return data

    data = parsed(brokers.ours, ours)
    assert data == parsed(brokers.reference, ref)
    assert data == {"version": 1, "brokers": [{"broker": 1, "logDirs": [{"logDir": "<logdir>", "error": None, "partitions": [
        {"partition": f"{topic}-{p}", "size": ours_disk[f"{topic}-{p}"], "offsetLag": 0, "isFuture": False} for p in range(3)
    ]}]}]}
    assert ours_disk == ref_disk and ours_disk[f"{topic}-0"] > 0 and ours_disk[f"{topic}-2"] == 0


# ---- 100,000 records through the Java clients, and our segments through kafka-dump-log -------

BIG_TOPIC, BIG_GROUP = "tools-100k", "tools-100k-group"


@pytest.fixture(scope="module")
def hundred_k(brokers: Brokers) -> dict[str, Run]:
    """100,000 keyed records from kafka-console-producer.sh (the Java producer, idempotent by
    default) into one partition with 1 MiB segments, on both brokers."""
    lines = "".join(f"k{i}:v{i}\n" for i in range(BIG_RECORDS))

    def produce(t: Target) -> Run:
        create_topic(t, BIG_TOPIC, 1, {"segment.bytes": "1048576"})
        return t.tool("kafka-console-producer.sh", "--topic", BIG_TOPIC, "--reader-property", "parse.key=true",
                      "--reader-property", "key.separator=:", input=lines, timeout=120)

    ours, ref = brokers.both(produce)
    return {"ours": ours, "reference": ref}


def test_java_clients_100k_exact_offsets(brokers: Brokers, hundred_k: dict[str, Run]) -> None:
    def scenario(t: Target) -> list[Run]:
        consumed = t.tool("kafka-console-consumer.sh", "--topic", BIG_TOPIC, "--from-beginning", "--group", BIG_GROUP,
                          "--max-messages", str(BIG_RECORDS), "--timeout-ms", "60000", "--formatter-property", "print.partition=true",
                          "--formatter-property", "print.offset=true", "--formatter-property", "print.key=true", timeout=120)
        return [
            consumed,
            t.tool("kafka-get-offsets.sh", "--topic", BIG_TOPIC),
            t.tool("kafka-consumer-groups.sh", "--describe", "--group", BIG_GROUP),
        ]

    ours, _ = brokers.compare(scenario)
    lines = ours[0].stdout.splitlines()
    assert len(lines) == BIG_RECORDS
    bad = [(i, line) for i, line in enumerate(lines) if line != f"Partition:0\tOffset:{i}\tk{i}\tv{i}"]
    assert not bad, bad[:5]
    assert _without_notice(ours[0].stderr) == f"Processed a total of {BIG_RECORDS} messages\n"
    assert ours[1].stdout == f"{BIG_TOPIC}:0:{BIG_RECORDS}\n"
    assert _group_rows(ours[2].stdout) == [[BIG_GROUP, BIG_TOPIC, "0", str(BIG_RECORDS), str(BIG_RECORDS), "0", "-", "-", "-"]]


_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) producerId: (-?\d+) .* isvalid: (\w+)$")
_RECORD = re.compile(r"^\| offset: (\d+) CreateTime: \d+ keySize: (\d+) valueSize: (\d+) sequence: (-?\d+) headerKeys: \[\] key: (\S+) payload: (\S+)$")


def _segments(t: Target) -> list[Path]:
    return sorted((t.data_dir / f"{BIG_TOPIC}-0").glob("*.log"))


def test_dump_log_reads_our_segments(brokers: Brokers, hundred_k: dict[str, Run]) -> None:
    """kafka-dump-log.sh decodes the segments we wrote (every batch valid, every record in place),
    and --verify-index-only finds no mismatch in the indexes of our rolled segments; the same
    holds for the reference's segments of the same records."""

    def scenario(t: Target) -> tuple[Run, Run, int]:
        segments = _segments(t)
        assert len(segments) >= 2, segments  # 1 MiB segments: rolled at least once
        dump = t.tools.ok("kafka-dump-log.sh", "--deep-iteration", "--print-data-log", "--files", ",".join(map(str, segments)))
        indexes = [str(s.with_suffix(ext)) for s in segments[:-1] for ext in (".index", ".timeindex")]
        verify = t.tools.ok("kafka-dump-log.sh", "--verify-index-only", "--files", ",".join(indexes))
        return dump, verify, len(segments)

    (dump, verify, n), (ref_dump, ref_verify, _) = brokers.both(scenario)

    def records(text: str) -> list[tuple[int, ...]]:
        batches = [m for line in text.splitlines() if (m := _BATCH.match(line))]
        assert batches and all(m.group(7) == "true" for m in batches)
        assert all(int(m.group(6)) >= 0 and int(m.group(4)) == int(m.group(1)) for m in batches)  # idempotent producer
        recs = [m.groups() for line in text.splitlines() if (m := _RECORD.match(line))]
        return [(int(o), int(ks), int(vs), int(seq), k, v) for o, ks, vs, seq, k, v in recs]

    ours_records = records(dump.stdout)
    assert len(ours_records) == BIG_RECORDS
    for i, (offset, _ks, _vs, seq, key, value) in enumerate(ours_records):
        assert (offset, seq, key, value) == (i, i, f"k{i}", f"v{i}"), ours_records[i]
    assert ours_records == records(ref_dump.stdout)
    for out in (verify.stdout, ref_verify.stdout):
        assert "Mismatches" not in out and "not found" not in out, out[-2000:]
    assert verify.stdout.count("Dumping ") == 2 * (n - 1)
    assert verify.stderr == ""
    assert _real_gaps(dump.stderr) == [] and _real_gaps(ref_dump.stderr) == []


_GAP = re.compile(r"Non-consecutive offsets in (\S+)\n  (-?\d+) is followed by (\d+)\n")


def _real_gaps(stderr: str) -> list[str]:
    """kafka-dump-log.sh's offset-gap reports, without the one Kafka 4.3's tool prints for every
    segment that does not start at offset 0 ("-1 is followed by <its base offset>")."""
    quirk = [m.group(0) for m in _GAP.finditer(stderr) if m.group(2) == "-1" and int(Path(m.group(1)).stem) == int(m.group(3))]
    for text in quirk:
        stderr = stderr.replace(text, "", 1)
    return [line for line in stderr.splitlines() if line.strip()]


# ---- the APIs the tools needed, request by request against both brokers ---------------------

ZERO_UUID = uuid.UUID(int=0)


def _plain(value: Any) -> Any:
    """A kio response as plain data; topic ids as "<id>" (zero: "<zero>"), durations in ms."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return "<zero>" if value == ZERO_UUID else "<id>"
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return value


def _raw(t: Target, api_key: int, version: int, data: dict[str, Any]) -> dict[str, Any]:
    conn = _BrokerConnection(*parse_bootstrap(t.bootstrap), "kafka-tools-test", 15.0)
    try:
        _, body = conn._send(api_key, version, data)
    finally:
        conn.close()
    return _plain(body)


def test_create_partitions_requests(brokers: Brokers) -> None:
    """CreatePartitions (37) answers like Kafka's controller: checks, messages, and result order
    (duplicates first, then the Java HashSet order of the names)."""
    names = [f"tools-cp-{c}" for c in "abcdefghi"]

    def scenario(t: Target) -> list[Any]:
        client = admin(t)
        futures = client.create_topics([NewTopic(n, 2, 1) for n in names], operation_timeout=30)
        for f in futures.values():
            f.result(timeout=30)
        for n in names:
            wait_for_leaders(t, n, 2)

        def grow(*topics: dict[str, Any], validate_only: bool = False, version: int = 3) -> dict[str, Any]:
            return _raw(t, 37, version, {"topics": [{"assignments": None, **x} for x in topics], "timeout": 30_000,
                                         "validate_only": validate_only})

        answers = [
            grow({"name": names[0], "count": 3}, {"name": "tools-cp-unknown", "count": 3}, {"name": names[1], "count": 2},
                 {"name": names[2], "count": 1}, {"name": names[3], "count": 3, "assignments": [{"broker_ids": [1]}]},
                 {"name": names[4], "count": 3, "assignments": [{"broker_ids": [2]}]},
                 {"name": names[5], "count": 3, "assignments": [{"broker_ids": [1, 1]}]},
                 {"name": names[6], "count": 3, "assignments": [{"broker_ids": []}]},
                 {"name": names[7], "count": 3}, {"name": names[7], "count": 4},
                 {"name": names[8], "count": 4, "assignments": [{"broker_ids": [1]}]}),
            grow({"name": names[1], "count": 5}, validate_only=True, version=0),
            grow({"name": names[4], "count": 3, "assignments": [{"broker_ids": [1]}]}, version=1),
        ]
        for n, count in ((names[0], 3), (names[3], 3), (names[4], 3)):
            wait_for_leaders(t, n, count)
        md = admin(t).list_topics(timeout=10)
        answers.append({n: len(md.topics[n].partitions) for n in names})
        return answers

    ours, ref = brokers.both(scenario)
    assert ours == ref
    assert ours[-1] == {**dict.fromkeys(names, 2), names[0]: 3, names[3]: 3, names[4]: 3}
    codes = {r["name"]: r["error_code"] for r in ours[0]["results"]}
    assert codes == {names[0]: 0, "tools-cp-unknown": 3, names[1]: 37, names[2]: 37, names[3]: 0, names[4]: 39,
                     names[5]: 39, names[6]: 39, names[7]: 42, names[8]: 39}


def test_describe_topic_partitions_requests(brokers: Brokers) -> None:
    """DescribeTopicPartitions (75): sorted topics, unknown and invalid names, the partition limit
    and the cursor, and the request errors."""
    names = ["tools-dtp-a", "tools-dtp-b"]

    def scenario(t: Target) -> list[Any]:
        create_topic(t, names[0], 3)
        create_topic(t, names[1], 2)

        def describe(topics: list[str], limit: int = 2000, cursor: dict[str, Any] | None = None) -> dict[str, Any]:
            return _raw(t, 75, 0, {"topics": [{"name": n} for n in topics], "response_partition_limit": limit, "cursor": cursor})

        return [
            describe([names[1], "tools-dtp-unknown", names[0], "bad name!", names[1]]),
            describe(names, limit=2),
            describe(names, limit=2, cursor={"topic_name": names[0], "partition_index": 2}),
            describe(names, limit=3),
            describe([names[1]], cursor={"topic_name": names[0], "partition_index": 0}),
            describe(names, cursor={"topic_name": names[0], "partition_index": -1}),
        ]

    ours, ref = brokers.both(scenario)
    assert ours == ref
    first = ours[0]["topics"]
    assert [(x["name"], x["error_code"], x["topic_id"]) for x in first] == [
        ("bad name!", 17, None), (names[0], 0, "<id>"), (names[1], 0, "<id>"), ("tools-dtp-unknown", 3, None)]  # zero id: None
    assert ours[1]["next_cursor"] == {"topic_name": names[0], "partition_index": 2}
    assert ours[3]["next_cursor"] == {"topic_name": names[1], "partition_index": 0}
    assert [x["error_code"] for x in ours[4]["topics"]] == [42]


def test_describe_cluster_requests(brokers: Brokers) -> None:
    """DescribeCluster (60) v0-v2: the broker, the controller id, endpoint types and their errors."""

    def scenario(t: Target) -> list[Any]:
        out = []
        for version, data in (
            (0, {"include_cluster_authorized_operations": True}),
            (1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}),
            (1, {"include_cluster_authorized_operations": False, "endpoint_type": 2}),
            (1, {"include_cluster_authorized_operations": False, "endpoint_type": 7}),
            (2, {"include_cluster_authorized_operations": True, "endpoint_type": 1, "include_fenced_brokers": True}),
        ):
            body = _raw(t, 60, version, {"include_fenced_brokers": False, **data})
            body["cluster_id"] = bool(body["cluster_id"])
            for b in body["brokers"]:
                b["port"] = b["port"] > 0
            out.append(body)
        return out

    ours, ref = brokers.both(scenario)
    assert ours == ref
    assert ours[4]["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": True, "rack": None, "is_fenced": False}]
    assert ours[0]["controller_id"] == 1 and ours[0]["cluster_authorized_operations"] > 0
    assert [x["error_code"] for x in ours] == [0, 0, 114, 115, 0]


def test_describe_log_dirs_requests(brokers: Brokers) -> None:
    """DescribeLogDirs (35) v1-v4 for named partitions (hosted or not) and for all."""
    topic = "tools-dld"

    def scenario(t: Target) -> list[Any]:
        create_topic(t, topic, 2)
        produce_one_per_batch(t, topic, [(0, b"k", b"v" * 50, BASE_TS)])
        out = []
        for version, topics in ((1, [{"topic": topic, "partitions": [0, 1, 7]}, {"topic": "tools-dld-unknown", "partitions": [0]}]),
                                (4, [{"topic": topic, "partitions": [1]}]), (4, None)):
            body = _raw(t, 35, version, {"topics": topics})
            for r in body["results"]:
                assert r["log_dir"] == str(t.data_dir)
                r["log_dir"] = "<logdir>"
                if version >= 4:
                    r["total_bytes"], r["usable_bytes"] = r["total_bytes"] > 0, r["usable_bytes"] > 0
                if topics is None:  # every partition: only ours is compared
                    r["topics"] = [x for x in r["topics"] if x["name"] == topic]
            out.append(body)
        return out

    ours, ref = brokers.both(scenario)
    assert ours == ref
    (result,) = ours[0]["results"]
    assert result["topics"] == [{"name": topic, "partitions": [
        {"partition_index": 0, "partition_size": result["topics"][0]["partitions"][0]["partition_size"], "offset_lag": 0, "is_future_key": False},
        {"partition_index": 1, "partition_size": 0, "offset_lag": 0, "is_future_key": False}]}]
    assert result["topics"][0]["partitions"][0]["partition_size"] > 0


# ---- the perf tools -------------------------------------------------------------------------

_PRODUCER_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th\."
)


def _perf(t: Target, topic: str) -> dict[str, Any]:
    create_topic(t, topic)
    prod = t.tools.ok("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", str(PERF_RECORDS),
                      "--record-size", str(PERF_RECORD_SIZE), "--throughput", "-1",
                      "--producer-props", f"bootstrap.servers={t.bootstrap}", fast=False, timeout=120)
    cons = t.tools.ok("kafka-consumer-perf-test.sh", "--bootstrap-server", t.bootstrap, "--topic", topic,
                      "--messages", str(PERF_RECORDS), "--timeout", "30000", fast=False, timeout=120)
    for r in (prod, cons):
        assert "ERROR" not in r.stdout + r.stderr and "Exception" not in r.stdout + r.stderr, r.stdout + r.stderr
    final = _PRODUCER_FINAL.search(prod.stdout)
    assert final, prod.stdout
    assert int(final.group(1)) == PERF_RECORDS
    header, row = cons.stdout.strip().splitlines()[-2:]
    cols = [c.strip() for c in header.split(",")]
    vals = dict(zip(cols, (v.strip() for v in row.split(",")), strict=True))
    assert int(vals["data.consumed.in.nMsg"]) == PERF_RECORDS
    return {
        "producer": {
            "records_per_sec": float(final.group(2)), "mb_per_sec": float(final.group(3)),
            "avg_latency_ms": float(final.group(4)), "max_latency_ms": float(final.group(5)),
            "p50_ms": int(final.group(6)), "p95_ms": int(final.group(7)), "p99_ms": int(final.group(8)), "p999_ms": int(final.group(9)),
            "seconds": round(prod.seconds, 2), "output": final.group(0),
        },
        "consumer": {
            "mb_per_sec": float(vals["MB.sec"]), "records_per_sec": float(vals["nMsg.sec"]),
            "rebalance_ms": int(vals["rebalance.time.ms"]), "fetch_ms": int(vals["fetch.time.ms"]),
            "fetch_mb_per_sec": float(vals["fetch.MB.sec"]), "fetch_records_per_sec": float(vals["fetch.nMsg.sec"]),
            "seconds": round(cons.seconds, 2), "output": row,
        },
    }


# For each figure: is a higher value better?
_HIGHER_BETTER = {"records_per_sec": True, "mb_per_sec": True, "avg_latency_ms": False, "max_latency_ms": False,
                  "p50_ms": False, "p95_ms": False, "p99_ms": False, "p999_ms": False, "rebalance_ms": False,
                  "fetch_ms": False, "fetch_mb_per_sec": True, "fetch_records_per_sec": True}


def test_perf_tools(brokers: Brokers) -> None:
    """kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh complete on both brokers; their
    figures (one broker after the other, not at once) go to .cache/bench/tools.json as ratios.
    Last in the module: by then both brokers have taken the 100,000-record load (a warm-up)."""
    topic = "tools-perf"
    ours = _perf(brokers.ours, topic)
    ref = _perf(brokers.reference, topic)
    report: dict[str, Any] = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "load": {"records": PERF_RECORDS, "record_size": PERF_RECORD_SIZE, "partitions": 1,
                 "producer": "kafka-producer-perf-test.sh --throughput -1 (defaults: acks=all, idempotent)",
                 "consumer": "kafka-consumer-perf-test.sh --messages 100000",
                 "tool_jvm": "KAFKA_HEAP_OPTS=-Xmx256m, Kafka's default JIT and GC", "reference": f"Apache Kafka {kafka_version()}, -Xmx512m"},
        "note": "ratio = ours / reference; 'better' says which direction is better",
    }
    for tool in ("producer", "consumer"):
        figures = {}
        for k, v in ours[tool].items():
            if k in _HIGHER_BETTER:
                r = ref[tool][k]
                figures[k] = {"ours": v, "reference": r, "ratio": round(v / r, 3) if r else None,
                              "better": "higher" if _HIGHER_BETTER[k] else "lower"}
        report[tool] = {"figures": figures, "ours_output": ours[tool]["output"], "reference_output": ref[tool]["output"]}
    TOOLS_JSON.parent.mkdir(parents=True, exist_ok=True)
    TOOLS_JSON.write_text(json.dumps(report, indent=1) + "\n")


def test_describe_producers(brokers: Brokers) -> None:
    """kafka-transactions.sh describe-producers: DescribeProducers (61) after idempotent produces."""
    topic = "tools-producers"

    def scenario(t: Target) -> list[Run]:
        create_topic(t, topic, 2)
        p = Producer({"bootstrap.servers": t.bootstrap, "linger.ms": 0, "enable.idempotence": True, **QUIET})
        for i in range(3):  # three batches on partition 0: the last sequence is 2
            p.produce(topic, b"v%d" % i, partition=0, timestamp=BASE_TS + i)
            assert p.flush(30) == 0
        runs = [t.tool("kafka-transactions.sh", "describe-producers", "--topic", topic, "--partition", str(n)) for n in (0, 1)]
        return runs

    def rows(r: Run) -> list[list[str]]:
        return [line.split() for line in r.stdout.splitlines() if line.strip()]

    ours, ref = brokers.both(scenario)
    # Producer ids and the broker's clock differ by nature: the columns are compared, those two by shape.
    for o, r in zip(ours, ref, strict=True):
        assert o.returncode == r.returncode
        ro, rr = rows(o), rows(r)
        assert len(ro) == len(rr) and (not ro or ro[0] == rr[0]), (o.stdout, r.stdout)
        for a, b in zip(ro[1:], rr[1:], strict=True):
            assert a[1:4] + a[5:] == b[1:4] + b[5:], (a, b)
            assert a[0].isdigit() and b[0].isdigit()
    header, *producers = rows(ours[0])
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"]
    assert [row[1:4] + row[5:] for row in producers] == [["0", "-1", "2", "None"]]
    assert producers[0][4] == str(BASE_TS + 2)  # the last batch's (max) timestamp
    assert rows(ours[1])[1:] == []  # partition 1: no producer wrote there


def test_describe_producers_requests(brokers: Brokers) -> None:
    """DescribeProducers (61) error answers, field by field: unknown topic, invalid name, unknown
    partition of a known topic, and a partition no producer wrote to."""
    topic = "tools-dp-raw"

    def scenario(t: Target) -> dict[str, Any]:
        create_topic(t, topic, 1)
        request = {"topics": [{"name": topic, "partition_indexes": [0, 5]},
                              {"name": "tools-dp-none", "partition_indexes": [0, 1]},
                              {"name": "bad name", "partition_indexes": [0]}]}
        # Kafka's Metadata can show the new leader a moment before its ReplicaManager leads the
        # partition (NOT_LEADER_OR_FOLLOWER meanwhile): ask again, for a bounded time.
        deadline = time.monotonic() + 15
        while True:
            answer = _raw(t, 61, 0, request)
            if answer["topics"][0]["partitions"][0]["error_code"] != 6 or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)

    ours, ref = brokers.both(scenario)
    assert ours == ref
    assert [[(p["partition_index"], p["error_code"]) for p in t["partitions"]] for t in ours["topics"]] == [
        [(0, 0), (5, 3)], [(0, 3), (1, 3)], [(0, 17)]]
