"""Group configs (ConfigResource type GROUP = 32): Kafka 4.3.1's GroupConfig and GroupConfigManager.

``kafka-configs.sh --entity-type groups --entity-name g --alter --add-config k=v`` sets a dynamic
config of one group; it overrides the broker-wide ``group.*`` setting it names as a synonym (for
``share.auto.offset.reset``, ``share.isolation.level`` and ``share.renew.acknowledge.enable``,
which have none, GroupConfig's own default). As Kafka does:

- validation (GroupConfig.validate): unknown names first (``Unknown group config name: x``), then
  every key parsed and checked by its ConfigDef in definition order (the props being the group's
  configs after the change), then the broker's ``group.*.min/max`` bounds in validateValues'
  order, then session timeout > heartbeat interval; all refused with INVALID_CONFIG.
- effective values (GroupConfig.evaluate): an override outside the broker's bounds, if the bounds
  changed since it was set, is clamped to them with a warning.
- DescribeConfigs lists every key (Kafka's HashMap order) whether the group exists or not:
  GROUP_CONFIG (8) for an override, else the broker's value as DEFAULT_CONFIG (5) or
  STATIC_BROKER_CONFIG (4) under the broker synonym's name.

Kept in ``sidecar-group-configs.json`` in the data directory (Kafka keeps them in its metadata
log), so they survive a restart. ``group_config(group_id, key)`` is what the coordinators read.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_sidecar.storage import checkpoint

from .groups.javaorder import JavaHashMap

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "sidecar-group-configs.json"
# DescribeConfigsResponse.ConfigSource ids used here.
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8
_TYPE_IDS = {"boolean": 1, "string": 2, "int": 3}
# AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
_OFFSET_RESET_MESSAGE = ("Invalid value `{}` for configuration share.auto.offset.reset. The value must be either "
                         "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


class GroupConfigError(Exception):
    """A refused group config (Kafka's InvalidConfigurationException: INVALID_CONFIG)."""


@dataclass(frozen=True)
class GroupConfigKey:
    name: str
    type: str  # int, string, boolean
    default: str
    at_least: int | None
    one_of: tuple[str, ...] | None
    broker_synonym: str | None
    doc: str


def _key(name: str, type_: str, default: str, at_least: int | None, synonym: str | None, doc: str,
         one_of: tuple[str, ...] | None = None) -> GroupConfigKey:
    return GroupConfigKey(name, type_, default, at_least, one_of, synonym, doc)


# GroupConfig.CONFIG_DEF of Kafka 4.3.1, in definition order (the order ConfigDef.parse checks).
GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {k.name: k for k in (
    _key("consumer.session.timeout.ms", "int", "45000", 1, "group.consumer.session.timeout.ms",
         "The timeout to detect client failures when using the consumer group protocol."),
    _key("consumer.heartbeat.interval.ms", "int", "5000", 1, "group.consumer.heartbeat.interval.ms",
         "The heartbeat interval given to the members of a consumer group."),
    _key("consumer.assignment.interval.ms", "int", "1000", 0, "group.consumer.assignment.interval.ms",
         "The interval between assignment updates for a consumer group."),
    _key("share.session.timeout.ms", "int", "45000", 1, "group.share.session.timeout.ms",
         "The timeout to detect client failures when using the share group protocol."),
    _key("share.heartbeat.interval.ms", "int", "5000", 1, "group.share.heartbeat.interval.ms",
         "The heartbeat interval given to the members of a share group."),
    _key("share.record.lock.duration.ms", "int", "30000", 1000, "group.share.record.lock.duration.ms",
         "The record acquisition lock duration in milliseconds for share groups."),
    _key("share.delivery.count.limit", "int", "5", 2, "group.share.delivery.count.limit",
         "The maximum number of delivery attempts for a record delivered to a share group."),
    _key("share.partition.max.record.locks", "int", "2000", 100, "group.share.partition.max.record.locks",
         "Share-group record lock limit per share-partition."),
    _key(SHARE_AUTO_OFFSET_RESET, "string", "latest", None, None,
         "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset "
         "to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li><li>by_duration:"
         "&lt;duration&gt;: automatically reset the offset to a configured duration from the current timestamp. "
         "&lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not allowed.</li>"
         "<li>anything else: throw exception to the share consumer.</li></ul>"),
    _key(SHARE_ISOLATION_LEVEL, "string", "read_uncommitted", None, None,
         'Controls how to read records written transactionally. If set to "read_committed", the share group will only '
         'deliver transactional records which have been committed. If set to "read_uncommitted", the share group will '
         "return all messages, even transactional messages which have been aborted. Non-transactional records will be "
         "returned unconditionally in either mode.", ("read_committed", "read_uncommitted")),
    _key("share.renew.acknowledge.enable", "boolean", "true", None, None,
         "Whether the renew acknowledge type is enabled for the share group."),
    _key("share.assignment.interval.ms", "int", "1000", 0, "group.share.assignment.interval.ms",
         "The interval between assignment updates for a share group."),
    _key("streams.session.timeout.ms", "int", "45000", 1, "group.streams.session.timeout.ms",
         "The timeout to detect client failures when using the streams group protocol."),
    _key("streams.heartbeat.interval.ms", "int", "5000", 1, "group.streams.heartbeat.interval.ms",
         "The heartbeat interval given to the members."),
    _key("streams.num.standby.replicas", "int", "0", 0, "group.streams.num.standby.replicas",
         "The number of standby replicas for each task."),
    _key("streams.initial.rebalance.delay.ms", "int", "3000", 0, "group.streams.initial.rebalance.delay.ms",
         "The amount of time the group coordinator will wait for more streams clients to join a new group before "
         "performing the first rebalance. A longer delay means potentially fewer rebalances."),
    _key("streams.assignment.interval.ms", "int", "1000", 0, "group.streams.assignment.interval.ms",
         "The interval between assignment updates for a streams group."),
)}

# The order Kafka 4.3.1 describes them in (its HashMap of the parsed config).
DESCRIBE_ORDER = (
    "consumer.session.timeout.ms", "consumer.assignment.interval.ms", SHARE_AUTO_OFFSET_RESET,
    "share.renew.acknowledge.enable", "streams.initial.rebalance.delay.ms", "share.session.timeout.ms",
    "streams.assignment.interval.ms", "share.heartbeat.interval.ms", "streams.heartbeat.interval.ms",
    "share.delivery.count.limit", "consumer.heartbeat.interval.ms", "share.record.lock.duration.ms",
    "share.assignment.interval.ms", SHARE_ISOLATION_LEVEL, "streams.session.timeout.ms",
    "share.partition.max.record.locks", "streams.num.standby.replicas",
)

# Kafka 4.3.1's defaults of the broker bounds (some are not among kafka-sidecar's typed broker configs).
_BROKER_DEFAULTS = {
    "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.consumer.min.assignment.interval.ms": 0, "group.consumer.max.assignment.interval.ms": 15000,
    "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
    "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
    "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
    "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
    "group.streams.min.session.timeout.ms": 45000, "group.streams.max.session.timeout.ms": 60000,
    "group.streams.min.heartbeat.interval.ms": 5000, "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.max.standby.replicas": 2,
    "group.streams.min.assignment.interval.ms": 0, "group.streams.max.assignment.interval.ms": 15000,
}


def _bound(kind: str, what: str) -> tuple[str, str, str]:
    return (f"{kind}.{what}", f"group.{kind}.min.{what}", f"group.{kind}.max.{what}")


# GroupConfig.validateValues' checks, in its order: (key, broker minimum, broker maximum).
BROKER_BOUNDS: tuple[tuple[str, str | None, str | None], ...] = (
    _bound("consumer", "heartbeat.interval.ms"), _bound("consumer", "session.timeout.ms"),
    _bound("consumer", "assignment.interval.ms"),
    _bound("share", "heartbeat.interval.ms"), _bound("share", "session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    ("share.delivery.count.limit", "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    ("share.partition.max.record.locks", "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"),
    _bound("share", "assignment.interval.ms"),
    _bound("streams", "heartbeat.interval.ms"), _bound("streams", "session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
    _bound("streams", "assignment.interval.ms"),
)
_SESSION_OVER_HEARTBEAT = tuple((f"{k}.session.timeout.ms", f"{k}.heartbeat.interval.ms") for k in ("consumer", "share", "streams"))


# ---- parsing (ConfigDef.parseType + validators) ----------------------------------------------------

# java.time.Duration.parse's pattern (case-insensitive).
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int | None:
    """java.time.Duration.parse(text).toMillis(), or None where Java throws."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(2) is None and m.group(3) is None):
        return None
    if m.group(3) is not None and not any(m.group(i) for i in (4, 5, 6)):
        return None  # a T with nothing after it
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    nanos = int((m.group(7) or "").ljust(9, "0")) if m.group(7) else 0
    if (m.group(6) or "").startswith("-"):
        nanos = -nanos
    total_nanos = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1_000_000_000 + nanos
    if m.group(1) == "-":
        total_nanos = -total_nanos
    return total_nanos // 1_000_000


def parse_share_auto_offset_reset(value: str) -> tuple[str, int]:
    """ShareGroupAutoOffsetResetStrategy.fromString: ("earliest"|"latest", 0) or ("by_duration", ms);
    GroupConfigError with Kafka's message otherwise (a negative duration too)."""
    if value in ("earliest", "latest"):
        return value, 0
    if value.startswith("by_duration:"):
        ms = parse_duration_ms(value[len("by_duration:"):])
        if ms is not None and ms >= 0:
            return "by_duration", ms
    raise GroupConfigError(f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: "
                           + _OFFSET_RESET_MESSAGE.format(value))


def parse_value(key: GroupConfigKey, raw: str) -> Any:
    """ConfigDef.parseValue: the typed value of ``raw`` for ``key``, with Kafka's messages."""
    def bad(message: str, shown: Any = raw) -> GroupConfigError:
        return GroupConfigError(f"Invalid value {shown} for configuration {key.name}: {message}")

    text = raw.strip()
    if key.type == "int":
        if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**31) <= int(text) < 2**31:
            raise bad("Not a number of type INT")
        value: Any = int(text)
        if key.at_least is not None and value < key.at_least:
            raise bad(f"Value must be at least {key.at_least}", value)
        return value
    if key.type == "boolean":
        if text.lower() not in ("true", "false"):
            raise bad("Expected value to be either true or false")
        return text.lower() == "true"
    if key.name == SHARE_AUTO_OFFSET_RESET:
        parse_share_auto_offset_reset(text)
    elif key.one_of is not None and text not in key.one_of:
        raise bad("String must be one of: " + ", ".join(key.one_of), text)
    return text


def format_value(key: GroupConfigKey, value: Any) -> str:
    """ConfigDef.convertToString."""
    if key.type == "boolean":
        return "true" if value else "false"
    return str(value)


# ---- the manager ---------------------------------------------------------------------------------


class GroupConfigManager:
    """Every group's dynamic configs (Kafka's GroupConfigManager plus the controller's validation).

    ``broker_value(name)`` gives a broker config's effective value (typed or as configured) or
    None when it is not set; ``static_names`` the broker configs set in its properties.
    """

    def __init__(self, data_dir: Path, broker_value: Any, static_names: Iterable[str] = ()) -> None:
        self.path = Path(data_dir) / GROUP_CONFIGS_FILE
        self._broker_value = broker_value
        self._static = set(static_names)
        self._lock = threading.Lock()
        self.configs: dict[str, dict[str, str]] = {}
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, NotADirectoryError):
            return
        except (OSError, ValueError) as e:
            raise OSError(f"cannot read group configs {self.path}: {e}") from None
        try:
            self.configs = {str(g): {str(k): str(v) for k, v in c.items()} for g, c in data.get("groups", {}).items()}
        except (AttributeError, TypeError) as e:
            raise OSError(f"cannot read group configs {self.path}: malformed entry ({e})") from None

    # ---- broker side -----------------------------------------------------------------------

    def broker_int(self, name: str) -> int:
        value = self._broker_value(name)
        return _BROKER_DEFAULTS[name] if value is None else int(value)

    def default_value(self, key: GroupConfigKey) -> Any:
        """The value a group without an override has: the broker synonym's, else GroupConfig's default."""
        if key.broker_synonym is not None:
            value = self._broker_value(key.broker_synonym)
            if value is not None:
                try:
                    return parse_value(key, str(value))
                except GroupConfigError:
                    return value  # the broker's own ConfigDef allowed it
        return parse_value(key, key.default)

    # ---- reading ---------------------------------------------------------------------------

    def group_configs(self, group_id: str) -> dict[str, str]:
        """The dynamic configs set on ``group_id`` (raw strings)."""
        return dict(self.configs.get(group_id, {}))

    def group_config(self, group_id: str, name: str) -> Any:
        """The effective value of ``name`` for ``group_id`` (typed): its override, clamped to the
        broker's current bounds as GroupConfig.evaluate does, else the broker's value."""
        key = GROUP_CONFIG_KEYS[name]
        raw = self.configs.get(group_id, {}).get(name)
        if raw is None:
            return self.default_value(key)
        try:
            value = parse_value(key, raw)
        except GroupConfigError:
            return self.default_value(key)
        for k, lo, hi in BROKER_BOUNDS:
            if k != name:
                continue
            if lo is not None and value < self.broker_int(lo):
                log.warning("The group config '%s' for group '%s' has value %s which is below the broker's allowed "
                            "minimum %s. The effective value will be capped to %s.", name, group_id, value,
                            self.broker_int(lo), self.broker_int(lo))
                value = self.broker_int(lo)
            if hi is not None and value > self.broker_int(hi):
                log.warning("The group config '%s' for group '%s' has value %s which exceeds the broker's allowed "
                            "maximum %s. The effective value will be capped to %s.", name, group_id, value,
                            self.broker_int(hi), self.broker_int(hi))
                value = self.broker_int(hi)
        return value

    def share_auto_offset_reset(self, group_id: str) -> tuple[str, int]:
        return parse_share_auto_offset_reset(self.group_config(group_id, SHARE_AUTO_OFFSET_RESET))

    # ---- validation (GroupConfig.validate) ----------------------------------------------------

    def validate(self, props: Mapping[str, str]) -> dict[str, Any]:
        """The typed configs of ``props`` (a group's configs after a change), or GroupConfigError."""
        for name in props:
            if name not in GROUP_CONFIG_KEYS:
                raise GroupConfigError(f"Unknown group config name: {name}")
        parsed = {}
        for name, key in GROUP_CONFIG_KEYS.items():
            parsed[name] = parse_value(key, props[name]) if name in props else parse_value(key, key.default)
        for name, lo, hi in BROKER_BOUNDS:
            if lo is not None and parsed[name] < self.broker_int(lo):
                raise GroupConfigError(f"{name} must be greater than or equal to {lo}")
            if hi is not None and parsed[name] > self.broker_int(hi):
                raise GroupConfigError(f"{name} must be less than or equal to {hi}")
        for session, heartbeat in _SESSION_OVER_HEARTBEAT:
            if parsed[session] <= parsed[heartbeat]:
                raise GroupConfigError(f"{session} must be greater than {heartbeat}")
        return {n: parsed[n] for n in props}

    @staticmethod
    def apply_ops(current: Mapping[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
        """IncrementalAlterConfigs over a group's configs (no group config is a LIST)."""
        configs = dict(current)
        for name, op, value in ops:
            if op == SET:
                configs[name] = value or ""
            elif op == DELETE:
                configs.pop(name, None)
            elif op in (APPEND, SUBTRACT):
                raise GroupConfigError(f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.")
            else:
                raise ValueError(f"unknown operation type {op}")
        return configs

    # ---- writing ---------------------------------------------------------------------------

    def set_group_configs(self, group_id: str, props: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``group_id`` (validated before) and persist them all."""
        with self._lock:
            stored = self._hold(group_id, props)
            data = {"version": 1, "groups": self.configs}
            checkpoint.atomic_write(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
        log.info("dynamic configs of group %s are now %s", group_id, stored or "{}")

    def adopt(self, group_id: str, props: Mapping[str, str]) -> None:
        """Make ``props`` the group's configs without writing the file (``serve --processes N``:
        the cluster's metadata log keeps them)."""
        with self._lock:
            stored = self._hold(group_id, props)
        log.info("dynamic configs of group %s are now %s", group_id, stored or "{}")

    def _hold(self, group_id: str, props: Mapping[str, str]) -> dict[str, str]:
        """Under the lock: ``props`` (validated) become the group's configs in memory."""
        stored = {n: format_value(GROUP_CONFIG_KEYS[n], v) for n, v in self.validate(props).items()}
        if stored:
            self.configs[group_id] = stored
        else:
            self.configs.pop(group_id, None)
        return stored

    def delete_group(self, group_id: str) -> None:
        if group_id in self.configs:
            self.set_group_configs(group_id, {})

    def groups_with_configs(self) -> list[str]:
        """The groups with dynamic configs, in the order Kafka lists them (a Java HashMap's)."""
        order: JavaHashMap[str, None] = JavaHashMap()
        for name in self.configs:
            order[name] = None
        return order.keys()

    # ---- DescribeConfigs (ConfigHelper.createGroupConfigEntry) ----------------------------------

    def describe(self, group_id: str, keys: list[str] | None, include_synonyms: bool,
                 include_documentation: bool) -> list[dict[str, Any]]:
        overrides = self.configs.get(group_id, {})
        wanted = set(keys) if keys else None
        out = []
        for name in DESCRIBE_ORDER:
            if wanted is not None and name not in wanted:
                continue
            key = GROUP_CONFIG_KEYS[name]
            default = format_value(key, self.default_value(key))
            synonym = key.broker_synonym or name
            source = STATIC_BROKER_CONFIG if key.broker_synonym in self._static else DEFAULT_CONFIG
            synonyms = [{"name": synonym, "value": default, "source": source}]
            value = default
            if name in overrides:
                value = overrides[name]
                synonyms.insert(0, {"name": name, "value": value, "source": GROUP_CONFIG})
            out.append({"name": name, "value": value, "read_only": False, "config_source": synonyms[0]["source"],
                        "is_sensitive": False, "synonyms": synonyms if include_synonyms else [],
                        "config_type": _TYPE_IDS[key.type], "documentation": key.doc if include_documentation else None})
        return out


# ---- one manager per broker --------------------------------------------------------------------

_MANAGERS: weakref.WeakKeyDictionary[Any, GroupConfigManager] = weakref.WeakKeyDictionary()


def _broker_value_of(broker: Broker) -> Any:
    def value(name: str) -> Any:
        v = broker.config.get(name)
        if v is None:
            v = broker.config.originals.get(name)
        return v
    return value


def group_config_manager(broker: Broker) -> GroupConfigManager:
    """The broker's GroupConfigManager, loaded from its data directory on first use."""
    mgr = _MANAGERS.get(broker)
    if mgr is None:
        mgr = _MANAGERS[broker] = GroupConfigManager(broker.data_dir, _broker_value_of(broker),
                                                     getattr(broker.config, "originals", {}) or {})
    return mgr


def group_config(broker: Broker, group_id: str, name: str) -> Any:
    """The effective (typed) value of group config ``name`` for ``group_id`` on ``broker``; e.g.
    ``group_config(broker, g, "consumer.session.timeout.ms")`` for a KIP-848 consumer group."""
    return group_config_manager(broker).group_config(group_id, name)


# ---- the GROUP resource of DescribeConfigs / (Incremental)AlterConfigs (server/apis/configs.py) ----

INVALID_REQUEST, INVALID_CONFIG, UNKNOWN_SERVER_ERROR = 42, 40, -1


class GroupResourceError(Exception):
    """One GROUP resource's error in a config request: Kafka's code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def describe_resource(mgr: GroupConfigManager, group_id: str, keys: list[str] | None, include_synonyms: bool,
                      include_documentation: bool) -> list[dict[str, Any]]:
    """DescribeConfigs of a GROUP resource: every key, set or not, whether the group exists or not."""
    if not group_id:
        raise GroupResourceError(INVALID_REQUEST, "Group name must not be empty")
    return mgr.describe(group_id, keys, include_synonyms, include_documentation)


async def alter_resource(mgr: GroupConfigManager, run_blocking: Callable[..., Awaitable[Any]], group_id: str, configs: Iterable[Any], incremental: bool,
                         validate_only: bool) -> None:
    """AlterConfigs (replace all) or IncrementalAlterConfigs of a GROUP resource."""
    props = checked_props(mgr, group_id, configs, incremental)
    if not validate_only:
        await run_blocking(mgr.set_group_configs, group_id, props)


def checked_props(mgr: GroupConfigManager, group_id: str, configs: Iterable[Any], incremental: bool) -> dict[str, str]:
    """The group's dynamic configs after the change, validated (GroupResourceError if not)."""
    if not group_id:
        raise GroupResourceError(INVALID_REQUEST, "Default group resources are not allowed.")
    try:
        if incremental:
            props = mgr.apply_ops(mgr.group_configs(group_id), [(c.name, c.config_operation, c.value) for c in configs])
        else:
            props = {c.name: c.value for c in configs}
        mgr.validate(props)
    except GroupConfigError as e:
        raise GroupResourceError(INVALID_CONFIG, str(e)) from None
    except ValueError:
        raise GroupResourceError(UNKNOWN_SERVER_ERROR, None) from None
    return props
