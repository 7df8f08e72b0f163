"""DescribeClientQuotas (API 48): kafka-sidecar has no client quotas, so none are described.

``kafka-configs.sh --describe --entity-type users`` asks for quotas before it asks for SCRAM
credentials; answering "no quota entities" (as Kafka does when none are set) lets it go on.
The filter is checked as Kafka's ClientQuotaManager checks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    INVALID_REQUEST,
)
from kafka_sidecar.protocol.framing import RequestHeader

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection

_ENTITY_TYPES = {"user", "client-id", "ip"}
_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_ANY = 0, 1, 2


async def handle_describe_client_quotas(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    seen: set[str] = set()
    for c in request.components:
        if c.entity_type not in _ENTITY_TYPES:
            return _error(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in seen:
            return _error(f"Duplicate {c.entity_type} filter component entity type")
        seen.add(c.entity_type)
        if c.match_type not in (_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_ANY):
            return _error(f"Unexpected match type: {c.match_type}")
    if "ip" in seen and len(seen) > 1:
        return _error("Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.")
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": []}


def _error(message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": INVALID_REQUEST, "error_message": message, "entries": None}
