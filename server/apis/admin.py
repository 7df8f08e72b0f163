"""The single-node admin APIs Kafka's tools call, answered as a one-broker KRaft Kafka answers them.

- ElectLeaders (43): every partition is led by its only (preferred) replica, so each named
  partition is ELECTION_NOT_NEEDED, and a null partition list (every partition) lists each topic
  with no results (Kafka leaves ELECTION_NOT_NEEDED out there).
- ListPartitionReassignments (46): nothing is ever being reassigned.
- AlterPartitionReassignments (45): the replica list is checked as Kafka's ReplicationControlManager
  checks a manual assignment (empty, a broker twice, a broker not registered); a valid one can only
  name this broker, which already holds the partition, so it completes at once (NONE); cancelling
  (null replicas) is NO_REASSIGNMENT_IN_PROGRESS.
- DescribeQuorum (55): this node is the only voter and the leader of ``__cluster_metadata``
  (a request naming anything but that one partition is UNKNOWN_TOPIC_OR_PARTITION throughout). There
  is no metadata log here, so the high watermark and log end offset are 0 and the timestamps now.
- ListConfigResources (74): v1 lists topics, this broker and its loggers, and the client-metrics
  subscriptions (server/telemetry/); v0 (ListClientMetricsResources) the subscriptions only.

Authorization as KafkaApis: ALTER on the cluster for elections and reassignments, DESCRIBE on the
cluster for listing reassignments and the quorum, DESCRIBE_CONFIGS on the cluster for ListConfigResources.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors

from ..security.acls import AclOperation
from ..security.authorizer import CLUSTER_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
INVALID_REPLICA_ASSIGNMENT = 39
PREFERRED, UNCLEAN = 0, 1
METADATA_TOPIC = "__cluster_metadata"
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def _partitions(services: BrokerServices, topic: str) -> int | None:
    info = services.metadata.topics.get(topic)
    return None if info is None else info.partitions


# ---- ElectLeaders (43) ------------------------------------------------------------------------


def _election_result(services: BrokerServices, topic: str, partition: int, election_type: int) -> tuple[int, str | None]:
    count = _partitions(services, topic)
    if count is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < count:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    if election_type not in (PREFERRED, UNCLEAN):
        return errors.INVALID_REQUEST, f"Unknown election type {election_type}"
    return ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."


async def handle_elect_leaders(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    election_type = getattr(request, "election_type", PREFERRED)  # v0: preferred only
    requested = request.topic_partitions
    if not services.authorizer.authorize_cluster(context, header, AclOperation.ALTER):
        return {"throttle_time": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "replica_election_results": [
            {"topic": t.topic, "partition_result": [
                {"partition_id": p, "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": None} for p in t.partitions]}
            for t in requested or ()]}
    if election_type not in (PREFERRED, UNCLEAN):
        # KafkaApis.handleElectLeaders: an unknown election type fails the request and each partition.
        message = f"Unknown election type {election_type}"
        return {"throttle_time": 0, "error_code": errors.INVALID_REQUEST, "replica_election_results": [
            {"topic": t.topic, "partition_result": [
                {"partition_id": p, "error_code": errors.INVALID_REQUEST, "error_message": message} for p in t.partitions]}
            for t in requested or ()]}
    if requested is None:
        # Every partition: nothing needs an election, and Kafka leaves those results out.
        return {"throttle_time": 0, "error_code": errors.NONE, "replica_election_results": [
            {"topic": name, "partition_result": []} for name in services.metadata.topics]}
    results: dict[str, list[dict[str, Any]]] = {}
    for t in requested:
        rows = results.setdefault(t.topic, [])
        for p in t.partitions:
            code, message = _election_result(services, t.topic, p, election_type)
            rows.append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "error_code": errors.NONE,
            "replica_election_results": [{"topic": t, "partition_result": rows} for t, rows in results.items()]}


# ---- Partition reassignments (45, 46) -----------------------------------------------------------


def _reassignment_result(services: BrokerServices, topic: str, partition: int, replicas: Any) -> tuple[int, str | None]:
    count = _partitions(services, topic)
    if count is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= partition < count:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return NO_REASSIGNMENT_IN_PROGRESS, None
    if not replicas:
        return INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for r in replicas:  # ReplicationControlManager.validateManualPartitionAssignment, replica by replica
        if r in seen:
            return INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker {r} more than once."
        seen.add(r)
        if r != services.node_id:
            return INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {r}, but no such broker is registered."
    return errors.NONE, None  # [this broker]: the current assignment, done at once


async def handle_alter_partition_reassignments(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)
    if not services.authorizer.authorize_cluster(context, header, AclOperation.ALTER):
        return {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change,
                "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    responses = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, message = _reassignment_result(services, t.name, p.partition_index, p.replicas)
            parts.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
        responses.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change, "error_code": errors.NONE,
            "error_message": None, "responses": responses}


async def handle_list_partition_reassignments(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not services.authorizer.authorize_cluster(context, header, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "topics": []}
    return {"throttle_time": 0, "error_code": errors.NONE, "error_message": None, "topics": []}


# ---- DescribeQuorum (55) -------------------------------------------------------------------------


def _quorum_partition(services: BrokerServices, partition: int, now: int, valid: bool) -> dict[str, Any]:
    if not valid:
        return {"partition_index": partition, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": "This server does not host this topic-partition.", "leader_id": 0, "leader_epoch": 0,
                "high_watermark": 0, "current_voters": [], "observers": []}
    voter = {"replica_id": services.node_id, "replica_directory_id": None, "log_end_offset": 0,
             "last_fetch_timestamp": now, "last_caught_up_timestamp": now}
    return {"partition_index": 0, "error_code": errors.NONE, "error_message": "", "leader_id": services.node_id,
            "leader_epoch": 1, "high_watermark": 0, "current_voters": [voter], "observers": []}


async def handle_describe_quorum(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not services.authorizer.authorize_cluster(context, header, AclOperation.DESCRIBE):
        return {"error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "topics": [], "nodes": []}
    now = int(time.time() * 1000)
    # KafkaRaftClient: the request must name exactly __cluster_metadata-0, else every partition it
    # names is UNKNOWN_TOPIC_OR_PARTITION.
    answered = (len(request.topics) == 1 and request.topics[0].topic_name == METADATA_TOPIC
                and [p.partition_index for p in request.topics[0].partitions] == [0])
    topics = [{"topic_name": t.topic_name, "partitions": [_quorum_partition(services, p.partition_index, now, answered)
                                                          for p in t.partitions]} for t in request.topics]
    listener = context.listener
    host, port = services.endpoint_for(listener)
    nodes = [{"node_id": services.node_id, "listeners": [
        {"name": listener or services.listeners[0].name, "host": host, "port": port}]}] if answered else []
    return {"error_code": errors.NONE, "error_message": "", "topics": topics, "nodes": nodes}


# ---- ListConfigResources (74) ------------------------------------------------------------------


async def handle_list_config_resources(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not services.authorizer.authorize_cluster(context, header, AclOperation.DESCRIBE_CONFIGS):
        return {"throttle_time": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "config_resources": []}
    client_metrics = [{"resource_name": name, "resource_type": CLIENT_METRICS} for name in services.client_metrics_subscriptions.names()]
    if header.api_version == 0:  # ListClientMetricsResources: client metrics only
        return {"throttle_time": 0, "error_code": errors.NONE, "config_resources": client_metrics}
    wanted = set(request.resource_types) or {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}
    if not wanted <= {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}:
        return {"throttle_time": 0, "error_code": errors.UNSUPPORTED_VERSION, "config_resources": []}
    node = str(services.node_id)
    out = []
    if GROUP in wanted:  # groups with dynamic configs, first (server/group_configs.py)
        out += [{"resource_name": name, "resource_type": GROUP} for name in services.group_configs.groups_with_configs()]
    if BROKER_LOGGER in wanted:
        out.append({"resource_name": node, "resource_type": BROKER_LOGGER})
    if BROKER in wanted:
        out.append({"resource_name": node, "resource_type": BROKER})
    if TOPIC in wanted:
        out += [{"resource_name": name, "resource_type": TOPIC} for name in services.metadata.topics]
    if CLIENT_METRICS in wanted:
        out += client_metrics
    return {"throttle_time": 0, "error_code": errors.NONE, "config_resources": out}
