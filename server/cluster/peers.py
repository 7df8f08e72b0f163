"""Peers: Kafka requests from one node of the cluster to another (Kafka's inter-broker APIs).

A transaction coordinator sends WriteTxnMarkers (27) to the node leading a partition of the
transaction, and a partition's leader asks the coordinator node to verify a transactional write
with AddPartitionsToTxn v5 ``verify_only`` (KIP-890), as Kafka's brokers do. One connection per
peer, opened on first use to the peer's PLAINTEXT listener on its bound address (the cluster
file's ``internal`` endpoint), one request at a time on it; a broken connection is dropped and
the next call opens a new one. A node whose listeners are all TLS or SASL has no peer endpoint:
calls fail with PeerUnavailable (the caller answers a retriable error).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from kafka_sidecar.protocol.messages import decode_response, encode_request

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0


class PeerUnavailable(Exception):
    """The peer could not be reached or did not answer."""


class _PeerConnection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()
        self.correlation = 0

    async def call(self, api_key: int, version: int, body: dict[str, Any], client_id: str) -> Any:
        async with self.lock:
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), CONNECT_TIMEOUT_S)
                assert self.reader is not None
                self.correlation += 1
                self.writer.write(encode_request(api_key, version, self.correlation, client_id, body))
                (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), REQUEST_TIMEOUT_S))
                correlation, answer = decode_response(api_key, version, await asyncio.wait_for(self.reader.readexactly(size), REQUEST_TIMEOUT_S))
                if correlation != self.correlation:
                    raise ConnectionError(f"correlation id {correlation}, expected {self.correlation}")
                return answer
            except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError) as e:
                self.close()
                raise PeerUnavailable(f"{self.host}:{self.port}: {e or type(e).__name__}") from None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Peers:
    """This node's connections to the other nodes (``endpoints``: node id -> (host, port))."""

    def __init__(self, node_id: int, endpoints: dict[int, tuple[str, int]]) -> None:
        self.node_id = node_id
        self.endpoints = endpoints
        self._connections: dict[int, _PeerConnection] = {}

    async def call(self, node_id: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to node ``node_id`` and its answer (PeerUnavailable if it cannot be had)."""
        conn = self._connections.get(node_id)
        if conn is None:
            endpoint = self.endpoints.get(node_id)
            if endpoint is None:
                raise PeerUnavailable(f"node {node_id} has no PLAINTEXT listener for inter-node requests")
            conn = self._connections[node_id] = _PeerConnection(*endpoint)
        return await conn.call(api_key, version, body, f"kafka-sidecar-node-{self.node_id}")

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
