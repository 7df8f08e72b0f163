"""KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader and its endpoint.

Kafka's KafkaApis (``getCurrentLeader``) puts the leader's id and epoch in the partition's
``current_leader`` and the leader's endpoint, on the listener the request came in on, in the
answer's ``node_endpoints`` (Produce v10+, Fetch v16+, ShareFetch and ShareAcknowledge; Kafka's
Fetch also does it for FENCED_LEADER_EPOCH, which our Fetch never answers), so a client goes straight to the right node instead of refreshing its
metadata first. Here leadership is static (server/cluster/placement.py) and every partition is
in epoch ``LEADER_EPOCH``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.storage.log import LEADER_EPOCH

if TYPE_CHECKING:
    from kafka_sidecar.server.services import BrokerServices


def current_leader(services: BrokerServices, topic: str, partition: int) -> dict[str, int]:
    """``{leader_id, leader_epoch}`` of a partition (Kafka's LeaderIdAndEpoch); -1s when the
    topic or partition is unknown, as Kafka answers when its metadata has no leader."""
    info = services.metadata.topics.get(topic)
    cluster = services.cluster
    if info is None or not 0 <= partition < info.partitions:
        return {"leader_id": -1, "leader_epoch": -1}
    leader = services.node_id if cluster is None else cluster.placement.leader(topic, partition)
    return {"leader_id": leader, "leader_epoch": LEADER_EPOCH}


def node_endpoints(services: BrokerServices, listener: str | None, node_ids: set[int]) -> list[dict[str, Any]]:
    """The NodeEndpoints of these nodes as a client of ``listener`` reaches them, by node id."""
    cluster = services.cluster
    if cluster is None:
        return []
    return [{**cluster.node_endpoint(n, listener), "rack": None} for n in sorted(node_ids) if n >= 0]
