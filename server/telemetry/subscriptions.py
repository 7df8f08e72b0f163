"""Client-metrics subscriptions: KIP-714's CLIENT_METRICS config resources.

Kafka's ClientMetricsConfigs (``metrics``, ``interval.ms``, ``match``) with its validation and
messages, the incremental and full alterations as Kafka's controller applies them to this
resource type, DescribeConfigs' entries, and the subscriptions persisted in the data dir
(``sidecar-client-metrics.json``) so they survive a restart, as Kafka's metadata log keeps them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.storage import checkpoint

from ..groups.javaorder import JavaHashMap

log = logging.getLogger(__name__)

SUBSCRIPTIONS_FILE = "sidecar-client-metrics.json"

METRICS_CONFIG, INTERVAL_MS_CONFIG, MATCH_CONFIG = "metrics", "interval.ms", "match"
CLIENT_INSTANCE_ID, CLIENT_ID = "client_instance_id", "client_id"
CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION = "client_software_name", "client_software_version"
CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT = "client_source_address", "client_source_port"
ALLOWED_MATCH_PARAMS = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                                  CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})
ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000

# ConfigDef order (metrics, interval.ms, match): parse errors name the first failing one.
_DEFINE_ORDER = (METRICS_CONFIG, INTERVAL_MS_CONFIG, MATCH_CONFIG)
_DEFAULTS = {METRICS_CONFIG: "", INTERVAL_MS_CONFIG: str(DEFAULT_INTERVAL_MS), MATCH_CONFIG: ""}
_TYPES = {METRICS_CONFIG: 7, INTERVAL_MS_CONFIG: 3, MATCH_CONFIG: 7}  # DescribeConfigs' LIST, INT
_DOCS = {
    METRICS_CONFIG: "Telemetry metric name prefix list",
    INTERVAL_MS_CONFIG: "Metrics push interval in milliseconds",
    MATCH_CONFIG: "Client match criteria",
}
DEFAULT_CONFIG, CLIENT_METRICS_CONFIG = 5, 7  # DescribeConfigs' config sources
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_INT = re.compile(r"[+-]?[0-9]+")


class SubscriptionError(Exception):
    """A refused change: Kafka's error code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _split_list(value: str) -> list[str]:
    """ConfigDef.parseType for LIST: trimmed comma-separated items, "" is the empty list."""
    value = value.strip()
    return [] if not value else [item.strip() for item in value.split(",")]


def parse_matching_patterns(patterns: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """ClientMetricsConfigs.parseMatchingPatterns: ``selector=regex`` items (Java's split("=")
    drops trailing empty strings, so ``client_id=`` is as illegal as ``client_id``)."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in ALLOWED_MATCH_PARAMS:
            raise SubscriptionError(errors.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise SubscriptionError(errors.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}") from None
    return out


def validate(name: str, props: Mapping[str, str]) -> None:
    """ClientMetricsConfigs.validate: a name, known keys, ConfigDef.parse (types and the lists'
    non-empty items), interval.ms within 100 ms..1 h, match patterns that parse."""
    if not name:
        raise SubscriptionError(errors.INVALID_REQUEST, "Subscription name can't be empty")
    for key in props:
        if key not in _DEFAULTS:
            raise SubscriptionError(errors.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    for key in _DEFINE_ORDER:
        if key not in props:
            continue
        value = props[key]
        if _TYPES[key] == 3:
            if not _INT.fullmatch(value.strip()) or not -(2**31) <= int(value.strip()) < 2**31:
                raise SubscriptionError(errors.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: Not a number of type INT")
        elif any(not item for item in _split_list(value)):
            raise SubscriptionError(errors.INVALID_CONFIG, f"Configuration '{key}' values must not be empty.")
    if INTERVAL_MS_CONFIG in props:
        interval = int(props[INTERVAL_MS_CONFIG].strip())
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise SubscriptionError(errors.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS_CONFIG}, "
                                    f"interval must be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    if MATCH_CONFIG in props:
        parse_matching_patterns(_split_list(props[MATCH_CONFIG]))


@dataclass(frozen=True)
class SubscriptionInfo:
    """ClientMetricsManager.SubscriptionInfo: one subscription, parsed."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    @classmethod
    def of(cls, name: str, props: Mapping[str, str]) -> SubscriptionInfo:
        return cls(name, tuple(_split_list(props.get(METRICS_CONFIG, ""))),
                   int(props.get(INTERVAL_MS_CONFIG, str(DEFAULT_INTERVAL_MS)).strip()),
                   parse_matching_patterns(_split_list(props.get(MATCH_CONFIG, ""))))


class ClientMetricsSubscriptions:
    """The subscriptions of one broker: their configs as set (strings), parsed, and persisted.
    ``version`` goes up with every change, so client instances re-evaluate (Kafka's
    subscriptionUpdateVersion)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / SUBSCRIPTIONS_FILE
        self.configs: dict[str, dict[str, str]] = {}
        self.infos: dict[str, SubscriptionInfo] = {}
        self.version = 0
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            # Not ignored: the next change would write over what could not be read.
            raise OSError(f"cannot read client metrics subscriptions {self.path}: {e}") from None
        subscriptions = data.get("subscriptions") if isinstance(data, dict) else None
        if not isinstance(subscriptions, dict) or not all(isinstance(p, dict) for p in subscriptions.values()):
            raise OSError(f"cannot read client metrics subscriptions {self.path}: malformed file")
        for name, props in subscriptions.items():
            try:
                validate(name, props)
            except SubscriptionError as e:
                log.error("ignoring client metrics subscription %r in %s: %s", name, self.path, e.message)
                continue
            self.configs[name] = dict(props)
            self.infos[name] = SubscriptionInfo.of(name, props)

    def names(self) -> list[str]:
        return list(self.configs)

    def _snapshot(self) -> bytes:
        return (json.dumps({"version": 1, "subscriptions": self.configs}, indent=1, sort_keys=True) + "\n").encode()

    def new_configs(self, name: str, changes: Any, incremental: bool) -> dict[str, str]:
        """The configs ``name`` would have after the request's changes (ConfigurationControlManager):
        incremental ``(key, op, value)`` triples in Java HashMap order of their keys, else all."""
        if not incremental:
            return {k: v or "" for k, v in changes}
        props = dict(self.configs.get(name, {}))
        ops: JavaHashMap[str, tuple[int, str | None]] = JavaHashMap()
        for key, op, value in changes:
            ops[key] = (op, value)
        for key, (op, value) in ops.items():
            if op == SET:
                props[key] = value or ""
            elif op == DELETE:
                props.pop(key, None)
            elif op in _OP_NAMES:
                # Kafka's controller knows no LIST type for CLIENT_METRICS keys.
                raise SubscriptionError(errors.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.")
            else:
                raise SubscriptionError(errors.UNKNOWN_SERVER_ERROR, None)
        return props

    def prepare(self, name: str, changes: Any, incremental: bool) -> dict[str, str]:
        """Validated new configs of ``name`` (nothing changed yet)."""
        props = self.new_configs(name, changes, incremental)
        validate(name, props)
        return props

    def apply(self, name: str, props: Mapping[str, str]) -> bytes | None:
        """Take validated ``props`` (empty: the subscription goes); the file's new contents, or
        None when nothing changed."""
        if dict(props) == self.configs.get(name, {} if props else None):
            return None
        if props:
            self.configs[name] = dict(props)
            self.infos[name] = SubscriptionInfo.of(name, props)
        else:
            self.configs.pop(name, None)
            self.infos.pop(name, None)
        self.version += 1
        log.info("client metrics subscription %r %s", name, f"set to {dict(props)}" if props else "removed")
        return self._snapshot()

    def write(self, snapshot: bytes) -> None:
        """Persist (blocking: run on a worker thread)."""
        checkpoint.atomic_write(self.path, snapshot)

    def describe(self, name: str, keys: Iterable[str] | None, include_synonyms: bool,
                 include_documentation: bool) -> list[dict[str, Any]]:
        """DescribeConfigs' entries: every key (sorted), set or default, whether the
        subscription exists or not."""
        props = self.configs.get(name, {})
        wanted = set(keys) if keys else None
        out = []
        for key in sorted(_DEFAULTS):
            if wanted is not None and key not in wanted:
                continue
            if key in props:
                value, source = props[key], CLIENT_METRICS_CONFIG
                synonyms = [{"name": key, "value": value, "source": source}]
            else:
                value, source, synonyms = _DEFAULTS[key], DEFAULT_CONFIG, []
            out.append({
                "name": key, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
                "synonyms": synonyms if include_synonyms else [], "config_type": _TYPES[key],
                "documentation": _DOCS[key] if include_documentation else None,
            })
        return out
