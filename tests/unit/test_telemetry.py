"""server/telemetry/: subscription validation (Kafka's messages), the subscription id (checked
against Kafka 4.3.1's own Crc32C / Uuid.hashCode / HashSet.toString by a Java run), client
instances' timing rules, and the OTLP reader."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from kafka_sidecar.protocol import compression
from kafka_sidecar.server.telemetry import subscriptions as subs
from kafka_sidecar.server.telemetry.manager import (
    TELEMETRY_TOO_LARGE,
    THROTTLING_QUOTA_EXCEEDED,
    UNKNOWN_SUBSCRIPTION_ID,
    ClientMetricsManager,
    compute_subscription_id,
)
from kafka_sidecar.server.telemetry.otlp import (
    DataPoint,
    OtlpError,
    decode_metrics_data,
    encode_gauge_metrics_data,
    fields,
)

UID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_subscription_id_is_kafkas() -> None:
    # Kafka 4.3.1's ClientMetricsManager.computeSubscriptionId gave these for UID (run in Java).
    names = ["org.apache.kafka.producer.", "zz", "org.apache.kafka.consumer.", "x.y", "a.b"]
    assert compute_subscription_id(names, 1000, UID) == -520049081
    assert compute_subscription_id([], 300000, UID) == -725132322


@pytest.mark.parametrize(("name", "props", "code", "message"), [
    ("", {}, 42, "Subscription name can't be empty"),
    ("s", {"foo": "1"}, 42, "Unknown client metrics configuration: foo"),
    ("s", {"interval.ms": "99"}, 42, "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "abc"}, 40, "Invalid value abc for configuration interval.ms: Not a number of type INT"),
    ("s", {"metrics": "a,,b"}, 40, "Configuration 'metrics' values must not be empty."),
    ("s", {"match": "client_id"}, 40, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_id=a=b"}, 40, "Illegal client matching pattern: client_id=a=b"),
    ("s", {"match": "client_name=a"}, 40, "Illegal client matching pattern: client_name=a"),
    ("s", {"match": "client_id=a["}, 40, "Illegal client matching pattern: client_id=a["),
])
def test_validation_messages(name: str, props: dict[str, str], code: int, message: str) -> None:
    with pytest.raises(subs.SubscriptionError) as e:
        subs.validate(name, props)
    assert (e.value.code, e.value.message) == (code, message)


def test_subscriptions_persist_and_append_is_refused(tmp_path: Path) -> None:
    store = subs.ClientMetricsSubscriptions(tmp_path)
    props = store.prepare("s", [("metrics", 0, "a."), ("interval.ms", 0, "1000")], incremental=True)
    snapshot = store.apply("s", props)
    assert snapshot is not None and store.version == 1
    store.write(snapshot)
    assert store.apply("s", props) is None  # unchanged: no write, same version
    with pytest.raises(subs.SubscriptionError, match="Can't APPEND to key metrics because its type is not LIST."):
        store.prepare("s", [("metrics", 2, "b.")], incremental=True)
    again = subs.ClientMetricsSubscriptions(tmp_path)
    assert again.configs == {"s": {"metrics": "a.", "interval.ms": "1000"}}
    assert again.infos["s"].interval_ms == 1000


def _manager(tmp_path: Path, clock: list[int]) -> ClientMetricsManager:
    store = subs.ClientMetricsSubscriptions(tmp_path)
    store.apply("s", {"metrics": "a.", "interval.ms": "1000", "match": "client_id=c.*"})
    return ClientMetricsManager(store, 1000, clock=lambda: clock[0])


def _push(mgr: ClientMetricsManager, cid: uuid.UUID, sid: int, metrics: bytes = b"", terminating: bool = False) -> int:
    req = SimpleNamespace(client_instance_id=cid, subscription_id=sid, terminating=terminating, compression_type=0, metrics=metrics)
    return mgr.push_telemetry(req, {"client_id": "c1"}, "c1")


def test_push_timing_and_errors(tmp_path: Path) -> None:
    clock = [10_000]
    mgr = _manager(tmp_path, clock)
    got = mgr.get_telemetry_subscriptions(None, {"client_id": "c1"})
    cid, sid = got["client_instance_id"], got["subscription_id"]
    assert (got["requested_metrics"], got["push_interval"]) == (["a."], 1000)
    assert sid == compute_subscription_id(["a."], 1000, cid)
    payload = encode_gauge_metrics_data([DataPoint("a.b", (), 1.0)])
    assert _push(mgr, cid, sid, payload) == 0  # right after the get
    assert _push(mgr, cid, sid, payload) == THROTTLING_QUOTA_EXCEEDED
    clock[0] += 1000
    assert _push(mgr, cid, sid + 1, payload) == UNKNOWN_SUBSCRIPTION_ID
    clock[0] += 1000
    assert _push(mgr, cid, sid, b"x" * 1001) == TELEMETRY_TOO_LARGE
    assert mgr.pushed.values == {(str(cid), "a.b", ()): ("c1", 1.0)}
    # Expiry (max(60 s, 3 intervals) after the last request) forgets the instance and its series.
    clock[0] += 60_001
    mgr.expire()
    assert mgr.instances == {} and mgr.pushed.values == {}


def test_pushed_series_are_capped(tmp_path: Path) -> None:
    clock = [10_000]
    mgr = _manager(tmp_path, clock)
    mgr.pushed.max_series = 3
    got = mgr.get_telemetry_subscriptions(None, {"client_id": "c1"})
    points = [DataPoint(f"a.m{i}", (), float(i)) for i in range(5)]
    assert _push(mgr, got["client_instance_id"], got["subscription_id"], encode_gauge_metrics_data(points)) == 0
    assert len(mgr.pushed.values) == 3 and mgr.pushed.dropped == 2


def test_otlp_reader() -> None:
    points = [DataPoint("m.one", (("k", "v"),), -2.5), DataPoint("m.two", (), 7.0)]
    data = encode_gauge_metrics_data(points)
    assert decode_metrics_data(data) == points
    assert decode_metrics_data(compression.decompress(compression.ZSTD, compression.compress(compression.ZSTD, data))) == points
    assert decode_metrics_data(b"") == []
    for bad in (b"\x0a\x05\x12", b"\x0b", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x00\x00"):
        with pytest.raises(OtlpError):
            decode_metrics_data(bad)
    assert list(fields(b"\x08\x96\x01")) == [(1, 0, 150)]


def test_otlp_sum_int_and_histogram() -> None:
    # Sum (7) with an as_int (6) point and a histogram (9) with count (4) and sum (5).
    int_point = b"\x31" + (-3 % (1 << 64)).to_bytes(8, "little")
    sum_metric = b"\x0a\x01s" + b"\x3a" + bytes([len(int_point) + 2]) + b"\x0a" + bytes([len(int_point)]) + int_point
    hist_point = b"\x21" + (5).to_bytes(8, "little") + b"\x29" + bytes.fromhex("0000000000002440")  # count 5, sum 10.0
    hist_metric = b"\x0a\x01h" + b"\x4a" + bytes([len(hist_point) + 2]) + b"\x0a" + bytes([len(hist_point)]) + hist_point
    scope = b"".join(b"\x12" + bytes([len(m)]) + m for m in (sum_metric, hist_metric))
    data = b"\x0a" + bytes([len(scope) + 2]) + b"\x12" + bytes([len(scope)]) + scope
    assert decode_metrics_data(data) == [DataPoint("s", (), -3.0), DataPoint("h.count", (), 5.0), DataPoint("h.sum", (), 10.0)]
