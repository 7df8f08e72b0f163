"""Per-IP connection limits and the broker-wide connection creation rate, over real TCP.

Kafka's ConnectionQuotas (SocketServer.scala): ``max.connections.per.ip`` and its overrides close
a connection over the limit at once (the connections already open keep working); the
broker-wide ``max.connection.creation.rate`` delays the accept, so a connection over the rate is
served late, not refused. The per-IP creation rate quota is compared with Kafka in
tests/conformance/test_connection_quotas.py. Connections come from distinct 127/8 source
addresses so each case counts only its own.
"""

from __future__ import annotations

import socket
import struct
import time

from kafka_sidecar.protocol.messages import encode_request
from kafka_sidecar.testing import broker


def _open(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def _api_versions(s: socket.socket) -> str:
    """ "answered" or "closed" (no answer)."""
    try:
        s.sendall(encode_request(18, 0, 1, "limits-test", {}))
        head = s.recv(4)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    if len(head) == 4 and struct.unpack(">i", head)[0] > 0:
        s.recv(1 << 16)
        return "answered"
    return "closed"


def test_max_connections_per_ip_and_overrides() -> None:
    overrides = {"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.4:3"}
    with broker(**overrides) as b:
        held = [_open(b.port, "127.0.0.3") for _ in range(3)]
        try:
            assert [_api_versions(s) for s in held] == ["answered", "answered", "closed"]
            held.pop(0).close()  # a slot is free again once a connection ends
            time.sleep(0.2)
            again = _open(b.port, "127.0.0.3")
            held.append(again)
            assert _api_versions(again) == "answered"
            assert _api_versions(held[0]) == "answered"  # the open ones keep working
            # 127.0.0.4 has its own limit (the override), counted apart from 127.0.0.3's
            other = [_open(b.port, "127.0.0.4") for _ in range(4)]
            held += other
            assert [_api_versions(s) for s in other] == ["answered", "answered", "answered", "closed"]
        finally:
            for s in held:
                s.close()


def test_broker_connection_creation_rate_delays_not_refuses() -> None:
    with broker(**{"max.connection.creation.rate": "2"}) as b:
        took = []
        for _ in range(23):
            t0 = time.monotonic()
            with _open(b.port, "127.0.0.5") as s:
                assert _api_versions(s) == "answered"
            took.append(time.monotonic() - t0)
        # The first burst is measured over 10 s (quota.window.num 11 x 1 s): 20 connections pass
        # at once, the 21st waits for the rate to come back under 2/s (every one is served).
        assert max(took[:20]) < 0.2
        assert max(took[20:]) >= 0.1
