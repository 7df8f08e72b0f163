"""Delegation tokens (APIs 38-41: Create/Renew/Expire/Describe, Kafka 4.3.1's versions), answered
as Kafka answers them when tokens are not enabled (no ``delegation.token.secret.key``):
DELEGATION_TOKEN_AUTH_DISABLED before anything else is looked at (Kafka 4.3 answers so on any
listener, PLAINTEXT included, whatever the owner or renewers), with its empty token: timestamps
-1, no id, no HMAC; Create names the owner (the request's, else the requester) and, from v3,
the requester. An owner name without an owner type (v3: both nullable) is Kafka's
NullPointerException in ``new KafkaPrincipal(null, name)`` before any check, answered by the
request's error response: UNKNOWN_SERVER_ERROR naming User:ANONYMOUS as owner and requester.
kafka-sidecar has no token authentication (SASL/OAUTHBEARER-style token
credentials), so tokens are never enabled.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

DELEGATION_TOKEN_AUTH_DISABLED = 64
UNKNOWN_SERVER_ERROR = -1
# Kafka's -1 "no timestamp": a datetime field the codec writes as -1 ms.
NO_TIMESTAMP = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) - datetime.timedelta(milliseconds=1)


def _principal(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


async def handle_create_delegation_token(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    requester_type, requester_name = _principal(context.principal)
    owner_name = getattr(request, "owner_principal_name", None)
    error = DELEGATION_TOKEN_AUTH_DISABLED
    if not owner_name:
        owner = (requester_type, requester_name)
    elif request.owner_principal_type is None:  # Kafka: getErrorResponse(NullPointerException)
        error, owner = UNKNOWN_SERVER_ERROR, ("User", "ANONYMOUS")
        requester_type, requester_name = owner
    else:
        owner = (request.owner_principal_type, owner_name)
    return {"error_code": error, "principal_type": owner[0], "principal_name": owner[1],
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp": NO_TIMESTAMP, "expiry_timestamp": NO_TIMESTAMP, "max_timestamp": NO_TIMESTAMP,
            "token_id": "", "hmac": b"", "throttle_time": 0}


async def handle_renew_delegation_token(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    return {"error_code": DELEGATION_TOKEN_AUTH_DISABLED, "expiry_timestamp": NO_TIMESTAMP, "throttle_time": 0}


async def handle_expire_delegation_token(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    return {"error_code": DELEGATION_TOKEN_AUTH_DISABLED, "expiry_timestamp": NO_TIMESTAMP, "throttle_time": 0}


async def handle_describe_delegation_token(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    return {"error_code": DELEGATION_TOKEN_AUTH_DISABLED, "tokens": [], "throttle_time": 0}
