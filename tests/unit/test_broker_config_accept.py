"""Broker config values are accepted and refused at start as Apache Kafka does.

Two layers: a table of values whose verdict (and message) was taken from Kafka 4.3.1's own
``KafkaConfig`` definitions and start-up (runs everywhere), and a differential test that asks the
reference Kafka's ConfigDef about a set of probe values for every broker config we know and
compares verdicts and messages (needs Java and the reference distribution; skips and says why
otherwise). Where we differ on purpose, ``DELIBERATE`` says why.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest
from kafka_sidecar.server.config import (
    BrokerConfig,
    ConfigError,
    definition,
    known_config_names,
)
from kafka_sidecar.storage.log_config import TOPIC_CONFIGS, LogConfig, dynamic_log_defaults

from tests.support import kafka_bin, kafka_tool_missing


def load(**overrides: str) -> BrokerConfig:
    return BrokerConfig.load(overrides={k.replace("_", "."): v for k, v in overrides.items()})


def refusal(name: str, value: str) -> str:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(overrides={name: value})
    found = re.fullmatch(r"(.*) \((?:[\w.]+=[^,()]*, )*(from [^()]*)\)", str(e.value), re.S)
    assert found and found.group(2) == "from --override", str(e.value)
    return found.group(1)


# (name, value) that Kafka 4.3.1 starts with (each checked by starting it): we accept them too.
ACCEPTED_AT_START = [
    ("log.retention.ms", "-5"),  # no validator at broker level: negative = unlimited
    ("log.retention.ms", "-1"),
    ("log.retention.ms", "1"),
    ("log.retention.minutes", "-5"),
    ("log.retention.hours", "-5"),
    ("log.retention.bytes", "-5"),
    ("broker.id", "0"),  # alone: node.id takes its value
    ("log.cleanup.policy", ""),  # an empty list is allowed (neither delete nor compact)
    ("sasl.enabled.mechanisms", ""),
    ("ssl.cipher.suites", ""),
    ("process.roles", " broker , controller "),
    ("group.initial.rebalance.delay.ms", "-5"),
    ("connections.max.idle.ms", "-1"),
    ("message.max.bytes", "0"),
    ("offsets.topic.compression.codec", "4"),
]

# (name, value, Kafka's message) for values Kafka 4.3.1 refuses from its ConfigDef.
REFUSED = [
    ("offsets.topic.replication.factor", "0", "Invalid value 0 for configuration offsets.topic.replication.factor: Value must be at least 1"),
    ("offsets.topic.replication.factor", "40000", "Invalid value 40000 for configuration offsets.topic.replication.factor: Not a number of type SHORT"),
    ("transaction.state.log.replication.factor", "0", "Invalid value 0 for configuration transaction.state.log.replication.factor: Value must be at least 1"),
    ("transaction.state.log.min.isr", "0", "Invalid value 0 for configuration transaction.state.log.min.isr: Value must be at least 1"),
    ("num.network.threads", "0", "Invalid value 0 for configuration num.network.threads: Value must be at least 1"),
    ("process.roles", "foo", "Invalid value foo for configuration process.roles: String must be one of: broker, controller"),
    ("process.roles", "broker,broker", "Configuration 'process.roles' values must not be duplicated."),
    ("process.roles", "broker,", "Configuration 'process.roles' values must not be empty."),
    ("process.roles", "", "Configuration 'process.roles' must not be empty. Valid values include: [broker, controller]"),
    ("process.roles", "foo,foo", "Configuration 'process.roles' values must not be duplicated."),
    ("log.cleanup.policy", "delete,delete", "Configuration 'log.cleanup.policy' values must not be duplicated."),
    ("log.cleanup.policy", ",", "Configuration 'log.cleanup.policy' values must not be duplicated."),
    ("log.cleanup.policy", "compact,,delete", "Configuration 'log.cleanup.policy' values must not be empty."),
    ("log.cleanup.policy", "compact,Delete", "Invalid value Delete for configuration log.cleanup.policy: String must be one of: compact, delete"),
    ("sasl.enabled.mechanisms", "PLAIN,PLAIN", "Configuration 'sasl.enabled.mechanisms' values must not be duplicated."),
    ("listeners", "", "Configuration 'listeners' must not be empty. Valid values include: any non-empty value"),
    ("listeners", "PLAINTEXT://:9092,PLAINTEXT://:9092", "Configuration 'listeners' values must not be duplicated."),
    ("advertised.listeners", "", "Configuration 'advertised.listeners' must not be empty. Valid values include: any non-empty value"),
    ("log.dirs", "/a,/a", "Configuration 'log.dirs' values must not be duplicated."),
    ("controller.listener.names", "", "Configuration 'controller.listener.names' must not be empty. Valid values include: any non-empty value"),
    ("ssl.client.auth", "REQUIRED", "Invalid value REQUIRED for configuration ssl.client.auth: String must be one of: required, requested, none"),
    ("log.message.timestamp.type", "createtime", "Invalid value createtime for configuration log.message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
    ("num.partitions", "abc", "Invalid value abc for configuration num.partitions: Not a number of type INT"),
]

# Refused by Kafka at start though its ConfigDef takes them (KafkaConfig.validateValues,
# KafkaConfig.populateSynonyms, CompressionType.forId, the broker's LogConfig): refused here too.
REFUSED_AT_START = [
    ("log.retention.ms", "0"),  # "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    ("log.retention.minutes", "0"),  # the same (log.retention.ms is computed from it)
    ("log.retention.hours", "0"),
    ("log.cleaner.dedupe.buffer.size", "1048576"),  # "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    ("log.cleaner.threads", "0"),  # java.lang.ArithmeticException: / by zero (in that check)
    ("log.roll.ms", "0"),  # "requirement failed: log.roll.ms must be greater than or equal to 1"
    ("log.roll.jitter.ms", "-5"),  # "requirement failed: log.roll.jitter.ms must be greater than or equal to 0"
    ("log.flush.interval.ms", "-5"),  # "Invalid value -5 for configuration flush.ms: Value must be at least 0"
    ("offsets.topic.compression.codec", "7"),  # "Unknown compression type id: 7"
    ("max.connections.per.ip", "0"),  # "requirement failed: ... can be set to zero only if ...overrides property is set."
    ("max.connections.per.ip.overrides", "hostName#:100"),  # "... contains invalid addresses : hostName#"
    ("max.connections.per.ip.overrides", "127.0.0.1"),  # Csv.parseCsvMap: "begin 0, end -1, length 9"
    ("max.connections.per.ip.overrides", "127.0.0.1:many"),  # 'For input string: "many"'
    ("broker.id", "-5"),  # node.id takes it: "Invalid value -5 for configuration node.id: Value must be at least 0"
]


@pytest.mark.parametrize(("name", "value"), ACCEPTED_AT_START, ids=[f"{n}={v}" for n, v in ACCEPTED_AT_START])
def test_values_kafka_starts_with_are_accepted(name: str, value: str) -> None:
    cfg = BrokerConfig.load(overrides={name: value})
    assert cfg.sources[name] == "--override"


@pytest.mark.parametrize(("name", "value", "message"), REFUSED, ids=[f"{n}={v}" for n, v, _ in REFUSED])
def test_values_kafka_refuses_are_refused_with_its_message(name: str, value: str, message: str) -> None:
    assert refusal(name, value) == message


@pytest.mark.parametrize(("name", "value"), REFUSED_AT_START, ids=[f"{n}={v}" for n, v in REFUSED_AT_START])
def test_values_kafka_refuses_at_start_are_refused(name: str, value: str) -> None:
    refusal(name, value)


@pytest.mark.parametrize("value", ["-5", "-1", "-100000000000"])
def test_negative_retention_means_unlimited_as_kafka(value: str) -> None:
    """KafkaConfig.logRetentionTimeMillis: any negative result is -1 (unlimited), whichever of
    log.retention.ms / .minutes / .hours gave it; topics get retention.ms=-1."""
    for name in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
        if name != "log.retention.ms" and value == "-100000000000":
            continue  # an INT
        defaults = BrokerConfig.load(overrides={name: value}).log_defaults()
        assert defaults["retention.ms"] == -1
        assert LogConfig(defaults).retention_ms == -1
    # log.retention.ms wins over the coarser units, as in Kafka
    both = BrokerConfig.load(overrides={"log.retention.ms": "-5", "log.retention.hours": "1"}).log_defaults()
    assert both["retention.ms"] == -1


def test_per_ip_limits_use_kafkas_words_at_start() -> None:
    assert load(max_connections_per_ip="0", max_connections_per_ip_overrides="127.0.0.1:5").values["max.connections.per.ip"] == 0
    with pytest.raises(ConfigError) as e:
        load(max_connections_per_ip_overrides="127.0.0.1:5, a#b:1, c:2")
    assert str(e.value) == ("max.connections.per.ip.overrides contains invalid addresses : a#b "
                            "(max.connections.per.ip.overrides=127.0.0.1:5, a#b:1, c:2, from --override)")
    assert load(max_connections_per_ip_overrides="127.0.0.1:5,").values["max.connections.per.ip.overrides"] == "127.0.0.1:5,"


def test_start_requirements_use_kafkas_words() -> None:
    with pytest.raises(ConfigError) as e:
        load(log_retention_hours="0")
    assert str(e.value) == ("log.retention.ms must be unlimited (-1) or, greater than or equal to 1 "
                            "(log.retention.hours=0, from --override)")
    assert load(log_retention_ms="-1", log_retention_hours="0").log_retention_ms() == -1  # ms wins
    assert refusal("log.cleaner.dedupe.buffer.size", "1000").startswith(
        "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
    assert load(log_cleaner_dedupe_buffer_size=str(4 << 20), log_cleaner_threads="3").values["log.cleaner.threads"] == 3
    with pytest.raises(ConfigError, match="log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread"):
        load(log_cleaner_dedupe_buffer_size=str(4 << 20), log_cleaner_threads="4")  # 1 MiB each is not more than 1 MiB


def test_dynamic_negative_retention_is_unlimited() -> None:
    """kafka-configs.sh --alter --entity-type brokers --add-config log.retention.ms=-5: Kafka's
    topics then report retention.ms -1 (checked against Kafka 4.3.1)."""
    assert dynamic_log_defaults([{"log.retention.ms": "-5"}]) == {"retention.ms": -1}
    assert dynamic_log_defaults([{}, {"log.retention.ms": "100"}]) == {"retention.ms": 100}


def test_broker_id_is_a_synonym_of_node_id() -> None:
    assert load(broker_id="3", node_id="3").values["node.id"] == 3
    with pytest.raises(ConfigError) as e:
        load(broker_id="2", node_id="3")
    assert str(e.value) == "You must set `node.id` to the same value as `broker.id`. (node.id=3, broker.id=2, from --override)"
    assert refusal("broker.id", "-5").startswith("Invalid value -5 for configuration node.id: Value must be at least 0")


def test_topic_list_configs_take_kafkas_rules() -> None:
    policy = TOPIC_CONFIGS["cleanup.policy"]
    assert policy.parse("") == "" and policy.parse("compact, delete") == "compact,delete"
    with pytest.raises(ConfigError, match=r"^Configuration 'cleanup.policy' values must not be duplicated\.$"):
        policy.parse("compact,compact")
    throttled = TOPIC_CONFIGS["leader.replication.throttled.replicas"]
    assert throttled.parse("*") == "*" and throttled.parse("0:1, 1:1") == "0:1,1:1" and throttled.parse("") == ""
    with pytest.raises(ConfigError) as e:
        throttled.parse("0:1,x")
    assert str(e.value) == ("Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
                            "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in "
                            "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


# ---- against the reference Kafka's own ConfigDef ------------------------------------------------

# Where our verdict differs from Kafka's ConfigDef on purpose: name -> why.
DELIBERATE = {
    "log.segment.bytes": "minimum 14 (Kafka 4.0.0's), not 1048576: small segments for tests "
                         "(tests/conformance/known_differences.py)",
    "segment.bytes": "the same, for topics",
    "default.replication.factor": "at least 1 until server/apis/topics.py refuses topics created "
                                  "with a default below 1 as Kafka does",
    "sasl.server.max.receive.size": "at least 1 until the SASL code gives -1 (unlimited) and 0 "
                                    "Kafka's meaning",
    "log.roll.ms": "Kafka refuses below 1 at start (KafkaConfig.validateValues)",
    "log.roll.jitter.ms": "Kafka refuses below 0 at start (KafkaConfig.validateValues)",
    "log.flush.interval.ms": "Kafka refuses below 0 at start (the broker's LogConfig: flush.ms)",
    "offsets.topic.compression.codec": "Kafka refuses ids other than 0-4 at start (CompressionType.forId)",
    "controller.quorum.voters": "not used here (one process): no {id}@{host}:{port} check",
}

_PROBES = {
    "int": ["-5", "-1", "0", "1", "4", "14", "1048576", "2147483648", "abc", ""],
    "long": ["-5", "-1", "0", "1", "14", "9223372036854775808", "1.5"],
    "short": ["-1", "0", "1", "32768"],
    "double": ["-0.5", "0", "0.5", "1", "1.5", "x"],
    "boolean": ["true", "TRUE", "false", "yes", ""],
    "string": ["", "x"],
    "list": ["", ",", "x", "x,x", "x,,y", " x , y "],
    "class": ["x"],
    "password": ["x"],
}

_CHECK_JAVA = """
import org.apache.kafka.common.config.ConfigDef;
import java.io.*;
public class Check {
  public static void main(String[] a) throws Exception {
    ConfigDef broker = (ConfigDef) Class.forName("kafka.server.KafkaConfig").getMethod("configDef").invoke(null);
    ConfigDef topic = org.apache.kafka.storage.internals.log.LogConfig.configDefCopy();
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    for (String line; (line = r.readLine()) != null; ) {
      ConfigDef d = line.startsWith("topic:") ? topic : broker;
      line = line.substring(line.indexOf(':') + 1);
      int i = line.indexOf('=');
      String name = line.substring(0, i), value = line.substring(i + 1);
      ConfigDef.ConfigKey k = d.configKeys().get(name);
      if (k == null) { System.out.println("UNKNOWN"); continue; }
      try {
        Object v = ConfigDef.parseType(name, value, k.type);
        if (k.validator != null) k.validator.ensureValid(name, v);
        System.out.println("OK");
      } catch (Exception e) {
        System.out.println("ERR\\t" + e.getMessage());
      }
    }
  }
}
"""


def _probes() -> list[tuple[str, str, str]]:
    """(broker or topic, name, value) to ask both about."""
    out = []
    for level, names in (("broker", known_config_names()), ("topic", sorted(TOPIC_CONFIGS))):
        for name in names:
            cdef = definition(name) if level == "broker" else TOPIC_CONFIGS[name]
            assert cdef is not None
            values = list(_PROBES[cdef.type])
            values += list(cdef.one_of or ()) + [v.upper() for v in cdef.one_of or ()]
            values += list(cdef.list_of or ()) + [",".join(cdef.list_of or ())]
            out += [(level, name, v) for v in values]
    return out


def _ours(level: str, name: str, value: str) -> str:
    try:
        cdef = definition(name) if level == "broker" else TOPIC_CONFIGS[name]
        assert cdef is not None
        # the definition alone, under the name given (BrokerConfig.load adds broker.id's synonym rule)
        dataclasses.replace(cdef, name=name).parse(value)
    except ConfigError as e:
        return f"ERR\t{e}"
    return "OK"


def test_every_broker_config_is_validated_as_kafkas_configdef_does(tmp_path: Path) -> None:
    missing = kafka_tool_missing("kafka-server-start.sh")
    if missing:
        pytest.skip(missing)
    libs = kafka_bin("kafka-server-start.sh").parent.parent / "libs"
    (tmp_path / "Check.java").write_text(_CHECK_JAVA)
    probes = _probes()
    run = subprocess.run(["java", "-cp", f"{libs}/*", str(tmp_path / "Check.java")],
                         input="".join(f"{lv}:{n}={v}\n" for lv, n, v in probes), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    verdicts = run.stdout.splitlines()
    assert len(verdicts) == len(probes), run.stderr
    differences = []
    for (level, name, value), kafka in zip(probes, verdicts, strict=True):
        if kafka == "UNKNOWN" or name in DELIBERATE:
            continue  # not a KafkaConfig (authorizer settings, topic-only synonyms)
        ours = _ours(level, name, value)
        if ours != kafka:
            differences.append(f"{level} {name}={value!r}: Kafka {kafka!r}, ours {ours!r}")
    assert not differences, "\n".join(differences)
    for name in DELIBERATE:  # each is still a difference (else drop it from DELIBERATE)
        pairs = [(p, v) for p, v in zip(probes, verdicts, strict=True) if p[1] == name]
        assert any(_ours(*p) != v for p, v in pairs), f"{name} now agrees with Kafka: remove it from DELIBERATE"
