"""Client quota metrics on /metrics, named as the JMX exporter names Kafka's quota MBeans
(``kafka.server:type=Produce|Fetch|Request,user=..,client-id=..``):

- ``kafka_server_produce_byte_rate``, ``kafka_server_fetch_byte_rate`` (bytes/s) and
  ``kafka_server_request_request_time`` (percent of one handler) per quota entity, the rate the
  quota is checked against;
- ``kafka_server_{produce,fetch,request}_throttle_time`` (ms): the average throttle time given
  in the quota window (NaN when none, as Kafka's Avg).

Labels ``user`` and ``client_id`` are Kafka's metric tags (an empty one when the quota is not
per that part). Only clients with a quota of that type have sensors, idle ones are dropped after
an hour (server/quotas/manager.py), and at most ``MAX_SERIES`` per type are shown, busiest first.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .manager import _now_ms

if TYPE_CHECKING:
    from ..broker import Broker

MAX_SERIES = 500
# quota type -> (family prefix, rate metric, its help)
_FAMILIES = (
    ("produce", "kafka_server_produce", "byte_rate", "Produced bytes per second, per quota entity"),
    ("fetch", "kafka_server_fetch", "byte_rate", "Fetched bytes per second, per quota entity"),
    ("request", "kafka_server_request", "request_time", "Request handler time in percent, per quota entity"),
)


class ClientQuotaCollector:
    def __init__(self, broker: Broker, now_ms: Callable[[], int] = _now_ms) -> None:
        self._broker = weakref.ref(broker)
        self._now_ms = now_ms  # the quota managers' monotonic clock; a test passes its own

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        broker = self._broker()
        quotas = getattr(broker, "client_quotas", None)
        now = self._now_ms()
        for attr, prefix, rate_name, rate_help in _FAMILIES:
            rate = GaugeMetricFamily(f"{prefix}_{rate_name}", rate_help, labels=["user", "client_id"])
            throttle = GaugeMetricFamily(f"{prefix}_throttle_time", "Average throttle time in ms given in the "
                                         "quota window, per quota entity", labels=["user", "client_id"])
            manager = getattr(quotas, attr, None)
            if manager is not None:
                manager.expire(now)
                measured = [(s.rate.measure(now), tags, s) for tags, s in manager.sensors()]
                measured.sort(key=lambda m: (-m[0], m[1]))
                for value, (user, client_id), sensor in measured[:MAX_SERIES]:
                    rate.add_metric([user, client_id], value)
                    throttle.add_metric([user, client_id], sensor.throttle_time.average(now))
            yield rate
            yield throttle
