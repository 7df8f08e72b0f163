"""storage/log_config.py: Kafka's parsing, messages and printing of config values, and the
topic defaults that dynamic broker configs imply."""

from __future__ import annotations

import pytest
from kafka_sidecar.storage.log_config import (
    DESCRIBE_ORDER,
    TOPIC_CONFIG_DOCS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigError,
    dynamic_log_defaults,
    format_config_value,
    java_double_str,
    validate_topic_config_set,
    validate_topic_configs,
)


@pytest.mark.parametrize(("value", "text"), [
    (0.5, "0.5"), (1.0, "1.0"), (100.0, "100.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1e7, "1.0E7"),
    (1.7976931348623157e308, "1.7976931348623157E308"), (-2.5, "-2.5"), (0.0, "0.0"),
])
def test_java_double_str(value, text):
    assert java_double_str(value) == text


def test_format_config_value():
    assert format_config_value("boolean", True) == "true"
    assert format_config_value("double", 1) == "1.0"
    assert format_config_value("long", 2**63 - 1) == "9223372036854775807"
    assert format_config_value("password", "secret") is None
    assert format_config_value("list", "compact,delete") == "compact,delete"


@pytest.mark.parametrize(("configs", "message"), [
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "1_000"}, "Invalid value 1_000 for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": str(2**63)}, f"Invalid value {2**63} for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": str(2**31)}, f"Invalid value {2**31} for configuration segment.bytes: Not a number of type INT"),
    ({"segment.bytes": "10"}, "Invalid value 10 for configuration segment.bytes: Value must be at least 14"),
    ({"compression.gzip.level": "0"}, "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ({"cleanup.policy": "compact,bogus"}, "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
    # Every name is checked before any value (Kafka's LogConfig.validate).
    ({"retention.ms": "abc", "no.such.config": "1"}, "Unknown topic config name: no.such.config"),
])
def test_validate_topic_configs_messages(configs, message):
    with pytest.raises(ConfigError) as e:
        validate_topic_configs(configs)
    assert str(e.value) == message


def test_validate_topic_configs_values():
    assert validate_topic_configs({"retention.ms": " +5 ", "compression.gzip.level": "-1", "cleanup.policy": "delete, compact"}) == {
        "retention.ms": 5, "compression.gzip.level": -1, "cleanup.policy": "delete,compact"}


def test_validate_topic_config_set():
    validate_topic_config_set({"min.compaction.lag.ms": 5, "max.compaction.lag.ms": 5})
    with pytest.raises(ConfigError, match=r"conflict topic config setting min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        validate_topic_config_set({"min.compaction.lag.ms": 10}, {"max.compaction.lag.ms": 5})
    with pytest.raises(ConfigError, match="Tiered Storage functionality is disabled"):
        validate_topic_config_set({"remote.storage.enable": True})


def test_dynamic_log_defaults_precedence():
    per_broker = {"log.segment.bytes": "5000", "log.cleaner.threads": "2"}
    cluster = {"log.segment.bytes": "7000", "log.retention.ms": "60000", "message.max.bytes": "bad"}
    assert dynamic_log_defaults([per_broker, cluster]) == {"segment.bytes": 5000, "retention.ms": 60000}


def test_tables_cover_every_topic_config():
    assert set(DESCRIBE_ORDER) == set(TOPIC_CONFIGS) == set(TOPIC_CONFIG_DOCS)
    assert TOPIC_CONFIG_SYNONYMS["segment.ms"] == "log.roll.ms"
    assert "leader.replication.throttled.replicas" not in TOPIC_CONFIG_SYNONYMS
