"""Consumer group APIs (classic protocol): the request/response side of ``server/groups``.

FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8),
OffsetFetch (9), DeleteGroups (42), OffsetDelete (47). Each handler turns the
kio request into plain values, asks the coordinator, and shapes the answer for
the requested version the way Kafka's response classes do (e.g. JoinGroup's
protocol name is "" before v7 and null from v7; LeaveGroup before v3 and
OffsetFetch before v2 fold member/group errors into their single error field).
The checks Kafka's request handler does before the coordinator (unknown topics
and partitions for OffsetCommit/OffsetDelete, SyncGroup v5's mandatory
protocol fields) are done here, in Kafka's order.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import uuid
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import RequestHeader
from kafka_sidecar.protocol.messages import ms
from kafka_sidecar.protocol.topic import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)

from ..groups.coordinator import GroupCoordinator, JoinRequest, RequestContext
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import (
    CLUSTER_AUTHORIZATION_FAILED,
    ERROR_MESSAGES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from ..share.records import partition_for as share_partition_for
from .metadata import AUTHORIZED_OPERATIONS_OMITTED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2

# Errors.message() of the errors FindCoordinator v1-v3 can carry in error_message.
_ERROR_MESSAGES = {
    errors.NONE: "NONE",
    errors.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    errors.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
    GROUP_AUTHORIZATION_FAILED: ERROR_MESSAGES[GROUP_AUTHORIZATION_FAILED],
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ERROR_MESSAGES[TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
}


def _coordinator(services: BrokerServices) -> GroupCoordinator:
    return services.group_coordinator


def _client_host(context: RequestContext) -> str:
    """The peer address as Kafka prints an InetAddress ("/127.0.0.1", "/0:0:0:0:0:0:0:1")."""
    host = context.peer.rpartition(":")[0].strip("[]")
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return "/" + host
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return f"/{addr.ipv4_mapped}"
        return "/" + ":".join(part.lstrip("0") or "0" for part in addr.exploded.split(":"))
    return f"/{addr}"


def _context(context: RequestContext, header: RequestHeader) -> RequestContext:
    return RequestContext(header.client_id or "", _client_host(context), header.api_version)


# ---- FindCoordinator (10) --------------------------------------------------------------


def _share_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """A share coordinator key "groupId:topicId:partition" (Kafka's SharePartitionKey.validate),
    or None if it is not one."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "==")
        partition = int(parts[2])
    except ValueError:
        return None
    if len(raw) != 16 or partition < 0:
        return None
    return parts[0], uuid.UUID(bytes=raw), partition



async def handle_find_coordinator(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    version = header.api_version
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    # DESCRIBE on the group (or transactional id) of each key, before anything else (KafkaApis.getCoordinator).
    az = services.authorizer
    denied: dict[str, int] = {}
    if key_type == GROUP_KEY_TYPE:
        denied = {k: GROUP_AUTHORIZATION_FAILED for k in keys if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, k)}
    elif key_type == TRANSACTION_KEY_TYPE:
        denied = {k: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for k in keys
                  if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, k)}
    elif key_type == SHARE_KEY_TYPE and version >= 6:
        # KIP-932's share coordinator keys "groupId:topicId:partition": for brokers (CLUSTER_ACTION).
        if not az.authorize_cluster(context, header, AclOperation.CLUSTER_ACTION):
            denied = dict.fromkeys(keys, CLUSTER_AUTHORIZATION_FAILED)
        else:
            denied = {k: errors.INVALID_REQUEST for k in keys if _share_key(k) is None}
    error = errors.NONE
    if key_type == SHARE_KEY_TYPE and version >= 6:
        if len(denied) < len(keys):
            try:
                await services.share_coordinator.persister.ensure_topic()
            except Exception:
                log.exception("cannot create the share state topic")
                error = errors.COORDINATOR_NOT_AVAILABLE
    elif key_type == GROUP_KEY_TYPE:
        if len(denied) < len(keys):
            try:
                await _coordinator(services).ensure_offsets_topic()
            except Exception:
                log.exception("cannot create the offsets topic")
                error = errors.COORDINATOR_NOT_AVAILABLE
    elif key_type == TRANSACTION_KEY_TYPE:
        # This broker coordinates every transactional id; __transaction_state is created on first use.
        if len(denied) < len(keys):
            try:
                await services.transaction_coordinator.ensure_topic()
            except Exception:
                log.exception("cannot create the transaction state topic")
                error = errors.COORDINATOR_NOT_AVAILABLE
    else:
        error = errors.INVALID_REQUEST  # share groups (KIP-932) and unknown key types
    no_node = {"node_id": -1, "host": "", "port": -1}
    if error:
        node = no_node
    else:
        host, port = services.endpoint_for(context.listener)  # the client's listener, as Kafka
        node = {"node_id": services.node_id, "host": host, "port": port}
    cluster = services.cluster

    def node_of(key: str) -> dict[str, Any]:
        """The key's coordinator: this broker, or in a cluster the leader of its state partition."""
        if cluster is None or error:
            return node
        if key_type == GROUP_KEY_TYPE:
            topic, partition = OFFSETS_TOPIC, services.group_coordinator.partition_for(key)
        elif key_type == SHARE_KEY_TYPE:
            share_key = _share_key(key)
            assert share_key is not None
            persister = services.share_coordinator.persister
            topic, partition = SHARE_GROUP_STATE_TOPIC, share_partition_for(*share_key, persister.num_partitions)
        else:
            topic, partition = TRANSACTION_STATE_TOPIC, services.transaction_coordinator.partition_for(key)
        return cluster.node_endpoint(cluster.placement.leader(topic, partition), context.listener)

    if version >= 4:
        return {
            "throttle_time": 0,
            "coordinators": [
                {"key": k, **no_node, "error_code": denied[k], "error_message": ""} if k in denied
                else {"key": k, **node_of(k), "error_code": error, "error_message": ""}
                for k in keys
            ],
        }
    node = node_of(keys[0])
    if keys[0] in denied:
        error, node = denied[keys[0]], no_node
    return {"throttle_time": 0, "error_code": error, "error_message": _ERROR_MESSAGES.get(error), **node}


# ---- JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13) ------------------------------


def _may_read_group(services: BrokerServices, context: RequestContext, header: RequestHeader, group_id: str) -> bool:
    """READ on the group: what Kafka asks of every member request and of OffsetCommit."""
    return services.authorizer.authorize(context, header, AclOperation.READ, ResourceType.GROUP, group_id)


async def handle_join_group(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _may_read_group(services, context, header, request.group_id):
        # JoinGroupRequest.getErrorResponse
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "generation_id": -1, "protocol_type": None,
                "protocol_name": "" if header.api_version < 7 else None, "leader": "", "skip_assignment": False,
                "member_id": "", "members": []}
    coordinator = _coordinator(services)
    await coordinator.ensure_offsets_topic()
    req = JoinRequest(
        group_id=request.group_id,
        session_timeout_ms=ms(request.session_timeout),
        # v0 has no rebalance timeout: Kafka's JoinGroupRequest uses the session timeout.
        rebalance_timeout_ms=ms(getattr(request, "rebalance_timeout", request.session_timeout)),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        reason=getattr(request, "reason", None),
    )
    response = dict(await coordinator.join_group(_context(context, header), req))
    # JoinGroupResponse: the protocol name is "" before v7 and null (never "") from v7.
    if header.api_version < 7:
        if response["protocol_name"] is None:
            response["protocol_name"] = ""
    elif response["protocol_name"] == "":
        response["protocol_name"] = None
    response["throttle_time"] = 0
    return response


async def handle_sync_group(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    mandatory_missing = header.api_version >= 5 and (getattr(request, "protocol_type", None) is None or getattr(request, "protocol_name", None) is None)
    # Kafka checks v5's mandatory protocol fields first (the coordinator answers that below), then READ on the group.
    if not mandatory_missing and not _may_read_group(services, context, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "protocol_type": None, "protocol_name": None, "assignment": b""}
    coordinator = _coordinator(services)
    await coordinator.ensure_offsets_topic()
    response = dict(await coordinator.sync_group(
        _context(context, header),
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
    ))
    response["throttle_time"] = 0
    return response


async def handle_heartbeat(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _may_read_group(services, context, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED}
    error = _coordinator(services).heartbeat(
        request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None),
    )
    return {"throttle_time": 0, "error_code": error}


async def handle_leave_group(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not _may_read_group(services, context, header, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "members": []}
    coordinator = _coordinator(services)
    await coordinator.ensure_offsets_topic()
    if header.api_version >= 3:
        members = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in request.members]
    else:
        members = [(request.member_id, None, None)]
    error, responses = coordinator.leave_group(request.group_id, members)
    if header.api_version >= 3:
        return {"throttle_time": 0, "error_code": error, "members": responses}
    if error == errors.NONE:
        error = next((r["error_code"] for r in responses if r["error_code"]), errors.NONE)
    return {"throttle_time": 0, "error_code": error, "members": []}


# ---- OffsetCommit (8), OffsetFetch (9), OffsetDelete (47) ------------------------------------


class _TopicPartitionResults:
    """Kafka's OffsetCommitResponse/OffsetDeleteResponse builders: topics in order of first
    appearance, partitions appended, coordinator results merged into existing topics."""

    def __init__(self) -> None:
        # (name, topic id): the id is set from OffsetCommit v10, where unknown ids have no name.
        self.topics: dict[tuple[str, Any], list[dict[str, Any]]] = {}

    def add(self, topic: str, partition: int, error: int, topic_id: Any = None) -> None:
        self.topics.setdefault((topic, topic_id), []).append({"partition_index": partition, "error_code": error})

    def as_list(self, with_topic_id: bool = True) -> list[dict[str, Any]]:
        """OffsetCommit's topics carry ``topic_id`` (v10); OffsetDelete's have no such field."""
        if not with_topic_id:
            return [{"name": t, "partitions": parts} for (t, _), parts in self.topics.items()]
        return [{"name": t, "topic_id": tid, "partitions": parts} for (t, tid), parts in self.topics.items()]


def _partition_exists(services: BrokerServices, topic: str, partition: int) -> bool | None:
    """None if the topic is unknown, else whether the partition exists."""
    info = services.metadata.topics.get(topic)
    if info is None:
        return None
    return 0 <= partition < info.partitions


def _request_topic_names(services: BrokerServices, topics: Any, by_id: bool) -> list[tuple[str, Any]]:
    """(name, topic id) of each request topic: OffsetCommit/OffsetFetch v10 name topics by id
    (an unknown id gets the name ""), earlier versions by name (topic id None)."""
    if not by_id:
        return [(t.name, None) for t in topics]
    known = services.metadata.topics_by_id
    return [(known[t.topic_id].name if t.topic_id in known else "", t.topic_id) for t in topics]


async def handle_offset_commit(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    coordinator = _coordinator(services)
    builder = _TopicPartitionResults()
    by_id = header.api_version >= 10
    named = _request_topic_names(services, request.topics, by_id)
    if not _may_read_group(services, context, header, request.group_id):
        # OffsetCommitRequest.getErrorResponse: the error on every partition.
        for t, (name, topic_id) in zip(request.topics, named, strict=True):
            for p in t.partitions:
                builder.add(name, p.partition_index, GROUP_AUTHORIZATION_FAILED, topic_id)
        return {"throttle_time": 0, "topics": builder.as_list()}
    az = services.authorizer
    readable = az.filter(context, header, AclOperation.READ, ResourceType.TOPIC, [n for n, _ in named if n]) if az.enabled else None
    valid: list[tuple[str, list[tuple[int, int, int, str | None]]]] = []
    ids: dict[str, Any] = {}  # name -> the topic id the request named it by (v10)
    for t, (name, topic_id) in zip(request.topics, named, strict=True):
        if by_id and not name:
            # KafkaApis: an unknown topic id fails its partitions before any other check.
            for p in t.partitions:
                builder.add(name, p.partition_index, errors.UNKNOWN_TOPIC_ID, topic_id)
            continue
        ids[name] = topic_id
        if readable is not None and name not in readable:
            for p in t.partitions:
                builder.add(name, p.partition_index, TOPIC_AUTHORIZATION_FAILED, topic_id)
            continue
        if services.metadata.topics.get(name) is None:
            for p in t.partitions:
                builder.add(name, p.partition_index, errors.UNKNOWN_TOPIC_OR_PARTITION, topic_id)
            continue
        good = []
        for p in t.partitions:
            if _partition_exists(services, name, p.partition_index):
                good.append((p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
            else:
                builder.add(name, p.partition_index, errors.UNKNOWN_TOPIC_OR_PARTITION, topic_id)
        if good:
            valid.append((name, good))
    if valid:
        await coordinator.ensure_offsets_topic()
        retention = getattr(request, "retention_time", None)
        retention_ms = -1 if retention is None else ms(retention)
        error, results = coordinator.commit_offsets(
            request.group_id, getattr(request, "generation_id_or_member_epoch", -1), request.member_id,
            getattr(request, "group_instance_id", None), retention_ms, valid, header.api_version,
        )
        if error:
            results = [(t, [(p[0], error) for p in parts]) for t, parts in valid]
        for topic, parts in results:
            for partition, code in parts:
                builder.add(topic, partition, code, ids.get(topic))
    return {"throttle_time": 0, "topics": builder.as_list()}


def _offset_fetch_errors(topics: list[tuple[str, Any, list[int]]], code: int) -> list[dict[str, Any]]:
    return [{"name": t, "topic_id": tid, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": code}
        for p in parts]} for t, tid, parts in topics]


def _fetch_group(services: BrokerServices, context: RequestContext, header: RequestHeader, group_id: str, topics: Any,
                 require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1) -> dict[str, Any]:
    """One group of an OffsetFetch, as KafkaApis answers it: DESCRIBE on the group, and on each
    topic (the others are left out of an all-topics answer, or answered TOPIC_AUTHORIZATION_FAILED
    after the rest when named). From v10 topics are named by id: an unknown id is answered
    UNKNOWN_TOPIC_ID after the group's offsets, and each answered topic carries its id."""
    az = services.authorizer
    if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"group_id": group_id, "error_code": GROUP_AUTHORIZATION_FAILED, "topics": []}
    by_id = header.api_version >= 10
    unknown_ids: list[tuple[str, Any, list[int]]] = []
    wanted = None
    if topics is not None:
        named = _request_topic_names(services, topics, by_id)
        unknown_ids = [("", tid, list(t.partition_indexes)) for t, (n, tid) in zip(topics, named, strict=True) if by_id and not n]
        wanted = [(n, list(t.partition_indexes)) for t, (n, _) in zip(topics, named, strict=True) if n or not by_id]
    denied: list[tuple[str, list[int]]] = []
    if az.enabled and wanted is not None:
        describable = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [t for t, _ in wanted])
        denied = [(t, parts) for t, parts in wanted if t not in describable]
        wanted = [(t, parts) for t, parts in wanted if t in describable]
    error, result = _coordinator(services).fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
    if az.enabled and wanted is None and not error:
        describable = az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, [t for t, _ in result])
        result = [(t, rows) for t, rows in result if t in describable]
    def topic_id(name: str) -> Any:
        info = services.metadata.topics.get(name) if by_id else None
        return info.topic_id if info is not None else None

    out = [{"name": t, "topic_id": topic_id(t), "partitions": rows} for t, rows in result]
    if not error:
        out += _offset_fetch_errors(unknown_ids, errors.UNKNOWN_TOPIC_ID)
        out += _offset_fetch_errors([(t, topic_id(t), parts) for t, parts in denied], TOPIC_AUTHORIZATION_FAILED)
    return {"group_id": group_id, "error_code": error, "topics": out}


async def handle_offset_fetch(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    version = header.api_version
    if version >= 8:
        # v9+ name the consumer-protocol member (member id and epoch), checked by consumer groups
        return {"throttle_time": 0, "groups": [_fetch_group(services, context, header, g.group_id, g.topics, request.require_stable,
                                                            getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
                                                for g in request.groups]}
    group = _fetch_group(services, context, header, request.group_id, request.topics, bool(getattr(request, "require_stable", False)))
    error = group["error_code"]
    if version < 2 and error:
        # No top-level error before v2: Kafka puts the group error on every partition.
        for t in group["topics"]:
            t["partitions"] = [
                {"partition_index": p["partition_index"], "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": error}
                for p in t["partitions"]
            ]
    # Topic ids are v10's, inside groups: the top-level topics of v0-7 name topics only.
    topics = [{"name": t["name"], "partitions": t["partitions"]} for t in group["topics"]]
    return {"throttle_time": 0, "error_code": error, "topics": topics}


async def handle_offset_delete(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    coordinator = _coordinator(services)
    az = services.authorizer
    if not az.authorize(context, header, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "topics": []}
    readable = az.filter(context, header, AclOperation.READ, ResourceType.TOPIC, [t.name for t in request.topics]) if az.enabled else None
    builder = _TopicPartitionResults()
    valid: list[tuple[str, list[int]]] = []
    for t in request.topics:
        if readable is not None and t.name not in readable:
            for p in t.partitions:
                builder.add(t.name, p.partition_index, TOPIC_AUTHORIZATION_FAILED)
            continue
        if services.metadata.topics.get(t.name) is None:
            for p in t.partitions:
                builder.add(t.name, p.partition_index, errors.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        good = []
        for p in t.partitions:
            if _partition_exists(services, t.name, p.partition_index):
                good.append(p.partition_index)
            else:
                builder.add(t.name, p.partition_index, errors.UNKNOWN_TOPIC_OR_PARTITION)
        if good:
            valid.append((t.name, good))
    await coordinator.ensure_offsets_topic()
    error, results = coordinator.delete_offsets(request.group_id, valid)
    if error:
        # A group-level error replaces the partition-level answers (OffsetDeleteResponse.Builder.merge).
        return {"throttle_time": 0, "error_code": error, "topics": []}
    for topic, parts in results:
        for partition, code in parts:
            builder.add(topic, partition, code)
    return {"throttle_time": 0, "error_code": errors.NONE, "topics": builder.as_list(with_topic_id=False)}


# ---- ListGroups (16), DescribeGroups (15), DeleteGroups (42) ------------------------------------


async def handle_list_groups(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    error, groups = _coordinator(services).list_groups(getattr(request, "states_filter", ()), getattr(request, "types_filter", ()))
    if az.enabled and not az.authorize_cluster(context, header, AclOperation.DESCRIBE, log_denied=False):
        # Without DESCRIBE on the cluster, only the groups the client may describe.
        groups = [g for g in groups if az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"], log_denied=False)]
    return {"throttle_time": 0, "error_code": error, "groups": groups}


async def handle_describe_groups(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    wanted = list(request.groups)
    # DESCRIBE on each group: the others are answered first, GROUP_AUTHORIZATION_FAILED (DescribeGroupsResponse.groupError).
    denied = [g for g in wanted if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    refused = [{"group_id": g, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_state": "", "protocol_type": "",
                "protocol_data": "", "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED} for g in denied]
    include_ops = bool(getattr(request, "include_authorized_operations", False))
    groups = _coordinator(services).describe_groups([g for g in wanted if g not in denied], header.api_version, include_ops)
    if az.enabled and include_ops and header.api_version >= 3:
        for g in groups:
            if g["error_code"] == errors.NONE:
                g["authorized_operations"] = az.authorized_operations(context, ResourceType.GROUP, g["group_id"])
    return {"throttle_time": 0, "groups": refused + groups}


async def handle_delete_groups(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    coordinator = _coordinator(services)
    names = list(dict.fromkeys(request.groups_names))
    az = services.authorizer
    deletable = az.filter(context, header, AclOperation.DELETE, ResourceType.GROUP, names) if az.enabled else set(names)
    allowed = [g for g in names if g in deletable]
    results = []
    if allowed or not az.enabled:
        await coordinator.ensure_offsets_topic()
        results = coordinator.delete_groups(list(request.groups_names) if not az.enabled else allowed)
    results += [{"group_id": g, "error_code": GROUP_AUTHORIZATION_FAILED} for g in names if g not in deletable]
    return {"throttle_time": 0, "results": results}
