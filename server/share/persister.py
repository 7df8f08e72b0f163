"""ShareStatePersister: share-partition state kept in ``__share_group_state`` (Kafka's share
coordinator and its ShareCoordinatorShard, on the same broker).

Every change of a share-partition's durable state (start offset, acknowledged/archived records,
delivery counts of released records) is appended through the ReplicaManager's PartitionWriter
as a ShareUpdate record of the share-partition's key, and every
``share.coordinator.snapshot.update.records.per.snapshot`` updates (and on initialization or an
offset reset) as a ShareSnapshot. Acquired records are written as AVAILABLE with the delivery
count they had before the acquisition, as Kafka persists nothing at acquisition: after a
restart (or kill -9) the records that were not acknowledged are delivered again, the
acknowledged ones never. At start the topic is replayed (snapshot replaces, update overlays,
tombstone deletes) into SharePartitions.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_sidecar.protocol import errors
from kafka_sidecar.storage.log_config import validate_topic_configs

from ..coordinator.runtime import coordinator_runtime
from ..groups.store import append_error_to_response_error
from .partition import RecordState, SharePartition
from .records import (
    SHARE_GROUP_STATE_TOPIC,
    SHARE_SNAPSHOT_TYPE,
    SHARE_UPDATE_TYPE,
    ShareStateValue,
    StateBatch,
    decode_share_key,
    decode_value,
    partition_for,
    share_key,
    snapshot_value,
    update_value,
)

if TYPE_CHECKING:
    from ..broker import Broker
    from ..cluster.share_state import RemoteShareState

log = logging.getLogger(__name__)

SharePartitionKey = tuple[str, uuid.UUID, int]
# Persisted view of one share-partition: (start offset, state batches).
PersistedState = tuple[int, tuple[StateBatch, ...]]


@dataclass
class _Written:
    """What was last written for a share-partition, and how many updates since its snapshot."""

    state: PersistedState
    snapshot_epoch: int
    updates: int
    create_timestamp: int
    snapshot_offset: int = -1  # where its last ShareSnapshot is in the state topic
    # What the share coordinator's APIs keep and answer (server/share/state_shard.py): the state
    # epoch of the last ShareSnapshot, the leader epoch and delivery-complete count last written.
    state_epoch: int = 0
    leader_epoch: int = 0
    delivery_complete_count: int = -1


@dataclass
class ReplayedState:
    """One share-partition's state as the replay leaves it: runs of (first offset, last offset,
    state, delivery count), in offset order, not overlapping, none below the start offset."""

    start_offset: int
    snapshot_epoch: int
    create_timestamp: int
    runs: list[tuple[int, int, int, int]] = field(default_factory=list)
    snapshot_offset: int = -1
    state_epoch: int = 0
    leader_epoch: int = 0
    delivery_complete_count: int = -1

    def overlay(self, batches: list[StateBatch]) -> None:
        """A record's state batches over what earlier records said, combined as Kafka's share
        coordinator does (``combine_batches``), everything below the start offset dropped."""
        old = [StateBatch(*r) for r in self.runs]
        self.runs = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                     for b in combine_batches(old, batches, self.start_offset)]


def combine_batches(so_far: list[StateBatch] | tuple[StateBatch, ...], new: list[StateBatch] | tuple[StateBatch, ...],
                    start: int) -> list[StateBatch]:
    """Kafka's PersisterStateBatchCombiner: both lists as one, what lies below ``start`` (unless
    -1) dropped, and where batches overlap the one of the higher (delivery count, delivery state)
    wins each offset (a late write of an older view loses nothing); neighbours alike joined."""
    batches = [b for b in (*so_far, *new) if start < 0 or b.last_offset >= start]
    if start >= 0:
        batches = [b if b.first_offset >= start else StateBatch(start, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in batches]
    if len(batches) < 2:
        return list(batches)
    # A sweep over the batches' edges: in each stretch the highest-priority batch covering it.
    edges = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    by_first = sorted(batches, key=lambda b: b.first_offset)
    active: list[tuple[int, int, int, int]] = []  # (-count, -state, last offset, index): a max-heap
    out: list[StateBatch] = []
    i = 0
    for lo, hi in itertools.pairwise(edges):
        while i < len(by_first) and by_first[i].first_offset <= lo:
            b = by_first[i]
            heapq.heappush(active, (-b.delivery_count, -b.delivery_state, b.last_offset, i))
            i += 1
        while active and active[0][2] < lo:
            heapq.heappop(active)
        if not active:
            continue
        count, state = -active[0][0], -active[0][1]
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == lo and (last.delivery_state, last.delivery_count) == (state, count):
            out[-1] = StateBatch(last.first_offset, hi - 1, state, count)
        else:
            out.append(StateBatch(lo, hi - 1, state, count))
    return out


def persisted_state(sp: SharePartition, *, as_written: bool = False) -> PersistedState:
    """The durable view of ``sp``: ACQUIRED written as AVAILABLE at the count before acquisition;
    runs of never-delivered AVAILABLE records left out (they read as new after a restart).
    ``as_written``: as Kafka writes it, from the start offset before the change being written
    (with the finished records the in-memory start offset has moved over since)."""
    start, runs = sp.start_offset, sp.batches
    if as_written:
        start, runs = sp.write_start_offset, sp.done_since_write + sp.batches
    batches: list[StateBatch] = []
    for run in runs:
        if run.last_offset < start:
            continue
        first = max(run.first_offset, start)
        if run.state == RecordState.ACQUIRED:
            state, count = int(RecordState.AVAILABLE), run.delivery_count - 1
        else:
            state, count = int(run.state), run.delivery_count
        if state == RecordState.AVAILABLE and count == 0:
            continue
        last = batches[-1] if batches else None
        if last is not None and last.last_offset + 1 == first and (last.delivery_state, last.delivery_count) == (state, count):
            batches[-1] = StateBatch(last.first_offset, run.last_offset, state, count)
        else:
            batches.append(StateBatch(first, run.last_offset, state, count))
    return start, tuple(batches)


def _clip(batches: tuple[StateBatch, ...], start: int) -> tuple[StateBatch, ...]:
    """``batches`` from ``start`` on."""
    return tuple(b if b.first_offset >= start else StateBatch(start, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in batches if b.last_offset >= start)


def share_config(broker: Broker, name: str, default: int) -> int:
    """A share setting: typed in server/config.py (group.share.*), else as given (originals:
    share.coordinator.* are not typed yet), else Kafka's default."""
    value = broker.config.get(name)
    if value is None:
        value = broker.config.originals.get(name)
    return default if value is None else int(value)


class ShareStatePersister:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtime = coordinator_runtime(broker)
        self.written: dict[SharePartitionKey, _Written] = {}
        # The highest leader epoch a share-state API saw per share-partition (Kafka's
        # ShareCoordinatorShard.leaderEpochMap): older writes and reads are fenced.
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        # In a --processes cluster: the share-partitions whose state another node keeps
        # (server/cluster/share_state.py, set by the Broker); None in one process.
        self.remote: RemoteShareState | None = None

    def _config(self, name: str, default: int) -> int:
        return share_config(self.broker, name, default)

    @property
    def num_partitions(self) -> int:
        info = self.broker.metadata.topics.get(SHARE_GROUP_STATE_TOPIC)
        if info is not None:
            return info.partitions
        return self._config("share.coordinator.state.topic.num.partitions", 50)

    async def ensure_topic(self) -> None:
        """Create ``__share_group_state`` the first time a share group needs it (as Kafka's share
        coordinator does): cleanup.policy=delete, retention.ms=-1 (Kafka prunes it by offsets)."""
        lm = self.broker.log_manager
        if SHARE_GROUP_STATE_TOPIC in self.broker.metadata.topics:
            return
        configs = validate_topic_configs({
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "compression.type": "producer",
            "segment.bytes": str(self._config("share.coordinator.state.topic.segment.bytes", 104857600)),
        })
        if SHARE_GROUP_STATE_TOPIC not in self.broker.metadata.topics:
            try:
                await self.broker.run_blocking(lm.create_topic, SHARE_GROUP_STATE_TOPIC, self.num_partitions, configs)
            except FileExistsError:
                pass

    # ---- writing ---------------------------------------------------------------------------

    def persisted(self, key: SharePartitionKey) -> PersistedState | None:
        """What the state topic holds for the share-partition (DescribeShareGroupOffsets reads it)."""
        last = self.written.get(key)
        return None if last is None else last.state

    def write(self, key: SharePartitionKey, sp: SharePartition, *, snapshot: bool = False,
              states_only: bool = False) -> int:
        """Append the share-partition's state if it changed since the last write: a ShareUpdate,
        or a ShareSnapshot when asked, on the first write or after enough updates. With
        ``states_only`` a change of the start offset alone is not written (an acquisition, or the
        start offset resolved at the first ShareFetch: Kafka writes neither). Returns the API's
        error for a failed append (what was written, and ``sp``'s write marks, unchanged), else NONE."""
        last = self.written.get(key)
        if states_only and last is not None and not snapshot and not sp.archived_since_write:
            # Only acquisitions (never written) and start offset moves since the last write:
            # what a states-only write would find unchanged, without building the state.
            return errors.NONE
        state = persisted_state(sp, as_written=True)
        if last is not None and not snapshot and (last.state == state or (states_only and _clip(last.state[1], state[0]) == state[1])):
            return errors.NONE
        now = self.runtime.clock.now_ms()
        per_snapshot = self._config("share.coordinator.snapshot.update.records.per.snapshot", 500)
        start, batches = state
        if self.remote is not None and self.remote.elsewhere(key):
            # Kept by another node's share coordinator (server/cluster/share_state.py): the
            # request's answer waits for it there.
            self.remote.write(key, state, initialize=snapshot)
            self.written[key] = _Written(state, 0, 0, now)
        elif last is None or snapshot or last.updates >= per_snapshot:
            epoch = 0 if last is None else last.snapshot_epoch + 1
            created = now if last is None else last.create_timestamp
            value = ShareStateValue(epoch, 0, start, list(batches), 0, created, now)
            error, offset = self._append(key, [(share_key(SHARE_SNAPSHOT_TYPE, *key), snapshot_value(value))])
            if error:
                return error
            self.written[key] = _Written(state, epoch, 0, created, offset)
            self._prune(partition_for(*key, self.num_partitions))
        else:
            value = ShareStateValue(last.snapshot_epoch, 0, start, list(batches))
            error, _ = self._append(key, [(share_key(SHARE_UPDATE_TYPE, *key), update_value(value))])
            if error:
                return error
            self.written[key] = _Written(state, last.snapshot_epoch, last.updates + 1, last.create_timestamp,
                                         last.snapshot_offset)
        # Kafka's cache moves after the write: the next write starts from here.
        sp.write_start_offset = sp.start_offset
        sp.done_since_write = []
        sp.archived_since_write = False
        return errors.NONE

    def _prune(self, partition: int) -> None:
        """Kafka's share coordinator prunes its state topic by offsets (cleanup.policy=delete,
        no retention): records before the oldest last snapshot of the share-partitions kept in
        this partition are not needed by a replay, so the log start moves there."""
        n = self.num_partitions
        offsets = [w.snapshot_offset for k, w in self.written.items() if partition_for(*k, n) == partition]
        if not offsets or min(offsets) < 0:
            return
        lg = self.broker.replica_manager.get_log(SHARE_GROUP_STATE_TOPIC, partition)
        if lg is not None and min(offsets) > lg.log_start_offset:
            self.broker.replica_manager.delete_records(SHARE_GROUP_STATE_TOPIC, partition, min(offsets))

    def delete(self, key: SharePartitionKey) -> int:
        """Tombstones for both record keys of the share-partition (group or offsets deleted), the
        share-partition forgotten once they are written: the API's error, or NONE."""
        if self.remote is not None and self.remote.elsewhere(key):
            self.remote.delete(key)
            self.written.pop(key, None)
            return errors.NONE
        if key not in self.written:
            return errors.NONE
        error, _ = self._append(key, [(share_key(SHARE_SNAPSHOT_TYPE, *key), None), (share_key(SHARE_UPDATE_TYPE, *key), None)])
        if error == errors.NONE:
            del self.written[key]
            self.leader_epochs.pop(key, None)
        return error

    def _append(self, key: SharePartitionKey, records: list[tuple[bytes, bytes | None]]) -> tuple[int, int]:
        """Append ``records`` as one batch to the key's partition through the coordinator runtime:
        (the API's error, or NONE; the first offset)."""
        partition = partition_for(*key, self.num_partitions)
        error, offset = self.runtime.append(SHARE_GROUP_STATE_TOPIC, partition, records)
        if error:
            log.warning("share-partition state of %s not written to %s-%d: error %d", key, SHARE_GROUP_STATE_TOPIC, partition, error)
            return append_error_to_response_error(error), -1
        return errors.NONE, offset

    # ---- replay ----------------------------------------------------------------------------

    def load(self) -> dict[SharePartitionKey, ReplayedState]:
        """Replay every partition of the state topic (storage thread, before serving)."""
        states: dict[SharePartitionKey, ReplayedState] = {}
        info = self.broker.metadata.topics.get(SHARE_GROUP_STATE_TOPIC)
        if info is None:
            return states

        def apply(offset: int, _pid: int, _epoch: int, key: bytes | None, value: bytes | None, marker: int | None) -> bool:
            if marker is not None or key is None:
                return False
            decoded = decode_share_key(key)
            if decoded is None:
                return False
            record_type, group_id, topic_id, partition = decoded
            k = (group_id, topic_id, partition)
            if value is None:
                states.pop(k, None)
                return True
            v = decode_value(record_type, value)
            st = states.get(k)
            if record_type == SHARE_SNAPSHOT_TYPE or st is None:
                st = states[k] = ReplayedState(v.start_offset, v.snapshot_epoch, v.create_timestamp,
                                               state_epoch=v.state_epoch, leader_epoch=v.leader_epoch)
                if record_type == SHARE_SNAPSHOT_TYPE:
                    st.snapshot_offset = offset
            else:
                if v.start_offset >= 0:
                    st.start_offset = v.start_offset
                if v.leader_epoch >= 0:
                    st.leader_epoch = v.leader_epoch
            st.delivery_complete_count = v.delivery_complete_count
            st.overlay(v.state_batches)
            return True

        lm = self.broker.log_manager
        self.runtime.load([lg for p in range(info.partitions) if (lg := lm.get_log(SHARE_GROUP_STATE_TOPIC, p)) is not None], apply)
        return states

    def restore(self, key: SharePartitionKey, st: ReplayedState, sp: SharePartition) -> None:
        """Fill ``sp`` (created at ``st.start_offset``) with the replayed records."""
        if st.runs:
            sp.restore(st.start_offset, st.runs[-1][1] + 1, st.runs)
        self.written[key] = _Written(persisted_state(sp, as_written=True), st.snapshot_epoch, 0, st.create_timestamp,
                                     st.snapshot_offset, st.state_epoch, st.leader_epoch, st.delivery_complete_count)
        self.leader_epochs[key] = st.leader_epoch
        # Kafka's SharePartition.maybeInitialize moves its cached start offset over the leading
        # finished records it read: its next write starts from there.
        sp.write_start_offset = sp.start_offset
        sp.done_since_write = []
        sp.archived_since_write = False
