"""Kafka Streams with the streams rebalance protocol (KIP-1071, ``group.protocol=streams``) against
kafka-sidecar: Kafka 4.3.1's own Streams library runs a word count (tests/tools/streams_app/
WordCount.java: a repartition topic and a changelog topic the broker creates), and its counts must
be exact after a restart of the app and after a kill -9 of the broker (the group's records are
replayed from ``__consumer_offsets``)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.reference import find_java, find_kafka_home
from tests.support import SidecarProcess, kafka_bin

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

APP = Path(__file__).resolve().parents[1] / "tools" / "streams_app" / "WordCount.java"
JAVA = find_java() is not None and find_kafka_home() is not None
pytestmark = pytest.mark.skipif(not JAVA, reason="needs Java and Kafka 4.3.1 (KAFKA_HOME or make reference)")


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """WordCount.java compiled against the reference distribution's jars (one javac per session)."""
    home = find_kafka_home()
    assert home is not None
    out = tmp_path_factory.mktemp("streams-app")
    subprocess.run(["javac", "-d", str(out), "-cp", f"{home / 'libs'}/*", str(APP)], check=True, timeout=180)
    return out


class StreamsApp:
    """The word count JVM; its stdout lines collected on a thread."""

    def __init__(self, classes: Path, bootstrap: str, app_id: str, topics: tuple[str, str], state_dir: Path) -> None:
        home = find_kafka_home()
        assert home is not None
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", f"{home / 'libs'}/*:{classes}", "WordCount", bootstrap, app_id, *topics, str(state_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def fatal(self) -> list[str]:
        return [x for x in self.lines if x.startswith(("FATAL", "STATE ERROR"))]


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[SidecarProcess]:
    sc = SidecarProcess(tmp_path / "data").start()
    try:
        yield sc
    finally:
        if sc.proc is not None and sc.proc.poll() is None:
            sc.stop()


def _produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i, line in enumerate(lines):
        p.produce(topic, line.encode(), key=str(i).encode())
    assert p.flush(30) == 0


def _counts(bootstrap: str, topic: str, partitions: int = 3) -> dict[str, int]:
    """The latest count of each word in the output topic: every partition read to its high watermark."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "log_level": 3})
    out: dict[str, int] = {}
    try:
        ends = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        seen = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(seen[p] < ends[p] for p in seen):
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen[m.partition()] = m.offset() + 1
                out[m.key().decode()] = int.from_bytes(m.value(), "big", signed=True)
    finally:
        c.close()
    return out


def _wait_counts(bootstrap: str, topic: str, expected: Counter[str], app: StreamsApp, timeout: float = 90) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    got: dict[str, int] = {}
    while time.monotonic() < deadline:
        assert not app.fatal(), app.lines[-30:]
        got = _counts(bootstrap, topic)
        if got == dict(expected):
            return got
        time.sleep(1)
    raise AssertionError(f"counts {got} != {dict(expected)}; app: {app.lines[-30:]}")


def _words(lines: list[str]) -> Counter[str]:
    return Counter(w for line in lines for w in line.split())


def test_word_count_exact_over_app_restart_and_broker_kill(sidecar: SidecarProcess, app_classes: Path, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    src, dst, app_id = f"wc-in-{tag}", f"wc-out-{tag}", f"wc-{tag}"
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap, "log_level": 3})
    for f in admin.create_topics([NewTopic(src, 3, 1), NewTopic(dst, 3, 1)]).values():
        f.result(30)
    del admin
    vocabulary = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    batches = [[" ".join(vocabulary[(i * k) % 7] for k in range(1, 1 + i % 5 + 1)) for i in range(n, n + 150)] for n in (0, 150, 300)]
    expected: Counter[str] = Counter()

    # 1. the first run: the broker creates the repartition and changelog topics, counts are exact
    _produce(sidecar.bootstrap, src, batches[0])
    expected += _words(batches[0])
    app = StreamsApp(app_classes, sidecar.bootstrap, app_id, (src, dst), tmp_path / "state")
    try:
        _wait_counts(sidecar.bootstrap, dst, expected, app)
        assert "STATE RUNNING" in app.lines
        log = sidecar.log_text()
        assert f"created topic {app_id}-counts-changelog with 3 partitions" in log
        assert f"created topic {app_id}-counts-repartition with 3 partitions" in log
        # 2. the app leaves (SIGTERM: a clean close) and comes back with its state directory
        assert app.stop() == 143  # the JVM's exit after its shutdown hook closed Streams
        _produce(sidecar.bootstrap, src, batches[1])
        expected += _words(batches[1])
        app = StreamsApp(app_classes, sidecar.bootstrap, app_id, (src, dst), tmp_path / "state")
        _wait_counts(sidecar.bootstrap, dst, expected, app)
        # 3. kill -9 of the broker while the app runs; it restarts on the same port and data dir
        sidecar.kill()
        sidecar.start()
        _produce(sidecar.bootstrap, src, batches[2])
        expected += _words(batches[2])
        _wait_counts(sidecar.bootstrap, dst, expected, app)
    finally:
        rc = app.stop()
    assert rc == 143, app.lines[-30:]
    # the group (with its topology) came back from __consumer_offsets: never initialized twice
    assert sidecar.log_text().count(f"[GroupId {app_id}]") >= 1
    assert sidecar.log_text().count("Member initialized the topology") == 1
    # Kafka 4.3.1's kafka-dump-log.sh --offsets-decoder reads every streams record as its own (types 17, 19-23)
    sidecar.stop()
    logs = [str(p) for p in sorted((tmp_path / "data").glob("__consumer_offsets-*/*.log")) if p.stat().st_size]
    out = subprocess.run([str(kafka_bin("kafka-dump-log.sh")), "--offsets-decoder", "--files", ",".join(logs)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    assert out.returncode == 0, out.stderr[-2000:]
    text = "\n".join(line for line in out.stdout.splitlines() if app_id in line)
    for record_type in (17, 19, 20, 21, 22, 23):
        assert f'"type":"{record_type}"' in text, text[-3000:]
    assert "Unknown" not in text and "Error" not in text, text[-3000:]
    assert f'"sourceTopics":["{src}"]' in text and '"state":0,"activeTasks":[{"subtopologyId":"0"' in text, text[-3000:]
