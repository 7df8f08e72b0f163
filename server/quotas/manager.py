"""Client quota enforcement: Kafka's ClientQuotaManager (produce, fetch) and ClientRequestQuotaManager.

Each quota type keeps the bounds set for it by (user entity, client-id entity), where an entity
is absent (None), the default (DEFAULT) or a name, and resolves a request's (user, client-id)
as Kafka's DefaultQuotaCallback does: the metric tags say which sensor the request is counted in
(clients sharing a user quota share one rate), and the most specific quota wins:
user+client-id, user+default client-id, user, default user+client-id, default user+default
client-id, default user, client-id, default client-id.

The hot path: ``ClientQuotas.active`` is False while no produce, fetch or request quota is set,
and Produce/Fetch then do nothing more. With quotas, a request costs a dict lookup for its
sensor and a few float operations.
"""

from __future__ import annotations

import time
from typing import Any

from .sensor import QuotaSensor, Rate
from .store import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaStore,
    Entity,
)


class _Default:
    """The default user or client-id entity (Kafka's DefaultUserEntity / DefaultClientIdEntity)."""

    def __repr__(self) -> str:
        return "<default>"


DEFAULT: Any = _Default()
# ClientRequestQuotaManager.NanosToPercentagePerSecond
NANOS_TO_PERCENTAGE = 100.0 / 1e9


# APIs that record request_percentage in their handlers (Produce, Fetch), or whose handler time
# is mostly a wait for other members or data (JoinGroup, SyncGroup, ShareFetch): Kafka counts only
# the handler thread's time, and a wall-clock measure would count the wait. Every other API is
# counted by server/dispatch.py (KafkaApis' sendResponseMaybeThrottle).
SELF_RECORDED_APIS = frozenset({0, 1, 11, 14, 78})


# ClientQuotaManager.InactiveSensorExpirationTimeSeconds, checked as often as Kafka's
# Metrics.ExpireSensorTask runs (every 30 s).
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
EXPIRE_CHECK_MS = 30 * 1000


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ClientQuotaManager:
    """One quota type: bounds by (user entity, client-id entity) and the clients' sensors."""

    def __init__(self, quota_type: str, samples: int, window_s: int, cap_to_window: bool = False) -> None:
        self.quota_type = quota_type
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = self.window_ms if cap_to_window else None
        self.overrides: dict[tuple[Any, Any], float] = {}
        self.enabled = False
        self._by_tags: dict[tuple[str, str], QuotaSensor] = {}
        # (user, client-id) -> its sensor; rebuilt when quotas change.
        self._by_client: dict[tuple[str, str], QuotaSensor] = {}
        self._next_expiry_ms = 0

    def update(self, overrides: dict[tuple[Any, Any], float]) -> None:
        """New bounds (after an alteration or at start): existing sensors keep their rates."""
        self.overrides = overrides
        self.enabled = bool(overrides)
        self._by_client = {}
        for tags, sensor in self._by_tags.items():
            sensor.bound = self.quota_limit(tags)

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """DefaultQuotaCallback.quotaMetricTags (the general case)."""
        o = self.overrides
        if (user, client_id) in o or (user, DEFAULT) in o:
            return user, client_id
        if (user, None) in o:
            return user, ""
        if (DEFAULT, client_id) in o or (DEFAULT, DEFAULT) in o:
            return user, client_id
        if (DEFAULT, None) in o:
            return user, ""
        return "", client_id

    def quota_limit(self, tags: tuple[str, str]) -> float:
        """DefaultQuotaCallback.quotaLimit for a sensor's tags; no quota: Long.MAX_VALUE."""
        user, client_id = tags
        o = self.overrides
        q = None
        if user and client_id:
            for key in ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT)):
                q = o.get(key)
                if q is not None:
                    break
        elif user:
            q = o.get((user, None))
            if q is None:
                q = o.get((DEFAULT, None))
        elif client_id:
            q = o.get((None, client_id))
            if q is None:
                q = o.get((None, DEFAULT))
        return float(2**63 - 1) if q is None else q

    def sensor(self, user: str, client_id: str, now_ms: int = 0) -> QuotaSensor:
        key = (user, client_id)
        sensor = self._by_client.get(key)
        if sensor is None:
            tags = self.metric_tags(user, client_id)
            sensor = self._by_tags.get(tags)
            if sensor is None:
                sensor = QuotaSensor(Rate(self.samples, self.window_ms), self.quota_limit(tags), self.max_throttle_ms, now_ms)
                self._by_tags[tags] = sensor
            self._by_client[key] = sensor
        return sensor

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """maybeRecordAndGetThrottleTimeMs: the throttle time in ms (0 when no quota is set)."""
        if not self.enabled:
            return 0
        if now_ms >= self._next_expiry_ms:
            self.expire(now_ms)
        return self.sensor(user, client_id, now_ms).record(value, now_ms)

    def expire(self, now_ms: int) -> None:
        """Drop the sensors that recorded nothing for an hour (Kafka's inactive sensor expiration),
        so clients that come and go do not pile up sensors and /metrics series."""
        self._next_expiry_ms = now_ms + EXPIRE_CHECK_MS
        idle = {tags for tags, s in self._by_tags.items() if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS}
        if idle:
            gone = {id(self._by_tags.pop(tags)) for tags in idle}
            self._by_client = {k: s for k, s in self._by_client.items() if id(s) not in gone}

    def sensors(self) -> list[tuple[tuple[str, str], QuotaSensor]]:
        """(user tag, client-id tag) and sensor of every live client sensor (for /metrics)."""
        return list(self._by_tags.items())

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        if self.enabled:
            self.sensor(user, client_id).unrecord(value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """getMaxValueInQuotaWindow: what may be sent in the quota's whole window."""
        if not self.enabled:
            return float("inf")
        tags = self.metric_tags(user, client_id)
        bound = self.quota_limit(tags)
        return bound * (self.samples - 1) * (self.window_ms / 1000)


def _side(name: str | None) -> Any:
    return DEFAULT if name is None else name


class ClientQuotas:
    """The broker's client quotas: the stored values and the three enforcing managers."""

    def __init__(self, store: ClientQuotaStore, samples: int | None = None, window_s: int | None = None) -> None:
        self.store = store
        # quota.window.num and quota.window.size.seconds (Kafka's defaults when not set).
        samples = int(samples or 11)
        window_s = int(window_s or 1)
        self.produce = ClientQuotaManager("Produce", samples, window_s)
        self.fetch = ClientQuotaManager("Fetch", samples, window_s)
        self.request = ClientQuotaManager("Request", samples, window_s, cap_to_window=True)
        # Read by Produce and Fetch on every request: False means "no quota, do nothing".
        self.active = False
        self.apply(store.quotas)

    def apply(self, quotas: dict[Entity, dict[str, float]]) -> None:
        """Make ``quotas`` the values in force (ClientQuotaMetadataManager's updates)."""
        self.store.quotas = quotas
        per: dict[str, dict[tuple[Any, Any], float]] = {PRODUCER_BYTE_RATE: {}, CONSUMER_BYTE_RATE: {}, REQUEST_PERCENTAGE: {}}
        for entity, values in quotas.items():
            d = dict(entity)
            if USER not in d and CLIENT_ID not in d:
                continue  # ip entities: connection_creation_rate
            key = (_side(d[USER]) if USER in d else None, _side(d[CLIENT_ID]) if CLIENT_ID in d else None)
            for k, bucket in per.items():
                if k in values:
                    bucket[key] = values[k]
        self.produce.update(per[PRODUCER_BYTE_RATE])
        self.fetch.update(per[CONSUMER_BYTE_RATE])
        self.request.update(per[REQUEST_PERCENTAGE])
        self.active = self.produce.enabled or self.fetch.enabled or self.request.enabled

    @staticmethod
    def client(principal: str, client_id: str | None) -> tuple[str, str]:
        """(user, client-id) as Kafka's quotas see them: the principal's name, "" for no id."""
        return principal.partition(":")[2] or principal, client_id or ""

    def throttle_produce(self, principal: str, client_id: str | None, request_bytes: int, thread_ns: int, acks: int) -> int:
        """KafkaApis.handleProduceRequest: the bandwidth and (unless acks=0) request throttles."""
        user, cid = self.client(principal, client_id)
        now = _now_ms()
        bandwidth = self.produce.record(user, cid, request_bytes, now)
        req = 0 if acks == 0 else self.request.record(user, cid, thread_ns * NANOS_TO_PERCENTAGE, now)
        return max(bandwidth, req)

    def throttle_fetch(self, principal: str, client_id: str | None, response_bytes: int, thread_ns: int) -> int:
        """KafkaApis.handleFetchRequest: throttled, the response is empty and its bytes un-recorded."""
        user, cid = self.client(principal, client_id)
        now = _now_ms()
        req = self.request.record(user, cid, thread_ns * NANOS_TO_PERCENTAGE, now)
        bandwidth = self.fetch.record(user, cid, response_bytes, now)
        throttle = max(bandwidth, req)
        if throttle > 0:
            self.fetch.unrecord(user, cid, response_bytes, now)
        return throttle

    def throttle_request(self, principal: str, client_id: str | None, result: Any, elapsed_s: float) -> int:
        """RequestHandlerHelper.sendResponseMaybeThrottle: the handler's time against
        request_percentage; over quota the answer carries the throttle time and the connection
        is muted for it after the answer (KIP-219): returns the throttle time in ms (0: none)."""
        user, cid = self.client(principal, client_id)
        throttle = self.request.record(user, cid, elapsed_s * 1e9 * NANOS_TO_PERCENTAGE, _now_ms())
        if throttle and isinstance(result, dict):
            result["throttle_time"] = max(result.get("throttle_time") or 0, throttle)
        return throttle

    def fetch_max_bytes(self, principal: str, client_id: str | None) -> float:
        user, cid = self.client(principal, client_id)
        return self.fetch.max_value_in_window(user, cid)
