"""Metadata (API 3): one broker (node 1, the listen address) leading every partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.storage.log_manager import InvalidTopicError, TopicInfo, validate_topic_name

from .topics import auto_create_topic

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import Connection

# Kafka's "authorized operations not requested" marker.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# Without an authorizer Kafka reports every operation a resource supports (AclEntry.supportedOperations),
# as a bit field of AclOperation codes: TOPIC = READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
# DESCRIBE_CONFIGS, ALTER_CONFIGS; CLUSTER = CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
# DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # 3576
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # 8096
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def topic_metadata(broker: Broker, info: TopicInfo) -> dict[str, Any]:
    node = broker.node_id
    return {
        "error_code": errors.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.name in INTERNAL_TOPICS,
        "partitions": [
            {
                "error_code": errors.NONE,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": 0,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in range(info.partitions)
        ],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _error_topic(name: str | None, code: int, topic_id: Any = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


async def _named_topics(broker: Broker, names: list[str], allow_auto: bool) -> list[dict[str, Any]]:
    """Kafka's KafkaApis.getTopicMetadata: the topics that exist (in request order), then the
    others: with auto-creation, invalid names (17) before the ones being created (3)."""
    lm = broker.log_manager
    found = [topic_metadata(broker, lm.topics[n]) for n in names if n in lm.topics]
    missing = [n for n in names if n not in lm.topics]
    if not allow_auto:
        return found + [
            _error_topic(n, errors.UNKNOWN_TOPIC_OR_PARTITION if _valid_name(n) else errors.INVALID_TOPIC_EXCEPTION)
            for n in missing
        ]
    invalid = [_error_topic(n, errors.INVALID_TOPIC_EXCEPTION) for n in missing if not _valid_name(n)]
    created = []
    for n in missing:
        if _valid_name(n):
            # Kafka answers UNKNOWN_TOPIC_OR_PARTITION while creating; the topic is there next time.
            created.append(_error_topic(n, await auto_create_topic(broker, n)))
    return found + invalid + created


async def handle_metadata(broker: Broker, conn: Connection, header: RequestHeader, request: Any) -> dict[str, Any]:
    lm = broker.log_manager
    version = header.api_version
    requested = request.topics
    if version < 12 and requested:
        # Kafka's MetadataRequest refuses these before v12 (UnsupportedVersionException): the
        # connection is closed. (Found by fuzzing: the v10/v11 answer cannot carry a null name.)
        for t in requested:
            if t.name is None or (getattr(t, "topic_id", None) is not None and t.topic_id.int):
                from ..dispatch import ProtocolViolation

                raise ProtocolViolation(f"Metadata v{version} does not support null topic names or topic ids")
    topic_ids = [t.topic_id for t in requested or () if getattr(t, "topic_id", None) is not None and t.topic_id.int]
    if requested is None or (version == 0 and not requested):
        topics = [topic_metadata(broker, info) for info in list(lm.topics.values())]
        described = topics
    elif topic_ids:
        # By topic id (v12+): the unknown ids first, then the topics the known ones name.
        ids = list(dict.fromkeys(topic_ids))
        unknown = [_error_topic(None, errors.UNKNOWN_TOPIC_ID, i) for i in ids if i not in lm.topics_by_id]
        described = [topic_metadata(broker, lm.topics_by_id[i]) for i in ids if i in lm.topics_by_id]
        topics = unknown + described
    else:
        allow_auto = getattr(request, "allow_auto_topic_creation", True) and bool(broker.config.get("auto.create.topics.enable"))
        topics = described = await _named_topics(broker, list(dict.fromkeys(t.name for t in requested)), allow_auto)
    if version >= 8 and getattr(request, "include_topic_authorized_operations", False):
        for t in described:
            t["topic_authorized_operations"] = TOPIC_AUTHORIZED_OPERATIONS
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = CLUSTER_AUTHORIZED_OPERATIONS
    # Kafka answers with the advertised endpoint of the listener this client connected through.
    host, port = broker.endpoint_for(getattr(conn, "listener", None))
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": broker.node_id, "host": host, "port": port, "rack": None}],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_operations,
        "error_code": errors.NONE,
    }
