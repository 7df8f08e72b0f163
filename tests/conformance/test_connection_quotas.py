"""The per-IP connection creation rate (KIP-612) side by side with Apache Kafka 4.3.1.

An ``ip`` entity's ``connection_creation_rate`` quota is set with AlterClientQuotas for
127.0.0.2, and connections are made from that source address (any 127/8 address reaches a
loopback listener), one after the other, each asking ApiVersions. Kafka measures the rate over
``quota.window.num`` windows (a first burst over 10 s), so with a quota of 1 per second the
first 10 connections are served and the 11th is throttled: not served, closed after the
throttle time (QuotaUtils.throttleTime: 11 / (10 s + e) - 1 over 1, times 10 s + e, so 1 s - e
where e is the time the first 10 took). Removing the quota serves the next connection at once. Only this source address
is limited, so the rest of the suite's connections to the shared brokers are not affected.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka_sidecar.protocol.messages import encode_request

from tests.conformance.harness import Ctx
from tests.conformance.test_client_quotas import _alter, _describe, _settled
from tests.conformance.wire import parse_bootstrap

SOURCE = "127.0.0.2"
ENTITY = [("ip", SOURCE)]


def _ask(s: socket.socket) -> str:
    """ApiVersions v0 on an open connection: "answered", "closed" (no answer) or "silent"."""
    try:
        s.sendall(encode_request(18, 0, 1, "conformance", {}))
        head = s.recv(4)
    except (ConnectionResetError, BrokenPipeError):
        head = b""
    except TimeoutError:
        return "silent"
    if len(head) == 4 and struct.unpack(">i", head)[0] > 0:
        s.recv(1 << 16)
        return "answered"
    return "closed"


def _connect_once(bootstrap: str, timeout: float = 5.0, source: str = SOURCE) -> tuple[str, float]:
    """Connect from ``source`` and ask ApiVersions v0: (what happened, seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(parse_bootstrap(bootstrap), timeout=timeout, source_address=(source, 0)) as s:
        outcome = _ask(s)
    return outcome, time.monotonic() - t0


def scenario_connection_creation_rate(ctx: Ctx) -> dict[str, Any]:
    obs: dict[str, Any] = {}
    w = ctx.wire()
    before = _describe(w, [("ip", 0, SOURCE)])
    if before:  # left by an interrupted run
        _alter(w, [(ENTITY, {"connection_creation_rate": None})])
    before = _describe(w, [])
    obs["set"] = _alter(w, [(ENTITY, {"connection_creation_rate": 1.0})])
    _settled(w, before)
    time.sleep(0.5)  # Kafka applies the quota from its metadata image, just after it answers
    outcomes: list[tuple[str, float]] = []
    for _ in range(30):
        outcomes.append(_connect_once(ctx.bootstrap))
        if outcomes[-1][0] != "answered":
            break
    obs["served_before_throttle"] = sum(1 for o, _ in outcomes if o == "answered")
    kind, took = outcomes[-1]
    obs["throttled_outcome"] = kind
    obs["throttled_closed_after_200ms"] = took >= 0.2  # 1 s - e (e: well under a second here)
    obs["throttled_closed_within_1200ms"] = took <= 1.2  # capped at one quota window
    before = _describe(w, [])
    obs["remove"] = _alter(w, [(ENTITY, {"connection_creation_rate": None})])
    _settled(w, before)
    time.sleep(0.5)
    obs["after_removal"] = [_connect_once(ctx.bootstrap)[0] for _ in range(3)]
    return obs


def test_connection_creation_rate(conform):
    obs = conform(scenario_connection_creation_rate)
    assert obs["served_before_throttle"] == 10
    assert obs["throttled_outcome"] == "closed" and obs["throttled_closed_after_200ms"] and obs["throttled_closed_within_1200ms"]
    assert obs["after_removal"] == ["answered"] * 3


PER_IP_SOURCE = "127.0.0.3"


def _set_cluster_default(w: Any, name: str, value: str | None) -> Any:
    """IncrementalAlterConfigs on the cluster-wide broker default (SET, or DELETE for None)."""
    op = {"name": name, "config_operation": 0 if value is not None else 1, "value": value}
    body = w.call(44, 0, {"validate_only": False, "resources": [{"resource_type": 4, "resource_name": "", "configs": [op]}]})
    return [(r["error_code"], r["error_message"]) for r in body["responses"]]


def scenario_max_connections_per_ip_override(ctx: Ctx) -> dict[str, Any]:
    """``max.connections.per.ip.overrides`` changed live: the third connection from the address
    is closed at once, the open ones keep working, a slot frees when one closes."""
    obs: dict[str, Any] = {}
    w = ctx.wire()
    obs["set"] = _set_cluster_default(w, "max.connections.per.ip.overrides", f"{PER_IP_SOURCE}:2")
    time.sleep(1.0)  # Kafka reconfigures from its metadata image, just after it answers
    held: list[socket.socket] = []
    try:
        for _ in range(3):
            held.append(socket.create_connection(parse_bootstrap(ctx.bootstrap), timeout=5, source_address=(PER_IP_SOURCE, 0)))
        obs["three_connections"] = [_ask(s) for s in held]
        held.pop(0).close()
        time.sleep(0.3)
        obs["after_one_closed"] = _connect_once(ctx.bootstrap, source=PER_IP_SOURCE)[0]
        obs["still_open"] = _ask(held[0])
    finally:
        for s in held:
            s.close()
        obs["delete"] = _set_cluster_default(w, "max.connections.per.ip.overrides", None)
    time.sleep(1.0)
    held = [socket.create_connection(parse_bootstrap(ctx.bootstrap), timeout=5, source_address=(PER_IP_SOURCE, 0)) for _ in range(3)]
    try:
        obs["after_delete"] = [_ask(s) for s in held]
    finally:
        for s in held:
            s.close()
    return obs


def test_max_connections_per_ip_override(conform):
    obs = conform(scenario_max_connections_per_ip_override)
    assert obs["three_connections"] == ["answered", "answered", "closed"]
    assert obs["after_one_closed"] == "answered" and obs["still_open"] == "answered"
    assert obs["after_delete"] == ["answered"] * 3


# Values Kafka refuses when they are set (KafkaConfig.validateValues through DynamicBrokerConfig):
# a host that is not a valid host pattern, an entry without ":" or without a numeric count, and
# max.connections.per.ip=0 without overrides; and three it takes (validate_only: nothing changes).
_INVALID_PER_IP = [
    ("max.connections.per.ip.overrides", "hostName#:100"),
    ("max.connections.per.ip.overrides", "127.0.0.1"),
    ("max.connections.per.ip.overrides", "127.0.0.1:many"),
    ("max.connections.per.ip.overrides", "127.0.0.1:5,"),
    ("max.connections.per.ip.overrides", "127.0.0.1:5, localhost : 7"),
    ("max.connections.per.ip.overrides", "127.0.0.1:-1"),
    ("max.connections.per.ip", "0"),
]


def _validate_only(w: Any, name: str, value: str, node: str = "") -> Any:
    op = {"name": name, "config_operation": 0, "value": value}
    body = w.call(44, 0, {"validate_only": True, "resources": [{"resource_type": 4, "resource_name": node, "configs": [op]}]})
    return [(r["error_code"], r["error_message"]) for r in body["responses"]]


def scenario_per_ip_limits_validated(ctx: Ctx) -> dict[str, Any]:
    w = ctx.wire()
    return {f"{name}={value}": _validate_only(w, name, value) for name, value in _INVALID_PER_IP}


def test_per_ip_limits_validated(conform):
    obs = conform(scenario_per_ip_limits_validated)
    codes = {k: v[0][0] for k, v in obs.items()}
    accepted = {"max.connections.per.ip.overrides=127.0.0.1:5,", "max.connections.per.ip.overrides=127.0.0.1:5, localhost : 7",
                "max.connections.per.ip.overrides=127.0.0.1:-1"}
    assert {k for k, c in codes.items() if c == 0} == accepted
    assert all(c == 42 for k, c in codes.items() if k not in accepted)  # INVALID_REQUEST
