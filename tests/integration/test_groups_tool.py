"""``kafka-sidecar groups`` prints every group type as Kafka's own tools do.

On each broker (ours, and the reference Apache Kafka 4.3.1) the same groups are made with real
clients: a KIP-848 consumer group (confluent-kafka, ``group.protocol=consumer``, still running),
a classic group with committed offsets and no members, a share group (Kafka's
kafka-console-share-consumer.sh, still running, ``share.auto.offset.reset=earliest``) and a
streams group (KIP-1071: Kafka 4.3.1's Streams word count, tests/tools/streams_app/WordCount.java,
still running, its input committed). Then for each question, Kafka's tool
(kafka-consumer-groups.sh / kafka-share-groups.sh / kafka-streams-groups.sh) and our ``groups``
command ask the same broker, and must print the same bytes. The reference half shows
our tool reads Kafka's broker as Kafka's tool does; the ours half, that our broker answers so
that both tools print it the same way.

Without Java or the Kafka distribution these tests skip, saying why.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.reference import ReferenceKafka, unavailable_reason
from tests.integration.test_kafka_tools import Tools
from tests.integration.test_streams_groups import APP, StreamsApp
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing, sidecar_command

TIMEOUT = 90
JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss1m -Djava.awt.headless=true"


def tool_env(tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "KAFKA_LOG4J_OPTS", "JMX_PORT", "KAFKA_DEBUG")}
    env.update(KAFKA_HEAP_OPTS="-Xmx256m", LOG_DIR=tmp, KAFKA_JVM_PERFORMANCE_OPTS=JVM, INCLUDE_TEST_JARS="true")
    return env


class Groups:
    """The three groups on one broker, kept alive while the questions are asked."""

    def __init__(self, bootstrap: str, tmp: str, app_classes: Path) -> None:
        self.bootstrap, self.tmp, self.app_classes = bootstrap, tmp, app_classes
        suffix = uuid.uuid4().hex[:6]
        self.topic, self.g848, self.classic, self.share = f"gt-{suffix}", f"g848-{suffix}", f"classic-{suffix}", f"share-{suffix}"
        self.streams = f"streams-{suffix}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._share_proc: subprocess.Popen[str] | None = None
        self._app: StreamsApp | None = None
        self.tools: Tools | None = None

    def start(self) -> Groups:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(self.topic, 2, 1)])[self.topic].result(30)
        p = Producer({"bootstrap.servers": self.bootstrap})
        for i in range(10):
            p.produce(self.topic, b"v%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        # classic: commit offsets and leave (Empty, no members)
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.classic, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe([self.topic])
        self._consume(c, 4)
        c.commit(asynchronous=False)
        c.close()
        # KIP-848: consume 6, commit, keep polling (Stable, one member)
        c848 = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.g848, "group.protocol": "consumer",
                         "client.id": "c848", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c848.subscribe([self.topic])
        self._consume(c848, 6)
        c848.commit(asynchronous=False)
        self._threads.append(threading.Thread(target=self._poll, args=(c848,), daemon=True))
        # share: start at the earliest offset, acknowledge everything
        cfg = ConfigResource(ResourceType.GROUP, self.share, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([cfg]).values():
            f.result(30)
        self._share_proc = subprocess.Popen(
            [str(kafka_bin("kafka-console-share-consumer.sh")), "--bootstrap-server", self.bootstrap, "--topic", self.topic,
             "--group", self.share], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=tool_env(self.tmp))
        for t in self._threads:
            t.start()
        assert self._share_proc.stdout is not None
        got = [self._share_proc.stdout.readline() for _ in range(10)]  # every record delivered once
        assert sorted(line.strip() for line in got) == sorted(f"v{i}" for i in range(10)), got
        return self

    def start_streams(self) -> None:
        """The streams group: the word count over the topic, until it has committed everything it read."""
        out = f"{self.topic}-counts"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})  # kept until the future resolves
        admin.create_topics([NewTopic(out, 2, 1)])[out].result(30)
        self._app = StreamsApp(self.app_classes, self.bootstrap, self.streams, (self.topic, out), Path(tempfile.mkdtemp(dir=self.tmp)))
        self._wait_streams_caught_up()

    def _wait_streams_caught_up(self) -> None:
        """Until every offset row of the streams group shows a lag of 0 with a committed offset on
        the input topic (the app commits every 200 ms), so both tools see one settled group."""
        deadline = time.monotonic() + 150
        rows: list[list[str]] = []
        while time.monotonic() < deadline:
            assert self._app is not None and not self._app.fatal(), self._app and self._app.lines
            run = subprocess.run([*sidecar_command(), "groups", "--bootstrap-server", self.bootstrap, "--describe",
                                  "--group", self.streams, "--verbose"], capture_output=True, text=True, timeout=TIMEOUT)
            rows = [line.split() for line in run.stdout.splitlines()[1:] if line.strip()]
            inputs = [r for r in rows if r[1] == self.topic]
            if len(inputs) == 2 and all(r[3] == "5" for r in inputs) and all(r[-1] == "0" for r in rows):
                return
            time.sleep(1)
        raise AssertionError(f"streams group {self.streams} never caught up: {rows} {self._app.lines if self._app else None}")

    @staticmethod
    def _consume(c: Consumer, n: int) -> None:
        got = 0
        deadline = time.monotonic() + 60
        while got < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        assert got >= n

    def _poll(self, c: Consumer) -> None:
        try:
            while not self._stop.is_set():
                c.poll(0.2)
        finally:
            c.close()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        if self._share_proc is not None:
            self._share_proc.kill()
            self._share_proc.wait()
        if self._app is not None:
            self._app.stop()


@pytest.fixture(scope="module")
def reference() -> Iterator[str]:
    why = unavailable_reason() or kafka_tool_missing("kafka-share-groups.sh")
    if why:
        pytest.skip(why)
    with ReferenceKafka() as k:
        yield k.bootstrap


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    why = kafka_tool_missing("kafka-share-groups.sh")
    if why:
        pytest.skip(why)
    server = SidecarProcess(tmp_path_factory.mktemp("groups-tool") / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    yield server.bootstrap
    server.stop()


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Tools:
    """Kafka's tools with test_kafka_tools' fast JVM settings and a class-data archive made by
    the first run (a tool start drops from several seconds to about one)."""
    return Tools(kafka_bin("kafka-consumer-groups.sh").parent.parent, tmp_path_factory.mktemp("group-tool-logs"))


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """WordCount.java compiled against the distribution's jars."""
    home = kafka_bin("kafka-streams-groups.sh").parent.parent
    out = tmp_path_factory.mktemp("streams-app")
    subprocess.run(["javac", "-d", str(out), "-cp", f"{home / 'libs'}/*", str(APP)], check=True, timeout=180)
    return out


@pytest.fixture(params=["ours", "reference"])
def groups(request: pytest.FixtureRequest, tmp_path, tools: Tools, app_classes: Path) -> Iterator[Groups]:
    g = Groups(request.getfixturevalue(request.param), str(tmp_path), app_classes).start()
    g.tools = tools
    if tools.archive is None:
        tools.ok_dumping_archive(tmp_path.parent / "groups-tools.jsa", "kafka-consumer-groups.sh", "--bootstrap-server", g.bootstrap,
                                 "--describe", "--group", g.g848)
    try:
        g.start_streams()  # after the class-data archive: one JVM fewer while it is dumped
        yield g
    finally:
        g.stop()


def both(g: Groups, script: str, *args: str) -> tuple[Any, subprocess.CompletedProcess[str]]:
    """Kafka's tool and ours, at once, against the same broker."""
    kinds = {"kafka-share-groups.sh": "share", "kafka-streams-groups.sh": "streams"}
    extra = ["--type", kinds[script]] if script in kinds and "--list" in args else []
    with ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(g.tools.run, script, "--bootstrap-server", g.bootstrap, *args)
        mine = subprocess.run([*sidecar_command(), "groups", "--bootstrap-server", g.bootstrap, *args, *extra],
                              capture_output=True, text=True, timeout=TIMEOUT)
        return theirs.result(), mine


QUESTIONS = [  # the verbose forms print every column of the plain ones, and more
    ("kafka-consumer-groups.sh", "--describe", "--group", "{g848}", "--verbose"),
    ("kafka-consumer-groups.sh", "--describe", "--group", "{g848}", "--members", "--verbose"),
    ("kafka-consumer-groups.sh", "--describe", "--group", "{g848}", "--state", "--verbose"),
    ("kafka-share-groups.sh", "--describe", "--group", "{share}", "--verbose"),
    ("kafka-share-groups.sh", "--describe", "--group", "{share}", "--members", "--verbose"),
    ("kafka-share-groups.sh", "--describe", "--group", "{share}", "--state", "--verbose"),
    ("kafka-streams-groups.sh", "--describe", "--group", "{streams}"),
    ("kafka-streams-groups.sh", "--describe", "--group", "{streams}", "--verbose"),
    ("kafka-streams-groups.sh", "--describe", "--group", "{streams}", "--members", "--verbose"),
    ("kafka-streams-groups.sh", "--describe", "--group", "{streams}", "--state", "--verbose"),
]


@pytest.mark.timeout(900)  # four groups (a Streams app among them) and twenty JVM tool runs per broker
def test_groups_print_as_kafkas_tools(groups: Groups) -> None:
    names = {"g848": groups.g848, "classic": groups.classic, "share": groups.share, "streams": groups.streams}
    for script, *args in QUESTIONS:
        args = [a.format(**names) for a in args]
        # The groups are live (the Streams app commits and writes its repartition topic): offsets
        # may move between the two tools' reads, so a differing answer is asked again (bounded).
        for _attempt in range(3):
            theirs, mine = both(groups, script, *args)
            if (mine.stdout, mine.stderr) == (theirs.stdout, theirs.stderr):
                break
            time.sleep(2)
        assert theirs.returncode == 0 and args[2] in theirs.stdout + theirs.stderr, theirs  # a real answer about the group
        assert (mine.stdout, mine.stderr) == (theirs.stdout, theirs.stderr), f"{script} {' '.join(args)}"
        assert mine.returncode == 0
    # The lists: Kafka's order is the broker's; ours too. Only this test's groups compared
    # (the module's brokers hold the other parametrization's groups as well).
    keep = set(names.values()) | {"GROUP"}

    def pick(out: str) -> list[str]:
        return sorted(line for line in out.splitlines() if line.split(" ")[0] in keep)

    for script, extra in (("kafka-consumer-groups.sh", ["--state"]), ("kafka-share-groups.sh", ["--state"]),
                          ("kafka-streams-groups.sh", ["--state"]), ("kafka-streams-groups.sh", [])):
        theirs, mine = both(groups, script, "--list", *extra)
        assert pick(mine.stdout) == pick(theirs.stdout) and len(pick(mine.stdout)) > len(extra), f"{script} --list {extra}"
