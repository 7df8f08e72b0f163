"""ClientMetricsManager (KIP-714): client instances, their subscriptions, and the checks of
GetTelemetrySubscriptions and PushTelemetry as Kafka 4.3 makes them.

A client instance (its id, the subscription it was given, its last get and push times) lives
in an LRU cache of at most 16384 instances and expires max(60 s, 3 push intervals) after its
last request. Pushed metrics are decompressed (protocol/compression.py) and decoded
(``otlp.py``); the latest value of each series is kept in :class:`PushedMetrics` for /metrics.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import crc32c
from kafka_sidecar.protocol import compression, errors

from ..groups.javaorder import JavaHashMap
from . import subscriptions as subs
from .otlp import decode_metrics_data

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

# ZSTD, LZ4, GZIP, SNAPPY (ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES).
SUPPORTED_COMPRESSION_TYPES = [compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY]
CACHE_MAX_SIZE = 16384
DEFAULT_TELEMETRY_MAX_BYTES = 1024 * 1024
DEFAULT_CACHE_EXPIRY_MS = 60 * 1000
# PushedMetrics: at most this many series in all, each gone with its client instance.
MAX_SERIES = 20000
_RESERVED = (uuid.UUID(int=0), uuid.UUID(int=1))
# Kafka's codes (not in protocol/errors.py).
THROTTLING_QUOTA_EXCEEDED, UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE = 89, 117, 118


def uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode."""
    x = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    h = ((x >> 32) ^ x) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def compute_subscription_id(metrics: list[str], push_interval_ms: int, client_instance_id: uuid.UUID) -> int:
    """CRC32C of ``Set.toString() + pushIntervalMs``, xor the instance id's hash (signed int32)."""
    crc = crc32c.crc32c(f"[{', '.join(metrics)}]{push_interval_ms}".encode())
    h = (crc ^ uuid_hash(client_instance_id)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def random_uuid() -> uuid.UUID:
    """Uuid.randomUuid: never reserved, never one whose base64 form starts with '-'."""
    while True:
        u = uuid.uuid4()
        if u not in _RESERVED and not base64.urlsafe_b64encode(u.bytes).startswith(b"-"):
            return u


@dataclass
class ClientMetricsInstance:
    client_instance_id: uuid.UUID
    attributes: dict[str, str | None]  # ClientMetricsInstanceMetadata
    subscription_id: int
    subscription_version: int
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_known_error: int = errors.NONE
    expires_ms: int = 0
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)

    def is_match(self, patterns: dict[str, Any]) -> bool:
        return all((v := self.attributes.get(k)) is not None and p.fullmatch(v) for k, p in patterns.items())

    def maybe_update_get_request_timestamp(self, now: int) -> bool:
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def maybe_update_push_request_timestamp(self, now: int) -> bool:
        # A push right after a get is accepted early: clients jitter the interval.
        accept = self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.push_interval_ms
        if accept:
            self.last_push_ms = now
        return accept


class PushedMetrics:
    """The latest value of each pushed series, per client instance, at most MAX_SERIES."""

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self.max_series = max_series
        self.values: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[str, float]] = {}
        self.dropped = 0

    def record(self, instance: ClientMetricsInstance, client_id: str, points: list[Any]) -> None:
        cid = str(instance.client_instance_id)
        for p in points:
            key = (cid, p.name, p.attributes)
            if key not in self.values and len(self.values) >= self.max_series:
                self.dropped += 1
                continue
            self.values[key] = (client_id, p.value)
            instance.series.add((p.name, p.attributes))

    def forget(self, instance: ClientMetricsInstance) -> None:
        cid = str(instance.client_instance_id)
        for name, attrs in instance.series:
            self.values.pop((cid, name, attrs), None)
        instance.series.clear()


class ClientMetricsManager:
    """One broker's client instances; subscriptions come from ClientMetricsSubscriptions."""

    def __init__(self, subscriptions: subs.ClientMetricsSubscriptions, telemetry_max_bytes: int,
                 clock=lambda: int(time.monotonic() * 1000), cache_expiry_ms: int = DEFAULT_CACHE_EXPIRY_MS,
                 cache_max_size: int = CACHE_MAX_SIZE) -> None:
        self.subscriptions = subscriptions
        self.telemetry_max_bytes = telemetry_max_bytes
        self.clock = clock
        self.cache_expiry_ms = cache_expiry_ms
        self.cache_max_size = cache_max_size
        self.instances: OrderedDict[uuid.UUID, ClientMetricsInstance] = OrderedDict()
        self.pushed = PushedMetrics()

    # ---- the instance cache --------------------------------------------------------------------

    def expire(self, now: int | None = None) -> None:
        now = self.clock() if now is None else now
        for cid in [cid for cid, inst in self.instances.items() if inst.expires_ms <= now]:
            self.pushed.forget(self.instances.pop(cid))

    def _create(self, cid: uuid.UUID, attributes: dict[str, str | None]) -> ClientMetricsInstance:
        """ClientMetricsManager.createClientInstance: every matching subscription's metrics, the
        lowest interval; only "*" when one of them subscribes to everything."""
        interval = subs.DEFAULT_INTERVAL_MS
        metrics: JavaHashMap[str, bool] = JavaHashMap()
        probe = ClientMetricsInstance(cid, attributes, 0, 0, [], interval)
        for info in self.subscriptions.infos.values():
            if probe.is_match(info.match):
                for m in _hash_set(info.metrics):
                    metrics[m] = True
                interval = min(interval, info.interval_ms)
        names = list(metrics.keys())
        if subs.ALL_SUBSCRIBED_METRICS in names:
            names = [subs.ALL_SUBSCRIBED_METRICS]
        sid = compute_subscription_id(names, interval, cid)
        return ClientMetricsInstance(cid, attributes, sid, self.subscriptions.version, names, interval)

    def client_instance(self, cid: uuid.UUID, attributes: dict[str, str | None], now: int) -> ClientMetricsInstance:
        self.expire(now)
        inst = self.instances.get(cid)
        if inst is None:
            inst = self._create(cid, {**attributes, subs.CLIENT_INSTANCE_ID: str(cid)})
            self.instances[cid] = inst
            while len(self.instances) > self.cache_max_size:
                self.pushed.forget(self.instances.popitem(last=False)[1])
        elif inst.subscription_version < self.subscriptions.version:
            # Subscriptions changed: re-evaluated, with fresh timestamps (a new instance in Kafka).
            fresh = self._create(cid, inst.attributes)
            fresh.series = inst.series
            self.instances[cid] = inst = fresh
        self.instances.move_to_end(cid)
        inst.expires_ms = now + max(self.cache_expiry_ms, inst.push_interval_ms * 3)
        return inst

    # ---- the requests --------------------------------------------------------------------------

    def get_telemetry_subscriptions(self, request_instance_id: uuid.UUID | None, attributes: dict[str, str | None]) -> dict[str, Any]:
        now = self.clock()
        cid = request_instance_id if request_instance_id not in (None, uuid.UUID(int=0)) else None
        while cid is None or (request_instance_id in (None, uuid.UUID(int=0)) and cid in self.instances):
            cid = random_uuid()
        inst = self.client_instance(cid, attributes, now)
        # (Kafka's condition lets no last error through: an early get is always throttled.)
        if not inst.maybe_update_get_request_timestamp(now):
            return {"throttle_time": 0, "error_code": THROTTLING_QUOTA_EXCEEDED, "client_instance_id": uuid.UUID(int=0),
                    "subscription_id": 0, "accepted_compression_types": [], "push_interval": 0,
                    "telemetry_max_bytes": 0, "delta_temporality": False, "requested_metrics": []}
        inst.last_known_error = errors.NONE
        return {"throttle_time": 0, "error_code": errors.NONE, "client_instance_id": cid,
                "subscription_id": inst.subscription_id, "accepted_compression_types": SUPPORTED_COMPRESSION_TYPES,
                "push_interval": inst.push_interval_ms, "telemetry_max_bytes": self.telemetry_max_bytes,
                "delta_temporality": True, "requested_metrics": list(inst.metrics)}

    def push_telemetry(self, request: Any, attributes: dict[str, str | None], client_id: str) -> int:
        """The error code of a PushTelemetry (its checks in Kafka's order), metrics recorded."""
        cid = request.client_instance_id
        if cid is None or cid in _RESERVED:
            log.debug("PushTelemetry: invalid client instance id %s", cid)
            return errors.INVALID_REQUEST
        now = self.clock()
        inst = self.client_instance(cid, attributes, now)
        try:
            code = self._check_push(request, inst, now)
        finally:
            inst.terminating = bool(request.terminating)
        if code:
            inst.last_known_error = code
            return code
        if request.metrics:
            try:
                points = decode_metrics_data(compression.decompress(request.compression_type, request.metrics)
                                             if request.compression_type else bytes(request.metrics))
            except (ValueError, OSError, EOFError) as e:  # OtlpError is a ValueError, as are codec errors
                log.info("PushTelemetry from client instance %s: undecodable metrics: %s", cid, e)
                inst.last_known_error = errors.INVALID_RECORD
                return errors.INVALID_RECORD
            self.pushed.record(inst, client_id, points)
        if request.terminating:
            self.pushed.forget(inst)
        inst.last_known_error = errors.NONE
        return errors.NONE

    def _check_push(self, request: Any, inst: ClientMetricsInstance, now: int) -> int:
        cid = request.client_instance_id
        if inst.terminating:
            log.debug("Client [%s] sent the previous request with state terminating to TRUE", cid)
            return errors.INVALID_REQUEST
        if not inst.maybe_update_push_request_timestamp(now) and not request.terminating:
            log.debug("Request from the client [%s] arrived before the next push interval time", cid)
            return THROTTLING_QUOTA_EXCEEDED
        if request.subscription_id != inst.subscription_id:
            log.debug("Unknown client subscription id for the client [%s]", cid)
            return UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type not in (compression.NONE, *SUPPORTED_COMPRESSION_TYPES):
            return errors.UNSUPPORTED_COMPRESSION_TYPE
        if request.metrics is not None and len(request.metrics) > self.telemetry_max_bytes:
            log.debug("Telemetry request from [%s] is larger than the maximum allowed size [%d]", cid, self.telemetry_max_bytes)
            return TELEMETRY_TOO_LARGE
        return errors.NONE


def _hash_set(items: Any) -> list[str]:
    """The iteration order of ``new HashSet<>(items)``."""
    m: JavaHashMap[str, bool] = JavaHashMap()
    for item in items:
        m[item] = True
    return list(m.keys())


# ---- one per broker (created on first use, kept as long as the broker) --------------------------

_SUBSCRIPTIONS: weakref.WeakKeyDictionary[Any, subs.ClientMetricsSubscriptions] = weakref.WeakKeyDictionary()
_MANAGERS: weakref.WeakKeyDictionary[Any, ClientMetricsManager] = weakref.WeakKeyDictionary()


def subscriptions_of(broker: Broker) -> subs.ClientMetricsSubscriptions:
    found = _SUBSCRIPTIONS.get(broker)
    if found is None:
        found = _SUBSCRIPTIONS[broker] = subs.ClientMetricsSubscriptions(broker.data_dir)
    return found


def telemetry_max_bytes(broker: Broker) -> int:
    """telemetry.max.bytes (a static broker config, [1,...], default 1 MiB)."""
    value = broker.config.get("telemetry.max.bytes")
    if value is None:
        value = (getattr(broker.config, "originals", None) or {}).get("telemetry.max.bytes", DEFAULT_TELEMETRY_MAX_BYTES)
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return DEFAULT_TELEMETRY_MAX_BYTES


def manager_of(broker: Broker) -> ClientMetricsManager:
    found = _MANAGERS.get(broker)
    if found is None:
        found = _MANAGERS[broker] = ClientMetricsManager(subscriptions_of(broker), telemetry_max_bytes(broker))
    return found


def existing_manager(broker: Broker) -> ClientMetricsManager | None:
    """The broker's manager if any client has used telemetry (for /metrics)."""
    return _MANAGERS.get(broker)


async def alter_client_metrics(store: subs.ClientMetricsSubscriptions, run_blocking: Callable[..., Awaitable[Any]], name: str, configs: Any, incremental: bool, validate_only: bool,
                               error: type[Exception]) -> None:
    """(Incremental)AlterConfigs on a CLIENT_METRICS resource: validated, applied, persisted;
    a refusal raised as ``error(code, message)``."""
    changes = [(c.name, c.config_operation, c.value) for c in configs] if incremental else [(c.name, c.value) for c in configs]
    try:
        props = store.prepare(name, changes, incremental)
    except subs.SubscriptionError as e:
        raise error(e.code, e.message) from None
    if not validate_only:
        snapshot = store.apply(name, props)
        if snapshot is not None:
            await run_blocking(store.write, snapshot)


class ClientTelemetryCollector:
    """/metrics: what clients pushed (the latest value of each series), and Kafka's
    client-metrics instance-count."""

    def __init__(self, broker: Broker) -> None:
        self._broker = weakref.ref(broker)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        broker = self._broker()
        mgr = existing_manager(broker) if broker is not None else None
        count = GaugeMetricFamily("kafka_server_client_metrics_instance_count",
                                  "The current number of client metrics instances being managed by the broker")
        pushed = GaugeMetricFamily("kafka_client_telemetry",
                                   "The latest value of each metric a client pushed (KIP-714 PushTelemetry)",
                                   labels=["client_instance_id", "client_id", "metric", "attributes"])
        if mgr is not None:
            mgr.expire()
            count.add_metric([], len(mgr.instances))
            for (cid, name, attrs), (client_id, value) in list(mgr.pushed.values.items()):
                pushed.add_metric([cid, client_id, name, ",".join(f"{k}={v}" for k, v in attrs)], value)
        else:
            count.add_metric([], 0)
        yield count
        yield pushed
