"""InitProducerId (API 22): producer ids for idempotent producers.

Ids come from a counter persisted in the data dir, so they never repeat across
restarts. Sequence and epoch checks happen per partition on append
(storage/producer_state.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.messages import ms

from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import (
    CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from ..transactions.state import INVALID_PRODUCER_EPOCH, PRODUCER_FENCED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices


def _error(code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


async def handle_init_producer_id(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    if az.enabled:
        # KafkaApis: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster
        # or WRITE on some topic (Kafka 3.0+, KIP-679).
        if request.transactional_id is not None:
            if not az.authorize(context, header, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
                return _error(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif (not az.authorize_cluster(context, header, AclOperation.IDEMPOTENT_WRITE, log_denied=False)
              and not az.authorize_by_resource_type(context, header, AclOperation.WRITE, ResourceType.TOPIC)):
            az.log_denial(context, header, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME,
                          "no IDEMPOTENT_WRITE on the cluster and no WRITE on any topic")
            return _error(CLUSTER_AUTHORIZATION_FAILED)
    if request.transactional_id is not None:
        # The transaction coordinator (server/transactions): a new epoch, fencing older producers.
        error, pid, epoch = await services.transaction_coordinator.init_producer_id(
            request.transactional_id, ms(request.transaction_timeout),
            getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1))
        if error == PRODUCER_FENCED and header.api_version < 4:
            error = INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED is new in v4
        return {"throttle_time": 0, "error_code": error, "producer_id": pid, "producer_epoch": epoch}
    # Without a transactional id Kafka ignores any producer id/epoch sent (v3+) and
    # hands out a fresh id with epoch 0; v0-v2 requests have no such fields at all.
    producer_id = await services.run_blocking(services.producer_ids.allocate)
    return {"throttle_time": 0, "error_code": errors.NONE, "producer_id": producer_id, "producer_epoch": 0}
