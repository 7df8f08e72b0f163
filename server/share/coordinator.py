"""ShareCoordinator: share groups (KIP-932) on this broker.

It plays the parts Kafka splits over the group coordinator (GroupMetadataManager's
shareGroupHeartbeat: members, epochs, the simple assignor, share-partition initialization), the
SharePartitionManager (share sessions, share-partitions per group and topic-partition) and the
share coordinator (share-partition state in ``__share_group_state``, server/share/persister.py).
Handlers are in server/apis/share.py.

As Kafka 4.3: a group created by a heartbeat starts at epoch 1 and the joining member bumps it;
only initialized share-partitions are assigned, and a heartbeat initializes the subscribed ones
that are not (InitializeShareGroupState, start offset -1), so the first member's first assignment
is empty and the next heartbeat bumps the epoch for the initialized partitions; target
assignments are batched by ``share.assignment.interval.ms``. The start offset is resolved by
``share.auto.offset.reset`` (latest, earliest, by_duration:<ISO-8601>) at the first ShareFetch
(SharePartition.maybeInitialize). Group configs (server/group_configs.py) override the broker's
``group.share.*`` per group.
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_sidecar.protocol.topic import OFFSETS_TOPIC

from ..coordinator.runtime import coordinator_runtime
from ..group_configs import group_config_manager
from .group import SIMPLE_ASSIGNOR, ShareGroup, ShareGroupMember
from .group_persistence import ShareGroupPersistence
from .metrics import ShareGroupStats
from .partition import AcquiredRecords, SharePartition
from .persister import ReplayedState, ShareStatePersister, share_config
from .session import ShareSessionCache

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

T = TypeVar("T")

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
UNKNOWN_MEMBER_ID = 25
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
FENCED_MEMBER_EPOCH = 110
JOIN_EPOCH, LEAVE_EPOCH = 0, -1
# ShareGroupDescribe's authorized_operations when they were not asked for (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET: a share-partition initialized by the group
# coordinator whose start offset the first ShareFetch resolves.
UNINITIALIZED_START_OFFSET = -1


class ShareCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtime = coordinator_runtime(broker)  # appends, durability, clock (server/coordinator/runtime.py)
        self.groups: dict[str, ShareGroup] = {}
        self.share_partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self.sessions = ShareSessionCache()
        # The share-partitions loaded into the broker's cache (Kafka's SharePartitionManager
        # partitionCache): loaded by a member's ShareFetch, dropped when the group's last share
        # session's connection closes. A ShareFetch that loads partitions answers as soon as the
        # first of them has records (server/apis/share.py), and acknowledgements to a partition
        # not loaded are UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
        self.loaded: set[tuple[str, uuid.UUID, int]] = set()
        # In a cluster: share-partitions known initialized (from __consumer_offsets) whose state
        # another node keeps and this one has not read yet (server/cluster/share_state.py).
        self.state_unread: set[tuple[str, uuid.UUID, int]] = set()
        self.stats = ShareGroupStats()  # counters for /metrics (server/share/metrics.py)
        # Durable share-partition state in __share_group_state (server/share/persister.py).
        self.persister = ShareStatePersister(broker)
        # The groups' metadata in __consumer_offsets (server/share/group_persistence.py).
        self.group_records = ShareGroupPersistence(self)

    async def start(self) -> None:
        """Replay ``__share_group_state``: every share-partition comes back with its start offset,
        acknowledged/archived records and delivery counts; its group comes back empty (members
        rejoin: their heartbeats answer UNKNOWN_MEMBER_ID)."""
        states = await self.broker.run_blocking(self.persister.load)
        for key, st in states.items():
            self.restore_partition(key, st)
            if self.coordinates_group(key[0]):
                self.groups.setdefault(key[0], ShareGroup(key[0]))
        if states:
            log.info("replayed the state of %d share-partitions from __share_group_state", len(states))
        # Share-partitions __consumer_offsets says are initialized but with no state written yet.
        remote = self.persister.remote
        for group_id, parts in self.group_records.replayed_partitions().items():
            for topic_id, p in parts:
                if (group_id, topic_id, p) not in self.share_partitions:
                    self.share_partitions[(group_id, topic_id, p)] = self._new_partition(group_id, UNINITIALIZED_START_OFFSET)
                    if remote is not None and remote.elsewhere((group_id, topic_id, p)):
                        self.state_unread.add((group_id, topic_id, p))
        for group in self.groups.values():
            group.subscription_metadata = self._subscription_metadata(group)
        self.group_records.on_loaded()

    def replay_group_record(self, key_bytes: bytes, value: bytes | None) -> None:
        """A share group record of __consumer_offsets (the loader's, at start-up)."""
        self.group_records.replay(key_bytes, value)

    def restore_partition(self, key: tuple[str, uuid.UUID, int], st: ReplayedState) -> None:
        """A share-partition's state read back: replayed at start, or (a cluster node leading the
        topic-partition) read from the share coordinator keeping it (server/cluster/share_state.py)."""
        sp = self.share_partitions[key] = self._new_partition(key[0], st.start_offset)
        self.persister.restore(key, st, sp)
        self.state_unread.discard(key)

    def coordinates_group(self, group_id: str) -> bool:
        """Whether this node is the group's coordinator (always, in one process; in a cluster the
        node leading the group's __consumer_offsets partition)."""
        cluster = self.broker.cluster
        if cluster is None:
            return True
        return cluster.placement.leader(OFFSETS_TOPIC, self.broker.group_coordinator.partition_for(group_id)) == cluster.node_id

    def _new_partition(self, group_id: str, start_offset: int) -> SharePartition:
        sp = SharePartition(start_offset)
        self._apply_group_configs(group_id, sp)
        return sp

    def _apply_group_configs(self, group_id: str, sp: SharePartition) -> None:
        """The group's settings in effect (Kafka's SharePartition reads them from the
        GroupConfigManager at each use, falling back to the broker's group.share.*)."""
        sp.lock_duration_ms = self.lock_duration_ms(group_id)
        sp.delivery_count_limit = self.group_config(group_id, "share.delivery.count.limit")
        sp.max_in_flight_records = self.group_config(group_id, "share.partition.max.record.locks")

    def persist(self, key: tuple[str, uuid.UUID, int]) -> None:
        """Write the share-partition's state if it changed (Kafka's WriteShareGroupState)."""
        sp = self.share_partitions.get(key)
        if sp is not None:
            self.persister.write(key, sp)

    # ---- configs ---------------------------------------------------------------------------

    def _config(self, name: str, default: int) -> int:
        return share_config(self.broker, name, default)

    def group_config(self, group_id: str, name: str) -> Any:
        """A group config's effective value for ``group_id`` (server/group_configs.py)."""
        return group_config_manager(self.broker).group_config(group_id, name)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.record.lock.duration.ms"))

    def max_share_sessions(self) -> int:
        return self._config("group.share.max.share.sessions", 2000)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.heartbeat.interval.ms"))

    def read_committed(self, group_id: str) -> bool:
        return self.group_config(group_id, "share.isolation.level") == "read_committed"

    # ---- ShareGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str, client_host: str) -> dict[str, Any]:
        """A heartbeat (``_heartbeat``) on a working copy of the group; what it changed is written
        to __consumer_offsets before the copy becomes the group (a failed append: the group as
        it was, and the heartbeat answers the append's error)."""
        error, response = self._change(group_id, lambda: self._heartbeat(
            group_id, member_id, member_epoch, rack_id, subscribed_topic_names, client_id, client_host))
        if error:
            return {"throttle_time": 0, "error_code": error, "error_message": None, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
        return response

    def _change(self, group_id: str, op: Callable[[], T]) -> tuple[int, T | None]:
        """Run ``op`` on a working copy of the group (a new group if there is none) and write the
        records of what it changed; only once they are appended does the copy become the group
        (as the records would replay it). A failed append leaves the group as it was: (the API's
        error for the append, None); else (NONE, what ``op`` returned)."""
        before = self.groups.get(group_id)
        if before is not None:
            self.groups[group_id] = copy.deepcopy(before)
        try:
            result = op()
            after = self.groups.get(group_id)
            error = self.group_records.sync(after) if after is not None else NONE
        except BaseException:
            self._restore(group_id, before)
            raise
        if error:
            self._restore(group_id, before)
            return error, None
        return NONE, result

    def _restore(self, group_id: str, before: ShareGroup | None) -> None:
        if before is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = before

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                   subscribed_topic_names: list[str] | None, client_id: str, client_host: str) -> dict[str, Any]:
        """Kafka's GroupMetadataManager.shareGroupHeartbeat: join (epoch 0), leave (-1) or
        heartbeat at the member's epoch; the answer carries the assignment when it changed."""
        def error(code: int, message: str | None = None) -> dict[str, Any]:
            return {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}

        if not group_id:
            return error(INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return error(INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < LEAVE_EPOCH:
            return error(INVALID_REQUEST, f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.")
        if member_epoch == JOIN_EPOCH and not subscribed_topic_names:
            return error(INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        now = self.runtime.clock.now_ms()
        group = self.groups.get(group_id)
        if group is not None:
            self._expire_members_of(group, now)
        if member_epoch == LEAVE_EPOCH:
            if group is None or member_id not in group.members:
                return error(UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            self._remove_member(group, member_id)
            return {"throttle_time": 0, "error_code": NONE, "member_id": member_id, "member_epoch": LEAVE_EPOCH,
                    "heartbeat_interval": 0, "assignment": None}
        if group is None:
            if member_epoch != JOIN_EPOCH:
                return error(UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            group = self.groups[group_id] = ShareGroup(group_id)
            group.group_epoch = 1  # a group created by a heartbeat starts at epoch 1, as in Kafka 4.3
        member = group.members.get(member_id)
        changed = False
        if member is None:
            if member_epoch != JOIN_EPOCH:
                return error(UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            member = group.members[member_id] = ShareGroupMember(
                member_id, 0, client_id, client_host, rack_id, list(subscribed_topic_names or []), now)
            changed = True
        elif member_epoch != JOIN_EPOCH and member_epoch != member.member_epoch:
            return error(FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch ({member_epoch}) "
                         f"than the one known by the group coordinator ({member.member_epoch}). The member must abandon "
                         "all its partitions and rejoin.")
        member.last_heartbeat_ms = now
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(subscribed_topic_names)
            changed = True
        if rack_id is not None:
            member.rack_id = rack_id
        metadata = self._subscription_metadata(group)
        if changed or metadata != group.subscription_metadata:
            group.group_epoch += 1
            group.subscription_metadata = metadata
        interval = int(self.group_config(group_id, "share.assignment.interval.ms"))
        if group.group_epoch > group.assignment_epoch and now - group.last_assignment_ms >= interval:
            group.assign(metadata, now)
        moved = group.reconcile(member) or member_epoch == JOIN_EPOCH
        assignment = None
        if moved:
            assignment = {"topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in member.assignment.items()]}
        self._initialize_partitions(group)
        return {"throttle_time": 0, "error_code": NONE, "member_id": member_id, "member_epoch": member.member_epoch,
                "heartbeat_interval": self.heartbeat_interval_ms(group_id), "assignment": assignment}

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, list[int]]]:
        """The subscribed topics that exist, with their initialized share-partitions (the only
        ones Kafka's share group assignor is given)."""
        topics = self.broker.metadata.topics
        out = {}
        for t in sorted(group.subscribed_topics()):
            if t in topics:
                tid = topics[t].topic_id
                out[t] = (tid, [p for p in range(topics[t].partitions) if (group.group_id, tid, p) in self.share_partitions])
        return out

    def _initialize_partitions(self, group: ShareGroup) -> None:
        """Kafka's InitializeShareGroupState for the subscribed partitions not initialized yet:
        their state is written with start offset -1, resolved at their first ShareFetch."""
        topics = self.broker.metadata.topics
        for t in sorted(group.subscribed_topics()):
            info = topics.get(t)
            for p in range(info.partitions if info is not None else 0):
                key = (group.group_id, info.topic_id, p)
                if key not in self.share_partitions:
                    sp = self._new_partition(group.group_id, UNINITIALIZED_START_OFFSET)
                    if not self.persister.write(key, sp, snapshot=True):  # initialized once written
                        self.share_partitions[key] = sp

    def _expire_members(self, group_id: str, now: int) -> None:
        """Members whose session timed out leave the group, written as one change (a failed
        append: they stay until the next try)."""
        group = self.groups.get(group_id)
        if group is not None and self._expired(group, now):
            self._change(group_id, lambda: self._expire_members_of(self.groups[group_id], now))

    def _expired(self, group: ShareGroup, now: int) -> list[str]:
        timeout = int(self.group_config(group.group_id, "share.session.timeout.ms"))
        return [m.member_id for m in group.members.values() if now - m.last_heartbeat_ms > timeout]

    def _expire_members_of(self, group: ShareGroup, now: int) -> None:
        for mid in self._expired(group, now):
            self._remove_member(group, mid)

    def _remove_member(self, group: ShareGroup, member_id: str) -> None:
        """A member leaves (or its session timed out): the rest of the group gets a new
        assignment. Its share session and acquired records stay: as in Kafka the group
        coordinator does not touch them; the session's final epoch (acknowledgements applied
        first) or its connection closing releases them, else their acquisition locks expire."""
        del group.members[member_id]
        # The group epoch moves; the remaining members get the new target assignment at their
        # next heartbeat (Kafka computes it there). The caller's change writes it.
        group.group_epoch += 1

    # ---- share-partitions ------------------------------------------------------------------

    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition of ``group_id`` for a topic-partition (initialized on first use),
        its start offset resolved by share.auto.offset.reset if it has none yet (Kafka's
        SharePartition.maybeInitialize at the first ShareFetch)."""
        key = (group_id, topic_id, partition)
        info = self.broker.metadata.topics_by_id.get(topic_id)
        lg = self.broker.replica_manager.get_log(info.name, partition) if info is not None else None
        sp = self.share_partitions.get(key)
        if sp is None:
            if lg is None:
                return None
            sp = self._new_partition(group_id, UNINITIALIZED_START_OFFSET)
            if self.persister.write(key, sp, snapshot=True):  # Kafka's InitializeShareGroupState
                return None  # not written: not initialized, the next ShareFetch tries again
            self.share_partitions[key] = sp
            if group_id in self.groups:
                self._change(group_id, lambda: None)
        self._apply_group_configs(group_id, sp)
        if not sp.initialized and lg is not None:
            sp.initialize(self._reset_offset(group_id, lg))
        return sp

    def _reset_offset(self, group_id: str, lg: Any) -> int:
        """share.auto.offset.reset: the log start (earliest), the high watermark (latest), or the
        first offset with a timestamp at or after now - duration (by_duration, else latest)."""
        strategy, duration_ms = group_config_manager(self.broker).share_auto_offset_reset(group_id)
        if strategy == "earliest":
            return lg.log_start_offset
        if strategy == "by_duration":
            found = lg.fetch_offset_by_timestamp(self.runtime.clock.now_ms() - duration_ms)
            if found is not None:
                return found[1]
        return lg.high_watermark

    def reset_share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> int:
        """AlterShareGroupOffsets: the share-partition starts at ``start_offset`` with nothing in
        flight. Its snapshot is written first: a failed append changes nothing (the error code)."""
        key = (group_id, topic_id, partition)
        sp = self._new_partition(group_id, start_offset)
        error = self.persister.write(key, sp, snapshot=True)
        if error:
            return error

        def install() -> None:
            self.groups.setdefault(group_id, ShareGroup(group_id))
            self.share_partitions[key] = sp
            self.loaded.discard(key)

        error, _ = self._change(group_id, install)
        return error

    def delete_share_partitions(self, group_id: str, topic_id: uuid.UUID | None = None) -> int:
        """DeleteShareGroupOffsets (one topic) or DeleteGroups (every topic): the state goes, each
        share-partition once its tombstones are written (a failed append: it stays, the error)."""
        for key in [k for k in self.share_partitions if k[0] == group_id and (topic_id is None or k[1] == topic_id)]:
            error = self.persister.delete(key)
            if error:
                return error
            del self.share_partitions[key]
            self.loaded.discard(key)
        if topic_id is not None and group_id in self.groups:
            return self._change(group_id, lambda: None)[0]
        return NONE

    # ---- ListGroups, DeleteGroups (through the group coordinator's facade) --------------------

    def is_share_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def list_rows(self, states_filter: set[str], types_filter: set[str]) -> list[dict[str, Any]]:
        """ListGroups rows of the share groups (group type and protocol type "share")."""
        if types_filter and "share" not in types_filter:
            return []
        now = self.runtime.clock.now_ms()
        rows = []
        for group_id in list(self.groups):
            self._expire_members(group_id, now)
            group = self.groups[group_id]
            if states_filter and group.state.lower() not in states_filter:
                continue
            rows.append({"group_id": group.group_id, "protocol_type": "share", "group_state": group.state, "group_type": "share"})
        return rows

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: refused while it has members, else the group and its
        share-partition state go."""
        group = self.groups.get(group_id)
        if group is None:
            return GROUP_ID_NOT_FOUND
        self._expire_members(group_id, self.runtime.clock.now_ms())
        group = self.groups[group_id]
        if group.members:
            return NON_EMPTY_GROUP
        error = self.delete_share_partitions(group_id) or self.group_records.deleted(group_id)
        if error:
            return error
        del self.groups[group_id]
        return NONE

    def expire_locks(self, now_ms: int | None = None) -> None:
        now = self.runtime.clock.now_ms() if now_ms is None else now_ms
        for key, sp in self.share_partitions.items():
            expired = sp.expire_locks(now)
            if expired:
                self.stats.lock_timeouts += expired
                self.persister.write(key, sp)

    def next_lock_deadline(self, group_id: str) -> int | None:
        deadlines = [d for (g, _, _), sp in self.share_partitions.items() if g == group_id
                     for d in [sp.next_lock_deadline()] if d is not None]
        return min(deadlines) if deadlines else None

    def acquire(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                batches: list[tuple[int, int]], max_records: int, *, record_limit: bool = False) -> list[AcquiredRecords]:
        sp = self.share_partition(group_id, topic_id, partition)
        if sp is None:
            return []
        acquired = sp.acquire(member_id, batches, max_records, self.runtime.clock.now_ms(), record_limit=record_limit)
        self.persister.write((group_id, topic_id, partition), sp, states_only=True)
        return acquired

    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                    batches: list[tuple[int, int, list[int]]]) -> int:
        """Kafka's SharePartitionManager.acknowledge: a share-partition not loaded by a ShareFetch
        is UNKNOWN_TOPIC_OR_PARTITION; else the first batch's error, or NONE."""
        key = (group_id, topic_id, partition)
        sp = self.share_partitions.get(key)
        if sp is None or key not in self.loaded:
            return UNKNOWN_TOPIC_OR_PARTITION
        self._apply_group_configs(group_id, sp)
        now = self.runtime.clock.now_ms()
        # A record whose lock ran out is no longer the member's to acknowledge.
        self.stats.lock_timeouts += sp.expire_locks(now)
        try:
            for first, last, types in batches:
                code = sp.acknowledge(member_id, first, last, types, now)
                if code:
                    return code
                self.stats.acknowledged(types, first, last)
            return NONE
        finally:
            self.persist(key)

    def release_session(self, group_id: str, member_id: str) -> bool:
        """The member's share session closes (epoch -1, or its connection closed): its acquired
        records on the session's partitions go back (Kafka's releaseSession). False when there
        was no session."""
        session = self.sessions.remove(group_id, member_id)
        if session is None:
            return False
        for topic_id, partition in session.partitions:
            key = (group_id, topic_id, partition)
            sp = self.share_partitions.get(key)
            if sp is not None and key in self.loaded and sp.release_member(member_id):
                self.persist(key)
        return True

    def connection_closed(self, connection: object) -> None:
        """A client connection closed (Kafka's ClientConnectionDisconnectListener): the share
        session it owned is released as a member leaving; when its group has no share session
        left, the group's share-partitions leave the broker's cache."""
        key, group_id = self.sessions.disconnected(connection)
        if key is not None:
            self.release_session(*key)
        if group_id is not None and not self.sessions.group_has_sessions(group_id):
            self.loaded = {k for k in self.loaded if k[0] != group_id}
            remote = self.persister.remote
            if remote is not None and not self.coordinates_group(group_id):
                # Kept by another node's share coordinator: read again at the next ShareFetch
                # (AlterShareGroupOffsets may reset it there meanwhile).
                for k in [k for k in self.share_partitions if k[0] == group_id and remote.elsewhere(k)]:
                    del self.share_partitions[k]

    # ---- ShareGroupDescribe ----------------------------------------------------------------

    def describe(self, group_id: str, include_authorized_operations: bool, authorized_operations: int) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": GROUP_ID_NOT_FOUND, "error_message": f"Group {group_id} not found.", "group_id": group_id,
                    "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
                    "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        self._expire_members(group_id, self.runtime.clock.now_ms())
        group = self.groups[group_id]
        by_id = self.broker.metadata.topics_by_id
        members = []
        for m in group.members.values():
            tps = [{"topic_id": t, "topic_name": by_id[t].name, "partitions": ps} for t, ps in m.assignment.items() if t in by_id]
            members.append({"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                            "client_id": m.client_id, "client_host": m.client_host,
                            "subscribed_topic_names": sorted(m.subscribed_topic_names), "assignment": {"topic_partitions": tps}})
        return {"error_code": NONE, "error_message": None, "group_id": group_id, "group_state": group.state,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "assignor_name": SIMPLE_ASSIGNOR, "members": members,
                "authorized_operations": authorized_operations if include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED}
