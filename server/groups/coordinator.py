"""GroupCoordinator: classic consumer groups and committed offsets (Kafka's group coordinator).

A port of the classic-group half of Kafka 4's ``GroupMetadataManager`` and
``OffsetMetadataManager``: the same state machine (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead), the same timers (member heartbeats, the
delayed join with ``group.initial.rebalance.delay.ms``, pending syncs, new
member join timeout), the same error codes in the same order of checks.

This broker is the coordinator of every group. Group metadata and offsets are
written as records to the compacted internal topic ``__consumer_offsets``
(partition ``abs(groupId.hashCode()) % offsets.topic.num.partitions``) before
a request is answered, and replayed from it at start-up, so a restart keeps
every group and committed offset. Everything runs on the event loop; writes go through the
coordinator runtime (server/coordinator/runtime.py) and timers run on its clock, keyed like
Kafka's timer keys.

Transactional offsets (TxnOffsetCommit) are written as transactional records of the
producer and kept pending per producer id until the transaction coordinator writes the
transaction's marker to the group's partition (``complete_transaction``): COMMIT publishes
them, ABORT drops them; OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
partition with pending offsets. Replay follows the records and markers in log order.

The work is split along Kafka's lines: ``membership.py`` (GroupMetadataManager: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, listing, describing and deleting groups) with ``rebalance.py``
(the rebalance state machine and its timers), ``offsets.py`` (OffsetMetadataManager: commits,
fetches, deletes, transactional offsets, expiration), ``loader.py`` (the start-up replay),
``timer.py`` (the keyed timers), ``writer.py`` (appends through the ReplicaManager) and
``store.py`` (the state they share). GroupCoordinator is the facade the API handlers call: it
routes each request to its manager and each replayed record to the manager of its key (Kafka's
GroupCoordinatorShard).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kafka_sidecar.protocol import errors
from kafka_sidecar.storage.log_config import validate_topic_configs

from ..apis.re2j import compile_re2j
from ..coordinator.runtime import coordinator_runtime
from ..group_configs import group_config
from .assignors import ASSIGNORS
from .classic_members import ClassicMembers
from .consumer_manager import (
    STALE_MEMBER_EPOCH,
    ConsumerGroupConfig,
    ConsumerGroupManager,
    HeartbeatRequest,
)
from .consumer_records import decode_consumer_key
from .consumer_regex import REGEX_REFRESH_INTERVAL_MS_DEFAULT
from .group import ClassicGroup, now_ms
from .loader import load_offsets_topic
from .membership import (
    GROUP_AUTHORIZED_OPERATIONS,
    GROUP_TYPES,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    NO_AUTHORIZED_OPERATIONS,
    GroupMetadataManager,
)
from .messages import JoinRequest, RequestContext, Response, join_response, sync_response
from .migration import GroupMigration
from .offsets import CommitResults, CommitTopics, OffsetMetadataManager
from .rebalance import Rebalancer
from .records import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_key,
    group_metadata_key,
)
from .store import GroupStore, Record, append_error_to_response_error, topic_partition_hash
from .streams_admin import (
    streams_describe,
    streams_facade_delete,
    streams_facade_list,
    streams_validate_commit,
    streams_validate_fetch,
)
from .streams_manager import StreamsGroupManager, StreamsHeartbeat
from .streams_manager import _error as streams_error
from .streams_records import decode_streams_key
from .timer import Timer
from .writer import GroupRecordWriter

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = [
    "GROUP_AUTHORIZED_OPERATIONS", "GROUP_TYPES", "NEW_MEMBER_JOIN_TIMEOUT_MS", "NO_AUTHORIZED_OPERATIONS",
    "GroupCoordinator", "JoinRequest", "Record", "RequestContext", "Response", "Timer", "join_response", "sync_response",
]

log = logging.getLogger(__name__)

# The names these helpers had here before the split (tests import them from this module).
_topic_partition_hash = topic_partition_hash
_append_error_to_response_error = append_error_to_response_error


def _assignor_names(configured: str) -> tuple[str, ...]:
    """The built-in assignors of ``group.consumer.assignors`` in order (the first is the default)."""
    names = [a.strip() for a in configured.split(",") if a.strip()]
    known = tuple(a for a in names if a in ASSIGNORS)
    if len(known) < len(names):
        log.warning("group.consumer.assignors: only the built-in assignors %s are available, ignoring %s",
                    sorted(ASSIGNORS), [a for a in names if a not in ASSIGNORS])
    return known or ("uniform", "range")


class GroupCoordinator:
    """The group coordinator the API handlers call: lifecycle, and routing to the managers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.configured_partitions: int = cfg.get("offsets.topic.num.partitions")
        self.segment_bytes: int = cfg.get("offsets.topic.segment.bytes")
        self.retention_check_interval_ms: int = cfg.get("offsets.retention.check.interval.ms")
        self.store = GroupStore(self.configured_partitions)
        self.runtime = coordinator_runtime(broker)
        self.timer = Timer(self.runtime.clock, self.runtime)
        self.writer = GroupRecordWriter(self.runtime, self.store, cfg.get("offsets.topic.compression.codec"), self.replay)
        self.rebalance = Rebalancer(self.store, self.writer, self.timer, cfg.get("group.initial.rebalance.delay.ms"))
        self.group_manager = GroupMetadataManager(
            self.store, self.writer, self.timer, self.rebalance, cfg.get("group.min.session.timeout.ms"),
            cfg.get("group.max.session.timeout.ms"), cfg.get("group.max.size"),
        )
        self.offset_manager = OffsetMetadataManager(
            self.store, self.writer, cfg.get("offset.metadata.max.bytes"), cfg.get("offsets.retention.minutes") * 60_000,
            self.rebalance.reschedule_heartbeat,
        )
        self.consumer_manager = ConsumerGroupManager(
            self.store, self.writer, self.timer,
            ConsumerGroupConfig(
                cfg.get("group.consumer.session.timeout.ms"), cfg.get("group.consumer.heartbeat.interval.ms"),
                cfg.get("group.consumer.max.size"),
                _assignor_names(str(cfg.get("group.consumer.assignors"))),
                cfg.get("group.consumer.assignment.interval.ms"),
                int(cfg.get("group.consumer.regex.refresh.interval.ms") or cfg.originals.get("group.consumer.regex.refresh.interval.ms")
                    or REGEX_REFRESH_INTERVAL_MS_DEFAULT),
            ),
            self._topic_lookup, self._regex_topics,
            lambda g, k: group_config(self.broker, g, k), self._topics_version,
        )
        # KIP-1071 streams groups (streams_manager.py, streams_admin.py)
        self.streams_manager = StreamsGroupManager(
            self.store, self.writer, self.timer, lambda name: v[1] if (v := self._topic_lookup(name)) else None,
            lambda g, k: group_config(self.broker, g, k))
        self._topic_ids: set[uuid.UUID] = set()
        self._new_topics_version = 0
        self._regexes: dict[str, re.Pattern[str]] = {}
        self._topic_lock: asyncio.Lock | None = None
        # KIP-848's online migration: classic members inside consumer groups, conversions both ways
        self.classic_members = ClassicMembers(self.consumer_manager, self._topic_name)
        self.consumer_manager.migration = GroupMigration(
            self.store, self.consumer_manager, self.classic_members, self.rebalance, cfg.get("group.max.size"),
            str(cfg.get("group.consumer.migration.policy")), lambda name: v[0] if (v := self._topic_lookup(name)) else None,
        )

    def _regex_topics(self, pattern: str) -> set[str]:
        """The topics an RE2J regex subscription matches, internal ones included (Kafka 4.3.1's
        TopicRegexResolver matches every topic name of the metadata image); ValueError if RE2J refuses it."""
        compiled = self._regexes.get(pattern)
        if compiled is None:
            compiled = self._regexes[pattern] = compile_re2j(pattern)
        return {t for t in self.broker.metadata.topics if compiled.fullmatch(t)}

    def _topics_version(self) -> int:
        """Grows whenever a topic was created since the last call (Kafka's lastMetadataImageWithNewTopics,
        here a time in ms so that it also grows over a restart); the regexes' refresh compares it."""
        ids = {info.topic_id for info in self.broker.metadata.topics.values()}
        if not self._new_topics_version or not ids <= self._topic_ids:
            self._new_topics_version = max(self._new_topics_version + 1, now_ms())
        self._topic_ids = ids
        return self._new_topics_version

    def _topic_lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        info = self.broker.metadata.topics.get(name)
        return None if info is None else (info.topic_id, info.partitions)

    # The shared state, under the names it had on the coordinator.

    @property
    def active(self) -> bool:
        return self.store.active

    @property
    def num_partitions(self) -> int:
        return self.store.num_partitions

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.store.groups

    @property
    def offsets(self) -> dict[str, dict[str, dict[int, OffsetAndMetadata]]]:
        return self.store.offsets

    @property
    def pending_txn_offsets(self) -> dict[int, dict[str, dict[str, dict[int, OffsetAndMetadata]]]]:
        return self.store.pending_txn_offsets

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Replay ``__consumer_offsets`` (if it exists) and start serving."""
        lm = self.broker.log_manager
        info = self.broker.metadata.topics.get(OFFSETS_TOPIC)
        if info is not None:
            self.store.num_partitions = info.partitions
            started = now_ms()
            count = await self.broker.run_blocking(load_offsets_topic, lm, info, self)
            self.group_manager.on_loaded()
            self.consumer_manager.on_loaded()
            self.streams_manager.on_loaded()
            log.info(
                "loaded %d groups and %d committed offsets from %d records of %s in %d ms",
                len(self.groups), sum(len(p) for t in self.offsets.values() for p in t.values()),
                count, OFFSETS_TOPIC, now_ms() - started,
            )
        self.store.active = True

    def shutdown(self) -> None:
        """Stop timers and answer parked JoinGroup/SyncGroup requests with NOT_COORDINATOR (Kafka's onUnloaded)."""
        self.store.active = False
        self.timer.cancel_all()
        self.group_manager.on_unloaded()

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` the first time a group needs it (Kafka creates it on the first FindCoordinator)."""
        lm = self.broker.log_manager
        if OFFSETS_TOPIC in self.broker.metadata.topics:
            return
        if self._topic_lock is None:
            self._topic_lock = asyncio.Lock()
        async with self._topic_lock:
            if OFFSETS_TOPIC in self.broker.metadata.topics:
                return
            configs = validate_topic_configs({
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self.segment_bytes),
            })
            self.store.num_partitions = self.configured_partitions
            await self.broker.run_blocking(lm.create_topic, OFFSETS_TOPIC, self.num_partitions, configs)

    def partition_for(self, group_id: str) -> int:
        return self.store.partition_for(group_id)

    # ---- replay (Kafka's GroupCoordinatorShard.replay) -------------------------------------

    def replay(self, key_bytes: bytes, value: bytes | None, record_offset: int) -> None:
        """Apply one record of the log to the manager of its key."""
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            self.offset_manager.replay(key, value, record_offset)
        elif isinstance(key, GroupMetadataKey):
            self.group_manager.replay(key, value)
        elif (consumer_key := decode_consumer_key(key_bytes)) is not None:
            self.consumer_manager.replay(consumer_key, value)
        elif (streams_key := decode_streams_key(key_bytes)) is not None:
            self.streams_manager.replay(streams_key, value)

    def replay_transactional(self, producer_id: int, key_bytes: bytes, value: bytes | None, record_offset: int) -> None:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            self.offset_manager.replay_transactional(producer_id, key, value, record_offset)

    def complete_transaction(self, producer_id: int, commit: bool, partition: int) -> None:
        """A transaction marker was written to __consumer_offsets-``partition``: publish (commit)
        or drop (abort) the producer's pending offsets of the groups of that partition."""
        self.offset_manager.complete_transaction(producer_id, commit, partition)

    # ---- the classic group protocol (GroupMetadataManager) ----------------------------------

    def join_group(self, ctx: RequestContext, req: JoinRequest) -> asyncio.Future[Response]:
        self.writer.touch(req.group_id)  # a join completed by another member's write waits for it too
        consumer = self.consumer_manager.groups.get(req.group_id) if self.active else None
        if consumer is not None:
            if consumer.members:
                # A classic member joins a consumer group with members (Kafka's classicGroupJoinToConsumerGroup).
                fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
                gm = self.group_manager
                if not gm.min_session_timeout_ms <= req.session_timeout_ms <= gm.max_session_timeout_ms:
                    fut.set_result(join_response(req.member_id, errors.INVALID_SESSION_TIMEOUT))
                else:
                    fut.set_result(self.classic_members.join(ctx, req))
                return fut
            # An empty consumer group becomes a classic group (Kafka converts empty groups both ways).
            self.consumer_manager.delete_group(req.group_id)
        return self.group_manager.join_group(ctx, req)

    def _classic_member_of_consumer_group(self, group_id: str) -> bool:
        """Whether a classic request for ``group_id`` is served by the consumer group (Kafka routes by group type)."""
        return self.active and bool(group_id) and self.consumer_manager.is_consumer_group(group_id)

    def sync_group(self, ctx: RequestContext, group_id: str, generation_id: int, member_id: str, instance_id: str | None, protocol_type: str | None, protocol_name: str | None, assignments: list[tuple[str, bytes]]) -> asyncio.Future[Response]:
        self.writer.touch(group_id)
        if self._classic_member_of_consumer_group(group_id) and not (ctx.api_version >= 5 and (protocol_type is None or protocol_name is None)):
            fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
            fut.set_result(self.classic_members.sync(group_id, generation_id, member_id, instance_id, protocol_type, protocol_name))
            return fut
        return self.group_manager.sync_group(ctx, group_id, generation_id, member_id, instance_id, protocol_type, protocol_name, assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        if self._classic_member_of_consumer_group(group_id):
            return self.classic_members.heartbeat(group_id, generation_id, member_id, instance_id)
        return self.group_manager.heartbeat(group_id, generation_id, member_id, instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[Response]]:
        """(top-level error, per-member responses) for [(member id, group instance id, reason)]."""
        self.writer.touch(group_id)
        if self._classic_member_of_consumer_group(group_id):
            return self.classic_members.leave(group_id, members)
        return self.group_manager.leave_group(group_id, members)

    def list_groups(self, states_filter: Iterable[str], types_filter: Iterable[str]) -> tuple[int, list[Response]]:
        states_filter, types_filter = list(states_filter), list(types_filter)
        error, rows = self._list_classic_and_consumer_groups(states_filter, types_filter)
        share = getattr(self.broker, "share_coordinator", None)  # None in unit tests' FakeBroker
        if not error and share is not None:  # share groups (server/share): same group ids, group type "share"
            rows += share.list_rows({s.strip().lower() for s in states_filter}, {t.strip().lower() for t in types_filter})
        if not error:
            rows = streams_facade_list(self.streams_manager, rows, states_filter, types_filter)
        return error, rows

    def _list_classic_and_consumer_groups(self, states_filter: list[str], types_filter: list[str]) -> tuple[int, list[Response]]:
        error, rows = self.group_manager.list_groups(states_filter, types_filter)
        consumer = self.consumer_manager
        if error or not consumer.groups:
            return error, rows
        # A consumer group's offsets live under an empty classic entry: list the consumer group instead.
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        rows = [r for r in rows if not consumer.is_consumer_group(r["group_id"])]
        rows += [r for r in consumer.list_rows()
                 if (not states or r["group_state"].lower() in states) and (not types or "consumer" in types)]
        return error, rows

    def describe_groups(self, group_ids: list[str], api_version: int, include_authorized_operations: bool) -> list[Response]:
        rows = self.group_manager.describe_groups(group_ids, api_version, include_authorized_operations)
        share = getattr(self.broker, "share_coordinator", None)
        for r in rows:
            if share is not None and share.is_share_group(r["group_id"]) and r["error_code"] == errors.GROUP_ID_NOT_FOUND:
                r["error_message"] = f"Group {r['group_id']} is not a classic group."
            if (self.consumer_manager.is_consumer_group(r["group_id"]) or self.streams_manager.is_streams_group(r["group_id"])) and r["error_code"] == errors.NONE:
                # Kafka: DescribeGroups only describes classic groups (the others are not found, Dead before v6).
                r.update(error_code=errors.GROUP_ID_NOT_FOUND if api_version >= 6 else errors.NONE,
                         error_message=f"Group {r['group_id']} is not a classic group." if api_version >= 6 else None,
                         group_state="Dead", protocol_type="", protocol_data="", members=[])
        return rows

    def delete_groups(self, group_ids: list[str]) -> list[Response]:
        refused: dict[str, int] = {}
        share = getattr(self.broker, "share_coordinator", None)
        for gid in group_ids:
            if self.consumer_manager.is_consumer_group(gid):
                error = self.consumer_manager.delete_group(gid)
                if error:
                    refused[gid] = error
            elif self.streams_manager.is_streams_group(gid):
                if error := streams_facade_delete(self.streams_manager, gid):
                    refused[gid] = error
            elif share is not None and share.is_share_group(gid):
                # A share group has no classic entry: its answer is the share coordinator's.
                refused[gid] = share.delete_group(gid)
        rows = self.group_manager.delete_groups([g for g in group_ids if g not in refused])
        return rows + [{"group_id": g, "error_code": e} for g, e in refused.items()]

    # ---- consumer groups, KIP-848 (ConsumerGroupManager) ------------------------------------

    def consumer_group_heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Response:
        self.writer.touch(req.group_id)
        return self.consumer_manager.heartbeat(ctx, req)

    def consumer_group_describe(self, group_ids: list[str]) -> list[Response]:
        return self.consumer_manager.describe(self.store.by_coordinator_partition(group_ids), self._topic_name)

    # ---- streams groups, KIP-1071 (StreamsGroupManager) --------------------------------------------

    def streams_group_heartbeat(self, ctx: RequestContext, req: StreamsHeartbeat) -> tuple[Response, list]:
        # streams_error: every field of the answer (a dict without "status" did not encode: found by fuzzing).
        self.writer.touch(req.group_id)
        if not self.active:
            return streams_error(errors.COORDINATOR_NOT_AVAILABLE, None), []
        if self.consumer_manager.is_consumer_group(req.group_id):
            return streams_error(errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group."), []
        return self.streams_manager.heartbeat(ctx, req)

    def streams_group_describe(self, group_ids: list[str]) -> list[Response]:
        return streams_describe(self.streams_manager, self.store.by_coordinator_partition(group_ids))

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.broker.metadata.topics_by_id.get(topic_id)
        return None if info is None else info.name

    # ---- offsets (OffsetMetadataManager) ------------------------------------------------------

    def commit_offsets(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, retention_ms: int,
        topics: CommitTopics, api_version: int,
    ) -> tuple[int, CommitResults]:
        """(group error, [(topic, [(partition, error)])]) for [(topic, [(partition, offset, leader epoch, metadata)])]."""
        if self.active and self.streams_manager.is_streams_group(group_id):
            error = streams_validate_commit(self.streams_manager, group_id, member_id, generation_id, api_version, [t for t, _ in topics])
            if error:
                return error, []
            return self.offset_manager.commit_offsets(group_id, -1, "", None, retention_ms, topics, api_version)
        if self.active and self.consumer_manager.is_consumer_group(group_id):
            return self._consumer_group_commit(
                group_id, generation_id, member_id, instance_id, topics, api_version, False,
                lambda allowed: self.offset_manager.commit_offsets(group_id, -1, "", None, retention_ms, allowed, api_version))
        return self.offset_manager.commit_offsets(group_id, generation_id, member_id, instance_id, retention_ms, topics, api_version)

    def _consumer_group_commit(
        self, group_id: str, member_epoch: int, member_id: str, instance_id: str | None, topics: CommitTopics,
        api_version: int, transactional: bool, commit: Callable[[CommitTopics], tuple[int, CommitResults]],
    ) -> tuple[int, CommitResults]:
        """A consumer group checks the member epoch (per partition for an older one), then commits
        the accepted partitions as for an empty classic group (the entry its offsets live under)."""
        error, stale = self.consumer_manager.validate_offset_commit(
            group_id, member_id, instance_id, member_epoch, api_version, [(t, p[0]) for t, parts in topics for p in parts], transactional)
        if error:
            return error, []
        allowed = [(t, kept) for t, parts in topics if (kept := [p for p in parts if (t, p[0]) not in stale])]
        results: CommitResults = []
        if allowed:
            error, results = commit(allowed)
            if error:
                return error, []
        done = {(t, p): code for t, rows in results for p, code in rows}
        return errors.NONE, [(t, [(p[0], done.get((t, p[0]), STALE_MEMBER_EPOCH)) for p in parts]) for t, parts in topics]

    def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int, member_id: str,
        instance_id: str | None, topics: CommitTopics,
    ) -> tuple[int, CommitResults]:
        """TxnOffsetCommit: pending until the transaction's marker (``complete_transaction``)."""
        if self.active and self.streams_manager.is_streams_group(group_id):
            error = streams_validate_commit(self.streams_manager, group_id, member_id, generation_id, 9, [t for t, _ in topics], True)
            if error:
                return error, []
            return self.offset_manager.commit_transactional_offsets(group_id, producer_id, producer_epoch, -1, "", None, topics)
        if self.active and self.consumer_manager.is_consumer_group(group_id):
            return self._consumer_group_commit(
                group_id, generation_id, member_id, instance_id, topics, 9, True,
                lambda allowed: self.offset_manager.commit_transactional_offsets(group_id, producer_id, producer_epoch, -1, "", None, allowed))
        return self.offset_manager.commit_transactional_offsets(group_id, producer_id, producer_epoch, generation_id, member_id, instance_id, topics)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[int, list[tuple[str, list[Response]]]]:
        """(group error, [(topic, [partition rows])]); ``topics`` None = every committed offset.

        A consumer group checks the member epoch of OffsetFetch v9+ (Kafka's validateOffsetFetch)."""
        if self.active and self.streams_manager.is_streams_group(group_id) and not (member_id is None and member_epoch < 0):
            error = streams_validate_fetch(self.streams_manager, group_id, member_id or "", member_epoch)
            if error:
                return error, []
        if self.active and self.consumer_manager.is_consumer_group(group_id) and not (member_id is None and member_epoch < 0):
            error = self.consumer_manager.validate_offset_fetch(group_id, member_id or "", member_epoch)
            if error:
                return error, []
        return self.offset_manager.fetch_offsets(group_id, topics, require_stable)

    def has_pending_transactional_offsets(self, group_id: str) -> bool:
        return self.offset_manager.has_pending_transactional_offsets(group_id)

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> tuple[int, CommitResults]:
        """OffsetDelete: (group error, [(topic, [(partition, error)])])."""
        return self.offset_manager.delete_offsets(group_id, topics)

    def on_topic_deleted(self, topic: str) -> int:
        """Every group's committed offsets of a deleted topic go: the number of tombstones written."""
        return self.offset_manager.on_topic_deleted(topic)

    # ---- expiration (Kafka's GroupCoordinatorShard.cleanupGroupMetadata) ----------------------

    def cleanup_group_metadata(self, now: int | None = None) -> int:
        """Expire offsets (``offsets.retention.minutes``) and delete empty groups left without offsets.

        Returns the number of tombstones written.
        """
        if not self.active:
            return 0
        now = now_ms() if now is None else now
        by_partition: dict[int, tuple[str, list[Record]]] = {}
        for gid in list(self.groups):
            group = self.groups[gid]
            consumer_group = self.consumer_manager.groups.get(gid)
            if consumer_group is not None and consumer_group.members:
                continue  # offsets of a consumer group with members do not expire
            records: list[Record] = []
            if self.offset_manager.cleanup_expired_offsets(gid, group, now, records) and group.is_empty:
                records.append((group_metadata_key(gid), None))
            if records:
                entry = by_partition.setdefault(self.partition_for(gid), (gid, []))
                entry[1].extend(records)
        written = 0
        for gid, records in by_partition.values():
            if self.writer.write_and_replay(gid, records) == errors.NONE:
                written += len(records)
        for gid in [g for g in self.consumer_manager.groups if g not in self.groups]:
            self.consumer_manager.delete_group(gid)  # an empty consumer group whose offsets all expired
        if written:
            log.info("wrote %d tombstones while cleaning up expired offsets and empty groups", written)
        return written

    async def periodic_cleanup(self) -> None:
        self.cleanup_group_metadata()
