"""A small blocking Kafka client for our command-line tools and the Spark data sources (works
against any Kafka broker).

It bootstraps from one address, learns the brokers from Metadata and sends each
request to the node asked for, negotiating versions with ApiVersions. With client properties
(a tool's ``--command-config``; ``client.security.ClientSecurity``) every connection is TLS
and/or authenticates with SASL PLAIN or SCRAM (SaslHandshake v1, SaslAuthenticate), as
Kafka's clients do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
from typing import Any

from kafka_sidecar.protocol.messages import decode_response, encode_request

from .security import ClientSecurity, client_security

API_VERSIONS = 18
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class KafkaClientError(Exception):
    pass


class _BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout: float, security: ClientSecurity | None = None) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if security is not None and security.ssl_context is not None:
            try:
                self.sock = security.ssl_context.wrap_socket(self.sock, server_hostname=host)
            except OSError:
                self.sock.close()
                raise
        self.client_id = client_id
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}
        _, body = self._send(API_VERSIONS, 3, {"client_software_name": "kafka-sidecar", "client_software_version": "0.1.0"})
        if body.error_code.value != 0:
            _, body = self._send(API_VERSIONS, 0, {})
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        if security is not None and security.sasl:
            self._authenticate(security)

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1 then SaslAuthenticate rounds (PLAIN: one; SCRAM: two, RFC 5802)."""
        mechanism = str(security.mechanism)
        _, body = self._send(SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if body.error_code.value:
            raise KafkaClientError(f"the broker does not enable SASL mechanism {mechanism} "
                                   f"(enabled: {', '.join(body.mechanisms) or 'none'})")
        user, password = str(security.username), str(security.password)
        if mechanism == "PLAIN":
            self._sasl_round(f"\0{user}\0{password}".encode())
            return
        h = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        nonce = base64.b64encode(os.urandom(24)).decode()
        first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
        server_first = self._sasl_round(f"n,,{first_bare}".encode()).decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        if not fields.get("r", "").startswith(nonce):
            raise KafkaClientError("SCRAM: the server's nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", h).digest()
        final_bare = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{final_bare}".encode()
        signature = hmac.new(hashlib.new(h, client_key).digest(), auth_message, h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_final = self._sasl_round(f"{final_bare},p={base64.b64encode(proof).decode()}".encode()).decode()
        expected = hmac.new(hmac.new(salted, b"Server Key", h).digest(), auth_message, h).digest()
        if server_final != "v=" + base64.b64encode(expected).decode():
            raise KafkaClientError("SCRAM: the server's signature is wrong")

    def _sasl_round(self, token: bytes) -> bytes:
        lo, hi = self.versions.get(SASL_AUTHENTICATE, (0, 1))
        _, body = self._send(SASL_AUTHENTICATE, min(hi, 2), {"auth_bytes": token})
        if body.error_code.value:
            raise KafkaClientError(f"org.apache.kafka.common.errors.SaslAuthenticationException: {body.error_message}")
        return bytes(body.auth_bytes)

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
    def __init__(self, bootstrap: str, client_id: str = "kafka-sidecar-tool", timeout: float = 30.0,
                 command_config: dict[str, str] | None = None) -> None:
        """``command_config``: Kafka client properties (a tool's --command-config): TLS, SASL,
        ``client.id``, ``request.timeout.ms``."""
        props = command_config or {}
        self.client_id = props.get("client.id") or client_id
        self.timeout = int(props["request.timeout.ms"]) / 1000 if props.get("request.timeout.ms") else timeout
        self.security = client_security(props) if props else None
        self.bootstrap = _BrokerConnection(*parse_bootstrap(bootstrap), self.client_id, self.timeout, self.security)
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
            conn = _BrokerConnection(host, port, self.client_id, self.timeout, self.security)
            self._connections[node_id] = conn
        return conn

    def close(self) -> None:
        self.bootstrap.close()
        for c in self._connections.values():
            c.close()
