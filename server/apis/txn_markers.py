"""WriteTxnMarkers (API 27): a transaction coordinator's COMMIT/ABORT markers for partitions this
broker leads (Kafka's inter-broker API, KafkaApis.handleWriteTxnMarkersRequest).

In a ``--processes N`` cluster the coordinator of a transaction sends it here for the
transaction's partitions led by this node; any client with CLUSTER_ACTION may send it, as to
Kafka. Per partition: no log here is UNKNOWN_TOPIC_OR_PARTITION (Kafka looks up only online
partitions), the marker's checks are the log's (an older producer epoch INVALID_PRODUCER_EPOCH,
an older coordinator epoch TRANSACTION_COORDINATOR_FENCED); markers written to
``__consumer_offsets`` publish or drop the producer's pending offset commits, as Kafka's
onTransactionCompleted. The answer waits for the flushes of the markers (coordinator_write: the runtime's write scope).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.topic import OFFSETS_TOPIC

from ..replica_manager import append_error_code
from ..security.acls import AclOperation
from ..security.authorizer import CLUSTER_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)


def _marker_result(marker: Any, code: int | None, services: BrokerServices) -> dict[str, Any]:
    """One marker's answer: every partition written (``code`` None) or all failed with ``code``."""
    rm = services.replica_manager
    runtime = services.coordinator_runtime
    commit = bool(marker.transaction_result)
    topics = []
    offsets_partitions = []
    for t in marker.topics:
        parts = []
        for p in t.partition_indexes:
            error = code
            if error is None:
                lg = rm.get_log(t.name, p)
                if lg is None:
                    error = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        rm.append_transaction_marker(lg, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, commit)
                        runtime.touch(t.name, p)  # the answer waits for the marker's flush, if the policy asks one
                        error = errors.NONE
                        if t.name == OFFSETS_TOPIC:
                            offsets_partitions.append(p)
                    except Exception as e:
                        error = append_error_code(e)
                        log.info("WriteTxnMarkers: %s marker of producer %d for %s-%d refused: %s",
                                 "commit" if commit else "abort", marker.producer_id, t.name, p, e)
            parts.append({"partition_index": p, "error_code": error})
        topics.append({"name": t.name, "partitions": parts})
    for p in offsets_partitions:
        services.group_coordinator.complete_transaction(marker.producer_id, commit, p)
    return {"producer_id": marker.producer_id, "topics": topics}


async def handle_write_txn_markers(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    denied = None if services.authorizer.authorize_cluster(context, context.header, AclOperation.CLUSTER_ACTION) else CLUSTER_AUTHORIZATION_FAILED
    return {"markers": [_marker_result(m, denied, services) for m in request.markers]}
