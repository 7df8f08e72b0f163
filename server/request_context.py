"""What an API handler sees of the client: Kafka's RequestContext (the request's header, who
sent it, through which listener) and, per connection, a ClientInfo.

Handlers (server/apis/) receive ``(services, context, request)``: the services are
server/services.py's BrokerServices, the context this module's RequestContext. Neither gives
a handler the Connection: it cannot write to the socket or change how the connection is read.
A throttle is returned (``Throttled``), and the connection (server/connection.py) mutes itself
for it after the answer is sent (KIP-219).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kafka_sidecar.protocol.framing import RequestHeader


def _never_closing() -> bool:
    return False


class ClientInfo:
    """One client connection as handlers see it, the same object for all its requests: its
    address, listener and principal (``User:ANONYMOUS`` until TLS or SASL says otherwise), the
    SASL exchange on a SASL listener, and the identity share sessions, telemetry and the fetch
    metrics key their per-connection state on. ``close_callbacks`` run when it closes;
    ``is_closing`` tells a long-poll that nobody waits for its answer any more."""

    __slots__ = ("peer", "client_host", "listener", "principal", "sasl", "close_callbacks", "is_closing",
                 "client_software", "__weakref__")

    def __init__(self, peer: str, client_host: str, listener: str = "PLAINTEXT", *,
                 principal: str = "User:ANONYMOUS", is_closing: Callable[[], bool] = _never_closing) -> None:
        self.peer = peer
        self.client_host = client_host
        self.listener = listener
        self.principal = principal
        self.sasl: Any = None  # server/security/sasl.py's SaslServerAuthenticator on a SASL listener
        self.close_callbacks: dict[str, Callable[[], None]] = {}
        self.is_closing = is_closing
        # KIP-714's client_software_* selectors: what the client's ApiVersions v3+ said.
        self.client_software: tuple[str | None, str | None] = (None, None)


class RequestContext(NamedTuple):
    """One request: its header, its frame's size (what the produce quota counts) and its
    client. A NamedTuple: one is built per request on the produce/fetch path."""

    header: RequestHeader
    client: ClientInfo
    request_size: int = 0

    @property
    def principal(self) -> str:
        return self.client.principal

    @property
    def client_host(self) -> str:
        return self.client.client_host

    @property
    def peer(self) -> str:
        return self.client.peer

    @property
    def listener(self) -> str:
        return self.client.listener

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class Throttled(NamedTuple):
    """A handler's answer with a throttle time (KIP-219): the connection sends ``response``
    (None: nothing, acks=0) and then reads nothing from the client for ``throttle_ms``."""

    response: Any
    throttle_ms: int
