"""Share-partition state across nodes (KIP-932's persister, Kafka's DefaultStatePersister and
PersisterStateManager): what a node sends when the state of a share-partition lives elsewhere.

A share-partition's records are acquired and acknowledged on the leader of its topic-partition
(ShareFetch, ShareAcknowledge); its durable state is kept by the share coordinator, the leader of
the ``__share_group_state`` partition of "groupId:topicId:partition" (server/share/state_shard.py).
When that is another node, the leader's persister (server/share/persister.py) hands its writes
here: WriteShareGroupState (85) with the share-partition's whole persisted state, or
InitializeShareGroupState (83) for a new start offset (the group coordinator initializing a
subscribed partition, AlterShareGroupOffsets), DeleteShareGroupState (86) when the group or its
offsets go. A leader that has no SharePartition for a key reads it first with
ReadShareGroupState (84); the group coordinator answers DescribeShareGroupOffsets from
ReadShareGroupStateSummary (87) and the leader's high watermark (ListOffsets).

Calls to one node go out in the order they were made (one chain per node), so a share-partition's
writes and a later read arrive in order. The answer of the request that wrote waits for the
write (CoordinatorRuntime.await_remote); a write that failed is logged and the leader forgets
what it last wrote, so its next write carries the whole state again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.topic import SHARE_GROUP_STATE_TOPIC

from ..share.persister import ReplayedState
from ..share.records import StateBatch, partition_for
from ..share.state_shard import delivery_complete_count
from .peers import PeerUnavailable

if TYPE_CHECKING:
    from ..share.coordinator import ShareCoordinator
    from ..share.persister import PersistedState, ShareStatePersister
    from .node import ClusterNode

log = logging.getLogger(__name__)

SharePartitionKey = tuple[str, uuid.UUID, int]
INITIALIZE, READ, WRITE, DELETE, SUMMARY, LIST_OFFSETS = 83, 84, 85, 86, 87, 2
UNINITIALIZED = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET
VERSIONS = {INITIALIZE: 0, READ: 0, WRITE: 1, DELETE: 0, SUMMARY: 1, LIST_OFFSETS: 7}


def _one(group_id: str, key: SharePartitionKey, partition: dict[str, Any]) -> dict[str, Any]:
    """A request body for one share-partition."""
    return {"group_id": group_id, "topics": [{"topic_id": key[1], "partitions": [{"partition": key[2], **partition}]}]}


def _result(answer: Any) -> Any | None:
    """The one partition result of a share-state answer (None if there is none)."""
    for t in answer.results:
        for p in t.partitions:
            return p
    return None


class RemoteShareState:
    """This node's calls to the share coordinators of share-partitions kept on other nodes."""

    def __init__(self, cluster: ClusterNode, persister: ShareStatePersister) -> None:
        self.cluster = cluster
        self.persister = persister
        self._tail: dict[int, asyncio.Future[Any]] = {}
        self._pending: dict[SharePartitionKey, asyncio.Future[int]] = {}  # each key's last write, until answered

    def coordinator_of(self, key: SharePartitionKey) -> int:
        """The node leading the key's ``__share_group_state`` partition (FindCoordinator SHARE)."""
        return self.cluster.placement.leader(SHARE_GROUP_STATE_TOPIC, partition_for(*key, self.persister.num_partitions))

    def elsewhere(self, key: SharePartitionKey) -> bool:
        return self.coordinator_of(key) != self.cluster.node_id

    # ---- the chain of calls per node -----------------------------------------------------------

    def _submit(self, node: int, api_key: int, body: dict[str, Any]) -> asyncio.Future[Any]:
        """Send after every call made before to ``node``: the answer, or None if none came."""
        fut = asyncio.ensure_future(self._send(self._tail.get(node), node, api_key, body))
        self._tail[node] = fut
        return fut

    async def _send(self, before: asyncio.Future[Any] | None, node: int, api_key: int, body: dict[str, Any]) -> Any:
        if before is not None and not before.done():
            await asyncio.wait([before])
        for attempt in (1, 2):
            try:
                return await self.cluster.peers.call(node, api_key, VERSIONS[api_key], body)
            except PeerUnavailable as e:
                # Once more on a new connection: the first call after the peer restarted finds the
                # old one closed (every call here may be repeated: a write carries the whole state).
                if attempt == 2:
                    log.warning("share-partition state: API %d to node %d failed: %s", api_key, node, e)
        return None

    # ---- writes (the persister's, synchronous: the request's answer waits for them) --------------

    def write(self, key: SharePartitionKey, state: PersistedState, *, initialize: bool) -> None:
        start, batches = state
        if initialize:
            body = _one(key[0], key, {"state_epoch": 0, "start_offset": start})
            api = INITIALIZE
        else:
            body = _one(key[0], key, {
                "state_epoch": 0, "leader_epoch": 0, "start_offset": start,
                "delivery_complete_count": delivery_complete_count(state),
                "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                   "delivery_state": b.delivery_state, "delivery_count": b.delivery_count} for b in batches]})
            api = WRITE
        self._track(key, api, self._submit(self.coordinator_of(key), api, body))

    def delete(self, key: SharePartitionKey) -> None:
        self._track(key, DELETE, self._submit(self.coordinator_of(key), DELETE, _one(key[0], key, {})))

    def _track(self, key: SharePartitionKey, api_key: int, sent: asyncio.Future[Any]) -> None:
        async def outcome() -> int:
            answer = await sent
            r = _result(answer) if answer is not None else None
            error = errors.COORDINATOR_NOT_AVAILABLE if r is None else int(r.error_code)
            if error:
                log.warning("share-partition state of %s: API %d answered error %d", key, api_key, error)
                if api_key != DELETE:
                    self.persister.written.pop(key, None)  # the next write carries the whole state
            return error

        fut = asyncio.ensure_future(outcome())
        self._pending[key] = fut
        fut.add_done_callback(lambda f: self._pending.pop(key, None) if self._pending.get(key) is f else None)
        self.persister.runtime.await_remote(fut, f"share-partition state of {key}")

    async def settle(self, group_id: str, keys: list[tuple[uuid.UUID, int]]) -> dict[tuple[uuid.UUID, int], int]:
        """Wait for the writes in flight of these share-partitions: those whose last write failed,
        with its error (an acknowledgement not kept is answered so, as Kafka's persister errors are)."""
        out = {}
        for topic_id, partition in keys:
            fut = self._pending.get((group_id, topic_id, partition))
            if fut is not None and (error := await fut):
                out[(topic_id, partition)] = error
        return out

    # ---- reads ---------------------------------------------------------------------------------

    async def read(self, key: SharePartitionKey) -> tuple[int, PersistedState | None]:
        """ReadShareGroupState: (error, (start offset, batches)); INVALID_REQUEST: never initialized."""
        answer = await self._submit(self.coordinator_of(key), READ, _one(key[0], key, {"leader_epoch": 0}))
        r = _result(answer) if answer is not None else None
        if r is None:
            return errors.COORDINATOR_NOT_AVAILABLE, None
        if r.error_code:
            return int(r.error_code), None
        batches = tuple(StateBatch(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count) for b in r.state_batches)
        return errors.NONE, (r.start_offset, batches)

    async def summary(self, key: SharePartitionKey) -> tuple[int, int, int]:
        """ReadShareGroupStateSummary: (error, start offset, delivery complete count); a key never
        initialized answers no error and start offset -1, as one initialized without one."""
        answer = await self._submit(self.coordinator_of(key), SUMMARY, _one(key[0], key, {"leader_epoch": 0}))
        r = _result(answer) if answer is not None else None
        if r is None:
            return errors.COORDINATOR_NOT_AVAILABLE, -1, -1
        return int(r.error_code), r.start_offset, r.delivery_complete_count

    async def high_watermark(self, topic: str, partition: int) -> int | None:
        """The partition's high watermark, asked of its leader (ListOffsets latest)."""
        node = self.cluster.placement.leader(topic, partition)
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]}
        answer = await self._submit(node, LIST_OFFSETS, body)
        if answer is None:
            return None
        for t in answer.topics:
            for p in t.partitions:
                return None if p.error_code else p.offset
        return None

    # ---- what the share APIs ask before they answer ----------------------------------------------

    async def load_missing(self, coordinator: ShareCoordinator, group_id: str, keys: list[tuple[uuid.UUID, int]]) -> dict[tuple[uuid.UUID, int], int]:
        """Before a ShareFetch: the share-partitions of ``keys`` this node leads, has none of in
        memory and whose state another node keeps are read from there (Kafka's
        SharePartition.maybeInitialize reading its persister). A key never initialized is left
        for the fetch to initialize; one that could not be read is returned with the error (it
        must not be initialized over state that exists)."""
        failed: dict[tuple[uuid.UUID, int], int] = {}
        by_id = coordinator.broker.metadata.topics_by_id
        for topic_id, partition in keys:
            key = (group_id, topic_id, partition)
            info = by_id.get(topic_id)
            if (key in coordinator.share_partitions and key not in coordinator.state_unread) or info is None \
                    or not self.cluster.placement.is_local(info.name, partition) or not self.elsewhere(key):
                continue
            error, state = await self.read(key)
            if state is not None:
                if key not in coordinator.share_partitions or key in coordinator.state_unread:
                    start, batches = state
                    st = ReplayedState(start, 0, -1, [(max(b.first_offset, start), b.last_offset, b.delivery_state, b.delivery_count)
                                                      for b in batches if b.last_offset >= start])
                    coordinator.restore_partition(key, st)
            elif error in (errors.INVALID_REQUEST, errors.UNKNOWN_TOPIC_OR_PARTITION):
                # Never initialized (Kafka's "Read operation on uninitialized share partition"):
                # from share.auto.offset.reset.
                coordinator.state_unread.discard(key)
            else:
                failed[(topic_id, partition)] = error
        return failed

    async def describe(self, coordinator: ShareCoordinator, group_id: str,
                       partitions: list[tuple[str, uuid.UUID, int]]) -> dict[tuple[uuid.UUID, int], tuple[int, int, int]]:
        """For DescribeShareGroupOffsets on the group coordinator: (start offset, leader epoch, lag) of each
        share-partition whose state or topic-partition is on another node; the state from its
        share coordinator (ReadShareGroupStateSummary), the high watermark from its leader."""
        out: dict[tuple[uuid.UUID, int], tuple[int, int, int]] = {}
        for topic, topic_id, partition in partitions:
            key = (group_id, topic_id, partition)
            local_data = self.cluster.placement.is_local(topic, partition)
            if not self.elsewhere(key):
                if local_data:
                    continue
                persisted = self.persister.persisted(key)
                if persisted is None:
                    continue
                error, start, complete = errors.NONE, persisted[0], delivery_complete_count(persisted)
            else:
                error, start, complete = await self.summary(key)
            if error == errors.UNKNOWN_TOPIC_OR_PARTITION:
                out[(topic_id, partition)] = (UNINITIALIZED, -1, -1)
                continue
            if error or start < 0:
                out[(topic_id, partition)] = (UNINITIALIZED, 0, -1)
                continue
            lg = coordinator.broker.replica_manager.get_log(topic, partition)
            hwm = lg.high_watermark if lg is not None else await self.high_watermark(topic, partition)
            out[(topic_id, partition)] = (start, 0, -1 if hwm is None or complete < 0 else max(0, hwm - start - complete))
        return out
