"""GroupStore: the group coordinator's state, shared by its managers (Kafka keeps it in each
shard's timeline maps): the classic groups with their listing order, the committed offsets, the
pending transactional offsets, and how group metadata records map onto a ClassicGroup."""

from __future__ import annotations

from kafka_sidecar.protocol import errors

from .group import ClassicGroup, GroupState, Member
from .javaorder import JavaHashMap, TimelineOrder, chm_order
from .records import (
    OFFSETS_TOPIC,
    GroupMetadataValue,
    MemberMetadata,
    OffsetAndMetadata,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    partition_for,
)

Record = tuple[bytes, bytes | None]


def topic_partition_hash(topic: str, partition: int) -> int:
    """Java's TopicPartition.hashCode."""
    h = (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def append_error_to_response_error(code: int) -> int:
    """Kafka's appendGroupMetadataErrorToResponseError (GroupCoordinatorService's
    normalizeException: a storage failure of the coordinator's partition is NOT_COORDINATOR)."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE):
        return errors.UNKNOWN_SERVER_ERROR
    return code


class GroupStore:
    """Groups, committed and pending offsets, keyed as Kafka keys them."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.active = False  # loaded and serving (Kafka: the shard is active); else COORDINATOR_NOT_AVAILABLE
        self.groups: dict[str, ClassicGroup] = {}
        # Per __consumer_offsets partition, the groups in Kafka's TimelineHashMap order (ListGroups).
        self.group_order: dict[int, TimelineOrder[str]] = {}
        # group -> topic -> partition -> committed offset
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Transactional offsets (TxnOffsetCommit) not yet committed or aborted:
        # producer id -> group -> topic -> partition -> offset (Kafka's pendingTransactionalOffsets).
        self.pending_txn_offsets: dict[int, dict[str, dict[str, dict[int, OffsetAndMetadata]]]] = {}

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id)
        self.put_group(group)
        return group

    def put_group(self, group: ClassicGroup) -> None:
        self.groups[group.group_id] = group
        self.group_order.setdefault(self.partition_for(group.group_id), TimelineOrder()).add(group.group_id)

    def remove_group(self, group_id: str) -> None:
        if self.groups.pop(group_id, None) is not None:
            order = self.group_order.get(self.partition_for(group_id))
            if order is not None:
                order.remove(group_id)

    def groups_in_kafka_order(self) -> list[ClassicGroup]:
        """Shards in the coordinator runtime's ConcurrentHashMap order, groups in each shard's table order."""
        partitions = chm_order(range(self.num_partitions), lambda p: topic_partition_hash(OFFSETS_TOPIC, p))
        return [self.groups[gid] for p in partitions for gid in self.group_order.get(p, ()) if gid in self.groups]

    def by_coordinator_partition(self, group_ids: list[str]) -> list[str]:
        """Group ids in the order Kafka answers them: by __consumer_offsets partition, in
        ``HashMap<TopicPartition, List<String>>`` order, request order within a partition."""
        by_tp: JavaHashMap[int, list[str]] = JavaHashMap(lambda p: topic_partition_hash(OFFSETS_TOPIC, p))
        for gid in group_ids:
            p = self.partition_for(gid)
            lst = by_tp.get(p)
            if lst is None:
                lst = []
                by_tp[p] = lst
            lst.append(gid)
        return [gid for lst in by_tp.values() for gid in lst]


def group_from_record(group_id: str, v: GroupMetadataValue) -> ClassicGroup:
    """A group as its GroupMetadataValue record describes it (replay)."""
    group = ClassicGroup(
        group_id,
        state=GroupState.STABLE if v.members else GroupState.EMPTY,
        generation_id=v.generation,
        protocol_type=v.protocol_type or None,
        protocol_name=v.protocol,
        leader_id=v.leader,
        current_state_timestamp=None if v.current_state_timestamp == -1 else v.current_state_timestamp,
    )
    for m in v.members:
        group.add(Member(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout, m.session_timeout, v.protocol_type,
            [(v.protocol or "", m.subscription)], m.assignment,
        ))
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> Record:
    members = [
        MemberMetadata(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout_ms, m.session_timeout_ms,
            m.metadata(group.protocol_name), assignment[m.member_id],
        )
        for m in group.all_members()
    ]
    value = GroupMetadataValue(
        group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
        group.current_state_timestamp_or_default(), members,
    )
    return group_metadata_key(group.group_id), group_metadata_value(value)


def empty_group_metadata_record(group: ClassicGroup) -> Record:
    value = GroupMetadataValue("", 0, None, None, group.current_state_timestamp_or_default(), [])
    return group_metadata_key(group.group_id), group_metadata_value(value)
