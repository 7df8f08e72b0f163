"""The console's requests, made through the broker's own API handlers as the logged-in principal.

Each page asks what Kafka's tools would ask (Metadata, DescribeConfigs, ListOffsets,
DescribeGroups, OffsetFetch, Produce, DeleteRecords...): the request is built as kio's request
object and handed to the handler in ``server/dispatch.py``'s table, with a ``ConsoleSession``
in place of the Kafka connection. So the console sees exactly what a Kafka client with the same
principal sees, every authorization goes through ``broker.authorizer`` (denials logged as
"for request = DescribeConfigs"...), and writes take the Produce and DeleteRecords paths to the
ReplicaManager. Requests made here are not counted in the request metrics (they are not wire
requests), so the Activity page shows the clients' traffic only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.messages import build, request_schema

from ..request_context import ClientInfo, RequestContext, Throttled

if TYPE_CHECKING:
    from ..broker import Broker

CLIENT_ID = "kafka-sidecar-console"


@dataclass
class ConsoleSession:
    """What an API handler reads of a connection, for one console request: the principal
    (``User:<name>`` after an HTTP basic login, ``User:ANONYMOUS`` on a broker without SASL)
    and the browser's address, which ACL host rules are matched against."""

    principal: str
    client_host: str
    listener: str = "console"

    @property
    def peer(self) -> str:
        host = self.client_host
        return f"[{host}]:0" if ":" in host else f"{host}:0"

    def client(self) -> ClientInfo:
        """The session as a handler's client (server/request_context.py)."""
        return ClientInfo(self.peer, self.client_host, self.listener, principal=self.principal)


def fetch_header() -> RequestHeader:
    """The header the authorizer's log line names for the message browser's reads (as Fetch)."""
    return RequestHeader(1, 17, 0, CLIENT_ID, 0)


async def call(broker: Broker, session: ConsoleSession, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """Run one API handler with a request built from ``data``; returns its answer (a dict)."""
    from ..dispatch import SUPPORTED_APIS

    spec = SUPPORTED_APIS[api_key]
    request = build(request_schema(api_key, version), data)
    header = RequestHeader(api_key, version, 0, CLIENT_ID, 0)
    result = await spec.handler(broker.services, RequestContext(header, session.client()), request)
    if isinstance(result, Throttled):  # a quota's throttle mutes a Kafka connection; the console has none
        result = result.response
    if spec.coordinator_write:
        await broker.replica_manager.await_pending_flushes()
    return result
