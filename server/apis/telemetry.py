"""KIP-714 client telemetry: GetTelemetrySubscriptions (71) and PushTelemetry (72), v0 as Kafka
4.3 serves them (server/telemetry/manager.py holds the client instances and their checks).

A client instance is matched on Kafka's selectors: client id (request header), software name
and version (from the connection's ApiVersions request), source address and port."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.framing import RequestHeader

from ..telemetry import subscriptions as subs

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices


def record_client_software(context: RequestContext, request: Any) -> None:
    """Called by ApiVersions: what KIP-714's client_software_* selectors match."""
    name = getattr(request, "client_software_name", None)
    if name is not None:
        context.client.client_software = (name, getattr(request, "client_software_version", None))


def _attributes(context: RequestContext, header: RequestHeader) -> dict[str, str | None]:
    """ClientMetricsInstanceMetadata (the instance id is added by the manager)."""
    name, version = context.client.client_software
    peer = context.peer
    port = peer.rpartition(":")[2] if ":" in peer else None
    return {
        subs.CLIENT_ID: header.client_id,
        subs.CLIENT_SOFTWARE_NAME: name,
        subs.CLIENT_SOFTWARE_VERSION: version,
        subs.CLIENT_SOURCE_ADDRESS: context.client_host or None,
        subs.CLIENT_SOURCE_PORT: port if port and port.isdigit() else None,
    }


async def handle_get_telemetry_subscriptions(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    return services.client_metrics.get_telemetry_subscriptions(request.client_instance_id, _attributes(context, header))


async def handle_push_telemetry(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    code = services.client_metrics.push_telemetry(request, _attributes(context, header), header.client_id or "")
    return {"throttle_time": 0, "error_code": code}
