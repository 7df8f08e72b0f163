"""Broker configuration: Kafka's ``server.properties`` names, defaults and precedence.

Sources, lowest first: Kafka's defaults, the ``--config`` properties file, ``KAFKA_*``
environment variables (the apache/kafka image's convention: ``KAFKA_LOG_SEGMENT_BYTES`` ->
``log.segment.bytes``), ``--override key=value`` flags. Topic-level defaults
(``log.segment.bytes`` -> ``segment.bytes`` ...) are derived with Kafka's synonym rules, e.g.
retention ``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``.
Every value remembers where it came from (``kafka-sidecar config --show`` prints it).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_sidecar.storage.log_config import TOPIC_CONFIGS, ConfigDef, ConfigError

log = logging.getLogger(__name__)

# Broker-only settings we understand: name -> definition (type, default, bounds).
BROKER_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        ConfigDef("num.partitions", "int", 1, at_least=1),
        ConfigDef("auto.create.topics.enable", "boolean", True),
        # Kafka has no lower bound here (it starts, then refuses every topic created with the
        # default: INVALID_REPLICATION_FACTOR); ours keeps at least 1 until server/apis/topics.py
        # answers that way for a default below 1 (it would create the topic).
        ConfigDef("default.replication.factor", "int", 1, at_least=1),
        ConfigDef("delete.topic.enable", "boolean", True),
        ConfigDef("node.id", "int", 1, at_least=0),
        # No bound of its own: a synonym of node.id, checked against it in BrokerConfig.load.
        ConfigDef("broker.id", "int", 1),
        ConfigDef("socket.request.max.bytes", "int", 104857600, at_least=1),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, at_least=0),
        ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, at_least=0),
        ConfigDef("log.flush.scheduler.interval.ms", "long", 2**63 - 1),
        ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000),
        ConfigDef("log.segment.delete.delay.ms", "long", 60000, at_least=0),
        ConfigDef("log.retention.check.interval.ms", "long", 300000, at_least=1),
        ConfigDef("log.retention.hours", "int", 168),
        ConfigDef("log.retention.minutes", "int", None),
        ConfigDef("log.roll.hours", "int", 168, at_least=1),
        ConfigDef("log.roll.jitter.hours", "int", 0, at_least=0),
        ConfigDef("log.dirs", "string", None, list_empty_ok=False),
        ConfigDef("log.dir", "string", "/tmp/kafka-logs", list_empty_ok=False),
        # Kafka's default is PLAINTEXT://:9092 (every interface); a sidecar stays on loopback,
        # both 127.0.0.1 and ::1 (server/listeners.py).
        ConfigDef("listeners", "string", "PLAINTEXT://localhost:9092", list_empty_ok=False),
        ConfigDef("advertised.listeners", "string", None, list_empty_ok=False),
        ConfigDef("connections.max.idle.ms", "long", 600000),
        ConfigDef("max.connections", "int", 2**31 - 1, at_least=0),
        # Per-IP limits and the broker-wide creation rate (server/quotas/connections.py).
        ConfigDef("max.connections.per.ip", "int", 2**31 - 1, at_least=0),
        ConfigDef("max.connections.per.ip.overrides", "string", ""),
        ConfigDef("max.connection.creation.rate", "int", 2**31 - 1, at_least=0),
        ConfigDef("group.initial.rebalance.delay.ms", "int", 3000),
        # Group coordinator (server/groups), Kafka's GroupCoordinatorConfig names and defaults.
        ConfigDef("group.min.session.timeout.ms", "int", 6000),
        ConfigDef("group.max.session.timeout.ms", "int", 1800000),
        ConfigDef("group.max.size", "int", 2**31 - 1, at_least=1),
        # Consumer groups of the KIP-848 protocol (server/groups/consumer_manager.py).
        ConfigDef("group.consumer.session.timeout.ms", "int", 45000, at_least=1),
        ConfigDef("group.consumer.min.session.timeout.ms", "int", 45000, at_least=1),
        ConfigDef("group.consumer.max.session.timeout.ms", "int", 60000, at_least=1),
        ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, at_least=1),
        ConfigDef("group.consumer.min.heartbeat.interval.ms", "int", 5000, at_least=1),
        ConfigDef("group.consumer.max.heartbeat.interval.ms", "int", 15000, at_least=1),
        ConfigDef("group.consumer.max.size", "int", 2**31 - 1, at_least=1),
        ConfigDef("group.consumer.assignment.interval.ms", "int", 1000, at_least=0),
        ConfigDef("group.consumer.assignors", "list", "uniform,range", list_empty_ok=False),  # any non-empty list, as Kafka
        ConfigDef("group.consumer.migration.policy", "string", "bidirectional", one_of=("DISABLED", "DOWNGRADE", "UPGRADE", "BIDIRECTIONAL"), case_insensitive=True),
        # Share groups (KIP-932, server/share): Kafka 4.3.1's ShareGroupConfig defaults and bounds.
        ConfigDef("group.share.session.timeout.ms", "int", 45000, at_least=1),
        ConfigDef("group.share.min.session.timeout.ms", "int", 45000, at_least=1),
        ConfigDef("group.share.max.session.timeout.ms", "int", 60000, at_least=1),
        ConfigDef("group.share.heartbeat.interval.ms", "int", 5000, at_least=1),
        ConfigDef("group.share.min.heartbeat.interval.ms", "int", 5000, at_least=1),
        ConfigDef("group.share.max.heartbeat.interval.ms", "int", 15000, at_least=1),
        ConfigDef("group.share.max.size", "int", 200, at_least=1, at_most=1000),
        ConfigDef("group.share.assignors", "list", "simple", list_empty_ok=False),
        ConfigDef("group.share.assignment.interval.ms", "int", 1000, at_least=0),
        ConfigDef("group.share.min.assignment.interval.ms", "int", 0, at_least=0),
        ConfigDef("group.share.max.assignment.interval.ms", "int", 15000, at_least=0),
        ConfigDef("group.share.record.lock.duration.ms", "int", 30000, at_least=1000, at_most=3600000),
        ConfigDef("group.share.min.record.lock.duration.ms", "int", 15000, at_least=1000, at_most=30000),
        ConfigDef("group.share.max.record.lock.duration.ms", "int", 60000, at_least=30000, at_most=3600000),
        ConfigDef("group.share.delivery.count.limit", "int", 5, at_least=2, at_most=10),
        ConfigDef("group.share.min.delivery.count.limit", "int", 2, at_least=2, at_most=5),
        ConfigDef("group.share.max.delivery.count.limit", "int", 10, at_least=5, at_most=25),
        ConfigDef("group.share.partition.max.record.locks", "int", 2000, at_least=100, at_most=10000),
        ConfigDef("group.share.min.partition.max.record.locks", "int", 100, at_least=100, at_most=2000),
        ConfigDef("group.share.max.partition.max.record.locks", "int", 4000, at_least=2000, at_most=10000),
        ConfigDef("group.share.max.share.sessions", "int", 2000, at_least=1),
        ConfigDef("group.share.initialize.retry.interval.ms", "int", 30000, at_least=1),  # internal in Kafka
        ConfigDef("group.share.persister.class.name", "string", "org.apache.kafka.server.share.persister.DefaultStatePersister"),
        ConfigDef("offsets.topic.num.partitions", "int", 50, at_least=1),
        ConfigDef("offsets.topic.segment.bytes", "int", 104857600, at_least=1),
        ConfigDef("offsets.topic.compression.codec", "int", 0, at_least=0, at_most=4),
        ConfigDef("offsets.retention.minutes", "int", 10080, at_least=1),
        ConfigDef("offsets.retention.check.interval.ms", "long", 600000, at_least=1),
        ConfigDef("offset.metadata.max.bytes", "int", 4096),
        ConfigDef("offsets.topic.replication.factor", "short", 3, at_least=1),
        ConfigDef("transaction.state.log.replication.factor", "short", 3, at_least=1),
        ConfigDef("transaction.state.log.min.isr", "int", 2, at_least=1),
        # Read from a Kafka server.properties and otherwise unused (one process, node 1).
        ConfigDef("process.roles", "list", "", list_of=("broker", "controller"), list_empty_ok=False),
        ConfigDef("controller.quorum.voters", "list", ""),
        ConfigDef("controller.listener.names", "list", "", list_empty_ok=False),
        ConfigDef("inter.broker.listener.name", "string", None),
        ConfigDef("listener.security.protocol.map", "string", ""),
        ConfigDef("log.cleaner.enable", "boolean", True),
        ConfigDef("log.cleaner.threads", "int", 1, at_least=0),
        ConfigDef("log.cleaner.backoff.ms", "long", 15000, at_least=0),
        ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728),
        ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9),
        ConfigDef("log.cleaner.io.buffer.size", "int", 524288, at_least=0),
        ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
        ConfigDef("log.initial.task.delay.ms", "long", 30000, at_least=0),
        ConfigDef("num.network.threads", "int", 3, at_least=1),
        ConfigDef("num.io.threads", "int", 8, at_least=1),
        ConfigDef("num.recovery.threads.per.data.dir", "int", 2, at_least=1),
        ConfigDef("producer.id.expiration.ms", "int", 86400000, at_least=1),
        ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, at_least=1),
        ConfigDef("transactional.id.expiration.ms", "int", 604800000, at_least=1),
        # The transaction coordinator (server/transactions): Kafka's names and defaults.
        ConfigDef("transaction.state.log.num.partitions", "int", 50, at_least=1),
        ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, at_least=1),
        ConfigDef("transaction.max.timeout.ms", "int", 900000, at_least=1),
        ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, at_least=1),
        ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, at_least=1),
        ConfigDef("transaction.partition.verification.enable", "boolean", True),
        # Security (server/security): TLS, SASL and the ACL authorizer, Kafka's names and defaults.
        # Per-listener values use Kafka's prefix, e.g. listener.name.sasl_ssl.ssl.keystore.location
        # and listener.name.sasl_plaintext.plain.sasl.jaas.config (server/security reads them).
        ConfigDef("ssl.keystore.type", "string", "JKS"),
        ConfigDef("ssl.keystore.location", "string", None),
        ConfigDef("ssl.keystore.password", "password", None, sensitive=True),
        ConfigDef("ssl.key.password", "password", None, sensitive=True),
        ConfigDef("ssl.keystore.certificate.chain", "password", None, sensitive=True),
        ConfigDef("ssl.keystore.key", "password", None, sensitive=True),
        ConfigDef("ssl.truststore.type", "string", "JKS"),
        ConfigDef("ssl.truststore.location", "string", None),
        ConfigDef("ssl.truststore.password", "password", None, sensitive=True),
        ConfigDef("ssl.truststore.certificates", "password", None, sensitive=True),
        ConfigDef("ssl.client.auth", "string", "none", one_of=("required", "requested", "none")),
        ConfigDef("ssl.protocol", "string", "TLSv1.3"),
        ConfigDef("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", list_empty_ok=True),
        ConfigDef("ssl.cipher.suites", "list", "", list_empty_ok=True),
        ConfigDef("ssl.endpoint.identification.algorithm", "string", "https"),
        ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT"),
        ConfigDef("sasl.enabled.mechanisms", "list", "GSSAPI", list_empty_ok=True),
        ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI"),
        ConfigDef("sasl.jaas.config", "password", None, sensitive=True),
        ConfigDef("connections.max.reauth.ms", "long", 0),
        ConfigDef("authorizer.class.name", "string", ""),
        ConfigDef("super.users", "string", None),
        ConfigDef("allow.everyone.if.no.acl.found", "boolean", False),
    ]
}
# Authentication limits of Kafka's SocketServer/SaslServerAuthenticator (server/security).
# Kafka has no bound on sasl.server.max.receive.size (-1 is NetworkReceive's "unlimited", 0 or
# less refuses every frame before authentication); ours keeps at least 1 until server/connection.py
# and server/security/listener.py give -1 and 0 those meanings.
BROKER_CONFIGS["sasl.server.max.receive.size"] = ConfigDef("sasl.server.max.receive.size", "int", 524288, at_least=1)
BROKER_CONFIGS["connection.failed.authentication.delay.ms"] = ConfigDef(
    "connection.failed.authentication.delay.ms", "int", 100, at_least=0)

# Client quotas (server/quotas): Kafka's QuotaConfig names, types and defaults.
BROKER_CONFIGS["quota.window.num"] = ConfigDef("quota.window.num", "int", 11, at_least=1)
BROKER_CONFIGS["quota.window.size.seconds"] = ConfigDef("quota.window.size.seconds", "int", 1, at_least=1)
# Incremental fetch sessions (server/fetch_session.py): ServerConfigs' name, default and bound.
BROKER_CONFIGS["max.incremental.fetch.session.cache.slots"] = ConfigDef(
    "max.incremental.fetch.session.cache.slots", "int", 1000, at_least=0)


@dataclass(frozen=True)
class JavaClassDef(ConfigDef):
    """A CLASS config (Kafka's ConfigDef.Type.CLASS) we know but cannot honour: no Java class can
    be loaded here, so any value is refused with the message Kafka gives for a class it cannot
    find, rather than started without it; unset it is Kafka's default (null)."""

    def parse(self, value: Any) -> Any:
        raise ConfigError(f"Invalid value {value} for configuration {self.name}: Class {value} could not be found.")


# Unset, quotas are DefaultQuotaCallback's (user, client-id) precedence: server/quotas/manager.py.
BROKER_CONFIGS["client.quota.callback.class"] = JavaClassDef("client.quota.callback.class", "class", None)

# Kafka's per-listener settings: ``listener.name.<listener, lower case>.<key>`` overrides ``<key>``
# for that listener, and ``listener.name.<listener>.<mechanism, lower case>.<key>`` for one SASL
# mechanism on it (Kafka's ListenerName.configPrefix / saslMechanismPrefix). Only the keys
# kafka-sidecar applies per listener are known in that form; others are warned about as unknown.
_LISTENER_PREFIXED = re.compile(r"listener\.name\.([^.]+)\.(.+)")
LISTENER_KEYS = frozenset(
    k for k in BROKER_CONFIGS if k.startswith(("ssl.", "sasl.")) and k != "sasl.mechanism.inter.broker.protocol"
) | {"connections.max.reauth.ms"}
MECHANISM_KEYS = frozenset({"sasl.jaas.config", "connections.max.reauth.ms"})
_MECHANISM = re.compile(r"[a-z0-9][a-z0-9_\-]*")


def listener_key(listener: str, key: str, mechanism: str | None = None) -> str:
    """The prefixed name of ``key`` for a listener (and a SASL mechanism), as Kafka spells it."""
    prefix = f"listener.name.{listener.lower()}."
    return prefix + (f"{mechanism.lower()}." if mechanism else "") + key


def definition(name: str) -> ConfigDef | None:
    """The definition that parses ``name``: a broker config, a topic config's broker synonym, or a
    listener-prefixed key (with the unprefixed key's type and checks)."""
    cdef = BROKER_CONFIGS.get(name) or _TOPIC_BY_SYNONYM.get(name)
    if cdef is not None:
        return cdef
    m = _LISTENER_PREFIXED.fullmatch(name)
    if m is None:
        return None
    rest = m.group(2)
    if rest in LISTENER_KEYS:
        return BROKER_CONFIGS[rest]
    mechanism, _, key = rest.partition(".")
    if key in MECHANISM_KEYS and _MECHANISM.fullmatch(mechanism):
        return BROKER_CONFIGS[key]
    return None

_TOPIC_BY_SYNONYM: dict[str, ConfigDef] = {c.broker_synonym: c for c in TOPIC_CONFIGS.values() if c.broker_synonym}
# Kafka's broker-level definition of log.retention.ms has no lower bound (the topic's retention.ms
# has at least -1): any negative value means unlimited (KafkaConfig.logRetentionTimeMillis).
_TOPIC_BY_SYNONYM["log.retention.ms"] = dataclasses.replace(_TOPIC_BY_SYNONYM["log.retention.ms"], at_least=None)

_WS = " \t\f"  # what Java's Properties counts as whitespace
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    """Java's LineReader: natural lines joined where one ends in an odd number of backslashes
    (the next line's leading whitespace dropped); blank and comment lines skipped (a comment
    line is never continued)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_WS)
            i += 1
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # continued past the end of the file
            line = line[:-1]
        yield line


def _unescape(text: str, line: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\" or i == len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i:i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"Malformed \\uxxxx encoding in {line!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java's ``Properties.load``: the key ends at the first unescaped ``=``, ``:`` or whitespace
    (whitespace around one ``=``/``:`` is the separator too, so ``num.partitions 3`` works);
    ``#``/``!`` comment lines; a trailing ``\\`` continues a line; ``\\uXXXX`` and ``\\t``-style
    escapes. ``text`` is the file decoded as ISO-8859-1, as Java reads an InputStream. Trailing
    whitespace of a value is dropped (Kafka's ConfigDef trims every value it parses).
    ValueError on a malformed ``\\u`` escape, as Java throws IllegalArgumentException."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:" or c in _WS:
                break
            i += 1
        key_end = min(i, n)
        j = key_end
        while j < n and line[j] in _WS:
            j += 1
        if j < n and line[j] in "=:" :
            j += 1
            while j < n and line[j] in _WS:
                j += 1
        props[_unescape(line[:key_end], line)] = _unescape(line[j:], line).rstrip(_WS)
    return props


def read_properties_file(path: Path) -> dict[str, str]:
    """A properties file as Kafka's ``Utils.loadProps`` reads it: bytes as ISO-8859-1 (non-ASCII
    characters written as ``\\uXXXX``), then ``Properties.load``."""
    return parse_properties(Path(path).read_bytes().decode("iso-8859-1"))


# The apache/kafka image's environment convention (docker/resources/common-scripts:
# kafka-propertiesSpec.json and utility.go ConvertKey): every ``KAFKA_*`` variable but these is a
# property; strip ``KAFKA_``, a single ``_`` between two other characters becomes ``.``, ``___``
# becomes ``-``, ``__`` becomes ``_``, then lower-case. The image's own excludes, plus the
# variables Kafka's scripts (and our tests) use for other things.
ENV_PREFIX = "KAFKA_"
ENV_EXCLUDES = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPT", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    # not in the image's list, but never broker properties
    "KAFKA_HEAP_OPTS", "KAFKA_HOME", "KAFKA_DEBUG", "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME",
    "KAFKA_CLUSTER_ID", "KAFKA_REFERENCE_BOOTSTRAP",
})
_SINGLE_UNDERSCORE = re.compile(r"[^_]_[^_]")


def env_key_to_property(var: str) -> str:
    """``KAFKA_LOG_SEGMENT_BYTES`` -> ``log.segment.bytes`` (the image's ConvertKey, same quirks)."""
    key = var[len(ENV_PREFIX):]
    key = _SINGLE_UNDERSCORE.sub(lambda m: m.group(0).replace("_", "."), key)
    return key.replace("___", "-").replace("__", "_").lower()


def properties_from_env(environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """The properties ``KAFKA_*`` variables set: name -> (variable, value)."""
    env = os.environ if environ is None else environ
    out: dict[str, tuple[str, str]] = {}
    for var in sorted(env):
        if var.startswith(ENV_PREFIX) and len(var) > len(ENV_PREFIX) and var not in ENV_EXCLUDES:
            out[env_key_to_property(var)] = (var, env[var])
    return out


def default_value(name: str) -> Any:
    """Kafka's default of a config we know (a broker config or a topic config's broker synonym)."""
    cdef = BROKER_CONFIGS.get(name)
    if cdef is not None:
        return cdef.default
    synonym = _TOPIC_BY_SYNONYM.get(name)
    if synonym is None:
        return None
    # The broker-level names given in finer units have no default of their own in Kafka
    # (log.retention.ms -> log.retention.minutes -> log.retention.hours).
    if name in ("log.retention.ms", "log.roll.ms", "log.roll.jitter.ms"):
        return None
    return synonym.default


def known_config_names() -> list[str]:
    return sorted(set(BROKER_CONFIGS) | set(_TOPIC_BY_SYNONYM))


def did_you_mean(name: str) -> str | None:
    """The known config name closest to an unknown one, if it is a near miss (a typo)."""
    import difflib

    close = difflib.get_close_matches(name, known_config_names(), n=1, cutoff=0.9)
    return close[0] if close else None


@dataclass
class BrokerConfig:
    """Effective broker config with the source of each value."""

    values: dict[str, Any] = field(default_factory=dict)
    # "default", the properties file's path, "env KAFKA_X" or "--override"
    sources: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    # Every property as given (file, environment, then --override), known or not: Kafka's
    # "originals", which DescribeConfigs reports as STATIC_BROKER_CONFIG.
    originals: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        properties: dict[str, str] | None = None,
        overrides: dict[str, str] | None = None,
        properties_source: str = "config file",
        env: Mapping[str, tuple[str, str]] | None = None,
    ) -> BrokerConfig:
        """Layer the sources (defaults < file < environment < overrides). Unknown names are
        warned about once each and ignored; a bad value raises ConfigError naming its source."""
        cfg = cls()
        for name, c in BROKER_CONFIGS.items():
            cfg.values[name] = c.default
            cfg.sources[name] = "default"
        layers: list[tuple[str, str, str]] = [(name, raw, properties_source) for name, raw in (properties or {}).items()]
        layers += [(name, raw, f"env {var}") for name, (var, raw) in (env or {}).items()]
        layers += [(name, raw, "--override") for name, raw in (overrides or {}).items()]
        for name, raw, source in layers:
            cfg.originals[name] = raw
            cdef = definition(name)
            if cdef is None:
                near = did_you_mean(name)
                if source == "--override" and near:
                    # A typed flag one letter off a known name is a typo, not a plugin's config.
                    raise ConfigError(f"unknown config {name} in --override; did you mean {near}?")
                if name not in cfg.unknown:
                    cfg.unknown.append(name)
                    log.warning("ignoring unknown config %s (from %s)%s", name, source,
                                f"; did you mean {near}?" if near else "")
                continue
            try:
                # Parse under the name the user wrote, so errors name their key.
                value = dataclasses.replace(cdef, name=name).parse(raw)
            except ConfigError as e:
                raise ConfigError(f"{e} (from {source})") from None
            cfg.values[name] = value
            cfg.sources[name] = source
        cfg._check_node_id()
        cfg._check_start_requirements()
        return cfg

    def _where(self, *names: str) -> str:
        """``a=1, b=2, from --override`` for error messages: the values given and their sources."""
        given = [n for n in names if self.is_set(n)]
        sources = list(dict.fromkeys(self.sources[n] for n in given))
        return ", ".join([*(f"{n}={self.values[n]}" for n in given), "from " + ", ".join(sources)])

    def _check_node_id(self) -> None:
        """broker.id is a synonym of node.id (KafkaConfig.populateSynonyms): one set alone gives
        the other its value, which then must be a valid node.id; both set must be equal."""
        if not self.is_set("broker.id"):
            return
        broker_id = self.values["broker.id"]
        if not self.is_set("node.id"):
            try:
                BROKER_CONFIGS["node.id"].parse(str(broker_id))
            except ConfigError as e:
                raise ConfigError(f"{e} ({self._where('broker.id')})") from None
        elif broker_id != self.values["node.id"]:
            raise ConfigError(f"You must set `node.id` to the same value as `broker.id`. ({self._where('node.id', 'broker.id')})")

    def _check_start_requirements(self) -> None:
        """KafkaConfig.validateValues' rules on the settings we know (Kafka refuses to start
        otherwise), with its wording and where the values came from."""
        if self.log_retention_ms() == 0:
            name = next(n for n in ("log.retention.ms", "log.retention.minutes", "log.retention.hours") if self.is_set(n))
            raise ConfigError(f"log.retention.ms must be unlimited (-1) or, greater than or equal to 1 ({self._where(name)})")
        per_ip_problem = per_ip_config_error(str(self.values["max.connections.per.ip"]), self.values["max.connections.per.ip.overrides"])
        if per_ip_problem is not None:
            where = self._where("max.connections.per.ip.overrides", "max.connections.per.ip")
            raise ConfigError(f"{per_ip_problem} ({where})")
        threads, buffer = self.values["log.cleaner.threads"], self.values["log.cleaner.dedupe.buffer.size"]
        if threads == 0:  # Kafka divides by it: java.lang.ArithmeticException: / by zero
            raise ConfigError("log.cleaner.threads must be at least 1: Kafka fails to start with 0 (/ by zero); "
                              f"log.cleaner.enable=false turns cleaning off ({self._where('log.cleaner.threads')})")
        if not buffer // threads > 1024 * 1024:  # (Scala truncates, Python floors: the same verdict)
            where = self._where("log.cleaner.dedupe.buffer.size", "log.cleaner.threads")
            raise ConfigError(f"log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread. ({where})")

    def log_retention_ms(self) -> int:
        """KafkaConfig.logRetentionTimeMillis: log.retention.ms, else .minutes, else .hours; any
        negative value is -1 (unlimited)."""
        if self.values.get("log.retention.ms") is not None:
            millis = int(self.values["log.retention.ms"])
        elif self.values.get("log.retention.minutes") is not None:
            millis = int(self.values["log.retention.minutes"]) * 60_000
        else:
            millis = int(self.values["log.retention.hours"]) * 3_600_000
        return -1 if millis < 0 else millis

    def effective(self) -> list[tuple[str, Any, str]]:
        """Every config we know, as (name, value, source), sorted by name."""
        out = []
        for name in known_config_names():
            if name in self.sources:
                out.append((name, self.values.get(name), self.sources[name]))
            else:
                out.append((name, default_value(name), "default"))
        prefixed = sorted(n for n in self.sources if n.startswith("listener.name.") and n not in BROKER_CONFIGS)
        out += [(n, self.values.get(n), self.sources[n]) for n in prefixed]
        return sorted(out)

    def get(self, name: str) -> Any:
        return self.values.get(name)

    def for_listener(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """``key`` for one listener (and SASL mechanism): the most specific value that is set
        (``listener.name.<l>.<mechanism>.<key>``, then ``listener.name.<l>.<key>``), else ``key``'s."""
        names = ([listener_key(listener, key, mechanism)] if mechanism else []) + [listener_key(listener, key)]
        for name in names:
            if name in self.sources:
                return self.values[name]
        return self.get(key)

    def source_for_listener(self, listener: str, key: str, mechanism: str | None = None) -> tuple[str, str] | None:
        """(name, source) of the value ``for_listener`` uses, None when it is the default."""
        names = ([listener_key(listener, key, mechanism)] if mechanism else []) + [listener_key(listener, key)]
        for name in [*names, key]:
            if self.sources.get(name, "default") != "default":
                return name, self.sources[name]
        return None

    def is_set(self, name: str) -> bool:
        return self.sources.get(name, "default") != "default"

    def log_defaults(self) -> dict[str, Any]:
        """Topic config defaults that the broker config sets (Kafka's defaults apply to the rest)."""
        out: dict[str, Any] = {}
        for synonym, cdef in _TOPIC_BY_SYNONYM.items():
            if self.is_set(synonym):
                out[cdef.name] = self.values[synonym]
        # Kafka's precedence for time-based settings given in coarser units.
        if any(self.is_set(n) for n in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")):
            out["retention.ms"] = self.log_retention_ms()  # negative means unlimited: -1
        if "segment.ms" not in out and self.is_set("log.roll.hours"):
            out["segment.ms"] = int(self.values["log.roll.hours"]) * 3_600_000
        if "segment.jitter.ms" not in out and self.is_set("log.roll.jitter.hours"):
            out["segment.jitter.ms"] = int(self.values["log.roll.jitter.hours"]) * 3_600_000
        if "flush.ms" not in out and self.is_set("log.flush.scheduler.interval.ms"):
            # KafkaConfig.logFlushIntervalMs: log.flush.interval.ms, else the flusher's interval.
            out["flush.ms"] = int(self.values["log.flush.scheduler.interval.ms"])
        return out


# Utils.validHostPattern: the characters Kafka accepts in an override's host.
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_split_csv(value: str) -> list[str]:
    """``value.split("\\s*,\\s*")`` as Java does it: trailing empty strings are dropped."""
    parts = re.split(r"\s*,\s*", value)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def per_ip_config_error(per_ip: str | None, overrides: str | None) -> str | None:
    """Why Kafka would refuse these ``max.connections.per.ip``/``...overrides`` values, or None.

    KafkaConfig.validateValues on the configs in effect (at start and for a dynamic change):
    the overrides are read by Csv.parseCsvMap (each entry split at its last ``:``; one without
    it fails Java's substring), the counts by Integer.parseInt, the hosts checked against
    Utils.validHostPattern; ``max.connections.per.ip`` may be 0 only with overrides set.
    """
    name = "max.connections.per.ip.overrides"
    parsed: list[tuple[str, str]] = []
    if overrides:
        for entry in _java_split_csv(overrides):
            colon = entry.rfind(":")
            if colon < 0:
                return f"Error parsing configuration property '{name}': begin 0, end -1, length {len(entry)}"
            parsed.append((entry[:colon].strip(), entry[colon + 1:].strip()))
    for _, count in parsed:
        if not _JAVA_INT.fullmatch(count) or not -(2**31) <= int(count) < 2**31:
            return f'For input string: "{count}"'
    if per_ip is not None and str(per_ip).strip() == "0" and not parsed:
        return (f"requirement failed: max.connections.per.ip can be set to zero only if {name} property is set.")
    invalid = [host for host, _ in parsed if not _VALID_HOST.fullmatch(host)]
    if invalid:
        return f"{name} contains invalid addresses : {','.join(dict.fromkeys(invalid))}"
    return None


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    over: dict[str, str] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        over[k.strip()] = v.strip()
    return over


def load_config(config_file: Path | None, overrides: list[str], environ: Mapping[str, str] | None = None) -> BrokerConfig:
    """Read ``--config``, ``KAFKA_*`` variables and ``--override`` flags; ConfigError on a bad
    value or flag. ``environ`` defaults to the process environment."""
    props: dict[str, str] = {}
    if config_file is not None:
        try:
            props = read_properties_file(Path(config_file))
        except OSError as e:
            raise ConfigError(f"cannot read config file {config_file}: {e.strerror}") from None
        except ValueError as e:
            raise ConfigError(f"cannot read config file {config_file}: {e}") from None
    return BrokerConfig.load(
        props, parse_overrides(overrides),
        properties_source=str(config_file) if config_file else "config file",
        env=properties_from_env(environ),
    )
