"""DescribeCluster (API 60) and DescribeTopicPartitions (API 75).

Both answered as a KRaft broker answers them (Kafka's KafkaApis.handleDescribeCluster with
AuthHelper.computeDescribeClusterResponse, and DescribeTopicPartitionsRequestHandler with
KRaftMetadataCache.describeTopicResponse), for our single broker: node 1 is the only broker,
never fenced, and (as a KRaft broker reports "a random alive broker") the controller id;
every partition is led by it with replicas and ISR [1] and an empty ELR, as on a fresh
Kafka partition. Authorized-operation fields carry the operations the authorizer allows (every
operation the resource supports without an authorizer, as Kafka reports them); DescribeCluster
is answered to anyone (its cluster operations are 0 without DESCRIBE on the cluster), and
DescribeTopicPartitions leaves out the topics the client may not DESCRIBE when listing all, and
answers the named ones TOPIC_AUTHORIZATION_FAILED, after the others.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.errors import (  # noqa: F401 (some re-exported)
    MISMATCHED_ENDPOINT_TYPE,
    UNSUPPORTED_ENDPOINT_TYPE,
)
from kafka_sidecar.protocol.topic import INTERNAL_TOPICS, InvalidTopicError, validate_topic_name

from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import TOPIC_AUTHORIZATION_FAILED
from .metadata import AUTHORIZED_OPERATIONS_OMITTED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

ZERO_UUID = uuid.UUID(int=0)

# EndpointType ids (KIP-919).
ENDPOINT_UNKNOWN, ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 0, 1, 2
_ENDPOINT_NAMES = {ENDPOINT_BROKER: "BROKER", ENDPOINT_CONTROLLER: "CONTROLLER"}

# max.request.partition.size.limit's default: the most partitions one DescribeTopicPartitions answer holds.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000


# ---- DescribeCluster (60) -------------------------------------------------------------------


def _cluster_error(code: int, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "cluster_id": "", "brokers": []}


async def handle_describe_cluster(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    version = header.api_version
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKER)
    if endpoint_type not in _ENDPOINT_NAMES:
        return _cluster_error(
            errors.INVALID_REQUEST if version == 0 else UNSUPPORTED_ENDPOINT_TYPE,
            f"Unsupported endpoint type {endpoint_type}",
        )
    if endpoint_type != ENDPOINT_BROKER:
        return _cluster_error(
            errors.INVALID_REQUEST if version == 0 else MISMATCHED_ENDPOINT_TYPE,
            f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type {_ENDPOINT_NAMES[endpoint_type]}",
        )
    host, port = services.endpoint_for(context.listener)
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        az = services.authorizer
        operations = az.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME) if az.authorize_cluster(context, header, AclOperation.DESCRIBE) else 0
    return {
        "throttle_time": 0,
        "error_code": errors.NONE,
        "error_message": None,
        "endpoint_type": ENDPOINT_BROKER,
        "cluster_id": services.cluster_id,
        "controller_id": services.node_id if services.cluster is None else services.cluster.controller_id,
        "brokers": [{"broker_id": services.node_id, "host": host, "port": port, "rack": None, "is_fenced": False}] if services.cluster is None
        else [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": None, "is_fenced": False}
              for b in services.cluster.brokers(context.listener)],
        "cluster_authorized_operations": operations,
    }


# ---- DescribeTopicPartitions (75) -----------------------------------------------------------


def _partition(services: BrokerServices, index: int, topic: str) -> dict[str, Any]:
    # A cluster node (serve --processes N) names the leader by the static placement.
    node = services.node_id if services.cluster is None else services.cluster.placement.leader(topic, index)
    return {
        "error_code": errors.NONE,
        "partition_index": index,
        "leader_id": node,
        "leader_epoch": 0,
        "replica_nodes": [node],
        "isr_nodes": [node],
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": [],
    }


def _invalid_request(request: Any) -> dict[str, Any]:
    """DescribeTopicPartitionsRequest.getErrorResponse: every requested topic gets the error."""
    return {
        "throttle_time": 0,
        "topics": [
            {"error_code": errors.INVALID_REQUEST, "name": t.name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": []}
            for t in request.topics
        ],
        "next_cursor": None,
    }


async def handle_describe_topic_partitions(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = {n for n in list(services.metadata.topics) if n >= cursor_topic}
    else:
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _invalid_request(request)  # "topic list should contain the cursor topic"
    if cursor is not None and cursor.partition_index < 0:
        return _invalid_request(request)  # "cursor partition must be valid"
    limit = services.config.get("max.request.partition.size.limit") or MAX_REQUEST_PARTITION_SIZE_LIMIT
    remaining = max(min(limit, request.response_partition_limit), 1)
    topics: list[dict[str, Any]] = []
    unauthorized: list[dict[str, Any]] = []
    next_cursor = None
    az = services.authorizer
    # Java's String order is UTF-16 code unit order: the same as Python's for legal topic names (ASCII).
    for name in sorted(names):
        # DESCRIBE on each topic, as Kafka's stream checks it: up to the one the next cursor names.
        if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not fetch_all:
                unauthorized.append({"error_code": TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": ZERO_UUID,
                                     "is_internal": False, "partitions": []})
            continue
        if remaining <= 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        info = services.metadata.topics.get(name)
        if info is None:
            if not fetch_all:
                try:
                    validate_topic_name(name)
                    code = errors.UNKNOWN_TOPIC_OR_PARTITION
                except InvalidTopicError:
                    code = errors.INVALID_TOPIC_EXCEPTION
                topics.append({
                    "error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": name in INTERNAL_TOPICS,
                    "partitions": [], "topic_authorized_operations": az.authorized_operations(context, ResourceType.TOPIC, name),
                })
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(info.partitions, start + remaining)
        partitions = [_partition(services, p, name) for p in range(start, upper)]
        topics.append({
            "error_code": errors.NONE, "name": name, "topic_id": info.topic_id, "is_internal": name in INTERNAL_TOPICS,
            "partitions": partitions, "topic_authorized_operations": az.authorized_operations(context, ResourceType.TOPIC, name),
        })
        if upper < info.partitions:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(partitions)
    return {"throttle_time": 0, "topics": topics + unauthorized, "next_cursor": next_cursor}
