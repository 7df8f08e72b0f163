"""Metadata (API 3): one broker (node 1, the listen address) leading every partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.topic import INTERNAL_TOPICS, InvalidTopicError, validate_topic_name
from kafka_sidecar.storage.topic_registry import TopicInfo

from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import TOPIC_AUTHORIZATION_FAILED
from .topics import auto_create_topic

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

# Kafka's "authorized operations not requested" marker.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# Authorized-operations fields come from broker.authorizer.authorized_operations: without an
# authorizer every operation a resource supports (AclEntry.supportedOperations), as Kafka reports
# them (TOPIC 3576, CLUSTER 8096), else the ones its ACLs allow.


def topic_metadata(services: BrokerServices, info: TopicInfo) -> dict[str, Any]:
    node = services.node_id
    # A cluster node (serve --processes N) names each partition's leader by the static placement.
    leader = services.cluster.placement.leader if services.cluster is not None else None
    return {
        "error_code": errors.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.name in INTERNAL_TOPICS,
        "partitions": [
            {
                "error_code": errors.NONE,
                "partition_index": p,
                "leader_id": (n := node if leader is None else leader(info.name, p)),
                "leader_epoch": 0,
                "replica_nodes": [n],
                "isr_nodes": [n],
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


async def _named_topics(services: BrokerServices, names: list[str], allow_auto: bool) -> list[dict[str, Any]]:
    """Kafka's KafkaApis.getTopicMetadata: the topics that exist (in request order), then the
    others: with auto-creation, invalid names (17) before the ones being created (3)."""
    found = [topic_metadata(services, services.metadata.topics[n]) for n in names if n in services.metadata.topics]
    missing = [n for n in names if n not in services.metadata.topics]
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
            created.append(_error_topic(n, await auto_create_topic(services, n)))
    return found + invalid + created


def _unauthorized_topic(name: str | None, topic_id: Any = None, is_internal: bool = False) -> dict[str, Any]:
    return {
        "error_code": TOPIC_AUTHORIZATION_FAILED,
        "name": name,
        "topic_id": topic_id,
        "is_internal": is_internal,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


async def handle_metadata(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    """KafkaApis.handleTopicMetadataRequest: topics the client may not DESCRIBE are left out of an
    all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (without their id, or
    without their name when asked by id); auto-creation needs CREATE on the cluster or the topic."""
    header = context.header
    az = services.authorizer
    version = header.api_version
    requested = request.topics
    if version < 12 and requested and any(
            t.name is None or (getattr(t, "topic_id", None) is not None and t.topic_id.int) for t in requested):
        # Kafka's handler throws InvalidRequestException before v12 and answers getErrorResponse:
        # every requested topic INVALID_REQUEST, a null name as "" (measured on Kafka 4.3.1).
        return {"throttle_time": 0, "brokers": [], "cluster_id": None, "controller_id": -1, "topics": [
            {"error_code": errors.INVALID_REQUEST, "name": t.name or "", "topic_id": getattr(t, "topic_id", None),
             "is_internal": False, "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
            for t in requested], "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    topic_ids = [t.topic_id for t in requested or () if getattr(t, "topic_id", None) is not None and t.topic_id.int]
    all_topics = requested is None or (version == 0 and not requested)
    unauthorized: list[dict[str, Any]] = []
    if all_topics:
        infos = list(services.metadata.topics.values())
        if az.enabled:
            # Topics the client may not describe are left out (and their denial not logged).
            allowed = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [i.name for i in infos], log_denied=False)
            infos = [i for i in infos if i.name in allowed]
        topics = [topic_metadata(services, info) for info in infos]
        described = topics
    elif topic_ids:
        # By topic id (v12+): the unknown ids first, then the topics the known ones name.
        ids = list(dict.fromkeys(topic_ids))
        unknown = [_error_topic(None, errors.UNKNOWN_TOPIC_ID, i) for i in ids if i not in services.metadata.topics_by_id]
        known = [services.metadata.topics_by_id[i] for i in ids if i in services.metadata.topics_by_id]
        if az.enabled:
            allowed = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [i.name for i in known])
            # Topic ids are not secret: the id is answered, the name is not.
            unauthorized = [_unauthorized_topic(None, i.topic_id) for i in known if i.name not in allowed]
            known = [i for i in known if i.name in allowed]
        described = [topic_metadata(services, info) for info in known]
        topics = unknown + described
    else:
        allow_auto = getattr(request, "allow_auto_topic_creation", True) and bool(services.config.get("auto.create.topics.enable"))
        names = list(dict.fromkeys(t.name for t in requested))
        if az.enabled:
            allowed = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
            denied_describe = [n for n in names if n not in allowed]
            names = [n for n in names if n in allowed]
            denied_create: list[str] = []
            missing = [n for n in names if n not in services.metadata.topics]
            if allow_auto and missing and not az.authorize_cluster(context, header, AclOperation.CREATE, log_denied=False):
                creatable = az.filter(context, header, AclOperation.CREATE, ResourceType.TOPIC, missing)
                denied_create = [n for n in missing if n not in creatable]
                names = [n for n in names if n not in denied_create]
            # The existence of topics the client may not describe is not disclosed (no id either).
            unauthorized = [_unauthorized_topic(n, None, n in INTERNAL_TOPICS) for n in denied_create]
            unauthorized += [_unauthorized_topic(n) for n in denied_describe]
        topics = described = await _named_topics(services, names, allow_auto)
    if version >= 8 and getattr(request, "include_topic_authorized_operations", False):
        for t in described:
            t["topic_authorized_operations"] = az.authorized_operations(context, ResourceType.TOPIC, t["name"])
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and getattr(request, "include_cluster_authorized_operations", False):
        if az.authorize_cluster(context, header, AclOperation.DESCRIBE):
            cluster_operations = az.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME)
        else:
            cluster_operations = 0
    # Kafka answers with the advertised endpoint of the listener this client connected through.
    host, port = services.endpoint_for(context.listener)
    if services.cluster is not None:  # every node of the cluster, as the layout advertises them
        brokers = services.cluster.brokers(context.listener)
        controller = services.cluster.controller_id
    else:
        brokers = [{"node_id": services.node_id, "host": host, "port": port, "rack": None}]
        controller = services.node_id
    return {
        "throttle_time": 0,
        "brokers": brokers,
        "cluster_id": services.cluster_id,
        "controller_id": controller,
        "topics": topics + unauthorized,
        "cluster_authorized_operations": cluster_operations,
        "error_code": errors.NONE,
    }
