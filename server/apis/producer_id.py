"""InitProducerId (API 22): producer ids for idempotent producers.

Ids come from a counter persisted in the data dir, so they never repeat across
restarts. Sequence and epoch checks happen per partition on append
(storage/producer_state.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection


async def handle_init_producer_id(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        # No transaction coordinator yet: tell the client there is none to find.
        return {"throttle_time": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "producer_id": -1, "producer_epoch": -1}
    # Without a transactional id Kafka ignores any producer id/epoch sent (v3+) and
    # hands out a fresh id with epoch 0; v0-v2 requests have no such fields at all.
    producer_id = await broker.run_blocking(broker.log_manager.allocate_producer_id)
    return {"throttle_time": 0, "error_code": errors.NONE, "producer_id": producer_id, "producer_epoch": 0}
