"""Static partition leadership: which node of the cluster leads a partition.

Partition ``p`` of topic ``t`` is led by node ``1 + (crc32(t) + p) mod N``: consecutive
partitions go round the nodes from a start that depends on the topic (as Kafka's default replica
placement spreads a new topic), so every topic's partitions are spread and topics with few
partitions do not all land on node 1. CRC-32 of the UTF-8 name, never Python's ``hash()`` (salted
per process): every node computes the same answer. Replication factor 1: the leader is the only
replica.
"""

from __future__ import annotations

import zlib


def topic_start(topic: str) -> int:
    """The topic's place in the rotation (the same on every node and every run)."""
    return zlib.crc32(topic.encode())


def leader_of(topic: str, partition: int, nodes: int) -> int:
    """The node id (1..nodes) leading ``partition`` of ``topic``."""
    return 1 + (zlib.crc32(topic.encode()) + partition) % nodes


class Placement:
    """Leadership for a cluster of ``nodes`` nodes, seen from node ``node_id``."""

    __slots__ = ("node_id", "nodes")

    def __init__(self, node_id: int, nodes: int) -> None:
        self.node_id = node_id
        self.nodes = nodes

    def leader(self, topic: str, partition: int) -> int:
        return 1 + (zlib.crc32(topic.encode()) + partition) % self.nodes

    def is_local(self, topic: str, partition: int) -> bool:
        """Whether this node leads (and so holds the log of) the partition."""
        return 1 + (zlib.crc32(topic.encode()) + partition) % self.nodes == self.node_id
