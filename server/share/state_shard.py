"""ShareStateShard: the share coordinator's side of Kafka's inter-broker share-state APIs, for the
``__share_group_state`` partitions this node leads (Kafka's ShareCoordinatorShard).

In a ``serve --processes N`` cluster the leader of a topic-partition keeps its SharePartitions in
memory, but their durable state lives with the leader of the ``__share_group_state`` partition
of the key "groupId:topicId:partition". That node answers ReadShareGroupState (84),
WriteShareGroupState (85), InitializeShareGroupState (83), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87) here (handlers in server/apis/share_state.py), with the same
ShareSnapshot / ShareUpdate records and the same written cache as the local persister
(server/share/persister.py), so a node's restart replays them as before. One process never
uses this: its persister writes its own partitions directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_sidecar.protocol import errors

from .partition import RecordState
from .persister import PersistedState, SharePartitionKey, _Written
from .records import (
    SHARE_GROUP_STATE_TOPIC,
    SHARE_SNAPSHOT_TYPE,
    SHARE_UPDATE_TYPE,
    ShareStateValue,
    partition_for,
    share_key,
    snapshot_value,
    update_value,
)

if TYPE_CHECKING:
    from .persister import ShareStatePersister

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def delivery_complete_count(state: PersistedState) -> int:
    """Records at or after the start offset whose delivery is complete (KIP-1226's count)."""
    start, batches = state
    count = sum(b.last_offset - max(b.first_offset, start) + 1 for b in batches
                if b.delivery_state in _DONE and b.last_offset >= start)
    return min(max(count, 0), _INT32_MAX)  # the record's field is an int32: batches sent may span more


_INT32_MAX = 2**31 - 1


class ShareStateShard:
    def __init__(self, persister: ShareStatePersister) -> None:
        self.persister = persister

    def leads(self, key: SharePartitionKey) -> bool:
        """Whether this node leads the key's ``__share_group_state`` partition (else NOT_COORDINATOR)."""
        p = self.persister
        return p.broker.replica_manager.get_log(SHARE_GROUP_STATE_TOPIC, partition_for(*key, p.num_partitions)) is not None

    def read(self, key: SharePartitionKey) -> tuple[int, int, PersistedState | None]:
        """(error, state epoch, (start offset, batches)); a key never initialized is
        UNKNOWN_TOPIC_OR_PARTITION, as Kafka's shard answers."""
        if not self.leads(key):
            return errors.NOT_COORDINATOR, 0, None
        w = self.persister.written.get(key)
        if w is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, 0, None
        return errors.NONE, 0, w.state

    def write(self, key: SharePartitionKey, state: PersistedState, *, initialize: bool = False) -> int:
        """A leader's new state for the share-partition (or, ``initialize``, a new start offset
        with nothing in flight): a ShareUpdate, or a ShareSnapshot on initialization, on the
        first write and every share.coordinator.snapshot.update.records.per.snapshot updates."""
        if not self.leads(key):
            return errors.NOT_COORDINATOR
        p = self.persister
        last = p.written.get(key)
        if initialize and state[0] < 0 and last is not None:
            # Initialized already (by the partition's leader, or before the group coordinator's
            # restart): kept. Only a start offset (AlterShareGroupOffsets) replaces a state.
            return errors.NONE
        if initialize:
            state = (state[0], ())
        now = p.runtime.clock.now_ms()
        start, batches = state
        per_snapshot = p._config("share.coordinator.snapshot.update.records.per.snapshot", 500)
        complete = delivery_complete_count(state)
        if last is None or initialize or last.updates >= per_snapshot:
            epoch = 0 if last is None else last.snapshot_epoch + 1
            created = now if last is None else last.create_timestamp
            value = ShareStateValue(epoch, 0, start, list(batches), 0, created, now, complete)
            error, offset = p._append(key, [(share_key(SHARE_SNAPSHOT_TYPE, *key), snapshot_value(value))])
            if error:
                return error
            p.written[key] = _Written(state, epoch, 0, created, offset)
            p._prune(partition_for(*key, p.num_partitions))
            return errors.NONE
        value = ShareStateValue(last.snapshot_epoch, 0, start, list(batches), delivery_complete_count=complete)
        error, _ = p._append(key, [(share_key(SHARE_UPDATE_TYPE, *key), update_value(value))])
        if error:
            return error
        p.written[key] = _Written(state, last.snapshot_epoch, last.updates + 1, last.create_timestamp, last.snapshot_offset)
        return errors.NONE

    def delete(self, key: SharePartitionKey) -> int:
        if not self.leads(key):
            return errors.NOT_COORDINATOR
        return self.persister.delete(key)

