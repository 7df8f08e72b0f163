"""A small blocking Kafka client for our command-line tools (works against any Kafka broker).

It bootstraps from one address, learns the brokers from Metadata and sends each
request to the node asked for, negotiating versions with ApiVersions.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka_sidecar.protocol.messages import decode_response, encode_request

API_VERSIONS = 18


class KafkaClientError(Exception):
    pass


class _BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}
        _, body = self._send(API_VERSIONS, 3, {"client_software_name": "kafka-sidecar", "client_software_version": "0.1.0"})
        if body.error_code.value != 0:
            _, body = self._send(API_VERSIONS, 0, {})
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise KafkaClientError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def _send(self, api_key: int, version: int, data: dict[str, Any]) -> tuple[int, Any]:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, self.client_id, data))
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return decode_response(api_key, version, self._recv_exact(size))

    def request(self, api_key: int, data: dict[str, Any], max_version: int, min_version: int = 0) -> tuple[int, Any]:
        """Send with the highest version both sides support; returns (version, body)."""
        lo, hi = self.versions.get(api_key, (None, None))
        if lo is None:
            raise KafkaClientError(f"the broker does not support API key {api_key}")
        version = min(hi, max_version)
        if version < max(lo, min_version):
            raise KafkaClientError(f"no common version for API key {api_key}: broker {lo}-{hi}, client {min_version}-{max_version}")
        _, body = self._send(api_key, version, data)
        return version, body

    def close(self) -> None:
        self.sock.close()


def parse_bootstrap(value: str) -> tuple[str, int]:
    first = value.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class KafkaClient:
    def __init__(self, bootstrap: str, client_id: str = "kafka-sidecar-tool", timeout: float = 30.0) -> None:
        self.client_id = client_id
        self.timeout = timeout
        self.bootstrap = _BrokerConnection(*parse_bootstrap(bootstrap), client_id, timeout)
        self._nodes: dict[int, tuple[str, int]] = {}
        self._connections: dict[int, _BrokerConnection] = {}

    def metadata(self, topics: list[str] | None) -> Any:
        _, body = self.bootstrap.request(3, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False,
        }, max_version=12, min_version=1)
        self._nodes = {b.node_id: (b.host, b.port) for b in body.brokers}
        return body

    def node(self, node_id: int) -> _BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            host, port = self._nodes[node_id]
            conn = _BrokerConnection(host, port, self.client_id, self.timeout)
            self._connections[node_id] = conn
        return conn

    def close(self) -> None:
        self.bootstrap.close()
        for c in self._connections.values():
            c.close()
