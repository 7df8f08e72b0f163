"""OffsetMetadataManager: committed offsets of the classic groups (Kafka's OffsetMetadataManager).

OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, the offsets of a deleted topic, offset
expiration, and the replay of offset commit records and transaction markers. OffsetCommit and
TxnOffsetCommit validate and build their records on one path (``_offset_commit_records``); they
differ only in how the records are written: an OffsetCommit is applied at once, a TxnOffsetCommit
is written as transactional records of the producer and kept pending per producer id until the
transaction coordinator writes the marker (``complete_transaction``: COMMIT publishes, ABORT drops).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafka_sidecar.protocol import errors

from .group import ClassicGroup, GroupState, Member, now_ms
from .messages import Response
from .records import (
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_offset_commit_value,
    offset_commit_key,
    offset_commit_value,
)
from .store import GroupStore, Record, append_error_to_response_error
from .writer import GroupRecordWriter

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

# [(topic, [(partition, offset, leader epoch, metadata)])] in, [(topic, [(partition, error)])] out
CommitTopics = list[tuple[str, list[tuple[int, int, int, str | None]]]]
CommitResults = list[tuple[str, list[tuple[int, int]]]]


def java_string_length(s: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def validate_offset_commit(group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int) -> int:
    """Kafka's ClassicGroup.validateOffsetCommit: may this member commit for this generation?"""
    if group.is_in(GroupState.DEAD):
        return errors.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and group.is_in(GroupState.EMPTY):
        return errors.NONE  # admin client or a consumer without group management
    if generation_id >= 0 or member_id or instance_id is not None:
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return errors.ILLEGAL_GENERATION
    elif not group.is_in(GroupState.EMPTY):
        return errors.UNKNOWN_MEMBER_ID
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        return errors.REBALANCE_IN_PROGRESS
    return errors.NONE


class OffsetMetadataManager:
    """Committed and pending transactional offsets, kept in the shared GroupStore."""

    def __init__(
        self, store: GroupStore, writer: GroupRecordWriter, offset_metadata_max_bytes: int, offsets_retention_ms: int,
        reschedule_heartbeat: Callable[[ClassicGroup, Member], None],
    ) -> None:
        self.store = store
        self.writer = writer
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.offsets_retention_ms = offsets_retention_ms
        # A commit of a member of a stable or rebalancing group counts as its heartbeat (Kafka).
        self.reschedule_heartbeat = reschedule_heartbeat

    # ---- OffsetCommit, TxnOffsetCommit ---------------------------------------------------

    def _offset_commit_records(
        self, group_id: str, topics: CommitTopics, now: int, expire_timestamp: int | None,
    ) -> tuple[list[Record], list[tuple[str, int, OffsetAndMetadata]], CommitResults]:
        """The one per-partition validation and record-building path of OffsetCommit and
        TxnOffsetCommit: (records, (topic, partition, offset) per record, per-partition results)."""
        records: list[Record] = []
        entries: list[tuple[str, int, OffsetAndMetadata]] = []
        results: CommitResults = []
        for topic, partitions in topics:
            out = []
            for partition, offset, leader_epoch, metadata in partitions:
                if metadata is not None and java_string_length(metadata) > self.offset_metadata_max_bytes:
                    out.append((partition, errors.OFFSET_METADATA_TOO_LARGE))
                    continue
                out.append((partition, errors.NONE))
                om = OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire_timestamp)
                records.append((offset_commit_key(group_id, topic, partition), offset_commit_value(om)))
                entries.append((topic, partition, om))
            results.append((topic, out))
        return records, entries, results

    def commit_offsets(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, retention_ms: int,
        topics: CommitTopics, api_version: int,
    ) -> tuple[int, CommitResults]:
        """(group error, [(topic, [(partition, error)])]) for [(topic, [(partition, offset, leader epoch, metadata)])]."""
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        group = self.store.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return (errors.GROUP_ID_NOT_FOUND if api_version >= 9 else errors.ILLEGAL_GENERATION), []
            log.info("creating simple consumer group %s via a manual offset commit", group_id)
            group = self.store.create_group(group_id)
        error = validate_offset_commit(group, member_id, instance_id, generation_id)
        if error:
            return error, []
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.reschedule_heartbeat(group, group.member(member_id))
        now = now_ms()
        records, _, results = self._offset_commit_records(group_id, topics, now, None if retention_ms == -1 else now + retention_ms)
        if records:
            error = self.writer.write_and_replay(group_id, records)
            if error:
                return append_error_to_response_error(error), []
        return errors.NONE, results

    def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int, member_id: str,
        instance_id: str | None, topics: CommitTopics,
    ) -> tuple[int, CommitResults]:
        """TxnOffsetCommit: the offsets are written as transactional records of the producer and
        become visible with the transaction's COMMIT marker (dropped on ABORT)."""
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        group = self.store.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return errors.ILLEGAL_GENERATION, []
            group = self.store.create_group(group_id)
        if group.is_in(GroupState.DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if not (generation_id < 0 and not member_id and instance_id is None):
            error = validate_offset_commit(group, member_id, instance_id, generation_id)
            if error:
                return error, []
        records, entries, results = self._offset_commit_records(group_id, topics, now_ms(), None)
        if records:
            error, first = self.writer.write_transactional(group_id, producer_id, producer_epoch, records)
            if error:
                return append_error_to_response_error(error), []
            pending = self.store.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {})
            for i, (topic, partition, om) in enumerate(entries):
                om.record_offset = first + i
                pending.setdefault(topic, {})[partition] = om
        return errors.NONE, results

    # ---- OffsetFetch ----------------------------------------------------------------------

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool = False) -> tuple[int, list[tuple[str, list[Response]]]]:
        """(group error, [(topic, [partition rows])]); ``topics`` None = every committed offset.

        With ``require_stable``, partitions with pending transactional offsets answer
        UNSTABLE_OFFSET_COMMIT (Kafka's OffsetFetch v7+ requireStable)."""
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        group = self.store.groups.get(group_id)
        committed = self.store.offsets.get(group_id, {}) if group is not None and not group.is_in(GroupState.DEAD) else {}

        unstable = self.pending_partitions(group_id) if require_stable else set()

        def row(partition: int, om: OffsetAndMetadata | None, topic: str = "") -> Response:
            if (topic, partition) in unstable:
                return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": errors.UNSTABLE_OFFSET_COMMIT}
            if om is None:
                return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": errors.NONE}
            return {"partition_index": partition, "committed_offset": om.offset, "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": errors.NONE}

        if topics is None:
            return errors.NONE, [(t, [row(p, om, t) for p, om in parts.items()]) for t, parts in committed.items()]
        return errors.NONE, [(t, [row(p, committed.get(t, {}).get(p), t) for p in parts]) for t, parts in topics]

    # ---- OffsetDelete, deleted topics -------------------------------------------------------

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> tuple[int, CommitResults]:
        """OffsetDelete: (group error, [(topic, [(partition, error)])])."""
        if not self.store.active:
            return errors.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return errors.INVALID_GROUP_ID, []
        group = self.store.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return errors.GROUP_ID_NOT_FOUND, []
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE) and not group.uses_consumer_protocol():
            return errors.NON_EMPTY_GROUP, []
        records: list[Record] = []
        results = []
        committed = self.store.offsets.get(group_id, {})
        for topic, partitions in topics:
            if group.is_subscribed_to_topic(topic):
                results.append((topic, [(p, errors.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            results.append((topic, [(p, errors.NONE) for p in partitions]))
            for p in partitions:
                if p in committed.get(topic, {}):
                    records.append((offset_commit_key(group_id, topic, p), None))
        if records:
            error = self.writer.write_and_replay(group_id, records)
            if error:
                return append_error_to_response_error(error), []
        return errors.NONE, results

    def on_topic_deleted(self, topic: str) -> int:
        """Kafka's onPartitionsDeleted: every group's committed offsets of a deleted topic go
        (tombstones in __consumer_offsets), so a topic created again under the name starts clean.
        Returns the number of tombstones written."""
        if not self.store.active:
            return 0
        written = 0
        for gid, committed in list(self.store.offsets.items()):
            parts = committed.get(topic)
            if not parts:
                continue
            records: list[Record] = [(offset_commit_key(gid, topic, p), None) for p in sorted(parts)]
            if self.writer.write_and_replay(gid, records) == errors.NONE:
                written += len(records)
        if written:
            log.info("deleted %d committed offsets of deleted topic %s", written, topic)
        return written

    # ---- expiration ---------------------------------------------------------------------

    @staticmethod
    def _expiration_base(group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
        """Kafka's ClassicGroup.offsetExpirationCondition: what the retention period counts from."""
        if group.protocol_type is not None:
            if group.is_in(GroupState.EMPTY):
                ts = group.current_state_timestamp
                return lambda om: ts if ts is not None else om.commit_timestamp
            if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in(GroupState.STABLE):
                return lambda om: om.commit_timestamp
            return None
        return lambda om: om.commit_timestamp

    def cleanup_expired_offsets(self, group_id: str, group: ClassicGroup, now: int, records: list[Record]) -> bool:
        """Kafka's cleanupExpiredOffsets: add the tombstones of the group's expired offsets to
        ``records``; True when every offset expired and no transaction may still commit one."""
        all_expired = True
        committed = self.store.offsets.get(group_id)
        pending = self.pending_partitions(group_id)  # kept while a transaction may still commit them (Kafka)
        if committed:
            base = self._expiration_base(group)
            if base is None:
                all_expired = False
            else:
                for topic, parts in committed.items():
                    if group.is_subscribed_to_topic(topic):
                        all_expired = False
                        continue
                    for p, om in parts.items():
                        expired = now >= om.expire_timestamp if om.expire_timestamp is not None else now - base(om) >= self.offsets_retention_ms
                        if expired and (topic, p) not in pending:
                            records.append((offset_commit_key(group_id, topic, p), None))
                        else:
                            all_expired = False
        return all_expired and not pending

    # ---- transactional offsets, replay ----------------------------------------------------

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return {(t, p) for groups in self.store.pending_txn_offsets.values() for t, parts in groups.get(group_id, {}).items() for p in parts}

    def has_pending_transactional_offsets(self, group_id: str) -> bool:
        return any(group_id in groups for groups in self.store.pending_txn_offsets.values())

    def replay(self, key: OffsetCommitKey, value: bytes | None, record_offset: int) -> None:
        """An offset commit record (or its tombstone) in the log."""
        if value is None:
            self._remove_offset(key.group, key.topic, key.partition)
        else:
            if key.group not in self.store.groups:
                self.store.create_group(key.group)
            om = decode_offset_commit_value(value, record_offset)
            self.store.offsets.setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = om

    def replay_transactional(self, producer_id: int, key: OffsetCommitKey, value: bytes | None, record_offset: int) -> None:
        """A transactional offset commit record: pending until the transaction's marker."""
        if value is None:
            return
        if key.group not in self.store.groups:
            self.store.create_group(key.group)
        om = decode_offset_commit_value(value, record_offset)
        self.store.pending_txn_offsets.setdefault(producer_id, {}).setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = om

    def _remove_offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        topics = self.store.offsets.get(group_id)
        if topics is None or topic not in topics:
            return None
        removed = topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self.store.offsets[group_id]
        return removed

    def complete_transaction(self, producer_id: int, commit: bool, partition: int) -> None:
        """A transaction marker was written to __consumer_offsets-``partition``: publish (commit)
        or drop (abort) the producer's pending offsets of the groups of that partition
        (Kafka's replayEndTransactionMarker: a newer non-transactional commit is kept)."""
        groups = self.store.pending_txn_offsets.get(producer_id)
        if not groups:
            return
        offsets = self.store.offsets
        for group_id in [g for g in groups if self.store.partition_for(g) == partition]:
            pending = groups.pop(group_id)
            if not commit:
                continue
            for topic, parts in pending.items():
                for p, om in parts.items():
                    existing = offsets.get(group_id, {}).get(topic, {}).get(p)
                    if existing is None or om.record_offset > existing.record_offset:
                        offsets.setdefault(group_id, {}).setdefault(topic, {})[p] = om
        if not groups:
            del self.store.pending_txn_offsets[producer_id]
