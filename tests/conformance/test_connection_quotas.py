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


def _connect_once(bootstrap: str, timeout: float = 5.0) -> tuple[str, float]:
    """Connect from SOURCE and ask ApiVersions v0: ("answered" | "closed" | "silent", seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(parse_bootstrap(bootstrap), timeout=timeout, source_address=(SOURCE, 0)) as s:
        s.sendall(encode_request(18, 0, 1, "conformance", {}))
        try:
            head = s.recv(4)
        except (ConnectionResetError, BrokenPipeError):
            head = b""
        except TimeoutError:
            return "silent", time.monotonic() - t0
        if len(head) == 4 and struct.unpack(">i", head)[0] > 0:
            return "answered", time.monotonic() - t0
        return "closed", time.monotonic() - t0


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
