"""LogConfig: Kafka's topic-level configs, their broker-wide synonyms and defaults.

Names, types, defaults, bounds and error messages follow Kafka 4's
``LogConfig``/``TopicConfig`` so that CreateTopics and config tools get the
answers they get from Kafka.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """An invalid config name or value; the message is Kafka's wording."""


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _parse_integer(name: str, value: Any, type_name: str, bits: int) -> int:
    """Java's Long/Integer/Short.parseX: an optional sign and ASCII digits, within range."""
    text = str(value).strip()
    if _INTEGER.fullmatch(text):
        v = int(text)
        if -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
            return v
    raise ConfigError(f"Invalid value {value} for configuration {name}: Not a number of type {type_name}")


def _parse_long(name: str, value: str) -> int:
    return _parse_integer(name, value, "LONG", 64)


def _parse_int(name: str, value: str) -> int:
    return _parse_integer(name, value, "INT", 32)


def _parse_short(name: str, value: str) -> int:
    return _parse_integer(name, value, "SHORT", 16)


def _parse_double(name: str, value: str) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
        ) from None


def _parse_bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ConfigError(f"Invalid value {value} for configuration {name}: Expected value to be either true or false")


def _parse_string(name: str, value: str) -> str:
    return str(value).strip()


def _parse_list(name: str, value: str) -> str:
    return ",".join(p.strip() for p in str(value).split(",") if p.strip())


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "long": _parse_long,
    "int": _parse_int,
    "short": _parse_short,
    "double": _parse_double,
    "boolean": _parse_bool,
    "string": _parse_string,
    "list": _parse_list,
    "class": _parse_string,
    "password": _parse_string,
}

# DescribeConfigs config_type ids (Kafka's DescribeConfigsResponse.ConfigType).
CONFIG_TYPE_IDS = {
    "boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9,
}


def java_double_str(v: float) -> str:
    """Java's Double.toString: plain within [1e-3, 1e7) (``0.5``, ``100.0``), else scientific
    (``1.0E7``, ``1.7976931348623157E308``), with the shortest digits that round-trip."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    d = Decimal(repr(float(v))).normalize()
    sign = "-" if d < 0 else ""
    if 1e-3 <= abs(v) < 1e7:
        text = format(abs(d), "f")
        return sign + (text if "." in text else text + ".0")
    _, digits, exponent = d.as_tuple()
    text = "".join(map(str, digits))
    return f"{sign}{text[0]}.{text[1:] or '0'}E{len(text) - 1 + int(exponent)}"


def format_config_value(type_: str, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString: how a parsed value is shown (passwords are hidden)."""
    if value is None or type_ == "password":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if type_ == "double":
        return java_double_str(float(value))
    return str(value)


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str
    default: Any
    broker_synonym: str | None = None
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] | None = None
    list_of: tuple[str, ...] | None = None
    sensitive: bool = False
    # Also allowed outside [at_least, at_most] (compression.gzip.level: 1..9 or -1).
    or_equal: Any = None
    # Kafka's ConfigDef.ValidList (every LIST config of Kafka 4.3, and listeners, log.dirs...):
    # None = no such validator; else whether a value that is an empty list is allowed.
    list_empty_ok: bool | None = None
    # Kafka's ThrottledReplicaListValidator ({leader,follower}.replication.throttled.replicas).
    replica_list: bool = False
    # Kafka's CaseInsensitiveValidString: one_of (upper case) matched ignoring case.
    case_insensitive: bool = False

    def parse(self, value: Any) -> Any:
        if self.list_empty_ok is not None:
            self._check_list(value)
        if self.replica_list:
            self._check_replica_list(value)
        parsed = _PARSERS[self.type](self.name, value)
        # Kafka's range messages quote the parsed value (a double 2 is "2.0").
        shown = format_config_value(self.type, parsed) if self.type in ("int", "long", "short", "double") else value
        if self.or_equal is not None:
            if parsed != self.or_equal and not self.at_least <= parsed <= self.at_most:
                raise ConfigError(
                    f"Invalid value {shown} for configuration {self.name}: Value must be between "
                    f"{self.at_least} and {self.at_most} or equal to {self.or_equal}"
                )
            return parsed
        if self.at_least is not None and parsed < self.at_least:
            bound = int(self.at_least) if self.type != "double" else self.at_least
            raise ConfigError(f"Invalid value {shown} for configuration {self.name}: Value must be at least {bound}")
        if self.at_most is not None and parsed > self.at_most:
            bound = int(self.at_most) if self.type != "double" else self.at_most
            raise ConfigError(f"Invalid value {shown} for configuration {self.name}: Value must be no more than {bound}")
        if self.one_of is not None and (parsed.upper() if self.case_insensitive else parsed) not in self.one_of:
            raise ConfigError(
                f"Invalid value {value} for configuration {self.name}: String must be one of"
                f"{' (case insensitive)' if self.case_insensitive else ''}: {', '.join(self.one_of)}"
            )
        if self.list_of is not None and self.list_empty_ok is None:
            items = parsed.split(",") if parsed else []
            for item in items:
                if item not in self.list_of:
                    raise ConfigError(
                        f"Invalid value {item} for configuration {self.name}: String must be one of: {', '.join(self.list_of)}"
                    )
        return parsed

    def _check_list(self, value: Any) -> None:
        """Kafka 4.3's ValidList.ensureValid, in its order, on the list as Kafka parses it (split
        at commas with the blanks around them; blank text is the empty list): an empty list, then
        duplicates, then each element in turn: empty (``a,,b``), or not one of ``list_of``."""
        text = str(value).strip()
        items = _LIST_SEPARATOR.split(text) if text else []
        if not items and not self.list_empty_ok:
            allowed = f"[{', '.join(self.list_of)}]" if self.list_of else "any non-empty value"
            raise ConfigError(f"Configuration '{self.name}' must not be empty. Valid values include: {allowed}")
        if len(set(items)) != len(items):
            raise ConfigError(f"Configuration '{self.name}' values must not be duplicated.")
        for item in items:
            if not item:
                raise ConfigError(f"Configuration '{self.name}' values must not be empty.")
            if self.list_of is not None and item not in self.list_of:
                raise ConfigError(
                    f"Invalid value {item} for configuration {self.name}: String must be one of: {', '.join(self.list_of)}"
                )

    def _check_replica_list(self, value: Any) -> None:
        """``*`` or ``partition:broker`` entries (empty ones pass, as in Kafka's regex)."""
        text = str(value).strip()
        items = _LIST_SEPARATOR.split(text) if text else []
        if not (all(_REPLICA.fullmatch(i) for i in items) or "".join(items) == "*"):
            raise ConfigError(
                f"Invalid value [{', '.join(items)}] for configuration {self.name}: {self.name} must be the literal '*' "
                "or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )


_LIST_SEPARATOR = re.compile(r"\s*,\s*")  # Kafka's ConfigDef.COMMA_WITH_WHITESPACE
_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _d(name: str, type_: str, default: Any, synonym: str | None = None, **kw: Any) -> ConfigDef:
    return ConfigDef(name, type_, default, synonym, **kw)


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Kafka 4.x topic configs (sorted by name), with the broker config each one defaults to.
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        _d("cleanup.policy", "list", "delete", "log.cleanup.policy", list_of=("compact", "delete"), list_empty_ok=True),
        _d("compression.gzip.level", "int", -1, "compression.gzip.level", at_least=1, at_most=9, or_equal=-1),
        _d("compression.lz4.level", "int", 9, "compression.lz4.level", at_least=1, at_most=17),
        _d("compression.type", "string", "producer", "compression.type", one_of=COMPRESSION_TYPES),
        _d("compression.zstd.level", "int", 3, "compression.zstd.level", at_least=-131072, at_most=22),
        _d("delete.retention.ms", "long", 86400000, "log.cleaner.delete.retention.ms", at_least=0),
        _d("file.delete.delay.ms", "long", 60000, "log.segment.delete.delay.ms", at_least=0),
        _d("flush.messages", "long", LONG_MAX, "log.flush.interval.messages", at_least=1),
        _d("flush.ms", "long", LONG_MAX, "log.flush.interval.ms", at_least=0),
        _d("follower.replication.throttled.replicas", "list", "", "follower.replication.throttled.replicas", replica_list=True),
        _d("index.interval.bytes", "int", 4096, "log.index.interval.bytes", at_least=0),
        _d("leader.replication.throttled.replicas", "list", "", "leader.replication.throttled.replicas", replica_list=True),
        _d("local.retention.bytes", "long", -2, "log.local.retention.bytes", at_least=-2),
        _d("local.retention.ms", "long", -2, "log.local.retention.ms", at_least=-2),
        _d("max.compaction.lag.ms", "long", LONG_MAX, "log.cleaner.max.compaction.lag.ms", at_least=1),
        _d("max.message.bytes", "int", 1048588, "message.max.bytes", at_least=0),
        _d("message.timestamp.after.max.ms", "long", 3600000, "log.message.timestamp.after.max.ms", at_least=0),
        _d("message.timestamp.before.max.ms", "long", LONG_MAX, "log.message.timestamp.before.max.ms", at_least=0),
        _d("message.timestamp.type", "string", "CreateTime", "log.message.timestamp.type", one_of=("CreateTime", "LogAppendTime")),
        _d("min.cleanable.dirty.ratio", "double", 0.5, "log.cleaner.min.cleanable.ratio", at_least=0, at_most=1),
        _d("min.compaction.lag.ms", "long", 0, "log.cleaner.min.compaction.lag.ms", at_least=0),
        _d("min.insync.replicas", "int", 1, "min.insync.replicas", at_least=1),
        _d("preallocate", "boolean", False, "log.preallocate"),
        _d("remote.log.copy.disable", "boolean", False),
        _d("remote.log.delete.on.disable", "boolean", False),
        _d("remote.storage.enable", "boolean", False),
        _d("retention.bytes", "long", -1, "log.retention.bytes"),
        _d("retention.ms", "long", 604800000, "log.retention.ms", at_least=-1),
        _d("segment.bytes", "int", 1073741824, "log.segment.bytes", at_least=14),
        _d("segment.index.bytes", "int", 10485760, "log.index.size.max.bytes", at_least=4),
        _d("segment.jitter.ms", "long", 0, "log.roll.jitter.ms", at_least=0),
        _d("segment.ms", "long", 604800000, "log.roll.ms", at_least=1),
        _d("unclean.leader.election.enable", "boolean", False, "unclean.leader.election.enable"),
    ]
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse topic config overrides; raise ConfigError (Kafka's message) on the first bad one.
    As Kafka's LogConfig.validate: every name is checked before any value."""
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    parsed: dict[str, Any] = {}
    for name, value in configs.items():
        if value is None:
            raise ConfigError(f"Invalid value null for configuration {name}: the value must not be null")
        parsed[name] = TOPIC_CONFIGS[name].parse(value)
    return parsed


def validate_topic_config_set(overrides: Mapping[str, Any], broker_defaults: Mapping[str, Any] | None = None) -> None:
    """Kafka's checks of a topic's whole (parsed) config set, after each value is valid on its own
    (LogConfig.validateTopicLogConfigValues, with tiered storage disabled on this broker)."""
    values: dict[str, Any] = {name: c.default for name, c in TOPIC_CONFIGS.items()}
    values.update(broker_defaults or {})
    values.update(overrides)
    min_lag, max_lag = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if min_lag > max_lag:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})")
    if values["remote.storage.enable"]:
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")


# Topic configs without a broker-wide default in Kafka (LogConfig.CONFIGS_WITH_NO_SERVER_DEFAULTS).
_NO_SERVER_DEFAULT = {"follower.replication.throttled.replicas", "leader.replication.throttled.replicas"}

# Kafka's ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS: topic config -> the broker config of
# highest priority that gives its default (log.retention.ms for retention.ms, ...).
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    name: c.broker_synonym for name, c in TOPIC_CONFIGS.items() if c.broker_synonym and name not in _NO_SERVER_DEFAULT
}


def dynamic_log_defaults(layers: list[Mapping[str, str]]) -> dict[str, Any]:
    """Topic config defaults that dynamic broker configs set (``log.retention.ms`` ->
    ``retention.ms`` ...); ``layers`` highest precedence first (this broker's, then the
    cluster-wide defaults). Values that no longer parse are skipped. A negative
    ``log.retention.ms`` is -1, unlimited (KafkaConfig.logRetentionTimeMillis: the broker-level
    setting has no lower bound, the topic's retention.ms at least -1)."""
    out: dict[str, Any] = {}
    for name, synonym in TOPIC_CONFIG_SYNONYMS.items():
        cdef = _BROKER_RETENTION_MS if synonym == "log.retention.ms" else TOPIC_CONFIGS[name]
        for layer in layers:
            if synonym in layer:
                try:
                    out[name] = cdef.parse(layer[synonym])
                except ConfigError:
                    continue
                if synonym == "log.retention.ms" and out[name] < 0:
                    out[name] = -1
                break
    return out


_BROKER_RETENTION_MS = ConfigDef("log.retention.ms", "long", None)


class LogConfig:
    """Effective config of one log: topic overrides over broker defaults over Kafka defaults."""

    def __init__(self, broker_defaults: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None) -> None:
        self.broker_defaults = dict(broker_defaults or {})
        self.overrides = dict(overrides or {})
        values: dict[str, Any] = {name: c.default for name, c in TOPIC_CONFIGS.items()}
        values.update(self.broker_defaults)
        values.update(self.overrides)
        self.values = values
        self.segment_bytes: int = values["segment.bytes"]
        self.segment_ms: int = values["segment.ms"]
        self.segment_jitter_ms: int = values["segment.jitter.ms"]
        self.segment_index_bytes: int = values["segment.index.bytes"]
        self.index_interval_bytes: int = values["index.interval.bytes"]
        self.max_message_bytes: int = values["max.message.bytes"]
        self.message_timestamp_type: str = values["message.timestamp.type"]
        self.message_timestamp_before_max_ms: int = values["message.timestamp.before.max.ms"]
        self.message_timestamp_after_max_ms: int = values["message.timestamp.after.max.ms"]
        self.cleanup_policy: str = values["cleanup.policy"]
        self.retention_ms: int = values["retention.ms"]
        self.retention_bytes: int = values["retention.bytes"]
        self.flush_messages: int = values["flush.messages"]
        self.flush_ms: int = values["flush.ms"]
        self.file_delete_delay_ms: int = values["file.delete.delay.ms"]
        self.preallocate: bool = values["preallocate"]
        # Read on every append: computed once (a LogConfig is never changed, a new one replaces it).
        policies = self.cleanup_policy.split(",")
        self.compact: bool = "compact" in policies
        self.delete: bool = "delete" in policies
        # How long a segment may stay active (Kafka's LogConfig.maxSegmentMs): segment.ms, or
        # max.compaction.lag.ms when smaller on a compacted topic, so the lag guarantee holds.
        max_lag = values["max.compaction.lag.ms"]
        self.max_segment_ms: int = min(max_lag, self.segment_ms) if self.compact and max_lag > 0 else self.segment_ms


    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def source_of(self, name: str) -> str:
        if name in self.overrides:
            return "DYNAMIC_TOPIC_CONFIG"
        if name in self.broker_defaults:
            return "STATIC_BROKER_CONFIG"
        return "DEFAULT_CONFIG"

# The order in which Kafka 4.0 lists a topic's configs in DescribeConfigs answers (its hash-map order).
DESCRIBE_ORDER: tuple[str, ...] = (
    'compression.type',
    'remote.log.delete.on.disable',
    'leader.replication.throttled.replicas',
    'remote.storage.enable',
    'min.insync.replicas',
    'segment.jitter.ms',
    'remote.log.copy.disable',
    'local.retention.ms',
    'cleanup.policy',
    'flush.ms',
    'follower.replication.throttled.replicas',
    'compression.lz4.level',
    'segment.bytes',
    'retention.ms',
    'compression.gzip.level',
    'flush.messages',
    'compression.zstd.level',
    'max.compaction.lag.ms',
    'file.delete.delay.ms',
    'max.message.bytes',
    'min.compaction.lag.ms',
    'message.timestamp.type',
    'local.retention.bytes',
    'preallocate',
    'min.cleanable.dirty.ratio',
    'index.interval.bytes',
    'unclean.leader.election.enable',
    'retention.bytes',
    'delete.retention.ms',
    'message.timestamp.after.max.ms',
    'message.timestamp.before.max.ms',
    'segment.ms',
    'segment.index.bytes',
)

# Kafka 4.0's documentation of each topic config (TopicConfig.*_DOC), as DescribeConfigs returns it.
TOPIC_CONFIG_DOCS: dict[str, str] = {
    'cleanup.policy': 'This config designates the retention policy to use on log segments. The "delete" policy (which is the default) will discard old segments when their retention time or size limit has been reached. The "compact" policy will enable <a href="#compaction">log compaction</a>, which retains the latest value for each key. It is also possible to specify both policies in a comma-separated list (e.g. "delete,compact"). In this case, old segments will be discarded per the retention time and size configuration, while retained segments will be compacted.',
    'compression.gzip.level': 'The compression level to use if compression.type is set to <code>gzip</code>.',
    'compression.lz4.level': 'The compression level to use if compression.type is set to <code>lz4</code>.',
    'compression.type': "Specify the final compression type for a given topic. This configuration accepts the standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts 'uncompressed' which is equivalent to no compression; and 'producer' which means retain the original compression codec set by the producer.",
    'compression.zstd.level': 'The compression level to use if compression.type is set to <code>zstd</code>.',
    'delete.retention.ms': 'The amount of time to retain delete tombstone markers for <a href="#compaction">log compacted</a> topics. This setting also gives a bound on the time in which a consumer must complete a read if they begin from offset 0 to ensure that they get a valid snapshot of the final stage (otherwise delete tombstones may be collected before they complete their scan).',
    'file.delete.delay.ms': 'The time to wait before deleting a file from the filesystem',
    'flush.messages': 'This setting allows specifying an interval at which we will force an fsync of data written to the log. For example if this was set to 1 we would fsync after every message; if it were 5 we would fsync after every five messages. In general we recommend you not set this and use replication for durability and allow the operating system\'s background flush capabilities as it is more efficient. This setting can be overridden on a per-topic basis (see <a href="#topicconfigs">the per-topic configuration section</a>).',
    'flush.ms': "This setting allows specifying a time interval at which we will force an fsync of data written to the log. For example if this was set to 1000 we would fsync after 1000 ms had passed. In general we recommend you not set this and use replication for durability and allow the operating system's background flush capabilities as it is more efficient.",
    'follower.replication.throttled.replicas': "A list of replicas for which log replication should be throttled on the follower side. The list should describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' can be used to throttle all replicas for this topic.",
    'index.interval.bytes': "This setting controls how frequently Kafka adds an index entry to its offset index. The default setting ensures that we index a message roughly every 4096 bytes. More indexing allows reads to jump closer to the exact position in the log but makes the index larger. You probably don't need to change this.",
    'leader.replication.throttled.replicas': "A list of replicas for which log replication should be throttled on the leader side. The list should describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' can be used to throttle all replicas for this topic.",
    'local.retention.bytes': 'The maximum size of local log segments that can grow for a partition before it deletes the old segments. Default value is -2, it represents `retention.bytes` value to be used. The effective value should always be less than or equal to `retention.bytes` value.',
    'local.retention.ms': 'The number of milliseconds to keep the local log segment before it gets deleted. Default value is -2, it represents `retention.ms` value is to be used. The effective value should always be less than or equal to `retention.ms` value.',
    'max.compaction.lag.ms': 'The maximum time a message will remain ineligible for compaction in the log. Only applicable for logs that are being compacted.',
    'max.message.bytes': "The largest record batch size allowed by Kafka (after compression if compression is enabled). If this is increased and there are consumers older than 0.10.2, the consumers' fetch size must also be increased so that they can fetch record batches this large. In the latest message format version, records are always grouped into batches for efficiency. In previous message format versions, uncompressed records are not grouped into batches and this limit only applies to a single record in that case.",
    'message.timestamp.after.max.ms': "This configuration sets the allowable timestamp difference between the message timestamp and the broker's timestamp. The message timestamp can be later than or equal to the broker's timestamp, with the maximum allowable difference determined by the value set in this configuration. If message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds this specified threshold. This configuration is ignored if message.timestamp.type=LogAppendTime.",
    'message.timestamp.before.max.ms': "This configuration sets the allowable timestamp difference between the broker's timestamp and the message timestamp. The message timestamp can be earlier than or equal to the broker's timestamp, with the maximum allowable difference determined by the value set in this configuration. If message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds this specified threshold. This configuration is ignored if message.timestamp.type=LogAppendTime.",
    'message.timestamp.type': 'Define whether the timestamp in the message is message create time or log append time.',
    'min.cleanable.dirty.ratio': 'This configuration controls how frequently the log compactor will attempt to clean the log (assuming <a href="#compaction">log compaction</a> is enabled). By default we will avoid cleaning a log where more than 50% of the log has been compacted. This ratio bounds the maximum space wasted in the log by duplicates (at 50% at most 50% of the log could be duplicates). A higher ratio will mean fewer, more efficient cleanings but will mean more wasted space in the log. If the max.compaction.lag.ms or the min.compaction.lag.ms configurations are also specified, then the log compactor considers the log to be eligible for compaction as soon as either: (i) the dirty ratio threshold has been met and the log has had dirty (uncompacted) records for at least the min.compaction.lag.ms duration, or (ii) if the log has had dirty (uncompacted) records for at most the max.compaction.lag.ms period.',
    'min.compaction.lag.ms': 'The minimum time a message will remain uncompacted in the log. Only applicable for logs that are being compacted.',
    'min.insync.replicas': 'When a producer sets acks to "all" (or "-1"), this configuration specifies the minimum number of replicas that must acknowledge a write for the write to be considered successful. If this minimum cannot be met, then the producer will raise an exception (either <code>NotEnoughReplicas</code> or <code>NotEnoughReplicasAfterAppend</code>).<br> Regardless of the <code>acks</code> setting, the messages will not be visible to the consumers until they are replicated to all in-sync replicas and the <code>min.insync.replicas</code> condition is met.<br> When used together, <code>min.insync.replicas</code> and <code>acks</code> allow you to enforce greater durability guarantees. A typical scenario would be to create a topic with a replication factor of 3, set <code>min.insync.replicas</code> to 2, and produce with <code>acks</code> of "all". This will ensure that a majority of replicas must persist a write before it\'s considered successful by the producer and it\'s visible to consumers.',
    'preallocate': 'True if we should preallocate the file on disk when creating a new log segment.',
    'remote.log.copy.disable': 'Determines whether tiered data for a topic should become read only, and no more data uploading on a topic. Once this config is set to true, the local retention configuration (i.e. local.retention.ms/bytes) becomes irrelevant, and all data expiration follows the topic-wide retention configuration(i.e. retention.ms/bytes).',
    'remote.log.delete.on.disable': 'Determines whether tiered data for a topic should be deleted after tiered storage is disabled on a topic. This configuration should be enabled when trying to set `remote.storage.enable` from true to false',
    'remote.storage.enable': 'To enable tiered storage for a topic, set this configuration as true. You can not disable this config once it is enabled. It will be provided in future versions.',
    'retention.bytes': 'This configuration controls the maximum size a partition (which consists of log segments) can grow to before we will discard old log segments to free up space if we are using the "delete" retention policy. By default there is no size limit only a time limit. Since this limit is enforced at the partition level, multiply it by the number of partitions to compute the topic retention in bytes. Additionally, retention.bytes configuration operates independently of "segment.ms" and "segment.bytes" configurations. Moreover, it triggers the rolling of new segment if the retention.bytes is configured to zero.',
    'retention.ms': 'This configuration controls the maximum time we will retain a log before we will discard old log segments to free up space if we are using the "delete" retention policy. This represents an SLA on how soon consumers must read their data. If set to -1, no time limit is applied. Additionally, retention.ms configuration operates independently of "segment.ms" and "segment.bytes" configurations. Moreover, it triggers the rolling of new segment if the retention.ms condition is satisfied.',
    'segment.bytes': 'This configuration controls the segment file size for the log. Retention and cleaning is always done a file at a time so a larger segment size means fewer files but less granular control over retention.',
    'segment.index.bytes': 'This configuration controls the size of the index that maps offsets to file positions. We preallocate this index file and shrink it only after log rolls. You generally should not need to change this setting.',
    'segment.jitter.ms': 'The maximum random jitter subtracted from the scheduled segment roll time to avoid thundering herds of segment rolling',
    'segment.ms': "This configuration controls the period of time after which Kafka will force the log to roll even if the segment file isn't full to ensure that retention can delete or compact old data.",
    'unclean.leader.election.enable': 'Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort, even though doing so may result in data loss.<p>Note: In KRaft mode, when enabling this config dynamically, it needs to wait for the unclean leader electionthread to trigger election periodically (default is 5 minutes). Please run `kafka-leader-election.sh` with `unclean` option to trigger the unclean leader election immediately if needed.</p>',
}
