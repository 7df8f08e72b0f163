"""What the group coordinator's managers take and answer: the request context, a JoinGroup
request, and the JoinGroup/SyncGroup response bodies (as dicts the API handlers encode)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kafka_sidecar.protocol import errors

Response = dict[str, Any]


@dataclass(frozen=True)
class RequestContext:
    client_id: str
    client_host: str  # as Kafka prints an InetAddress: "/127.0.0.1"
    api_version: int


@dataclass
class JoinRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reason: str | None = None


def join_response(member_id: str, error: int = errors.NONE, **fields: Any) -> Response:
    r: Response = {
        "error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
        "leader": "", "skip_assignment": False, "member_id": member_id, "members": [],
    }
    r.update(fields)
    return r


def sync_response(error: int = errors.NONE, protocol_type: str | None = None, protocol_name: str | None = None, assignment: bytes = b"") -> Response:
    return {"error_code": error, "protocol_type": protocol_type, "protocol_name": protocol_name, "assignment": assignment}


def set_response(fut: asyncio.Future[Response], response: Response) -> None:
    """Answer a parked request unless it was answered already."""
    if not fut.done():
        fut.set_result(response)
