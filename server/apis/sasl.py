"""SaslHandshake (API 17, v0-1) and SaslAuthenticate (API 36, v0-2).

The exchange itself is ``server/security/sasl.py``'s SaslServerAuthenticator (one per
connection on a SASL listener); these handlers shape its answers. On a connection that is
already authenticated (and not re-authenticating), or on a listener without SASL, they answer
ILLEGAL_SASL_STATE as Kafka's request handler does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    ILLEGAL_SASL_STATE,
)

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices



async def handle_sasl_handshake(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    sasl = context.client.sasl
    if sasl is None:
        return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}
    code, mechanisms = sasl.handshake(header.api_version, request.mechanism)
    return {"error_code": code, "mechanisms": mechanisms}


async def handle_sasl_authenticate(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    sasl = context.client.sasl
    if sasl is None:
        return {"error_code": ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime": 0,
                "error_message": "SaslAuthenticate request received after successful authentication"}
    was_authenticated = sasl.authenticated
    out = sasl.authenticate(header.api_version, bytes(request.auth_bytes))
    if out.error_code == errors.NONE and sasl.authenticated and not was_authenticated:
        services.metrics.authentications_succeeded[context.listener] += 1
    return {"error_code": out.error_code, "error_message": out.error_message,
            "auth_bytes": out.auth_bytes, "session_lifetime": out.session_lifetime_ms}
