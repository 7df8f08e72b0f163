"""Client quotas over real TCP: Kafka's own kafka-configs.sh sets and describes them, a
librdkafka producer over producer_byte_rate is slowed to about the quota and told so
(throttle_time_ms in its Produce answers), a consumer over consumer_byte_rate likewise, and
a restart keeps the quotas (sidecar-client-quotas.json)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.conformance.wire import Wire, batch
from tests.support import SidecarProcess, kafka_bin, kafka_tool_missing

# Kafka's default windows (quota.window.num=11 of 1 s): a rate is measured over at least 10 s,
# so the first 10 s worth of quota passes at once and only what is beyond it is slowed.
OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def server(tmp_path: Path):
    s = SidecarProcess(tmp_path / "data", OVERRIDES).start()
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.stop()


def _configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m",
           "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    return subprocess.run([str(kafka_bin("kafka-configs.sh")), "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _alter(w: Wire, entity: list[tuple[str, str | None]], ops: dict[str, float | None], validate_only: bool = False) -> list[dict]:
    body = w.call(49, 1, {"validate_only": validate_only, "entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()]}]})
    return body["entries"]


def _describe(w: Wire, components: list[tuple[str, int, str | None]], strict: bool = True) -> dict:
    return w.call(48, 1, {"strict": strict, "components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]})


def test_kafka_configs_sets_and_describes_quotas_and_a_restart_keeps_them(server):
    why = kafka_tool_missing("kafka-configs.sh")
    if why:
        pytest.skip(why)
    r = _configs(server.bootstrap, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
                 "--entity-type", "clients", "--entity-name", "app-1")
    assert r.returncode == 0 and "Completed updating config for client app-1." in r.stdout, r.stdout + r.stderr
    r = _configs(server.bootstrap, "--alter", "--add-config", "request_percentage=50", "--entity-type", "users",
                 "--entity-default")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _configs(server.bootstrap, "--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "users",
                 "--entity-name", "alice")
    assert r.returncode != 0 and "producer_byte_rate cannot be a fractional value." in r.stdout + r.stderr
    r = _configs(server.bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "app-1")
    assert "Quota configs for client-id 'app-1' are" in r.stdout, r.stdout + r.stderr
    assert "consumer_byte_rate=2097152.0" in r.stdout and "producer_byte_rate=1048576.0" in r.stdout

    server.restart()
    r = _configs(server.bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "app-1")
    assert "consumer_byte_rate=2097152.0" in r.stdout and "producer_byte_rate=1048576.0" in r.stdout, r.stdout + r.stderr
    r = _configs(server.bootstrap, "--describe", "--entity-type", "users", "--entity-default")
    assert "Quota configs for the default user-principal are request_percentage=50.0" in r.stdout, r.stdout + r.stderr
    r = _configs(server.bootstrap, "--alter", "--delete-config", "producer_byte_rate", "--entity-type", "clients",
                 "--entity-name", "app-1")
    assert r.returncode == 0, r.stdout + r.stderr
    with Wire(server.bootstrap) as w:
        found = _describe(w, [("client-id", 0, "app-1")])
        assert [e["values"] for e in found["entries"]] == [[{"key": "consumer_byte_rate", "value": 2097152.0}]]


def test_raw_alter_validate_only_and_filters(server):
    with Wire(server.bootstrap) as w:
        assert _alter(w, [("user", "bob")], {"producer_byte_rate": 1000.0}, validate_only=True)[0]["error_code"] == 0
        assert _describe(w, [])["entries"] == []
        (e,) = _alter(w, [("user", "bob"), ("client-id", None)], {"producer_byte_rate": 1000.0})
        assert e["error_code"] == 0
        assert [x["entity_type"] for x in e["entity"]] == ["client-id", "user"]
        (e,) = _alter(w, [("ip", "127.0.0.1")], {"producer_byte_rate": 1000.0})
        assert (e["error_code"], e["error_message"]) == (42, "Invalid configuration key producer_byte_rate")
        assert _alter(w, [("ip", None)], {"connection_creation_rate": 10.0})[0]["error_code"] == 0
        assert len(_describe(w, [("user", 0, "bob")], strict=False)["entries"]) == 1
        assert _describe(w, [("user", 0, "bob")], strict=True)["entries"] == []
        assert len(_describe(w, [("ip", 1, None)])["entries"]) == 1
        bad = _describe(w, [("ip", 2, None), ("user", 2, None)])
        assert bad["error_code"] == 42 and "IP filter component should not be used" in bad["error_message"]


def test_producer_slowed_to_producer_byte_rate_and_told_the_throttle(server):
    quota = 40_000  # bytes/s
    with Wire(server.bootstrap) as w:
        w.create_topic("q")
        assert _alter(w, [("client-id", "slow-producer")], {"producer_byte_rate": float(quota)})[0]["error_code"] == 0
    throttles: list[int] = []
    p = Producer({"bootstrap.servers": server.bootstrap, "client.id": "slow-producer", "linger.ms": 5,
                  "batch.size": 16384, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    value = b"x" * 1000
    total = 520_000
    started = time.monotonic()
    for _ in range(total // len(value)):
        while True:
            try:
                p.produce("q", value)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - started
    p.poll(0.5)
    # 520 KB at 40 KB/s: about 13 s counting the last answer's throttle, which flush() does not
    # wait for (unthrottled it takes 0.03 s).
    assert throttles and max(throttles) > 0, throttles
    assert elapsed > 6, elapsed
    assert total / elapsed < quota * 1.6, (total / elapsed, elapsed)

    # Another client id is not throttled.
    fast: list[int] = []
    p2 = Producer({"bootstrap.servers": server.bootstrap, "client.id": "fast-producer", "linger.ms": 5,
                   "throttle_cb": lambda ev: fast.append(ev.throttle_time)})
    started = time.monotonic()
    for _ in range(300):
        p2.produce("q", value)
    assert p2.flush(30) == 0
    assert time.monotonic() - started < 3 and not [t for t in fast if t > 0]


def test_consumer_slowed_to_consumer_byte_rate(server):
    quota = 80_000
    with Wire(server.bootstrap) as w:
        w.create_topic("c")
        for _ in range(100):
            assert w.produce("c", batch([b"y" * 1000] * 10))["error"] == 0  # 1 MB
        assert _alter(w, [("user", None), ("client-id", None)], {"consumer_byte_rate": float(quota)})[0]["error_code"] == 0
        # A raw fetch over the quota gets an empty answer carrying the throttle time.
        throttled = None
        for _ in range(10):
            body = w.call(1, 12, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": "c", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                          "last_fetched_epoch": -1, "log_start_offset": -1,
                                                          "partition_max_bytes": 50 << 20}]}]})
            if body["throttle_time"]:
                throttled = body
                break
        assert throttled is not None and throttled["responses"] == []
        assert _alter(w, [("user", None), ("client-id", None)], {"consumer_byte_rate": None})[0]["error_code"] == 0
        assert _alter(w, [("client-id", "slow-consumer")], {"consumer_byte_rate": float(quota)})[0]["error_code"] == 0
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g", "client.id": "slow-consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["c"])
    got = 0
    started = time.monotonic()
    try:
        while got < 1000 and time.monotonic() - started < 60:
            for m in c.consume(500, 1.0):
                if m.error() is None:
                    got += 1
    finally:
        c.close()
    elapsed = time.monotonic() - started
    assert got == 1000
    # 1 MB at 80 KB/s: about 12 s, where unthrottled it is a fraction of one.
    assert elapsed > 9, elapsed


def test_request_percentage_counts_every_api_and_throttles_metadata(server):
    """KafkaApis' sendResponseMaybeThrottle: a Metadata or ApiVersions request's handler time counts
    against request_percentage like a Produce's; over quota the answer carries throttle_time_ms
    and the connection is muted for that long after it."""
    with Wire(server.bootstrap) as w:
        w.create_topic("m")
        assert _alter(w, [("client-id", "busy")], {"request_percentage": 0.01})[0]["error_code"] == 0
    with Wire(server.bootstrap, client_id="busy") as w:
        throttled = None
        for _ in range(200):
            body = w.metadata(["m"])
            if body["throttle_time"]:
                throttled = body
                break
        # 0.01 % of a second is 1 us per second: a few Metadata answers exceed it over 10 s.
        assert throttled is not None and 0 < throttled["throttle_time"] <= 1000, throttled
        # Muted after the throttled answer: the next request is read only once the throttle passed.
        started = time.monotonic()
        api = w.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert time.monotonic() - started >= throttled["throttle_time"] / 1000 * 0.8
        assert api["throttle_time"] > 0
    # Another client id is not counted with it.
    with Wire(server.bootstrap, client_id="idle") as w:
        assert w.metadata(["m"])["throttle_time"] == 0


def test_quota_metrics_on_the_metrics_endpoint(tmp_path: Path):
    """/metrics shows the throttled client's request_percentage sensor with Kafka's names."""
    from tests.integration.test_client_telemetry import MetricsSidecar

    s = MetricsSidecar(tmp_path / "data", OVERRIDES)
    try:
        with Wire(s.bootstrap) as w:
            assert _alter(w, [("user", None), ("client-id", "busy")], {"request_percentage": 0.01})[0]["error_code"] == 0
        with Wire(s.bootstrap, client_id="busy") as w:
            assert any(w.metadata(None)["throttle_time"] for _ in range(200))
        text = s.scrape()
        assert 'kafka_server_request_request_time{client_id="busy",user="ANONYMOUS"}' in text, text[-2000:]
        line = next(x for x in text.splitlines() if x.startswith('kafka_server_request_throttle_time{client_id="busy"'))
        assert 0 < float(line.split()[-1]) <= 1000
        assert "# TYPE kafka_server_produce_byte_rate gauge" in text
    finally:
        s.stop()
