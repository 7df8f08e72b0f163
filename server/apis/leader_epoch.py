"""OffsetForLeaderEpoch (API 23): the end offset of a leader epoch (KIP-101, KIP-320).

Consumers use it to validate a position after a leader change or with a committed leader
epoch (log truncation detection); followers use it to truncate. This broker is the only
replica and the leader of every partition in one epoch for good: ``LEADER_EPOCH`` (0), the
epoch Metadata advertises and every appended batch is stamped with. Its leader-epoch cache
(Kafka's LeaderEpochFileCache) is therefore the single entry ``(LEADER_EPOCH, log start
offset)``: Kafka assigns the epoch at offset 0 when the partition becomes leader, and moving
the log start offset (retention, DeleteRecords) moves that entry's start offset with it.

Answers follow Kafka's ReplicaManager.lastOffsetForLeaderEpoch, Partition.lastOffsetForLeaderEpoch
and LeaderEpochFileCache.endOffsetFor, partition by partition, in request order:

- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- ``current_leader_epoch`` (when not -1) below ours: FENCED_LEADER_EPOCH; above: UNKNOWN_LEADER_EPOCH;
- ``leader_epoch`` -1 (undefined): no error, epoch -1, end offset -1;
- ``leader_epoch`` = ours (the latest): ours and the log end offset;
- above ours: no error, epoch -1, end offset -1 (no epoch is above the latest);
- below ours (other negative values): the requested epoch and our epoch's start offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.storage.log import LEADER_EPOCH, Log

from ..security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

FENCED_LEADER_EPOCH = errors.FENCED_LEADER_EPOCH
UNKNOWN_LEADER_EPOCH = errors.UNKNOWN_LEADER_EPOCH

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
NO_PARTITION_LEADER_EPOCH = -1  # current_leader_epoch: "not given", no fencing check


def _result(partition: int, code: int = errors.NONE, epoch: int = UNDEFINED_EPOCH, end_offset: int = UNDEFINED_EPOCH_OFFSET) -> dict[str, Any]:
    return {"error_code": code, "partition": partition, "leader_epoch": epoch, "end_offset": end_offset}


def end_offset_for(lg: Log, partition: int, requested: int) -> dict[str, Any]:
    """LeaderEpochFileCache.endOffsetFor over the one-entry cache {LEADER_EPOCH: log start offset}."""
    if requested == UNDEFINED_EPOCH:
        return _result(partition)
    if requested == LEADER_EPOCH:
        return _result(partition, epoch=LEADER_EPOCH, end_offset=lg.log_end_offset)
    if requested > LEADER_EPOCH:
        return _result(partition)  # no epoch above the latest one
    # Below every known epoch: the requested epoch and the start offset of the first one above it.
    return _result(partition, epoch=requested, end_offset=lg.log_start_offset)


def offset_for_partition(services: BrokerServices, topic: str, partition: int, current_leader_epoch: int, requested: int) -> dict[str, Any]:
    lg = services.log_manager.get_log(topic, partition)
    if lg is None:
        return _result(partition, services.replica_manager.missing_log_error(topic, partition))
    if current_leader_epoch != NO_PARTITION_LEADER_EPOCH:
        if current_leader_epoch < LEADER_EPOCH:
            return _result(partition, FENCED_LEADER_EPOCH)
        if current_leader_epoch > LEADER_EPOCH:
            return _result(partition, UNKNOWN_LEADER_EPOCH)
    return end_offset_for(lg, partition, requested)


async def handle_offset_for_leader_epoch(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    # KafkaApis: CLUSTER_ACTION on the cluster (brokers) or DESCRIBE on each topic (consumers,
    # KIP-320); the other topics come after, TOPIC_AUTHORIZATION_FAILED on each partition.
    header = context.header
    az = services.authorizer
    describable = None
    if az.enabled and not az.authorize_cluster(context, header, AclOperation.CLUSTER_ACTION, log_denied=False):
        describable = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.topic for t in request.topics])
    topics, unauthorized = [], []
    for t in request.topics:
        if describable is not None and t.topic not in describable:
            unauthorized.append({"topic": t.topic, "partitions": [
                _result(p.partition, errors.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]})
            continue
        parts = [
            offset_for_partition(services, t.topic, p.partition, getattr(p, "current_leader_epoch", NO_PARTITION_LEADER_EPOCH), p.leader_epoch)
            for p in t.partitions
        ]
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics + unauthorized}
