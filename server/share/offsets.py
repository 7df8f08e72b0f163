"""Share-group offsets for the admin tools: DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), the way Kafka's
GroupCoordinatorService answers them (kafka-share-groups.sh --describe --offsets,
--reset-offsets, --delete-offsets).

A share group's "offset" for a topic-partition is its share-partition start offset;
the lag (DescribeShareGroupOffsets v1, KIP-1226) is the records between the start offset
and the high watermark whose delivery is not complete. Altering or deleting offsets is
refused while the group has members (GROUP_NOT_EMPTY), as in Kafka.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors

from .partition import RecordState

if TYPE_CHECKING:
    from .coordinator import ShareCoordinator

# Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET / the lag of an uninitialized share-partition.
UNINITIALIZED_START_OFFSET = -1
UNKNOWN_LAG = -1
_NOT_EMPTY_MESSAGE = "The group is not empty."
_UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


def _unknown_topic(name: str) -> str:
    return f"Topic {name} not found."


def initialized_topics(coordinator: ShareCoordinator, group_id: str) -> list[tuple[str, list[int]]]:
    """The group's initialized share-partitions, by topic name."""
    by_id = coordinator.broker.metadata.topics_by_id
    wanted: dict[str, list[int]] = {}
    for (gid, topic_id, partition) in sorted(coordinator.share_partitions, key=lambda k: (str(k[1]), k[2])):
        if gid == group_id and topic_id in by_id:
            wanted.setdefault(by_id[topic_id].name, []).append(partition)
    return sorted(wanted.items())


def describe_offsets(coordinator: ShareCoordinator, group_id: str, topics: list[tuple[str, list[int]]] | None,
                     elsewhere: dict[tuple[uuid.UUID, int], tuple[int, int, int]] | None = None) -> dict[str, Any]:
    """One group of the DescribeShareGroupOffsets answer. ``topics`` None: every initialized
    share-partition of the group (--describe --offsets); else the partitions named.
    ``elsewhere``: (start offset, leader epoch, lag) of the share-partitions whose state or
    topic-partition another node of the cluster has (server/cluster/share_state.py)."""
    group = coordinator.groups.get(group_id)
    if group is None and topics is None:
        return {"group_id": group_id, "topics": [], "error_code": errors.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {group_id} not found."}
    # Partitions named: answered from the share state whether or not the group exists (Kafka's
    # coordinator asks its persister; an unknown group's partitions are uninitialized, -1).
    topics_by_name = coordinator.broker.metadata.topics
    if topics is None:
        topics = initialized_topics(coordinator, group_id)
    out = []
    for name, partitions in topics:
        info = topics_by_name.get(name)
        if info is None:
            out.append({"topic_name": name, "topic_id": None, "partitions": [
                {"partition_index": p, "start_offset": UNINITIALIZED_START_OFFSET, "leader_epoch": -1, "lag": UNKNOWN_LAG,
                 "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION, "error_message": _unknown_topic(name)} for p in partitions]})
            continue
        rows = []
        for p in partitions:
            known = elsewhere.get((info.topic_id, p)) if elsewhere else None
            if known is not None:
                rows.append({"partition_index": p, "start_offset": known[0], "leader_epoch": known[1], "lag": known[2],
                             "error_code": errors.NONE, "error_message": None})
                continue
            # Kafka answers from the share coordinator's state: the start offset as last written
            # (-1 until the first write after the first ShareFetch resolved it).
            persisted = coordinator.persister.persisted((group_id, info.topic_id, p))
            if persisted is None or persisted[0] < 0:
                rows.append({"partition_index": p, "start_offset": UNINITIALIZED_START_OFFSET,
                             "leader_epoch": -1 if persisted is None else 0,
                             "lag": UNKNOWN_LAG, "error_code": errors.NONE, "error_message": None})
                continue
            start, batches = persisted
            lg = coordinator.broker.replica_manager.get_log(name, p)
            lag = UNKNOWN_LAG
            if lg is not None:
                done = sum(min(b.last_offset, lg.high_watermark - 1) - max(b.first_offset, start) + 1 for b in batches
                           if b.delivery_state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED) and b.last_offset >= start)
                lag = max(0, lg.high_watermark - start - done)
            rows.append({"partition_index": p, "start_offset": start, "leader_epoch": 0, "lag": lag,
                         "error_code": errors.NONE, "error_message": None})
        out.append({"topic_name": name, "topic_id": info.topic_id, "partitions": rows})
    return {"group_id": group_id, "topics": out, "error_code": errors.NONE, "error_message": None}


def alter_offsets(coordinator: ShareCoordinator, group_id: str, topics: list[tuple[str, list[tuple[int, int]]]]) -> dict[str, Any]:
    """AlterShareGroupOffsets: each named share-partition starts again at the given offset,
    with nothing in flight. An unknown group is created empty, as Kafka does."""
    group = coordinator.groups.get(group_id)
    if group is not None and group.members:
        return {"throttle_time": 0, "error_code": errors.NON_EMPTY_GROUP, "error_message": _NOT_EMPTY_MESSAGE, "responses": []}
    topics_by_name = coordinator.broker.metadata.topics
    responses = []
    for name, partitions in topics:
        info = topics_by_name.get(name)
        rows = []
        for p, offset in partitions:
            if info is None or not 0 <= p < info.partitions:
                rows.append({"partition_index": p, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                             "error_message": _UNKNOWN_PARTITION_MESSAGE if info else _unknown_topic(name)})
                continue
            error = coordinator.reset_share_partition(group_id, info.topic_id, p, offset)
            rows.append({"partition_index": p, "error_code": error, "error_message": None})
        responses.append({"topic_name": name, "topic_id": info.topic_id if info else None, "partitions": rows})
    return {"throttle_time": 0, "error_code": errors.NONE, "error_message": None, "responses": responses}


def delete_offsets(coordinator: ShareCoordinator, group_id: str, topic_names: list[str]) -> dict[str, Any]:
    """DeleteShareGroupOffsets: the group forgets its share-partitions of the named topics
    (they are initialized again, from share.auto.offset.reset, at the next fetch)."""
    group = coordinator.groups.get(group_id)
    if group is None:
        return {"throttle_time": 0, "error_code": errors.GROUP_ID_NOT_FOUND, "error_message": f"Group {group_id} not found.",
                "responses": []}
    if group.members:
        return {"throttle_time": 0, "error_code": errors.NON_EMPTY_GROUP, "error_message": _NOT_EMPTY_MESSAGE, "responses": []}
    topics_by_name = coordinator.broker.metadata.topics
    responses = []
    for name in topic_names:
        info = topics_by_name.get(name)
        if info is None:
            responses.append({"topic_name": name, "topic_id": None, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": _unknown_topic(name)})
            continue
        error = coordinator.delete_share_partitions(group_id, info.topic_id)
        responses.append({"topic_name": name, "topic_id": info.topic_id, "error_code": error, "error_message": None})
    return {"throttle_time": 0, "error_code": errors.NONE, "error_message": None, "responses": responses}
