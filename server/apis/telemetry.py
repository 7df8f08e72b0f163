"""KIP-714 client telemetry: GetTelemetrySubscriptions (71) and PushTelemetry (72), v0 as Kafka
4.3 serves them (server/telemetry/manager.py holds the client instances and their checks).

A client instance is matched on Kafka's selectors: client id (request header), software name
and version (from the connection's ApiVersions request), source address and port."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.framing import RequestHeader

from ..telemetry import subscriptions as subs
from ..telemetry.manager import manager_of

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection

# Connection -> (client software name, version), from its ApiVersions v3+ request.
_CLIENT_SOFTWARE: weakref.WeakKeyDictionary[Any, tuple[str | None, str | None]] = weakref.WeakKeyDictionary()


def record_client_software(conn: Connection, request: Any) -> None:
    """Called by ApiVersions: what KIP-714's client_software_* selectors match."""
    name = getattr(request, "client_software_name", None)
    if name is not None:
        try:
            _CLIENT_SOFTWARE[conn] = (name, getattr(request, "client_software_version", None))
        except TypeError:  # not weak-referenceable (a test double)
            pass


def _attributes(conn: Connection, header: RequestHeader) -> dict[str, str | None]:
    """ClientMetricsInstanceMetadata (the instance id is added by the manager)."""
    name, version = _CLIENT_SOFTWARE.get(conn, (None, None))
    peer = getattr(conn, "peer", "")
    port = peer.rpartition(":")[2] if ":" in peer else None
    return {
        subs.CLIENT_ID: header.client_id,
        subs.CLIENT_SOFTWARE_NAME: name,
        subs.CLIENT_SOFTWARE_VERSION: version,
        subs.CLIENT_SOURCE_ADDRESS: getattr(conn, "client_host", None) or None,
        subs.CLIENT_SOURCE_PORT: port if port and port.isdigit() else None,
    }


async def handle_get_telemetry_subscriptions(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    return manager_of(broker).get_telemetry_subscriptions(request.client_instance_id, _attributes(conn, header))


async def handle_push_telemetry(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    code = manager_of(broker).push_telemetry(request, _attributes(conn, header), header.client_id or "")
    return {"throttle_time": 0, "error_code": code}
