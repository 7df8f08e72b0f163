"""Operating kafka-sidecar as people run Kafka (issue 9, "Operate").

- Config: ``config --show`` prints every value with its source (default, server.properties,
  ``KAFKA_*`` environment in the apache/kafka image's convention, ``--override``); unknown
  names are warned about once; bad values stop the start with one clear line.
- Listeners: an IPv6 listener with real clients (librdkafka over ``[::1]``, kafka-python
  resolving ``localhost`` to ``::1``), two listeners each advertising its own endpoint, and
  ``advertised.listeners``.
- Metrics: ``/metrics`` scraped over HTTP before and after produce/fetch shows the numbers
  moving; ``/healthz`` and ``/readyz`` (not ready before start and while stopping).
- Logs: ``--log-format json`` gives JSON lines; a config change logs one line; start-up
  progress reporting.
- Tools: ``topics``, ``groups``, ``dump-log`` against our server and, over the wire, against
  the reference Apache Kafka (``bench/reference.py``; skipped when Java or the distribution is
  missing), with Kafka's own tools' output as the reference where they overlap; ``dump-log``
  on Apache Kafka's files (tests/data/kafka-4.0.0) and ``--verify``.

Every wait is bounded; everything listens on loopback only.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.support import GOLDEN, kafka_bin, sidecar_command, wait_until

RUN_TIMEOUT = 30.0
KAFKA_BIN = kafka_bin("kafka-dump-log.sh").parent
LOGDIR = GOLDEN / "kafka-4.0.0-logdir"
DUMPS = GOLDEN / "dump-log"
_ADDR = re.compile(r"(\[[^\]]+\]|[\w.-]+):(\d+)(?: \[(\w+)\])?")


def clean_env(**extra: str) -> dict[str, str]:
    """The test environment without KAFKA_* variables (they are broker config now), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    env.update(extra)
    return env


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sidecar_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env())


class Server:
    """``kafka-sidecar serve`` as a subprocess: its listener addresses and metrics URL."""

    def __init__(self, tmp: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.data_dir = tmp / f"data-{uuid.uuid4().hex[:6]}"
        self.stderr_path = tmp / f"server-{uuid.uuid4().hex[:6]}.log"
        self._stderr = open(self.stderr_path, "w")
        cmd = [*sidecar_command(), "serve", "--data-dir", str(self.data_dir), *args]
        self.proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env or clean_env())
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.metrics_url: str | None = None
        self.addresses: list[tuple[str, int, str | None]] = []
        deadline = time.monotonic() + RUN_TIMEOUT
        while not self.addresses:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line is None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"server did not start (exit {self.proc.poll()}):\n{self.stderr()}")
            if "metrics on " in line:
                self.metrics_url = line.split("metrics on ", 1)[1].strip()
            if "listening on " in line:
                where = line.split("listening on ", 1)[1].split(" (data dir", 1)[0]
                self.addresses = [(h.strip("[]"), int(p), n) for h, p, n in _ADDR.findall(where)]

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    @property
    def port(self) -> int:
        return self.addresses[0][1]

    @property
    def bootstrap(self) -> str:
        host, port, _ = self.addresses[0]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def url(self, path: str) -> str:
        assert self.metrics_url, "no --metrics-port"
        return self.metrics_url.rsplit("/", 1)[0] + path

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture
def servers(tmp_path):
    started: list[Server] = []

    def make(args: list[str], env: dict[str, str] | None = None) -> Server:
        s = Server(tmp_path, args, env)
        started.append(s)
        return s

    yield make
    for s in started:
        s.kill()


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = http_get(server.url("/metrics"))
    assert status == 200
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def produce(bootstrap: str, topic: str, n: int, partition: int | None = None, conf: dict | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(conf or {})})
    for i in range(n):
        if partition is None:
            p.produce(topic, key=b"k%d" % i, value=b"value-%d" % i)
        else:
            p.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=partition)
    assert p.flush(20) == 0


def consume(bootstrap: str, topic: str, n: int, group: str | None = None, timeout: float = 30, linger: float = 0.0, **conf) -> list[bytes]:
    """``n`` records from the start of ``topic``; then keeps polling ``linger`` seconds."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        end = time.monotonic() + linger
        while time.monotonic() < end:
            c.poll(0.1)
    finally:
        c.close()
    return got


def commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    """Commit offsets for a group without joining it; retried while the coordinator loads
    (a freshly started Kafka answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS at first)."""
    from confluent_kafka import KafkaException

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                c.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as e:
                if time.monotonic() > deadline or not e.args[0].retriable() and e.args[0].code() not in (14, 15, 16):
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def tool(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, cwd)


# ============================================================================ config


def test_config_show_lists_every_value_with_its_source(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nauto.create.topics.enable=false\nno.such.setting=1\nlog.retention.hours=24\n")
    env = clean_env(KAFKA_LOG_SEGMENT_BYTES="1048576", KAFKA_NUM_PARTITIONS="5", KAFKA_NO_SUCH_SETTING="2",
                    KAFKA_HEAP_OPTS="-Xmx1g", KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT")
    r = run_cli(["config", "--show", "--config", str(props), "--override", "log.cleaner.threads=2", "--json"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    rows = {e["name"]: (e["value"], e["source"]) for e in json.loads(r.stdout)}
    assert rows["num.partitions"] == ("5", "env KAFKA_NUM_PARTITIONS")  # env beats the file
    assert rows["auto.create.topics.enable"] == ("false", str(props))
    assert rows["log.retention.hours"] == ("24", str(props))
    assert rows["log.segment.bytes"] == ("1048576", "env KAFKA_LOG_SEGMENT_BYTES")
    assert rows["listener.security.protocol.map"][1] == "env KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"
    assert rows["log.cleaner.threads"] == ("2", "--override")
    assert rows["log.retention.check.interval.ms"] == ("300000", "default")
    assert rows["listeners"] == ("PLAINTEXT://localhost:9092", "default")
    assert "no.such.setting" not in rows and "heap.opts" not in rows
    # Unknown names: warned about once, even when given twice.
    assert r.stderr.count("ignoring unknown config no.such.setting") == 1, r.stderr

    # --override beats the environment; --listen and --data-dir show as their own sources.
    r = run_cli(["config", "--show", "--override", "num.partitions=7", "--listen", "[::1]:0", "--data-dir", "d"], tmp_path, env)
    lines = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines()[1:] if ln and not ln.startswith("#")}
    assert lines["num.partitions"][1:] == ["7", "--override"]
    assert lines["listeners"][1:] == ["PLAINTEXT://[::1]:0", "--listen"]
    assert lines["log.dirs"][1:] == ["d", "--data-dir"]
    assert r.stdout.splitlines()[0].split() == ["NAME", "VALUE", "SOURCE"]


def test_env_key_conversion_follows_the_apache_image():
    from kafka_sidecar.server.config import env_key_to_property, properties_from_env

    assert env_key_to_property("KAFKA_LOG_SEGMENT_BYTES") == "log.segment.bytes"
    assert env_key_to_property("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP") == "listener.security.protocol.map"
    assert env_key_to_property("KAFKA_SOME__UNDERSCORE___DASH") == "some_underscore-dash"
    got = properties_from_env({"KAFKA_NUM_PARTITIONS": "2", "KAFKA_HEAP_OPTS": "x", "KAFKA_OPTS": "y", "KAFKA_HOME": "/k", "PATH": "/bin"})
    assert got == {"num.partitions": ("KAFKA_NUM_PARTITIONS", "2")}


@pytest.mark.parametrize(("args", "env", "mentions"), [
    ([], {"KAFKA_NUM_PARTITIONS": "many"}, ["num.partitions", "env KAFKA_NUM_PARTITIONS"]),
    (["--override", "log.segment.bytes=-1"], {}, ["log.segment.bytes", "--override"]),
    (["--override", "listeners=PLAINTEXT://127.0.0.1:0,PLAINTEXT://[::1]:0"], {}, ["listeners", "different name"]),
    (["--override", "listeners=INTERNAL://127.0.0.1:0"], {}, ["No security protocol defined for listener INTERNAL"]),
    (["--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "advertised.listeners=OTHER://h:1"], {}, ["advertised.listeners"]),
    (["--override", "listeners=SSL://127.0.0.1:0"], {}, ["SSL://127.0.0.1:0", "no server certificate", "ssl.keystore.location"]),
])
def test_bad_config_is_one_clear_line_at_start(tmp_path, args, env, mentions):
    r = run_cli(["serve", "--data-dir", str(tmp_path / "d"), *args], tmp_path, clean_env(**env))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka-sidecar: error: "), r.stderr
    for m in mentions:
        assert m in lines[0], lines[0]
    assert "listening on" not in r.stdout


def test_environment_configures_the_server(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0"], clean_env(KAFKA_NUM_PARTITIONS="3", KAFKA_LOG_RETENTION_MS="123456"))
    r = tool(["topics", "--bootstrap-server", s.bootstrap, "--create", "--topic", "from-env"], tmp_path)
    assert r.returncode == 0 and r.stdout == "Created topic from-env.\n", r.stdout + r.stderr
    r = tool(["topics", "--bootstrap-server", s.bootstrap, "--describe", "--topic", "from-env"], tmp_path)
    assert "PartitionCount: 3\t" in r.stdout
    assert "retention.ms=123456" in r.stdout  # log.retention.ms: a static broker config, as Kafka shows it
    assert s.stop() == 0


# ============================================================================ listeners


def test_listener_parsing_follows_kafka():
    from kafka_sidecar.server.listeners import Endpoint, resolve_listeners
    from kafka_sidecar.storage.log_config import ConfigError

    got = resolve_listeners("PLAINTEXT://127.0.0.1:9092,internal://[::1]:9092,EXTERNAL://:9093",
                            "EXTERNAL://broker.example:19093", "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT")
    assert got.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9092), Endpoint("INTERNAL", "::1", 9092), Endpoint("EXTERNAL", "", 9093)]
    assert got.advertised == {"EXTERNAL": Endpoint("EXTERNAL", "broker.example", 19093)}
    for bad, words in [
        ("PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.2:9092", "different port"),  # same port, both IPv4
        ("PLAINTEXT://127.0.0.1", "Unable to parse"),
        ("PLAINTEXT://127.0.0.1:70000", "not in 0..65535"),
    ]:
        with pytest.raises(ConfigError, match=words):
            resolve_listeners(bad, None, "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT")
    with pytest.raises(ConfigError, match="nonroutable meta-address 0.0.0.0"):
        resolve_listeners("PLAINTEXT://:0", "PLAINTEXT://0.0.0.0:9092", None)


def test_ipv6_listener_with_librdkafka(tmp_path, servers):
    s = servers(["--override", "listeners=PLAINTEXT://[::1]:0"])
    assert s.addresses[0][0] == "::1"
    produce(s.bootstrap, "v6-topic", 20)
    assert sorted(consume(s.bootstrap, "v6-topic", 20)) == sorted(b"value-%d" % i for i in range(20))
    from kafka_sidecar.client import KafkaClient

    client = KafkaClient(s.bootstrap)
    try:
        (b,) = client.metadata(None).brokers
        assert (b.host, b.port) == ("::1", s.port)
    finally:
        client.close()
    assert s.stop() == 0


def test_localhost_serves_clients_that_resolve_it_to_ipv6(tmp_path, servers, monkeypatch):
    """The default listener host, ``localhost``, binds 127.0.0.1 and ::1 on one port: a client
    whose resolver says ``localhost`` is ``::1`` (kafka-python here) connects."""
    s = servers(["--override", "listeners=PLAINTEXT://localhost:0"])
    assert s.addresses[0][0] == "localhost"
    for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as sock:
            sock.settimeout(5)
            sock.connect((addr, s.port))
    from kafka import KafkaConsumer, KafkaProducer

    real = socket.getaddrinfo
    resolved: list[str] = []

    def v6_localhost(host, port, *args, **kwargs):
        if host == "localhost":
            resolved.append(host)
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", int(port or 0), 0, 0))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", v6_localhost)
    p = KafkaProducer(bootstrap_servers=f"localhost:{s.port}", request_timeout_ms=10000)
    for i in range(5):
        p.send("via-localhost", b"v%d" % i)
    p.flush(20)
    p.close(5)
    c = KafkaConsumer("via-localhost", bootstrap_servers=f"localhost:{s.port}", auto_offset_reset="earliest", consumer_timeout_ms=10000)
    got = [m.value for _, m in zip(range(5), c, strict=False)]
    c.close()
    assert got == [b"v%d" % i for i in range(5)]
    assert resolved, "the client never resolved localhost"
    monkeypatch.undo()
    assert s.stop() == 0


def test_two_listeners_each_advertise_their_own_endpoint(tmp_path, servers):
    s = servers([
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://[::1]:0",
        "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "--override", "advertised.listeners=PLAINTEXT://kafka.example.invalid:19092",
    ])
    by_name = {n: (h, p) for h, p, n in s.addresses}
    assert set(by_name) == {"PLAINTEXT", "INTERNAL"} and by_name["INTERNAL"][0] == "::1"
    from kafka_sidecar.client import KafkaClient

    def advertised(host: str, port: int) -> tuple[str, int]:
        client = KafkaClient(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        try:
            (b,) = client.metadata(None).brokers
            return b.host, b.port
        finally:
            client.close()

    assert advertised(*by_name["PLAINTEXT"]) == ("kafka.example.invalid", 19092)
    assert advertised(*by_name["INTERNAL"]) == by_name["INTERNAL"]
    internal = f"[::1]:{by_name['INTERNAL'][1]}"
    produce(internal, "two-listeners", 10)
    assert len(consume(internal, "two-listeners", 10)) == 10
    # FindCoordinator answers with the client's listener too (a group over INTERNAL works).
    assert len(consume(internal, "two-listeners", 10, group="g-internal")) == 10
    assert s.stop() == 0


# ============================================================================ metrics, health, readiness


def _value(m: dict, name: str, **labels: str) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_move_with_produce_and_fetch(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0", "--metrics-port", "0", "--override", "auto.create.topics.enable=false"])
    assert s.metrics_url and s.metrics_url.startswith("http://127.0.0.1:")
    assert http_get(s.url("/healthz")) == (200, "ok\n")
    assert http_get(s.url("/readyz")) == (200, "ready\n")
    assert http_get(s.url("/nope"))[0] == 404
    r = tool(["topics", "--bootstrap-server", s.bootstrap, "--create", "--topic", "m", "--partitions", "2"], tmp_path)
    assert r.returncode == 0, r.stdout
    before = scrape(s)
    assert _value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic="m") == 0
    produce(s.bootstrap, "m", 100, partition=0)
    got = consume(s.bootstrap, "m", 100, linger=1.5)
    assert len(got) == 100

    def settled():
        m = scrape(s)
        return m if _value(m, "kafka_server_brokertopicmetrics_messagesout_total", topic="m") >= 100 else None

    after = wait_until(settled, timeout=15, message="messages out to reach 100")
    assert _value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic="m") == 100
    bytes_in = _value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic="m")
    assert bytes_in > 100 * len(b"value-0")
    assert _value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic="m") >= bytes_in
    assert _value(after, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert _value(after, "kafka_network_requestmetrics_requests_total", request="Fetch") > \
        _value(before, "kafka_network_requestmetrics_requests_total", request="Fetch")
    assert _value(after, "kafka_network_requestmetrics_request_duration_seconds_count", request="Produce") >= 1
    assert _value(after, "kafka_network_requestmetrics_request_duration_seconds_bucket", request="Produce", le="+Inf") >= 1
    assert _value(after, "kafka_log_log_end_offset", topic="m", partition="0") == 100
    assert _value(after, "kafka_log_log_start_offset", topic="m", partition="0") == 0
    assert _value(after, "kafka_log_log_size_bytes", topic="m", partition="0") == bytes_in
    assert _value(after, "kafka_log_log_segments", topic="m", partition="1") == 1
    assert ("kafka_cluster_partition_underminisr", (("partition", "0"), ("topic", "m"))) in after
    assert _value(after, "kafka_cluster_partition_underminisr", topic="m", partition="0") == 0
    assert _value(after, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert ("kafka_server_fetchsessioncache_numincrementalfetchsessions", ()) in after
    assert ("kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total", ()) in after
    assert _value(after, "kafka_server_socketserver_connections_opened_total", listener="PLAINTEXT") >= 2
    assert ("kafka_log_logcleaner_cleanings_total", ()) in after
    assert ("kafka_log_logmanager_retention_rounds_total", ()) in after
    assert _value(after, "kafka_sidecar_ready") == 1
    # An error answer is counted per API and error name.
    from kafka_sidecar.client import KafkaClient

    client = KafkaClient(s.bootstrap)
    try:
        client.metadata(["no-such-topic"])
    finally:
        client.close()
    m = scrape(s)
    assert _value(m, "kafka_network_requestmetrics_errors_total", request="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION") >= 1
    assert _value(m, "kafka_server_socketserver_connections", listener="PLAINTEXT") >= 0
    assert s.stop() == 0


def test_readiness_follows_the_broker_lifecycle(tmp_path):
    """/readyz is 503 before the logs are loaded and the listener accepts, 200 then, 503 again
    once shutting down; /healthz is 200 throughout."""
    from kafka_sidecar.server.broker import Broker
    from kafka_sidecar.server.config import BrokerConfig
    from kafka_sidecar.server.metrics import MetricsServer

    async def scenario() -> list[tuple[int, str]]:
        broker = Broker(BrokerConfig.load(), tmp_path / "data", "127.0.0.1", 0)
        ms = MetricsServer(broker, "127.0.0.1", 0)
        await ms.start()
        loop = asyncio.get_running_loop()

        async def get(path: str) -> tuple[int, str]:
            return await loop.run_in_executor(None, http_get, f"http://127.0.0.1:{ms.port}{path}")

        seen = [await get("/readyz"), await get("/healthz")]
        await broker.start()
        seen.append(await get("/readyz"))
        stopping = asyncio.create_task(broker.stop())
        await asyncio.sleep(0)
        seen.append(await get("/readyz"))
        await stopping
        await ms.stop()
        return seen

    seen = asyncio.run(scenario())
    assert seen[0][0] == 503 and seen[0][1].startswith("not ready: "), seen
    assert seen[1] == (200, "ok\n")
    assert seen[2] == (200, "ready\n")
    assert seen[3][0] == 503 and "shutting down" in seen[3][1]


def test_metrics_port_conflict_is_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = run_cli(["serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "--metrics-port", str(port)], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("kafka-sidecar: error: cannot serve metrics on 127.0.0.1:")


# ============================================================================ logs


def test_json_logs_and_one_line_per_config_change(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0", "--log-format", "json"])
    r = tool(["topics", "--bootstrap-server", s.bootstrap, "--create", "--topic", "j"], tmp_path)
    assert r.returncode == 0
    r = tool(["topics", "--bootstrap-server", s.bootstrap, "--alter", "--topic", "j", "--config", "retention.ms=60000"], tmp_path)
    assert r.stdout == "Completed updating config for topic j.\n", r.stdout
    wait_until(lambda: "configs are now" in s.stderr(), timeout=10, message="config change log line")
    assert s.stop() == 0
    records = [json.loads(line) for line in s.stderr().splitlines() if line.strip()]
    assert records and all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    messages = [r["message"] for r in records]
    assert any(m.startswith("loaded 0 partitions") for m in messages)
    changes = [m for m in messages if "configs are now" in m]
    assert changes == ["topic j configs are now {'retention.ms': 60000}"], changes
    assert any("created topic j" in m for m in messages)


def test_progress_reports_only_slow_work():
    import logging

    from kafka_sidecar.server.logging_setup import Progress

    # Fast work: nothing at all.
    out = io.StringIO()
    p = Progress("loading logs", 10, stream=out, tty=True, delay=60)
    for i in range(10):
        p.update(i + 1)
    p.finish()
    assert out.getvalue() == ""
    # On a terminal: a bar redrawn in place, cleared at the end.
    out = io.StringIO()
    p = Progress("loading logs", 4, stream=out, tty=True, delay=0)
    p.update(1)
    p.finish()
    assert out.getvalue().startswith("\rloading logs [#######") and "1/4 partitions (25%)" in out.getvalue()
    # Not a terminal: periodic log lines.
    records: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test-progress")
    logger.addHandler(Catch())
    logger.setLevel(logging.INFO)
    p = Progress("loading logs", 200, stream=io.StringIO(), tty=False, delay=0, interval=0, logger=logger)
    p.update(50)
    p.update(200)
    assert records[0].startswith("loading logs: 50/200 partitions (25%)")
    assert records[-1].startswith("loading logs: 200/200 partitions (100%)")


def test_slow_startup_reports_progress(tmp_path, monkeypatch):
    """Loading many partitions: progress lines ("loading logs: N/M partitions") while it lasts and
    the final figure (the delay is set to 0 here; it is 1 s normally), and /readyz says how far."""
    import logging

    from kafka_sidecar.server import broker as broker_module
    from kafka_sidecar.server.broker import Broker
    from kafka_sidecar.server.config import BrokerConfig

    data = tmp_path / "data"
    data.mkdir()
    for t in range(40):
        for part in range(25):
            (data / f"bulk{t}-{part}").mkdir()
    monkeypatch.setattr(broker_module, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(broker_module, "PROGRESS_INTERVAL_S", 0.0)
    lines: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Catch()
    logging.getLogger("kafka_sidecar.startup").addHandler(handler)
    logging.getLogger("kafka_sidecar.startup").setLevel(logging.INFO)

    async def scenario() -> str:
        broker = Broker(BrokerConfig.load(), data, "127.0.0.1", 0)
        states = []
        task = asyncio.create_task(broker.start())
        while not task.done():
            states.append(broker.state)
            await asyncio.sleep(0.01)
        await task
        await broker.stop()
        return next((st for st in states if st.startswith("loading logs: ")), "")

    try:
        state = asyncio.run(scenario())
    finally:
        logging.getLogger("kafka_sidecar.startup").removeHandler(handler)
    progress = [ln for ln in lines if ln.startswith("loading logs: ")]
    assert progress, lines
    assert re.match(r"loading logs: \d+/1000 partitions \(\d+%\)", progress[0])
    assert progress[-1].startswith("loading logs: 1000/1000 partitions (100%)")
    assert re.fullmatch(r"loading logs: \d+/1000 partitions", state)


# ============================================================================ tools: topics and groups


def _topics_flow(bootstrap: str, tmp: Path, name: str) -> None:
    r = tool(["topics", "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", "2",
              "--replication-factor", "1", "--config", "retention.ms=86400000"], tmp)
    assert (r.returncode, r.stdout) == (0, f"Created topic {name}.\n"), r.stdout + r.stderr
    r = tool(["topics", "--bootstrap-server", bootstrap, "--create", "--topic", name], tmp)
    assert r.returncode == 1 and r.stdout.startswith(f"Error while executing topic command : Topic '{name}' already exists."), r.stdout
    r = tool(["topics", "--bootstrap-server", bootstrap, "--create", "--topic", name, "--if-not-exists"], tmp)
    assert r.returncode == 0 and r.stdout == ""
    r = tool(["topics", "--bootstrap-server", bootstrap, "--list"], tmp)
    assert name in r.stdout.splitlines()
    r = tool(["topics", "--bootstrap-server", bootstrap, "--alter", "--topic", name, "--config", "segment.ms=3600000",
              "--delete-config", "retention.ms"], tmp)
    assert r.stdout == f"Completed updating config for topic {name}.\n", r.stdout
    r = tool(["topics", "--bootstrap-server", bootstrap, "--describe", "--topic", name], tmp)
    lines = r.stdout.splitlines()
    assert re.fullmatch(rf"Topic: {name}\tTopicId: [\w-]{{22}}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: .*", lines[0]), lines
    assert "segment.ms=3600000" in lines[0] and "retention.ms" not in lines[0]
    assert lines[1:] == [f"\tTopic: {name}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: " for p in (0, 1)]
    r = tool(["topics", "--bootstrap-server", bootstrap, "--alter", "--topic", name, "--partitions", "3"], tmp)
    assert (r.returncode, r.stdout) == (0, ""), r.stdout
    r = tool(["topics", "--bootstrap-server", bootstrap, "--describe", "--topic", name], tmp)
    assert "\tPartitionCount: 3\t" in r.stdout and f"\tTopic: {name}\tPartition: 2\t" in r.stdout
    r = tool(["topics", "--bootstrap-server", bootstrap, "--alter", "--topic", name, "--config", "retention.ms=abc"], tmp)
    assert r.returncode == 1 and "Invalid value abc for configuration retention.ms" in r.stdout
    r = tool(["topics", "--bootstrap-server", bootstrap, "--delete", "--topic", name], tmp)
    assert r.returncode == 0, r.stdout

    def gone():
        return name not in tool(["topics", "--bootstrap-server", bootstrap, "--list"], tmp).stdout.splitlines()

    wait_until(gone, timeout=20, interval=0.5, message="topic deleted")
    r = tool(["topics", "--bootstrap-server", bootstrap, "--describe", "--topic", name], tmp)
    assert (r.returncode, r.stdout) == (1, f"Error while executing topic command : Topic '{name}' does not exist as expected\n")


def _groups_flow(bootstrap: str, tmp: Path, topic: str, group: str) -> None:
    r = tool(["topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "2"], tmp)
    assert r.returncode == 0, r.stdout
    produce(bootstrap, topic, 10, partition=0)
    produce(bootstrap, topic, 4, partition=1)
    commit(bootstrap, group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)])
    r = tool(["groups", "--bootstrap-server", bootstrap, "--list"], tmp)
    assert group in r.stdout.splitlines(), r.stdout
    r = tool(["groups", "--bootstrap-server", bootstrap, "--describe", "--group", group], tmp)
    assert r.returncode == 0
    assert r.stdout.splitlines() == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID",
        f"{group:<15} {topic:<15} 0          3               10              7               -               -               -",
        f"{group:<15} {topic:<15} 1          4               4               0               -               -               -",
    ], r.stdout
    assert f"Consumer group '{group}' has no active members." in r.stderr
    # Dry run by default, then --execute.
    r = tool(["groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest"], tmp)
    assert f"{group:<30} {topic:<30} {'0':<10} {'0':<15}" in r.stdout.splitlines(), r.stdout
    r = tool(["groups", "--bootstrap-server", bootstrap, "--describe", "--group", group], tmp)
    assert " 0          3 " in r.stdout  # unchanged: dry run
    r = tool(["groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--all-topics", "--to-offset", "2", "--execute"], tmp)
    assert r.returncode == 0, r.stdout
    assert [ln.split() for ln in r.stdout.splitlines()[2:]] == [[group, topic, "0", "2"], [group, topic, "1", "2"]]
    r = tool(["groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-latest", "--execute"], tmp)
    assert [ln.split() for ln in r.stdout.splitlines()[2:]] == [[group, topic, "0", "10"]]
    r = tool(["groups", "--bootstrap-server", bootstrap, "--describe", "--group", group], tmp)
    rows = [ln.split() for ln in r.stdout.splitlines()[2:]]
    assert [row[:6] for row in rows] == [[group, topic, "0", "10", "10", "0"], [group, topic, "1", "2", "4", "2"]]
    r = tool(["groups", "--bootstrap-server", bootstrap, "--describe", "--group", "no-such-group-" + group], tmp)
    assert r.returncode == 1 and "GroupIdNotFoundException" in r.stdout
    r = tool(["groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state"], tmp)
    assert r.stdout.splitlines()[2].split()[-2:] == ["Empty", "0"], r.stdout


def test_topics_tool_against_sidecar(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0"])
    _topics_flow(s.bootstrap, tmp_path, "tool-topic")
    assert s.stop() == 0


def test_groups_tool_against_sidecar(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0", "--override", "group.initial.rebalance.delay.ms=0"])
    _groups_flow(s.bootstrap, tmp_path, "gtopic", "tool-group")
    assert s.stop() == 0


def test_groups_tool_shows_active_members_and_refuses_to_reset_them(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0", "--override", "group.initial.rebalance.delay.ms=0"])
    produce(s.bootstrap, "active", 6)
    stop = threading.Event()
    assigned = threading.Event()

    def member() -> None:
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "live", "client.id": "live-client",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 100})
        c.subscribe(["active"], on_assign=lambda *_: assigned.set())
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            c.poll(0.2)
        c.close()

    t = threading.Thread(target=member, daemon=True)
    t.start()
    try:
        assert assigned.wait(30)

        def described():
            r = tool(["groups", "--bootstrap-server", s.bootstrap, "--describe", "--group", "live"], tmp_path)
            rows = [ln.split() for ln in r.stdout.splitlines()[2:]]
            return rows if rows and rows[0][3] == "6" else None

        rows = wait_until(described, timeout=30, interval=0.5, message="committed offsets of the live member")
        assert rows[0][:6] == ["live", "active", "0", "6", "6", "0"]
        assert rows[0][6].startswith("live-client-") and rows[0][7] == "/127.0.0.1" and rows[0][8] == "live-client"
        r = tool(["groups", "--bootstrap-server", s.bootstrap, "--describe", "--group", "live", "--members"], tmp_path)
        assert r.stdout.splitlines()[2].split()[-1] == "1", r.stdout
        r = tool(["groups", "--bootstrap-server", s.bootstrap, "--reset-offsets", "--group", "live", "--all-topics", "--to-earliest", "--execute"], tmp_path)
        assert "Error: Assignments can only be reset if the group 'live' is inactive, but the current state is Stable." in r.stdout
        assert r.returncode == 1
    finally:
        stop.set()
        t.join(30)
    assert s.stop() == 0


# ---- the same tools against Apache Kafka (bench/reference.py) -----------------------------------


@pytest.fixture(scope="module")
def reference():
    from bench.reference import ReferenceKafka, ReferenceUnavailable, unavailable_reason

    why = unavailable_reason()
    if why:
        pytest.skip(why)
    kafka = ReferenceKafka({"group.initial.rebalance.delay.ms": 0})
    try:
        kafka.start()
    except ReferenceUnavailable as e:
        pytest.skip(str(e))
    yield kafka
    kafka.stop()


@pytest.mark.reference
def test_topics_tool_against_reference_kafka(tmp_path, reference):
    _topics_flow(reference.bootstrap, tmp_path, "tool-topic-ref")


@pytest.mark.reference
def test_groups_tool_against_reference_kafka(tmp_path, reference):
    _groups_flow(reference.bootstrap, tmp_path, "gtopic-ref", "tool-group-ref")


@pytest.mark.reference
def test_tools_print_what_kafkas_tools_print(tmp_path, reference):
    """Same broker, same question: our tools and Kafka's print the same text."""
    b = reference.bootstrap
    assert tool(["topics", "--bootstrap-server", b, "--create", "--topic", "same", "--partitions", "3",
                 "--config", "cleanup.policy=compact"], tmp_path).returncode == 0
    produce(b, "same", 5, partition=1)
    commit(b, "same-group", [TopicPartition("same", 1, 2)])
    env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx256m")

    def kafka_tool(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(KAFKA_BIN / script), "--bootstrap-server", b, *args], capture_output=True, text=True, timeout=120, env=env)

    for args in (["--describe", "--topic", "same"], ["--list"]):
        theirs = kafka_tool("kafka-topics.sh", *args)
        ours = tool(["topics", "--bootstrap-server", b, *args], tmp_path)
        assert ours.stdout == theirs.stdout, (ours.stdout, theirs.stdout)
    for args in (["--describe", "--group", "same-group"], ["--list"], ["--list", "--state"]):
        theirs = kafka_tool("kafka-consumer-groups.sh", *args)
        ours = tool(["groups", "--bootstrap-server", b, *args], tmp_path)
        assert ours.stdout == theirs.stdout, (ours.stdout, theirs.stdout)


# ============================================================================ dump-log


def _dump(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["dump-log", *args], cwd)


@pytest.mark.parametrize("base", ["00000000000000000000", "00000000000000000158", "00000000000000000267"])
def test_dump_log_matches_kafka_on_kafkas_files(base):
    """Apache Kafka 4.0's own files (tests/data/kafka-4.0.0): our output equals kafka-dump-log.sh's."""
    part = LOGDIR / "golden-0"
    cases = {
        f"{base}.log.batches.txt": ["--files", f"{base}.log"],
        f"{base}.log.print-data-log.deep-iteration.txt": ["--files", f"{base}.log", "--print-data-log", "--deep-iteration"],
        f"{base}.index.txt": ["--files", f"{base}.index"],
        f"{base}.index.verify-index-only.txt": ["--files", f"{base}.index", "--verify-index-only"],
        f"{base}.timeindex.txt": ["--files", f"{base}.timeindex"],
        f"{base}.timeindex.verify-index-only.txt": ["--files", f"{base}.timeindex", "--verify-index-only"],
    }
    if (part / f"{base}.snapshot").exists():
        cases[f"{base}.snapshot.txt"] = ["--files", f"{base}.snapshot"]
    for golden, args in cases.items():
        r = _dump(args, part)
        assert r.returncode == 0, r.stderr
        assert r.stdout == (DUMPS / f"golden-0_{golden}").read_text(), golden
        assert r.stderr == ""


def test_dump_log_compacted_segment_reports_offset_gaps_like_kafka():
    part = LOGDIR / "golden-compact-0"
    for base in ("00000000000000000000", "00000000000000020013"):
        r = _dump(["--files", f"{base}.log", "--print-data-log", "--deep-iteration"], part)
        expected = (DUMPS / f"golden-compact-0_{base}.log.print-data-log.deep-iteration.txt").read_text()
        # The golden file holds stdout then stderr (Kafka ran it in another directory).
        out_part, _, err_part = expected.partition("Non-consecutive offsets in ")
        assert r.stdout == out_part
        if err_part:
            assert r.stderr.startswith("Non-consecutive offsets in ")
            assert r.stderr.splitlines()[1:] == err_part.splitlines()[1:]


def test_dump_log_verify_accepts_kafkas_logdir_and_catches_damage(tmp_path):
    r = _dump(["--verify", "--files", ",".join(str(LOGDIR / d) for d in ("golden-0", "golden-compact-0", "golden-del-0", "golden-del-compact-0"))], tmp_path)
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[-1].startswith("verified ") and r.stdout.splitlines()[-1].endswith("all OK")
    assert not [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED")]
    # Damage a copy: one flipped byte in a record (CRC), one index entry moved, a snapshot byte.
    part = tmp_path / "golden-0"
    shutil.copytree(LOGDIR / "golden-0", part)
    for f in part.iterdir():
        f.chmod(0o644)
    log = part / "00000000000000000158.log"
    data = bytearray(log.read_bytes())
    data[5000] ^= 0xFF
    log.write_bytes(bytes(data))
    index = part / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[8:16] = (5).to_bytes(4, "big") + (305).to_bytes(4, "big")  # entry 2: offset 5 at the 2nd batch (ends at 19)
    index.write_bytes(bytes(data))
    snap = part / "00000000000000000267.snapshot"
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0x01
    snap.write_bytes(bytes(data))
    r = _dump(["--verify", "--files", str(part)], tmp_path)
    assert r.returncode == 1
    failed = {ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("FAILED")}
    assert failed == {str(log), str(index), str(snap)}, r.stdout
    assert "CRC-32C mismatch" in r.stdout and "Snapshot is corrupt (CRC is no longer valid)" in r.stdout
    assert "entry offset 5 position 305: the batch there ends at offset 19" in r.stdout
    # Kafka's own mismatch report for the index, and isvalid: false for the damaged batch.
    r = _dump(["--files", str(index), "--verify-index-only"], tmp_path)
    assert f"Mismatches in :{index}" in r.stderr and "  Index offset: 5, log offset: 19" in r.stderr
    r = _dump(["--files", str(log)], tmp_path)
    assert "isvalid: false" in r.stdout


@pytest.mark.skipif(shutil.which("java") is None or not (KAFKA_BIN / "kafka-dump-log.sh").exists(), reason="needs java and kafka-dump-log.sh")
def test_dump_log_matches_kafka_on_our_files(tmp_path, servers):
    s = servers(["--listen", "127.0.0.1:0", "--override", "log.segment.bytes=20000"])
    produce(s.bootstrap, "ours", 300, conf={"compression.type": "lz4", "batch.size": 4000})
    produce(s.bootstrap, "ours", 3000, conf={"batch.size": 4000})
    assert s.stop() == 0
    part = s.data_dir / "ours-0"
    files = sorted(p.name for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex", ".snapshot"))
    assert len([f for f in files if f.endswith(".log")]) >= 2
    env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx256m")
    for args in (["--files", ",".join(files)], ["--files", ",".join(f for f in files if f.endswith(".log")), "--print-data-log"]):
        theirs = subprocess.run([str(KAFKA_BIN / "kafka-dump-log.sh"), *args], cwd=part, capture_output=True, text=True, timeout=120, env=env)
        ours = _dump(args, part)
        assert ours.stdout == theirs.stdout
    r = _dump(["--verify", "--files", str(part)], tmp_path)
    assert r.returncode == 0, r.stdout
