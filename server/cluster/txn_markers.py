"""Transaction markers for partitions other nodes lead: WriteTxnMarkers (27) sent there.

Kafka's TransactionMarkerChannelManager: once a transaction is PrepareCommit/PrepareAbort, the
coordinator sends each partition's leader a WriteTxnMarkers request and completes the
transaction (CompleteCommit/CompleteAbort) when every marker is written. Retriable failures (the
node restarting, NOT_LEADER_OR_FOLLOWER, a storage error) are retried, the delay doubling up
to a second, for as long as the node runs; a partition that is gone (UNKNOWN_TOPIC_OR_PARTITION)
or whose producer moved on (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) needs no
marker, as Kafka drops those. Until the transaction completes, the coordinator answers its
producer CONCURRENT_TRANSACTIONS, as Kafka does while markers are pending.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors

from .peers import PeerUnavailable

if TYPE_CHECKING:
    from ..transactions.state import TransactionMetadata
    from .node import ClusterNode

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION = 27, 1
# Kafka's TransactionMarkerRequestCompletionHandler: these need no retry.
_DONE = {errors.NONE, errors.UNKNOWN_TOPIC_OR_PARTITION, errors.INVALID_PRODUCER_EPOCH, errors.TRANSACTION_COORDINATOR_FENCED}
RETRY_DELAYS_S = (0.05, 1.0)


class TxnMarkerSender:
    def __init__(self, cluster: ClusterNode) -> None:
        self.cluster = cluster
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, m: TransactionMetadata, commit: bool, partitions: list[tuple[str, int]],
             done: Callable[[TransactionMetadata, bool], None]) -> None:
        """Write ``m``'s markers on the nodes leading ``partitions``, then call ``done(m, commit)``."""
        # A context of its own: not the ending request's write scope, long answered when this is done.
        task = asyncio.get_running_loop().create_task(self._send(m, commit, partitions, done), context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, m: TransactionMetadata, commit: bool, partitions: list[tuple[str, int]],
                    done: Callable[[TransactionMetadata, bool], None]) -> None:
        by_node: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for topic, p in partitions:
            by_node[self.cluster.placement.leader(topic, p)].append((topic, p))
        await asyncio.gather(*(self._send_to(node, m, commit, tps) for node, tps in by_node.items()))
        done(m, commit)

    async def _send_to(self, node: int, m: TransactionMetadata, commit: bool, partitions: list[tuple[str, int]]) -> None:
        pending = list(partitions)
        delay = RETRY_DELAYS_S[0]
        while pending:
            try:
                answer = await self.cluster.peers.call(node, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, marker_request(m, commit, pending))
                failed = [(t.name, p.partition_index, p.error_code) for r in answer.markers for t in r.topics for p in t.partitions
                          if p.error_code not in _DONE]
            except PeerUnavailable as e:
                failed = [(t, p, -1) for t, p in pending]
                log.info("transaction %s: node %d unavailable for its markers (%s); retrying", m.transactional_id, node, e)
            pending = [(t, p) for t, p, _ in failed]
            if pending:
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_DELAYS_S[1])

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def marker_request(m: TransactionMetadata, commit: bool, partitions: list[tuple[str, int]]) -> dict[str, Any]:
    """A WriteTxnMarkers v1 request for ``partitions`` of producer ``m``."""
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, p in partitions:
        topics[topic].append(p)
    return {"markers": [{
        "producer_id": m.producer_id, "producer_epoch": m.producer_epoch, "transaction_result": commit,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()], "coordinator_epoch": 0,
    }]}
