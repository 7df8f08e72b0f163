"""KIP-890 verification across nodes: a transactional Produce whose coordinator is another node.

Before the first transactional batch of a transaction is appended to a partition, the leader
asks the transaction's coordinator whether the partition was added to it. On one node that is a
call into the local coordinator (``server/apis/produce.py``); in a cluster the coordinator may be
another node, asked here with Kafka's own AddPartitionsToTxn v5 ``verify_only`` (what Kafka's
AddPartitionsToTxnManager sends), once per Produce for all its partitions needing it. An
unreachable coordinator is COORDINATOR_NOT_AVAILABLE, which the produce path turns into Kafka's
retriable NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.record_batch import read_header
from kafka_sidecar.protocol.topic import TRANSACTION_STATE_TOPIC

from .peers import PeerUnavailable

if TYPE_CHECKING:
    from ..services import BrokerServices

ADD_PARTITIONS_TO_TXN, VERIFY_VERSION = 24, 5
HEADER_SIZE = 61


async def verify_elsewhere(services: BrokerServices, request: Any, names: list[str | None], transactional_id: str) -> dict[tuple[str, int], int] | None:
    """The coordinator's verdict for each partition of this Produce that needs one, when the
    coordinator is another node: {(topic, partition): error code}; None when it is this node
    (the produce path asks it directly) or verification is off."""
    cluster = services.cluster
    assert cluster is not None
    if not services.config.get("transaction.partition.verification.enable"):
        return None
    coordinator = cluster.placement.leader(TRANSACTION_STATE_TOPIC, services.transaction_coordinator.partition_for(transactional_id))
    if coordinator == cluster.node_id:
        return None
    rm = services.replica_manager
    wanted: dict[str, list[int]] = {}
    producer: tuple[int, int] | None = None
    for t, name in zip(request.topic_data, names, strict=True):
        if name is None:
            continue
        for p in t.partition_data:
            records = p.records
            lg = rm.get_log(name, p.index)
            if lg is None or records is None or len(records) < HEADER_SIZE:
                continue
            h = read_header(records)
            if not h.is_transactional or lg.has_ongoing_transaction(h.producer_id):
                continue
            producer = (h.producer_id, h.producer_epoch)
            wanted.setdefault(name, []).append(p.index)
    if producer is None:
        return {}
    body = {"transactions": [{
        "transactional_id": transactional_id, "producer_id": producer[0], "producer_epoch": producer[1], "verify_only": True,
        "topics": [{"name": n, "partitions": ps} for n, ps in wanted.items()],
    }]}
    try:
        answer = await cluster.peers.call(coordinator, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body)
    except PeerUnavailable:
        return {(n, p): errors.COORDINATOR_NOT_AVAILABLE for n, ps in wanted.items() for p in ps}
    if answer.error_code:
        return {(n, p): answer.error_code for n, ps in wanted.items() for p in ps}
    return {(t.name, r.partition_index): r.partition_error_code
            for txn in answer.results_by_transaction for t in txn.topic_results for r in t.results_by_partition}
