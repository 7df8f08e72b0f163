"""Connection limits at accept time: Kafka's ConnectionQuotas (SocketServer.scala, KIP-402, KIP-612).

What a new connection is checked against, in Kafka's order:

1. the broker-wide creation rate ``max.connection.creation.rate`` and ``max.connections``: over
   the rate, Kafka's acceptor waits the throttle time before it takes the connection (every
   connection behind it waits too); here the connection is held, unread, until then;
2. the per-IP creation rate, the ``connection_creation_rate`` client quota of an ``ip`` entity
   (or the default ip entity): over it, the connection is not served and is closed after the
   throttle time (Kafka's delayed close), and is taken back from the rates it was counted in;
3. ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: at the limit, the
   connection is closed at once ("Rejected connection from ...").

``max.connections`` itself is checked as before (``admit`` in server/connection.py closes a
connection over it at once). Throttle times are capped at one quota window, as Kafka's are.
No I/O here: the caller passes the peer address and the time, and acts on the answer.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .sensor import QuotaSensor, Rate
from .store import CONNECTION_CREATION_RATE, IP, Entity

log = logging.getLogger("kafka_sidecar.server.connection")

# QuotaConfig.IP_CONNECTION_RATE_DEFAULT and the brokers' default: Integer.MAX_VALUE means no quota.
UNLIMITED = 2**31 - 1
# ConnectionQuotaEntity: an IP's sensor is dropped after an hour without connections.
IP_SENSOR_EXPIRY_MS = 3600 * 1000


@dataclass(frozen=True)
class Admission:
    """What to do with a new connection: serve it after ``delay_ms`` (0: now), or close it
    after ``delay_ms`` without serving it (``close``)."""

    delay_ms: int = 0
    close: bool = False


def _parse_overrides(value: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: "host:100,127.0.0.1:200" by resolved address."""
    out: dict[str, int] = {}
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, _, count = item.rpartition(":")
        if not count.strip().isdigit():
            continue  # Kafka refuses such a value when it is set; never fail an accept on it
        try:
            addresses = {_normalize(host)} if is_ip(host) else {_normalize(a[4][0]) for a in socket.getaddrinfo(host, None)}
        except OSError:
            continue  # Kafka resolves with InetAddress.getByName; an unknown host matches nobody
        for a in addresses:
            out[a] = int(count)
    return out


def is_ip(host: str) -> bool:
    """Whether ``host`` is an IP address literal (not a name to resolve)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _normalize(address: str) -> str:
    """One spelling per address (IPv6 compressed; IPv4-mapped IPv6 as the IPv4 address)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


class ConnectionQuotas:
    """Open connections per IP and the connection creation rates (broker-wide and per IP)."""

    def __init__(self, setting: Callable[[str], Any], client_quotas: Callable[[], dict[Entity, dict[str, float]]]) -> None:
        self.setting = setting  # a broker config in force (dynamic updates are read at each accept)
        self.client_quotas = client_quotas  # the quotas in force: the ip entities' connection_creation_rate
        self.counts: dict[str, int] = {}
        self._ip_sensors: dict[str, QuotaSensor] = {}
        self._broker_sensor: QuotaSensor | None = None
        # Kafka's acceptor blocks while throttled, so the next connection waits behind it.
        self._accept_free_at_ms = 0
        self._overrides_value: str | None = None
        self._overrides: dict[str, int] = {}

    # --------------------------------------------------------------- configuration

    def _window(self) -> tuple[int, int]:
        samples = int(self.setting("quota.window.num") or 11)
        window_ms = int(self.setting("quota.window.size.seconds") or 1) * 1000
        return samples, window_ms

    def _sensor(self, existing: QuotaSensor | None, bound: float, now_ms: int) -> QuotaSensor:
        samples, window_ms = self._window()
        if existing is None or existing.rate.samples != samples or existing.rate.window_ms != window_ms:
            # maxThrottleTimeMs: one quota window.
            return QuotaSensor(Rate(samples, window_ms), bound, max_throttle_ms=window_ms, now_ms=now_ms)
        existing.bound = bound
        return existing

    def ip_rate_quota(self, address: str) -> int:
        """connectionRateForIp: the ip entity's quota, else the default ip entity's, else none."""
        values = self.client_quotas()
        default: float | None = None
        for entity, quota in values.items():
            if len(entity) != 1 or entity[0][0] != IP or CONNECTION_CREATION_RATE not in quota:
                continue
            name = entity[0][1]
            if name is None:
                default = quota[CONNECTION_CREATION_RATE]
            elif _normalize(name) == address:
                return int(quota[CONNECTION_CREATION_RATE])
        return int(default) if default is not None else UNLIMITED

    def max_per_ip(self, address: str) -> int:
        value = self.setting("max.connections.per.ip.overrides")
        if value != self._overrides_value:  # resolved once per value, not at every accept
            self._overrides_value, self._overrides = value, _parse_overrides(value)
        limit = self._overrides.get(address)
        if limit is not None:
            return limit
        value = self.setting("max.connections.per.ip")
        return UNLIMITED if value is None else int(value)

    # --------------------------------------------------------------- accepting

    def accept(self, peer_ip: str, now_ms: int) -> Admission:
        """ConnectionQuotas.inc: count a new connection from ``peer_ip`` or say why not.

        A connection answered with ``close`` is not counted; any other must be given back
        with ``release`` when it ends.
        """
        address = _normalize(peer_ip)
        delay = self._broker_throttle(now_ms)
        start_ms = now_ms + delay  # Kafka records the IP's rate once the acceptor is free again
        ip_throttle = self._ip_throttle(address, start_ms)
        if ip_throttle:
            if self._broker_sensor is not None:
                self._broker_sensor.unrecord(1.0, start_ms)
            return Admission(delay + ip_throttle, close=True)
        count = self.counts.get(address, 0)
        self.counts[address] = count + 1
        limit = self.max_per_ip(address)
        if count >= limit:
            self.release(address)
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.", address, limit)
            return Admission(delay, close=True)
        return Admission(delay)

    def release(self, peer_ip: str) -> None:
        """A counted connection ended (ConnectionQuotas.dec)."""
        address = _normalize(peer_ip)
        left = self.counts.get(address, 0) - 1
        if left > 0:
            self.counts[address] = left
        else:
            self.counts.pop(address, None)

    def _broker_throttle(self, now_ms: int) -> int:
        """waitForConnectionSlot's wait for the broker-wide creation rate (the acceptor's queue)."""
        start = max(now_ms, self._accept_free_at_ms)
        queued = start - now_ms
        value = self.setting("max.connection.creation.rate")
        rate = UNLIMITED if value is None else int(value)
        if rate >= UNLIMITED:
            return queued
        self._broker_sensor = self._sensor(self._broker_sensor, float(rate), start)
        throttle = self._broker_sensor.record(1.0, start)
        if throttle:
            log.debug("connection creation rate %d/s reached: delaying the next accept by %d ms", rate, throttle)
            self._accept_free_at_ms = start + throttle
        return queued + throttle

    def _ip_throttle(self, address: str, now_ms: int) -> int:
        """recordIpConnectionMaybeThrottle: the IP's throttle time (0 within its quota)."""
        quota = self.ip_rate_quota(address)
        self._expire_ip_sensors(now_ms)
        if quota >= UNLIMITED:
            return 0
        sensor = self._ip_sensors[address] = self._sensor(self._ip_sensors.get(address), float(quota), now_ms)
        throttle = sensor.record(1.0, now_ms)
        if throttle:
            sensor.unrecord(1.0, now_ms)  # the connection is not accepted: take it back
            log.debug("Throttling %s for %d ms (connection_creation_rate %d)", address, throttle, quota)
        return throttle

    def _expire_ip_sensors(self, now_ms: int) -> None:
        if len(self._ip_sensors) > 64:
            for ip, s in list(self._ip_sensors.items()):
                if now_ms - s.last_record_ms >= IP_SENSOR_EXPIRY_MS:
                    del self._ip_sensors[ip]
