"""Client quotas without a socket: Kafka's sampled rate, throttle times, quota precedence, the
controller's validation and the describe filters (server/quotas)."""

from __future__ import annotations

import pytest
from kafka_sidecar.server.quotas import ClientQuotas, ClientQuotaStore, load_client_quotas
from kafka_sidecar.server.quotas.sensor import QuotaSensor, Rate
from kafka_sidecar.server.quotas.store import Alteration, QuotaError


def test_rate_measures_over_at_least_samples_minus_one_windows():
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    # One burst at t=0: measured over 10 full windows (10 s), not over 0 ms.
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)
    # Samples with no event for samples * window are purged.
    assert rate.measure(11_000) == 0.0


def test_throttle_time_is_kafkas_formula():
    # O = 20,000 B / 10 s = 2,000 B/s over T = 1,000 B/s: X = (O - T) / T * W = 10,000 ms.
    sensor = QuotaSensor(Rate(11, 1000), 1000.0)
    assert sensor.record(20_000, 0) == 10_000
    # Within quota: no throttle.
    assert QuotaSensor(Rate(11, 1000), 1000.0).record(5_000, 0) == 0
    # The request quota caps its throttle at one window.
    assert QuotaSensor(Rate(11, 1000), 1.0, max_throttle_ms=1000).record(500.0, 0) == 1000


def test_unrecord_takes_the_bytes_back():
    sensor = QuotaSensor(Rate(11, 1000), 1000.0)
    assert sensor.record(20_000, 0) > 0
    sensor.unrecord(20_000, 0)
    assert sensor.rate.measure(0) == 0.0


def _quotas(tmp_path, entries):
    store = ClientQuotaStore.empty(tmp_path)
    alts = [Alteration(list(e), [(k, v) for k, v in ops.items()]) for e, ops in entries]
    results, after = store.alter(alts, False, lambda h: False)
    assert all(err is None for _, err in results), results
    return ClientQuotas(ClientQuotaStore(store.path), 11, 1), after


def test_precedence_most_specific_quota_wins(tmp_path):
    q, after = _quotas(tmp_path, [
        ([("user", None)], {"producer_byte_rate": 1.0}),
        ([("user", None), ("client-id", None)], {"producer_byte_rate": 2.0}),
        ([("user", "alice")], {"producer_byte_rate": 3.0}),
        ([("user", "alice"), ("client-id", None)], {"producer_byte_rate": 4.0}),
        ([("user", "alice"), ("client-id", "c1")], {"producer_byte_rate": 5.0}),
        ([("client-id", "c9")], {"producer_byte_rate": 6.0}),
    ])
    q.apply(after)
    m = q.produce

    def limit(user, cid):
        return m.quota_limit(m.metric_tags(user, cid))

    assert limit("alice", "c1") == 5.0       # user + client-id
    assert limit("alice", "c2") == 4.0       # user + default client-id
    assert limit("bob", "c2") == 2.0         # default user + default client-id
    assert q.active and not q.fetch.enabled and not q.request.enabled


def test_user_quota_is_shared_by_the_users_clients(tmp_path):
    q, after = _quotas(tmp_path, [([("user", "alice")], {"producer_byte_rate": 1000.0})])
    q.apply(after)
    assert q.produce.sensor("alice", "a") is q.produce.sensor("alice", "b")
    assert q.produce.metric_tags("bob", "x") == ("", "x")
    assert q.produce.quota_limit(("", "x")) == float(2**63 - 1)


def test_no_quota_is_inactive_and_removal_disables(tmp_path):
    q = load_client_quotas(tmp_path)
    assert not q.active
    assert q.throttle_produce("User:ANONYMOUS", None, 10**9, 0, 1) == 0
    store = q.store
    results, after = store.alter([Alteration([("client-id", "c")], [("consumer_byte_rate", 10.0)])], False, lambda h: True)
    q.apply(after)
    assert q.active and q.fetch.enabled
    results, after = store.alter([Alteration([("client-id", "c")], [("consumer_byte_rate", None)])], False, lambda h: True)
    q.apply(after)
    assert not q.active and after == {}


@pytest.mark.parametrize(("components", "ops", "message"), [
    ([("user", "a")], [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    ([("user", "a")], [("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
    ([("user", "a")], [("connection_creation_rate", 1.0)], "Invalid configuration key connection_creation_rate"),
    ([("ip", "1.2.3.4")], [("connection_creation_rate", 3e9)], "Proposed value for connection_creation_rate is too large for an INT."),
    ([("ip", "1.2.3.4"), ("user", "a")], [("request_percentage", 1.0)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
    ([("group", "g")], [("producer_byte_rate", 1.0)], "Unhandled client quota entity type: group"),
    ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
    ([("user", "a")], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
     "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"),
])
def test_alter_validation_messages(tmp_path, components, ops, message):
    store = ClientQuotaStore.empty(tmp_path)
    results, after = store.alter([Alteration(components, ops)], False, lambda h: True)
    ((_, error),) = results
    assert error is not None and error.message == message and error.code == 42
    assert after == {}


def test_validate_only_changes_nothing_and_persistence_round_trips(tmp_path):
    store = ClientQuotaStore.empty(tmp_path)
    alt = Alteration([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)])
    results, after = store.alter([alt], True, lambda h: True)
    assert results[0][1] is None and after == {}
    results, after = store.alter([alt], False, lambda h: True)
    store.write(store.snapshot(after))
    loaded = ClientQuotaStore.load(tmp_path)
    assert loaded.quotas == after == {(("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}


def test_describe_filters(tmp_path):
    store = ClientQuotaStore.empty(tmp_path)
    _, store.quotas = store.alter([
        Alteration([("user", "alice")], [("producer_byte_rate", 1.0)]),
        Alteration([("user", "alice"), ("client-id", "c")], [("producer_byte_rate", 2.0)]),
        Alteration([("user", None)], [("producer_byte_rate", 3.0)]),
        Alteration([("ip", "1.2.3.4")], [("connection_creation_rate", 4.0)]),
    ], False, lambda h: True)

    def names(components, strict):
        return sorted(repr(e) for e, _ in store.describe(components, strict))

    assert len(names([], False)) == 4
    assert names([("user", 0, "alice")], True) == ["(('user', 'alice'),)"]
    assert len(names([("user", 0, "alice")], False)) == 2
    assert names([("user", 1, None)], False) == ["(('user', None),)"]
    assert len(names([("user", 2, None)], True)) == 2
    assert names([("ip", 2, None)], False) == ["(('ip', '1.2.3.4'),)"]
    with pytest.raises(QuotaError, match="IP filter component should not be used"):
        store.describe([("ip", 2, None), ("user", 2, None)], False)
    with pytest.raises(QuotaError, match="cannot appear more than once"):
        store.describe([("user", 2, None), ("user", 0, "a")], False)
    with pytest.raises(QuotaError) as e:
        store.describe([("group", 2, None)], False)
    assert e.value.code == 35


# --------------------------------------------------------------------------- Java HashMap order


def test_java_hashes_and_capacities():
    from kafka_sidecar.server.quotas.hashmap import capacity, entity_hash, string_hash

    assert string_hash("user") == 0x36EBCB and string_hash(None) == 0 and string_hash("") == 0
    # "\U0001F600".hashCode() in Java: two UTF-16 code units, 0xD83D * 31 + 0xDE00.
    assert string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    # ClientQuotaEntity.hashCode = 31 + sum(key.hashCode() ^ value.hashCode()).
    assert entity_hash([("client-id", None)]) == 31 + string_hash("client-id")
    # new HashMap<>(): 16 slots until 13 entries; new HashMap<>(0) grows 1, 2, 4, 8, 16.
    assert capacity(12) == 16 and capacity(13) == 32
    assert [capacity(n, 0) for n in (1, 2, 3, 4, 7)] == [2, 4, 4, 8, 16]
    assert capacity(2, initial=2) == 4


def test_alter_answers_and_stores_in_kafkas_hashmap_order(tmp_path):
    store = ClientQuotaStore.empty(tmp_path)
    results, after = store.alter([
        Alteration([("client-id", None)], [("producer_byte_rate", 10.0)]),
        Alteration([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0)]),
        Alteration([("ip", "10.0.0.5"), ("user", "e6")], [("connection_creation_rate", 1.0)]),
        Alteration([("user", "e7")], [("producer_byte_rate", 1.0), ("consumer_byte_rate", 2.0)]),
    ], False, lambda h: True)
    # As Kafka 4.3.1 answered: results in its HashMap's order, the request's entity map
    # (new HashMap<>(2), grown to 4 slots) putting user before ip.
    assert [e for e, _ in results] == [(("user", "e6"), ("ip", "10.0.0.5")), (("client-id", None),),
                                       (("ip", "10.0.0.1"),), (("user", "e7"),)]
    # Two entities of one bucket: Kafka 4.3.1 shows the later one of the request first; a new
    # entity's values in a map grown from 1 slot (consumer_byte_rate's bucket 0 before producer's 3).
    assert list(after) == [(("ip", "10.0.0.1"),), (("client-id", None),), (("user", "e7"),)]
    assert list(after[(("user", "e7"),)]) == ["consumer_byte_rate", "producer_byte_rate"]
    # The file keeps that order across a restart.
    store.write(store.snapshot(after))
    assert list(ClientQuotaStore.load(tmp_path).quotas) == list(after)


# --------------------------------------------------------------------------- broker configs


def test_quota_window_configs_are_kafkas_and_used_by_the_managers(tmp_path):
    from kafka_sidecar.server.config import BrokerConfig, ConfigError

    defaults = BrokerConfig.load(overrides={})
    assert (defaults.get("quota.window.num"), defaults.get("quota.window.size.seconds")) == (11, 1)
    assert defaults.get("client.quota.callback.class") is None
    config = BrokerConfig.load(overrides={"quota.window.num": "5", "quota.window.size.seconds": "2"})
    quotas = ClientQuotas(ClientQuotaStore.empty(tmp_path), config.get("quota.window.num"), config.get("quota.window.size.seconds"))
    _, after = quotas.store.alter([Alteration([("client-id", "c")], [("request_percentage", 1.0)])], False, lambda h: True)
    quotas.apply(after)
    sensor = quotas.request.sensor("", "c")
    assert (sensor.rate.samples, sensor.rate.window_ms, sensor.max_throttle_ms) == (5, 2000, 2000)
    with pytest.raises(ConfigError, match=r"Invalid value 0 for configuration quota.window.num: Value must be at least 1"):
        BrokerConfig.load(overrides={"quota.window.num": "0"})
    # No Java class can be loaded: refused with the message Kafka gives for one it cannot find.
    with pytest.raises(ConfigError, match=r"Class com.example.Cb could not be found."):
        BrokerConfig.load(overrides={"client.quota.callback.class": "com.example.Cb"})


# --------------------------------------------------------------------------- metrics and expiry


def _request_quota(tmp_path, percentage: float) -> ClientQuotas:
    quotas = ClientQuotas(ClientQuotaStore.empty(tmp_path))
    _, after = quotas.store.alter([Alteration([("client-id", None)], [("request_percentage", percentage)])], False, lambda h: True)
    quotas.apply(after)
    return quotas


def test_idle_sensors_expire_after_an_hour(tmp_path):
    from kafka_sidecar.server.quotas.manager import INACTIVE_SENSOR_EXPIRATION_MS

    quotas = _request_quota(tmp_path, 50.0)
    manager = quotas.request
    manager.record("", "a", 1.0, 1_000)
    manager.record("", "b", 1.0, 1_000)
    assert [tags for tags, _ in manager.sensors()] == [("", "a"), ("", "b")]
    # "b" keeps recording; "a" is idle for the hour and goes, at the next 30 s check.
    manager.record("", "b", 1.0, 1_000 + INACTIVE_SENSOR_EXPIRATION_MS - 1)
    manager.record("", "b", 1.0, 1_000 + INACTIVE_SENSOR_EXPIRATION_MS + 30_000)
    assert [tags for tags, _ in manager.sensors()] == [("", "b")]
    # A client that comes back gets a fresh sensor.
    assert manager.record("", "a", 1.0, 1_000 + INACTIVE_SENSOR_EXPIRATION_MS + 31_000) == 0
    assert [tags for tags, _ in manager.sensors()] == [("", "b"), ("", "a")]


def test_quota_metrics_are_kafkas_names_per_entity(tmp_path):
    from kafka_sidecar.server.quotas.manager import _now_ms
    from kafka_sidecar.server.quotas.metrics import ClientQuotaCollector
    from prometheus_client import CollectorRegistry, generate_latest

    class Broker:  # what the collector reads of a broker
        def __init__(self, client_quotas: ClientQuotas) -> None:
            self.client_quotas = client_quotas

    broker = Broker(_request_quota(tmp_path, 1.0))
    now = _now_ms()
    # 20 % over 10 s (the window's minimum span) is 2 % of a handler: over 1 %, throttled.
    throttle = broker.client_quotas.request.record("alice", "app", 20.0, now)
    assert throttle > 0
    registry = CollectorRegistry(auto_describe=False)
    # Collected at the instant recorded (a loaded machine must not move the rate's window).
    registry.register(ClientQuotaCollector(broker, now_ms=lambda: now))
    text = generate_latest(registry).decode()
    # A default client-id quota: the sensor's tags are the client id alone (DefaultQuotaCallback).
    assert 'kafka_server_request_request_time{client_id="app",user=""} 2.0' in text
    # (2 - 1) / 1 * 10 s, capped at one window for the request quota.
    assert throttle == 1000
    assert 'kafka_server_request_throttle_time{client_id="app",user=""} 1000.0' in text
    # No produce or fetch quota: no sensors, the families are empty.
    assert "kafka_server_produce_byte_rate{" not in text and "# TYPE kafka_server_fetch_byte_rate gauge" in text
