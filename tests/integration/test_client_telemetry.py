"""KIP-714 client telemetry over TCP against a kafka-sidecar process (no reference needed; the
conformance suite's test_client_metrics.py compares the subscriptions with Kafka 4.3.1):

- a real client (confluent-kafka / librdkafka, ``enable.metrics.push`` on by default) matched by a
  subscription pushes its metrics, and they appear on the Prometheus /metrics endpoint;
- subscriptions survive a restart (kept in the data dir);
- GetTelemetrySubscriptions and PushTelemetry answer Kafka's errors for bad pushes.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_sidecar.protocol import compression
from kafka_sidecar.server.telemetry.otlp import DataPoint, encode_gauge_metrics_data

from tests.conformance.wire import Wire
from tests.support import (
    _LISTENING,
    SidecarProcess,
    free_port,
    kafka_bin,
    kafka_tool_missing,
    sidecar_command,
    wait_until,
)

CLIENT_METRICS, DESCRIBE_CONFIGS = 16, 32
GET_TELEMETRY, PUSH_TELEMETRY = 71, 72
SET, DELETE = 0, 1
INVALID_REQUEST, UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD, THROTTLING_QUOTA_EXCEEDED = 42, 76, 87, 89
UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE = 117, 118
MAX_BYTES = 2000


class MetricsSidecar:
    """kafka-sidecar serve with --metrics-port (the real /metrics endpoint)."""

    def __init__(self, data_dir: Path, overrides: dict[str, str]) -> None:
        self.metrics_port = free_port()
        cmd = [*sidecar_command(), "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
               "--metrics-port", str(self.metrics_port)]
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self.log = open(data_dir.parent / "server.log", "a")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = _LISTENING.search(self.proc.stdout.readline())
            if m:
                self.bootstrap = f"127.0.0.1:{m.group(2)}"
                return
        raise RuntimeError("kafka-sidecar did not start")

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsSidecar]:
    s = MetricsSidecar(tmp_path_factory.mktemp("telemetry") / "data", {"telemetry.max.bytes": str(MAX_BYTES)})
    try:
        yield s
    finally:
        s.stop()


def _subscribe(w: Wire, name: str, metrics: str, interval_ms: int, match: str) -> None:
    r = w.incremental_alter_configs(CLIENT_METRICS, name, [("metrics", SET, metrics), ("interval.ms", SET, str(interval_ms)),
                                                           ("match", SET, match)])
    assert r == {"error": 0, "message": None}


def test_librdkafka_pushes_and_metrics_appear(server: MetricsSidecar) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with Wire(server.bootstrap) as w:
        _subscribe(w, "ck-producers", "org.apache.kafka.producer.", 500, "client_id=telemetry-ck")
        w.create_topic("telemetry-t", partitions=1)
    p = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap, "client.id": "telemetry-ck"})
    try:
        for i in range(10):
            p.produce("telemetry-t", f"m{i}".encode())
        p.flush(10)

        def pushed() -> bool:
            p.poll(0.1)
            return 'client_id="telemetry-ck"' in server.scrape()

        wait_until(pushed, timeout=30, interval=0.5, message="librdkafka's pushed metrics on /metrics")
        text = server.scrape()
        lines = [line for line in text.splitlines() if line.startswith("kafka_client_telemetry{") and "telemetry-ck" in line]
        assert all('metric="org.apache.kafka.producer.' in line for line in lines), lines[:5]
        assert re.search(r'client_instance_id="[0-9a-f-]{36}"', lines[0])
        assert re.search(r"kafka_server_client_metrics_instance_count [1-9]", text)
    finally:
        p.flush(5)


def test_subscriptions_survive_restart(tmp_path: Path) -> None:
    server = SidecarProcess(tmp_path / "data").start()
    try:
        with Wire(server.bootstrap) as w:
            _subscribe(w, "kept", "org.apache.kafka.consumer.", 2000, "client_software_name=apache-kafka-java")
            _subscribe(w, "gone", "*", 1000, "")
            assert w.incremental_alter_configs(CLIENT_METRICS, "gone", [("metrics", DELETE, None), ("interval.ms", DELETE, None),
                                                                        ("match", DELETE, None)])["error"] == 0
        server.restart()
        with Wire(server.bootstrap) as w:
            listed = w.call(74, 1, {"resource_types": [CLIENT_METRICS]})["config_resources"]
            assert [(r["resource_name"], r["resource_type"]) for r in listed] == [("kept", CLIENT_METRICS)]
            configs = {c["name"]: (c["value"], c["config_source"]) for c in w.describe_configs(CLIENT_METRICS, "kept")["configs"]}
            assert configs == {"interval.ms": ("2000", 7), "match": ("client_software_name=apache-kafka-java", 7),
                               "metrics": ("org.apache.kafka.consumer.", 7)}
    finally:
        server.stop()


def _get(w: Wire, instance: uuid.UUID | None = None) -> dict:
    return w.call(GET_TELEMETRY, 0, {"client_instance_id": instance})


def _push(w: Wire, instance: uuid.UUID | None, subscription_id: int, metrics: bytes, compression_type: int = 0,
          terminating: bool = False) -> int:
    return w.call(PUSH_TELEMETRY, 0, {"client_instance_id": instance, "subscription_id": subscription_id,
                                      "terminating": terminating, "compression_type": compression_type,
                                      "metrics": metrics})["error_code"]


PAYLOAD = encode_gauge_metrics_data([DataPoint("org.apache.kafka.raw.gauge", (("topic", "t1"),), 42.5)])


def test_subscription_and_push_errors(server: MetricsSidecar) -> None:
    with Wire(server.bootstrap, client_id="raw-telemetry") as w:
        _subscribe(w, "raw", "org.apache.kafka.raw.,org.apache.kafka.other.", 60000, "client_id=raw-.*")
        _subscribe(w, "raw-all", "*", 120000, "client_id=raw-telemetry,client_software_name=nomatch")
        first = _get(w)
        assert first["error_code"] == 0
        cid, sid = first["client_instance_id"], first["subscription_id"]
        assert cid is not None and cid != uuid.UUID(int=0)
        assert sorted(first["requested_metrics"]) == ["org.apache.kafka.other.", "org.apache.kafka.raw."]
        assert (first["push_interval"], first["telemetry_max_bytes"], first["delta_temporality"]) == (60000, MAX_BYTES, True)
        assert list(first["accepted_compression_types"]) == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
        # A second get within the push interval: throttled.
        assert _get(w, cid)["error_code"] == THROTTLING_QUOTA_EXCEEDED

        # Right after the get a push is accepted; a second one within the interval is throttled.
        assert _push(w, cid, sid, compression.compress(compression.GZIP, PAYLOAD), compression.GZIP) == 0
        assert 'metric="org.apache.kafka.raw.gauge"' in server.scrape()
        assert re.search(r'kafka_client_telemetry\{attributes="topic=t1",client_id="raw-telemetry",'
                         rf'client_instance_id="{cid}",metric="org.apache.kafka.raw.gauge"\}} 42.5', server.scrape())
        assert _push(w, cid, sid, PAYLOAD) == THROTTLING_QUOTA_EXCEEDED

        def fresh() -> tuple[uuid.UUID, int]:
            body = _get(w)
            assert body["error_code"] == 0
            return body["client_instance_id"], body["subscription_id"]

        i, s = fresh()
        assert _push(w, i, s + 1, PAYLOAD) == UNKNOWN_SUBSCRIPTION_ID
        i, s = fresh()
        assert _push(w, i, s, PAYLOAD, compression_type=9) == UNSUPPORTED_COMPRESSION_TYPE
        i, s = fresh()
        assert _push(w, i, s, b"\x00" * (MAX_BYTES + 1)) == TELEMETRY_TOO_LARGE
        i, s = fresh()
        assert _push(w, i, s, b"\x0a\x05\x12\xff") == INVALID_RECORD  # a length past the end
        i, s = fresh()
        assert _push(w, i, s, gzip.compress(b"not protobuf")[:10], compression.GZIP) == INVALID_RECORD
        i, s = fresh()
        # A terminating push is accepted even early; nothing after it.
        assert _push(w, i, s, PAYLOAD, terminating=True) == 0
        assert _push(w, i, s, PAYLOAD, terminating=True) == INVALID_REQUEST
        assert _push(w, uuid.UUID(int=0), 0, PAYLOAD) == INVALID_REQUEST
        # A client no subscription matches gets no metrics and the default interval (5 minutes).
    with Wire(server.bootstrap, client_id="other-client") as w:
        body = _get(w)
        assert (body["error_code"], list(body["requested_metrics"]), body["push_interval"]) == (0, [], 300000)


def test_subscription_change_reaches_known_instances(server: MetricsSidecar) -> None:
    """A changed subscription is answered at once, even within the push interval."""
    with Wire(server.bootstrap, client_id="change-me") as w:
        _subscribe(w, "change", "a.", 30000, "client_id=change-me")
        first = _get(w)
        _subscribe(w, "change", "b.", 20000, "client_id=change-me")
        second = _get(w, first["client_instance_id"])
        assert second["error_code"] == 0
        assert (list(second["requested_metrics"]), second["push_interval"]) == (["b."], 20000)
        assert second["subscription_id"] != first["subscription_id"]


def test_java_console_producer_pushes(server: MetricsSidecar) -> None:
    """Kafka 4.3.1's own Java client (kafka-console-producer.sh) pushes once a subscription matches
    its client software name."""
    missing = kafka_tool_missing("kafka-console-producer.sh")
    if missing:
        pytest.skip(missing)
    with Wire(server.bootstrap) as w:
        _subscribe(w, "java-producers", "org.apache.kafka.producer.", 500,
                   "client_software_name=apache-kafka-java,client_id=java-telemetry")
        w.create_topic("telemetry-java", partitions=1)
    proc = subprocess.Popen(
        [str(kafka_bin("kafka-console-producer.sh")), "--bootstrap-server", server.bootstrap, "--topic", "telemetry-java",
         "--command-property", "client.id=java-telemetry"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})
    try:
        assert proc.stdin is not None
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        wait_until(lambda: 'client_id="java-telemetry"' in server.scrape(), timeout=60, interval=0.5,
                   message="the Java producer's pushed metrics on /metrics")
        lines = [line for line in server.scrape().splitlines() if 'client_id="java-telemetry"' in line]
        assert all('metric="org.apache.kafka.producer.' in line for line in lines), lines[:5]
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
