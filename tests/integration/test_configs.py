"""Topic and broker configs: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Kafka 4.0.0's answers are the reference: the golden DescribeConfigs/IncrementalAlterConfigs
frames (``tests/data/kafka-4.0.0/configs``) are replayed against a sidecar started with the recorded
broker's static properties and compared field by field; the cases the recording does not cover
follow Kafka's ConfigHelper/ConfigAdminManager/ConfigurationControlManager (raw kio requests, so
the exact codes and messages are checked). Then what users do: kafka-python's, confluent-kafka's
and kafkajs's admin clients and Kafka's own ``kafka-configs.sh`` change configs, the changes act
at once on later produces (segment rolls, LogAppendTime, max.message.bytes) and retention, and
they survive a restart.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka import KafkaProducer
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.errors import MessageSizeTooLargeError

from tests.integration.retention_helpers import FAST_RETENTION, consume, create_topic, offsets
from tests.integration.test_golden_replay import (
    BROKER_OVERRIDES,
    CREATE_TOPICS,
    Exchange,
    RawClient,
    Replay,
    _send,
    answered,
    check_exchange,
    decode_response,
    load_exchanges,
    plain,
)
from tests.support import REPO, SidecarProcess, kafka_bin, wait_until

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
KAFKA_CONFIGS_SH = kafka_bin("kafka-configs.sh")
NODE = shutil.which("node")
NODE_DIR = REPO / "tests" / "tools" / "node"
KAFKAJS_INSTALLED = (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists()

needs_kafka_tools = pytest.mark.skipif(
    not KAFKA_CONFIGS_SH.exists() or shutil.which("java") is None, reason="Kafka's bin/kafka-configs.sh or java missing"
)
needs_kafkajs = pytest.mark.skipif(NODE is None or not KAFKAJS_INSTALLED, reason="node or kafkajs missing (tests/tools/install-tools.sh)")


# ---- golden replay ------------------------------------------------------------------------------


def golden_static_broker_configs() -> dict[str, str]:
    """The recorded broker's server.properties, as its DescribeConfigs answer reports them
    (STATIC_BROKER_CONFIG entries): start ours with the same, and the answers can be equal."""
    ex = next(e for e in load_exchanges("configs") if e.api_key == DESCRIBE_CONFIGS and (e.conn, e.correlation_id) == (1, 5))
    configs = plain(decode_response(ex.api_key, ex.version, ex.response)[1])["results"][0]["configs"]
    return {c["name"]: c["value"] for c in configs if c["config_source"] == 4}


@pytest.fixture(scope="module")
def configs_api_replay(tmp_path_factory) -> Replay:
    """configs' DescribeConfigs/IncrementalAlterConfigs requests (and the kafka-python admin's
    connections), in recorded order, after produce-fetch's CreateTopics made topic ``golden``."""
    data_dir = tmp_path_factory.mktemp("golden-configs-api") / "data"
    server = SidecarProcess(data_dir, {**BROKER_OVERRIDES, **golden_static_broker_configs()}).start()
    setup = [ex for ex in load_exchanges("produce-fetch") if ex.api_key == CREATE_TOPICS]
    exchanges = [ex for ex in load_exchanges("configs") if ex.api_key != CREATE_TOPICS]
    try:
        yield Replay().run(server, setup + exchanges)
    finally:
        server.stop()


@pytest.mark.parametrize("ex", answered("configs", {DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS}))
def test_golden_configs(configs_api_replay: Replay, ex: Exchange) -> None:
    check_exchange(ex, configs_api_replay)


# ---- raw requests -------------------------------------------------------------------------------


class Api:
    """Config requests over one raw connection, answers as plain data."""

    def __init__(self, server: SidecarProcess) -> None:
        self.client = RawClient(server.port)
        self.correlation_id = 0

    def close(self) -> None:
        self.client.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        return _send(self.client, api_key, version, body, self.correlation_id)

    def describe(self, rtype: int, name: str, keys: list[str] | None = None, synonyms: bool = True, docs: bool = False, version: int = 4) -> dict[str, Any]:
        body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
                "include_synonyms": synonyms, "include_documentation": docs}
        return self.send(DESCRIBE_CONFIGS, version, body)["results"][0]

    def entries(self, rtype: int, name: str, keys: list[str] | None = None) -> dict[str, dict[str, Any]]:
        result = self.describe(rtype, name, keys)
        assert result["error_code"] == 0, result
        return {c["name"]: c for c in result["configs"]}

    def incremental(self, *resources: tuple[int, str, list[tuple[str, int, str | None]]], validate_only: bool = False) -> list[tuple[int, str | None]]:
        body = {"validate_only": validate_only, "resources": [
            {"resource_type": t, "resource_name": n, "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}
            for t, n, ops in resources
        ]}
        return [(r["error_code"], r["error_message"]) for r in self.send(INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]]

    def alter(self, *resources: tuple[int, str, dict[str, str | None]], validate_only: bool = False, version: int = 2) -> list[tuple[int, str | None]]:
        body = {"validate_only": validate_only, "resources": [
            {"resource_type": t, "resource_name": n, "configs": [{"name": k, "value": v} for k, v in configs.items()]}
            for t, n, configs in resources
        ]}
        return [(r["error_code"], r["error_message"]) for r in self.send(ALTER_CONFIGS, version, body)["responses"]]


def overrides(api: Api, topic: str) -> dict[str, str]:
    return {n: c["value"] for n, c in api.entries(TOPIC, topic).items() if c["config_source"] == 1}


def syn(entry: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


OK = (0, None)


def test_incremental_alter_operations_and_kafka_errors(sidecar, topic_name):
    """SET/DELETE/APPEND/SUBTRACT on a topic, validate_only, and the errors Kafka 4.0 gives for the
    cases the golden recording does not cover (ConfigAdminManager.preprocess, then
    ConfigurationControlManager, then the topic validator)."""
    create_topic(sidecar.bootstrap, topic_name, {"segment.bytes": "100000"})
    api = Api(sidecar)
    try:
        t = (TOPIC, topic_name)
        assert api.incremental((*t, [("cleanup.policy", APPEND, "compact")])) == [OK]  # default "delete" + compact
        assert overrides(api, topic_name) == {"segment.bytes": "100000", "cleanup.policy": "delete,compact"}
        assert api.incremental((*t, [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", SET, "3600000")])) == [OK]
        assert overrides(api, topic_name) == {"segment.bytes": "100000", "cleanup.policy": "compact", "retention.ms": "3600000"}
        assert api.incremental((*t, [("retention.ms", SET, "1")]), validate_only=True) == [OK]
        assert api.incremental((*t, [("cleanup.policy", DELETE, None), ("segment.bytes", DELETE, None)])) == [OK]
        assert overrides(api, topic_name) == {"retention.ms": "3600000"}

        # One request per case (a request naming a resource twice is refused as a whole, below).
        cases = [
            (*t, [("retention.ms", APPEND, "5")]),
            (TOPIC, "", [("retention.ms", SET, "5")]),
            (TOPIC, "bad name", [("retention.ms", SET, "5")]),
            (*t, [("retention.ms", SET, "5"), ("retention.ms", SET, "6")]),
            (*t, [("retention.ms", SET, None)]),
            (*t, [("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")]),
            (*t, [("remote.storage.enable", SET, "true")]),
            (*t, [("compression.gzip.level", SET, "12")]),
            (*t, [("segment.bytes", SET, "99999999999")]),
            (*t, [("retention.ms", 7, "1")]),
        ]
        assert [api.incremental(case)[0] for case in cases] == [
            (40, "Can't APPEND to key retention.ms because its type is not LIST."),
            (42, "Default topic resources are not allowed."),
            (17, "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
            (42, "Error due to duplicate config keys"),
            (42, "Null value not supported for : retention.ms"),
            (40, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
            (40, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."),
            (40, "Invalid value 12 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
            (40, "Invalid value 99999999999 for configuration segment.bytes: Not a number of type INT"),
            (-1, None),  # an operation id Kafka has no OpType for: UNKNOWN_SERVER_ERROR, no message
        ]
        # The same resource twice: both refused.
        same = (*t, [("retention.ms", SET, "5")])
        assert api.incremental(same, same) == [(42, "Each resource must appear at most once.")] * 2
        # An invalid value is reported before the topic is found missing (as Kafka's controller does).
        assert api.incremental((TOPIC, "no-such-topic-x", [("segment.bytes", SET, "1")])) == [
            (40, "Invalid value 1 for configuration segment.bytes: Value must be at least 14")]
        assert overrides(api, topic_name) == {"retention.ms": "3600000"}

        # Legacy AlterConfigs replaces the whole set of overrides.
        assert api.alter((*t, {"segment.bytes": "200000", "cleanup.policy": "compact,delete"})) == [OK]
        assert overrides(api, topic_name) == {"segment.bytes": "200000", "cleanup.policy": "compact,delete"}
        assert api.alter((*t, {"max.message.bytes": "2000"}), validate_only=True, version=0) == [OK]
        assert api.alter((*t, {"retention.ms": None}), (*t, {"x": "1"})) == [(42, "Each resource must appear at most once.")] * 2
        assert api.alter((*t, {"retention.ms": None})) == [(42, "Null value not supported for : retention.ms")]
        assert api.alter((*t, {"no.such.config": "1"})) == [(40, "Unknown topic config name: no.such.config")]
        assert api.alter((TOPIC, "no-such-topic-x", {"retention.ms": "5"})) == [(3, "The topic 'no-such-topic-x' does not exist.")]
        assert overrides(api, topic_name) == {"segment.bytes": "200000", "cleanup.policy": "compact,delete"}
    finally:
        api.close()


def test_describe_configs_versions_keys_and_errors(sidecar, topic_name):
    create_topic(sidecar.bootstrap, topic_name, {"min.cleanable.dirty.ratio": "0.25", "preallocate": "true"})
    api = Api(sidecar)
    try:
        for version in (1, 2, 3, 4):
            result = api.describe(TOPIC, topic_name, ["preallocate", "min.cleanable.dirty.ratio", "nope"], version=version)
            assert result["error_code"] == 0
            assert [(c["name"], c["value"], c["config_source"]) for c in result["configs"]] == [
                ("preallocate", "true", 1), ("min.cleanable.dirty.ratio", "0.25", 1)]
        entries = api.entries(TOPIC, topic_name)
        assert len(entries) == 33
        assert syn(entries["min.cleanable.dirty.ratio"]) == [
            ("min.cleanable.dirty.ratio", "0.25", 1), ("log.cleaner.min.cleanable.ratio", "0.5", 5)]
        assert entries["min.cleanable.dirty.ratio"]["config_type"] == 6
        bad = api.describe(TOPIC, "..")
        assert (bad["error_code"], bad["error_message"], bad["configs"]) == (17, "Topic name is invalid: '..' is not allowed", [])
        docs = api.describe(BROKER, "1", ["log.segment.bytes", "num.partitions"], docs=True)["configs"]
        assert [(c["name"], c["read_only"], bool(c["documentation"])) for c in docs] == [
            ("log.segment.bytes", False, True), ("num.partitions", True, True)]
        assert api.describe(BROKER, "")["configs"] == []
        logger = api.describe(8, "1")
        assert logger["error_code"] == 42
    finally:
        api.close()


# ---- effects: live, and after a restart ---------------------------------------------------------


def log_files(server: SidecarProcess, topic: str) -> list[str]:
    return sorted(p.name for p in (server.data_dir / f"{topic}-0").glob("*.log"))


def produce(bootstrap: str, topic: str, count: int, size: int = 600, timestamp_ms: int | None = None) -> None:
    """``count`` batches of one record each (kafka-python, acks=all, no linger)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, request_timeout_ms=10_000)
    try:
        for i in range(count):
            producer.send(topic, value=b"v%05d" % i + b"x" * size, timestamp_ms=timestamp_ms).get(timeout=10)
    finally:
        producer.close()


def test_topic_config_changes_act_at_once_and_survive_restart(sidecar_factory, topic_name):
    """segment.bytes, message.timestamp.type and max.message.bytes changed on a running broker
    govern the next produce; after a restart they are still described and still in force."""
    server = sidecar_factory()
    create_topic(server.bootstrap, topic_name)
    old_ts = int(time.time() * 1000) - 3_600_000
    produce(server.bootstrap, topic_name, 6, timestamp_ms=old_ts)
    assert len(log_files(server, topic_name)) == 1

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    resource = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("segment.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "4000", incremental_operation=AlterConfigOpType.SET),
    ])
    admin.incremental_alter_configs([resource])[resource].result(timeout=10)

    before = int(time.time() * 1000)
    produce(server.bootstrap, topic_name, 6, timestamp_ms=old_ts)
    after = int(time.time() * 1000)
    assert len(log_files(server, topic_name)) >= 3, "a 2000-byte segment.bytes rolls every few batches"
    records = consume(server.bootstrap, topic_name, 12)
    assert [r.timestamp for r in records[:6]] == [old_ts] * 6 and {r.timestamp_type for r in records[:6]} == {0}
    assert all(before <= r.timestamp <= after and r.timestamp_type == 1 for r in records[6:]), "LogAppendTime: the broker's clock"
    with pytest.raises(MessageSizeTooLargeError):
        produce(server.bootstrap, topic_name, 1, size=5000)

    server.restart()
    described = admin_describe(server.bootstrap, "topic", topic_name)
    assert {k: (e.value, e.source) for k, e in described.items() if k in ("segment.bytes", "message.timestamp.type", "max.message.bytes")} == {
        "segment.bytes": ("2000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "message.timestamp.type": ("LogAppendTime", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "max.message.bytes": ("4000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    }
    files = len(log_files(server, topic_name))
    before = int(time.time() * 1000)
    produce(server.bootstrap, topic_name, 6, timestamp_ms=old_ts)
    assert len(log_files(server, topic_name)) > files
    records = consume(server.bootstrap, topic_name, 18)
    assert all(r.timestamp >= before and r.timestamp_type == 1 for r in records[12:])
    with pytest.raises(MessageSizeTooLargeError):
        produce(server.bootstrap, topic_name, 1, size=5000)


def admin_describe(bootstrap: str, rtype: str, name: str) -> dict[str, Any]:
    """confluent-kafka's describe_configs, with each entry's source as a ConfigSource."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(rtype, name)
    entries = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)
    for e in entries.values():
        e.source = ConfigSource(e.source)
    return entries


def test_retention_ms_lowered_on_a_running_broker_deletes_old_segments(sidecar_factory, topic_name):
    server = sidecar_factory(FAST_RETENTION)
    create_topic(server.bootstrap, topic_name, {"segment.bytes": "2000"})
    produce(server.bootstrap, topic_name, 8, timestamp_ms=int(time.time() * 1000) - 3_600_000)
    time.sleep(1.0)  # several retention checks: the default 7 days keeps everything
    assert offsets(server.bootstrap, topic_name) == (0, 8)
    api = Api(server)
    try:
        assert api.incremental((TOPIC, topic_name, [("retention.ms", SET, "600000")])) == [OK]
    finally:
        api.close()
    wait_until(lambda: offsets(server.bootstrap, topic_name) == (8, 8), timeout=15, message="the hour-old segments deleted")
    server.restart()
    assert offsets(server.bootstrap, topic_name) == (8, 8)


def test_broker_dynamic_defaults_apply_to_topics_without_overrides(sidecar_factory, topic_name):
    """log.segment.bytes / log.message.timestamp.type set cluster-wide (resource name "") and for
    broker 1: topics without their own override follow at once, with Kafka's sources and
    synonyms; the settings survive a restart; DELETE restores the static default."""
    server = sidecar_factory({"log.retention.hours": "1000"})
    plain_topic, pinned = f"{topic_name}-plain", f"{topic_name}-pinned"
    create_topic(server.bootstrap, plain_topic)
    create_topic(server.bootstrap, pinned, {"segment.bytes": "1073741824"})
    api = Api(server)
    try:
        assert api.incremental((BROKER, "", [("log.segment.bytes", SET, "2000"), ("log.message.timestamp.type", SET, "LogAppendTime")])) == [OK]
        produce(server.bootstrap, plain_topic, 6)
        produce(server.bootstrap, pinned, 6)
        assert len(log_files(server, plain_topic)) >= 3 and len(log_files(server, pinned)) == 1

        entries = api.entries(TOPIC, plain_topic, ["segment.bytes", "retention.ms", "message.timestamp.type"])
        assert (entries["segment.bytes"]["value"], entries["segment.bytes"]["config_source"]) == ("2000", 3)
        assert syn(entries["segment.bytes"]) == [("log.segment.bytes", "2000", 3), ("log.segment.bytes", "1073741824", 5)]
        # Kafka's quirk: log.retention.hours gives the value, but no synonym is listed for it.
        assert (entries["retention.ms"]["value"], entries["retention.ms"]["config_source"], syn(entries["retention.ms"])) == ("3600000000", 5, [])
        assert syn(api.entries(TOPIC, pinned, ["segment.bytes"])["segment.bytes"]) == [
            ("segment.bytes", "1073741824", 1), ("log.segment.bytes", "2000", 3), ("log.segment.bytes", "1073741824", 5)]
        default = api.describe(BROKER, "")["configs"]
        assert sorted((c["name"], c["value"], c["config_source"], syn(c)) for c in default) == [
            ("log.message.timestamp.type", "LogAppendTime", 3, [("log.message.timestamp.type", "LogAppendTime", 3)]),
            ("log.segment.bytes", "2000", 3, [("log.segment.bytes", "2000", 3)]),
        ]
        # This broker's own setting wins over the cluster-wide one.
        assert api.incremental((BROKER, "1", [("log.segment.bytes", SET, "1000000")])) == [OK]
        broker = api.entries(BROKER, "1", ["log.segment.bytes", "log.retention.hours", "log.retention.ms", "num.partitions"])
        assert syn(broker["log.segment.bytes"]) == [("log.segment.bytes", "1000000", 2), ("log.segment.bytes", "2000", 3), ("log.segment.bytes", "1073741824", 5)]
        assert (broker["log.retention.hours"]["value"], syn(broker["log.retention.hours"])) == ("1000", [("log.retention.hours", "1000", 4), ("log.retention.hours", "168", 5)])
        assert (broker["log.retention.ms"]["value"], broker["log.retention.ms"]["config_source"]) == (None, 5)
        assert broker["num.partitions"]["read_only"] is True
        assert api.entries(TOPIC, plain_topic, ["segment.bytes"])["segment.bytes"]["value"] == "1000000"
        # Broker-level errors (ConfigAdminManager / DynamicBrokerConfig).
        cases = [
            (BROKER, "2", [("log.segment.bytes", SET, "2000")]),
            (BROKER, "abc", [("log.segment.bytes", SET, "2000")]),
            (BROKER, "1", [("num.partitions", SET, "3"), ("log.retention.hours", SET, "1")]),
            (BROKER, "", [("log.retention.ms", SET, "abc")]),
            (BROKER, "", [("ssl.keystore.password", SET, "secret")]),
            (BROKER, "", [("sasl.enabled.mechanisms", SET, "PLAIN")]),
            (BROKER, "", [("log.retention.ms", APPEND, "1")]),
            (BROKER, "", [("log.segment.bytes", SET, "10")]),
        ]
        assert [api.incremental(case)[0] for case in cases] == [
            (42, "Unexpected broker id, expected 1, but received 2"),
            (42, "Node id must be an integer, but it is: abc"),
            (42, "Cannot update these configs dynamically: [log.retention.hours, num.partitions]"),
            (42, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"),
            (42, "These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.password]"),
            (42, "Cannot update these configs at default cluster level, broker id must be specified: [sasl.enabled.mechanisms]"),
            (40, "Config value append is not allowed for config key: log.retention.ms"),
            (42, "Invalid value 10 for configuration log.segment.bytes: Value must be at least 14"),
        ]
        assert api.incremental((BROKER, "", [("log.cleanup.policy", APPEND, "compact")])) == [OK]
        assert api.entries(BROKER, "1", ["log.cleanup.policy"])["log.cleanup.policy"]["value"] == "delete,compact"
    finally:
        api.close()

    server.restart()
    api = Api(server)
    try:
        entries = api.entries(TOPIC, plain_topic, ["segment.bytes", "message.timestamp.type", "cleanup.policy"])
        assert [(e["value"], e["config_source"]) for e in entries.values()] == [("delete,compact", 3), ("1000000", 2), ("LogAppendTime", 3)]
        assert api.incremental((BROKER, "1", [("log.segment.bytes", DELETE, None)])) == [OK]
        assert api.alter((BROKER, "", {"log.segment.bytes": "3000"})) == [OK]  # legacy: replaces the whole set
        entries = api.entries(TOPIC, plain_topic, ["segment.bytes", "message.timestamp.type", "cleanup.policy"])
        assert [(e["value"], e["config_source"]) for e in entries.values()] == [("delete", 5), ("3000", 3), ("CreateTime", 5)]
        assert api.incremental((BROKER, "", [("log.segment.bytes", DELETE, None)])) == [OK]
        assert api.entries(TOPIC, plain_topic, ["segment.bytes"])["segment.bytes"]["config_source"] == 5
    finally:
        api.close()
    files = len(log_files(server, plain_topic))
    produce(server.bootstrap, plain_topic, 6)
    assert len(log_files(server, plain_topic)) == files, "back to 1 GiB segments"


# ---- clients and tools --------------------------------------------------------------------------


def test_kafka_python_admin(sidecar, topic_name):
    create_topic(sidecar.bootstrap, topic_name, {"segment.bytes": "1048576"})
    admin = KafkaAdminClient(bootstrap_servers=sidecar.bootstrap, request_timeout_ms=10_000)
    try:
        topic = KpConfigResource(ConfigResourceType.TOPIC, topic_name)
        result = admin.describe_configs([topic], include_synonyms=True)
        seg = result["topic"][topic_name]["segment.bytes"]
        assert (seg["value"], seg["config_source"]) == ("1048576", "DYNAMIC_TOPIC_CONFIG")
        admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"retention.ms": "86400000"})])
        # Legacy AlterConfigs: kafka-python resends the other modified keys itself.
        admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"cleanup.policy": "compact"})], incremental=False)
        modified = admin.describe_configs([topic])["topic"][topic_name]
        assert {k: v["value"] for k, v in modified.items()} == {
            "segment.bytes": "1048576", "retention.ms": "86400000", "cleanup.policy": "compact"}
        broker = admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
        assert broker["broker"]["1"]["log.segment.bytes"]["value"] == "1073741824"
    finally:
        admin.close()


def test_confluent_kafka_admin(sidecar, topic_name):
    create_topic(sidecar.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})

    def alter_incremental(*entries: ConfigEntry) -> None:
        resource = ConfigResource("topic", topic_name, incremental_configs=list(entries))
        admin.incremental_alter_configs([resource])[resource].result(timeout=10)

    alter_incremental(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
                      ConfigEntry("flush.messages", "1000", incremental_operation=AlterConfigOpType.SET))
    alter_incremental(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    described = admin_describe(sidecar.bootstrap, "topic", topic_name)
    assert (described["cleanup.policy"].value, described["cleanup.policy"].source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert (described["flush.messages"].value, described["flush.messages"].is_default) == ("1000", False)
    assert (described["retention.ms"].value, described["retention.ms"].source) == ("604800000", ConfigSource.DEFAULT_CONFIG)
    assert [(s.name, s.value) for s in described["segment.bytes"].synonyms.values()] == [("log.segment.bytes", "1073741824")]

    bad = ConfigResource("topic", topic_name, incremental_configs=[ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="Not a number of type LONG"):
        admin.incremental_alter_configs([bad])[bad].result(timeout=10)

    legacy = ConfigResource("topic", topic_name, set_config={"retention.bytes": "1000000"})
    with pytest.warns(DeprecationWarning):  # legacy AlterConfigs: still what older tools send
        futures = admin.alter_configs([legacy])
    futures[legacy].result(timeout=10)
    described = admin_describe(sidecar.bootstrap, "topic", topic_name)
    assert {k for k, e in described.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG} == {"retention.bytes"}

    broker = admin_describe(sidecar.bootstrap, "broker", "1")
    assert broker["num.partitions"].is_read_only and not broker["log.retention.ms"].is_read_only
    assert broker["ssl.keystore.password"].is_sensitive and broker["ssl.keystore.password"].value is None


@needs_kafkajs
def test_kafkajs_admin(sidecar, topic_name, tmp_path):
    create_topic(sidecar.bootstrap, topic_name)
    spec = {"brokers": [sidecar.bootstrap], "ops": [
        {"op": "alterConfigs", "args": {"resources": [{"type": TOPIC, "name": topic_name, "configEntries": [
            {"name": "retention.ms", "value": "123456"}, {"name": "segment.bytes", "value": "2000000"}]}]}},
        {"op": "describeConfigs", "args": {"includeSynonyms": True, "resources": [
            {"type": TOPIC, "name": topic_name, "configNames": ["retention.ms", "segment.bytes", "cleanup.policy"]}]}},
        {"op": "alterConfigs", "args": {"resources": [{"type": TOPIC, "name": topic_name, "configEntries": [
            {"name": "retention.ms", "value": "-5"}]}]}},
        {"op": "describeConfigs", "args": {"resources": [{"type": BROKER, "name": "1", "configNames": ["log.segment.bytes"]}]}},
    ]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([NODE, str(NODE_DIR / "configs.js"), str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert [r["ok"] for r in results] == [True, True, False, True]
    entries = {e["configName"]: e for e in results[1]["value"]["resources"][0]["configEntries"]}
    assert {k: (e["configValue"], e["configSource"], e["isDefault"]) for k, e in entries.items()} == {
        "segment.bytes": ("2000000", 1, False), "retention.ms": ("123456", 1, False), "cleanup.policy": ("delete", 5, True)}
    assert [(s["configName"], s["configSource"]) for s in entries["segment.bytes"]["configSynonyms"]] == [
        ("segment.bytes", 1), ("log.segment.bytes", 5)]
    assert results[2]["error"]["type"] == "INVALID_CONFIG"
    broker = results[3]["value"]["resources"][0]["configEntries"]
    assert [(e["configName"], e["configValue"], e["readOnly"]) for e in broker] == [("log.segment.bytes", "1073741824", False)]


def kafka_configs(server: SidecarProcess, *args: str) -> str:
    proc = subprocess.run([str(KAFKA_CONFIGS_SH), "--bootstrap-server", server.bootstrap, *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"kafka-configs.sh {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


@needs_kafka_tools
def test_kafka_configs_sh(sidecar_factory, topic_name):
    """Kafka's kafka-configs.sh: describe, add and delete topic configs, describe broker 1, set a
    cluster-wide default; values act on the next produce and survive a restart."""
    server = sidecar_factory()
    create_topic(server.bootstrap, topic_name)
    topic = ["--entity-type", "topics", "--entity-name", topic_name]
    out = kafka_configs(server, *topic, "--alter", "--add-config", "segment.bytes=2000,message.timestamp.type=LogAppendTime,retention.ms=86400000")
    assert f"Completed updating config for topic {topic_name}." in out
    out = kafka_configs(server, *topic, "--alter", "--delete-config", "retention.ms")
    out = kafka_configs(server, *topic, "--describe")
    assert out.splitlines() == [
        f"Dynamic configs for topic {topic_name} are:",
        "  message.timestamp.type=LogAppendTime sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:message.timestamp.type=LogAppendTime, DEFAULT_CONFIG:log.message.timestamp.type=CreateTime}",
        "  segment.bytes=2000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=2000, DEFAULT_CONFIG:log.segment.bytes=1073741824}",
    ]
    before = int(time.time() * 1000)
    produce(server.bootstrap, topic_name, 6, timestamp_ms=1_600_000_000_000)
    assert len(log_files(server, topic_name)) >= 3
    assert all(r.timestamp >= before for r in consume(server.bootstrap, topic_name, 6))

    out = kafka_configs(server, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.retention.ms=7200000")
    assert "Completed updating default config for brokers in the cluster." in out
    server.restart()
    out = kafka_configs(server, *topic, "--describe", "--all")
    assert "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}" in out.splitlines()
    assert "  segment.bytes=2000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=2000, DEFAULT_CONFIG:log.segment.bytes=1073741824}" in out.splitlines()
    out = kafka_configs(server, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
    lines = out.splitlines()
    assert lines[0] == "All configs for broker 1 are:"
    assert "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}" in lines
    assert "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}" in lines
    assert f"  log.dirs={Path(server.data_dir).resolve()} sensitive=false synonyms={{STATIC_BROKER_CONFIG:log.dirs={Path(server.data_dir).resolve()}}}" in lines
    assert len(lines) == 1 + 289
    assert kafka_configs(server, "--entity-type", "brokers", "--entity-name", "1", "--describe").splitlines() == [
        "Dynamic configs for broker 1 are:"]
