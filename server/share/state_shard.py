"""ShareStateShard: the share coordinator's side of Kafka's inter-broker share-state APIs, for the
``__share_group_state`` partitions this node leads (Kafka's ShareCoordinatorShard).

In a ``serve --processes N`` cluster the leader of a topic-partition keeps its SharePartitions in
memory, but their durable state lives with the leader of the ``__share_group_state`` partition
of the key "groupId:topicId:partition". That node answers ReadShareGroupState (84),
WriteShareGroupState (85), InitializeShareGroupState (83), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87) here (handlers in server/apis/share_state.py), with the same
ShareSnapshot / ShareUpdate records and the same written cache as the local persister
(server/share/persister.py), so a node's restart replays them as before. One process never
uses this itself: its persister writes its own partitions directly; a client with
CLUSTER_ACTION may still send these APIs to it.

What Kafka 4.3.1 answers (tests/conformance/test_share_state_apis.py compares): a negative
partition is INVALID_REQUEST; a key never initialized cannot be read or written
(INVALID_REQUEST) but its summary is a state of start offset -1; a leader epoch below the highest
one written or read is FENCED_LEADER_EPOCH, a state epoch below the stored one
FENCED_STATE_EPOCH; initialize, summary and delete of a topic-partition the metadata does not
have are UNKNOWN_TOPIC_OR_PARTITION; a write's batches are combined with those kept
(``combine_batches``), its start offset -1 keeps the one kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_sidecar.protocol import errors

from .partition import RecordState
from .persister import PersistedState, SharePartitionKey, _Written, combine_batches
from .records import (
    SHARE_GROUP_STATE_TOPIC,
    SHARE_SNAPSHOT_TYPE,
    SHARE_UPDATE_TYPE,
    ShareStateValue,
    StateBatch,
    partition_for,
    share_key,
    snapshot_value,
    update_value,
)

if TYPE_CHECKING:
    from .persister import ShareStatePersister

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_INT32_MAX = 2**31 - 1

# (error code, error message) as Kafka's share coordinator answers them.
Answer = tuple[int, str | None]
OK: Answer = (errors.NONE, None)
NEGATIVE_PARTITION: Answer = (errors.INVALID_REQUEST, "The partition id cannot be a negative number.")
UNKNOWN_PARTITION: Answer = (errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
FENCED_LEADER: Answer = (errors.FENCED_LEADER_EPOCH, "The leader epoch in the request is older than the epoch on the broker.")
FENCED_STATE: Answer = (errors.FENCED_STATE_EPOCH,
                        "The share coordinator rejected the request because the share-group state epoch did not match.")
NOT_COORDINATOR_MESSAGE = "This is not the correct coordinator."


def uninitialized(operation: str) -> Answer:
    return errors.INVALID_REQUEST, f"{operation} operation on uninitialized share partition not allowed."


def delivery_complete_count(state: PersistedState) -> int:
    """Records at or after the start offset whose delivery is complete (KIP-1226's count)."""
    start, batches = state
    count = sum(b.last_offset - max(b.first_offset, start) + 1 for b in batches
                if b.delivery_state in _DONE and b.last_offset >= start)
    return min(max(count, 0), _INT32_MAX)  # the record's field is an int32: batches sent may span more


class ShareStateShard:
    def __init__(self, persister: ShareStatePersister) -> None:
        self.persister = persister

    def leads(self, key: SharePartitionKey) -> bool:
        """Whether this node leads the key's ``__share_group_state`` partition (else NOT_COORDINATOR)."""
        p = self.persister
        return p.broker.replica_manager.get_log(SHARE_GROUP_STATE_TOPIC, partition_for(*key, p.num_partitions)) is not None

    def _refused(self, key: SharePartitionKey, what: str) -> Answer | None:
        """The checks every API makes first: a negative partition, then the coordinator."""
        if key[2] < 0:
            return NEGATIVE_PARTITION
        if not self.leads(key):
            return errors.NOT_COORDINATOR, f"Unable to {what}: {NOT_COORDINATOR_MESSAGE}"
        return None

    def _known(self, key: SharePartitionKey) -> bool:
        """Whether the metadata has the key's topic-partition (Kafka's metadata image check)."""
        info = self.persister.broker.metadata.topics_by_id.get(key[1]) if key[1] is not None else None
        return info is not None and key[2] < info.partitions

    def _fenced(self, key: SharePartitionKey, leader_epoch: int) -> bool:
        return self.persister.leader_epochs.get(key, leader_epoch) > leader_epoch

    # ---- reads ---------------------------------------------------------------------------------

    def read(self, key: SharePartitionKey, leader_epoch: int) -> tuple[Answer, _Written | None]:
        """ReadShareGroupState: the kept state; a reader with a newer leader epoch fences older ones."""
        refused = self._refused(key, "read share group state")
        if refused:
            return refused, None
        w = self.persister.written.get(key)
        if w is None:
            return uninitialized("Read"), None
        if self._fenced(key, leader_epoch):
            return FENCED_LEADER, None
        if not self._known(key):
            return UNKNOWN_PARTITION, None
        self.persister.leader_epochs[key] = leader_epoch
        return OK, w

    def summary(self, key: SharePartitionKey) -> tuple[Answer, _Written | None]:
        """ReadShareGroupStateSummary: no fencing; a key never initialized reads as no state (None)."""
        refused = self._refused(key, "read share group state summary")
        if refused:
            return refused, None
        if not self._known(key):
            return UNKNOWN_PARTITION, None
        return OK, self.persister.written.get(key)

    # ---- writes --------------------------------------------------------------------------------

    def initialize(self, key: SharePartitionKey, state_epoch: int, start: int) -> Answer:
        """InitializeShareGroupState: a ShareSnapshot at ``start`` with nothing in flight, at
        ``state_epoch`` (not below the kept one)."""
        refused = self._refused(key, "initialize share group state")
        if refused:
            return refused
        p = self.persister
        last = p.written.get(key)
        if last is not None and last.state_epoch > state_epoch:
            return FENCED_STATE
        if not self._known(key):
            return UNKNOWN_PARTITION
        if last is not None and (start < 0 or (last.state_epoch, last.state[0]) == (state_epoch, start)):
            # The same initialization again: kept. (Also one without a start offset over a kept
            # state: the nodes of a --processes cluster initialize so, server/cluster/share_state.py,
            # where Kafka's group coordinator knows which partitions it initialized already.)
            return OK
        epoch = 0 if last is None else last.snapshot_epoch + 1
        return self._snapshot(key, last, epoch, state_epoch, 0, (start, ()), -1 if start < 0 else 0)

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start: int,
              batches: tuple[StateBatch, ...], complete: int) -> Answer:
        """WriteShareGroupState: a ShareUpdate of the request's batches (a ShareSnapshot of the
        combined state every share.coordinator.snapshot.update.records.per.snapshot updates)."""
        refused = self._refused(key, "write share group state")
        if refused:
            return refused
        p = self.persister
        last = p.written.get(key)
        if last is None:
            return uninitialized("Write")
        if self._fenced(key, leader_epoch):
            return FENCED_LEADER
        if last.state_epoch > state_epoch:
            return FENCED_STATE
        if not self._known(key):
            return UNKNOWN_PARTITION
        new_start = start if start != -1 else last.state[0]
        new_leader = leader_epoch if leader_epoch != -1 else last.leader_epoch
        combined = (new_start, tuple(combine_batches(last.state[1], batches, new_start)))
        per_snapshot = p._config("share.coordinator.snapshot.update.records.per.snapshot", 500)
        if last.updates >= per_snapshot:
            new_state = state_epoch if state_epoch != -1 else last.state_epoch
            answer = self._snapshot(key, last, last.snapshot_epoch + 1, new_state, new_leader, combined, complete)
        else:
            value = ShareStateValue(last.snapshot_epoch, leader_epoch, start, combine_batches((), batches, start),
                                    delivery_complete_count=complete)
            error, _ = p._append(key, [(share_key(SHARE_UPDATE_TYPE, *key), update_value(value))])
            if error:
                return error, None
            p.written[key] = _Written(combined, last.snapshot_epoch, last.updates + 1, last.create_timestamp,
                                      last.snapshot_offset, last.state_epoch, new_leader, complete)
            answer = OK
        if answer == OK:
            p.leader_epochs[key] = max(p.leader_epochs.get(key, leader_epoch), leader_epoch)
        return answer

    def _snapshot(self, key: SharePartitionKey, last: _Written | None, epoch: int, state_epoch: int, leader_epoch: int,
                  state: PersistedState, complete: int) -> Answer:
        p = self.persister
        now = p.runtime.clock.now_ms()
        created = now if last is None else last.create_timestamp
        value = ShareStateValue(epoch, leader_epoch, state[0], list(state[1]), state_epoch, created, now, complete)
        error, offset = p._append(key, [(share_key(SHARE_SNAPSHOT_TYPE, *key), snapshot_value(value))])
        if error:
            return error, None
        p.written[key] = _Written(state, epoch, 0, created, offset, state_epoch, leader_epoch, complete)
        p.leader_epochs[key] = max(p.leader_epochs.get(key, leader_epoch), leader_epoch)
        p._prune(partition_for(*key, p.num_partitions))
        return OK

    def delete(self, key: SharePartitionKey) -> Answer:
        refused = self._refused(key, "delete share group state")
        if refused:
            return refused
        if not self._known(key):
            return UNKNOWN_PARTITION
        error = self.persister.delete(key)
        return (error, None) if error else OK
