"""Streams group APIs of KIP-1071: StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89).

The request side of ``server/groups/streams_manager.py``. As Kafka's KafkaApis, a heartbeat needs
READ on the group and DESCRIBE on the topology's source topics, and the internal topics the
coordinator found missing are created here after it answered (Kafka's
AutoTopicCreationManager.createStreamsInternalTopics): the member sees MISSING_INTERNAL_TOPICS
until a later heartbeat finds them. Served only while ``streams.version`` is at least 1.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.messages import ms
from kafka_sidecar.storage.log_config import validate_topic_configs

from ..groups.streams_group import StreamsTopology, Subtopology, TasksTuple, TopicInfo, tasks_of
from ..groups.streams_manager import StreamsHeartbeat, _error
from ..groups.streams_topics import InternalTopic
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED
from .consumer_groups import NOT_COORDINATOR_MESSAGE
from .groups import _context, not_coordinator

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)

STREAMS_VERSION = "streams.version"


def streams_enabled(services: BrokerServices) -> bool:
    return services.features.finalized_level(STREAMS_VERSION) >= 1


def _topic_info(t: Any) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor, tuple((kv.key, kv.value) for kv in t.topic_configs))


def topology_of(request_topology: Any) -> StreamsTopology | None:
    if request_topology is None:
        return None
    subs = [Subtopology(
        s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
        tuple(_topic_info(t) for t in s.state_changelog_topics), tuple(s.repartition_sink_topics),
        tuple(_topic_info(t) for t in s.repartition_source_topics),
        tuple((tuple(g.source_topics), tuple(g.source_topic_regex), tuple(g.repartition_source_topics)) for g in s.copartition_groups),
    ) for s in request_topology.subtopologies]
    return StreamsTopology(request_topology.epoch, tuple(sorted(subs, key=lambda s: s.subtopology_id)))


def _tasks(items: Any) -> dict[str, frozenset[int]]:
    return tasks_of((t.subtopology_id, t.partitions) for t in items or ())


async def handle_streams_group_heartbeat(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not streams_enabled(services):
        out = _error(errors.UNSUPPORTED_VERSION, "The streams group protocol is not enabled.")
        out["throttle_time"] = 0
        return out
    az = services.authorizer
    if not az.authorize(context, header, AclOperation.READ, ResourceType.GROUP, request.group_id):
        out = _error(GROUP_AUTHORIZATION_FAILED, None)
        out["throttle_time"] = 0
        return out
    topology = topology_of(request.topology)
    if topology is not None:
        sources = sorted({t for s in topology.subtopologies for t in s.source_topics})
        if sources and len(az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, sources)) < len(sources):
            out = _error(TOPIC_AUTHORIZATION_FAILED, None)
            out["throttle_time"] = 0
            return out
    if not_coordinator(services, request.group_id):
        out = _error(errors.NOT_COORDINATOR, NOT_COORDINATOR_MESSAGE)
        out["throttle_time"] = 0
        return out
    coordinator = services.group_coordinator
    await coordinator.ensure_offsets_topic()
    owned = None
    if request.active_tasks is not None or request.standby_tasks is not None or request.warmup_tasks is not None:
        owned = TasksTuple(_tasks(request.active_tasks), _tasks(request.standby_tasks), _tasks(request.warmup_tasks))
    endpoint = request.user_endpoint
    req = StreamsHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        endpoint_information_epoch=request.endpoint_information_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=ms(request.rebalance_timeout), topology=topology, owned=owned,
        process_id=request.process_id, user_endpoint=(endpoint.host, int(endpoint.port)) if endpoint is not None else None,
        client_tags=tuple((kv.key, kv.value) for kv in request.client_tags) if request.client_tags is not None else None,
        shutdown_application=request.shutdown_application,
    )
    response, to_create = coordinator.streams_group_heartbeat(_context(context, header), req)
    if to_create:
        await _create_internal_topics(services, to_create)
    response["throttle_time"] = 0
    return response


async def _create_internal_topics(services: BrokerServices, topics: list[InternalTopic]) -> None:
    lm = services.log_manager
    for t in topics:
        if t.name in services.metadata.topics:
            continue
        try:
            configs = validate_topic_configs(t.configs)
            await services.run_blocking(lm.create_topic, t.name, t.partitions, configs)
            log.info("created internal topic %s (%d partitions) of a streams group", t.name, t.partitions)
        except FileExistsError:
            pass
        except Exception as e:  # Kafka logs the failure; the member keeps seeing the status
            log.warning("could not create the streams internal topic %s: %s", t.name, e)


async def handle_streams_group_describe(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    wanted = list(request.group_ids)
    denied = {g for g in wanted if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, g)}
    asked = [g for g in wanted if g not in denied]
    elsewhere = {g for g in asked if not_coordinator(services, g)}
    groups = services.group_coordinator.streams_group_describe([g for g in asked if g not in elsewhere])
    if elsewhere:  # Kafka answers by coordinator partition, each with its error
        groups += [{"group_id": gid, "error_code": errors.NOT_COORDINATOR, "error_message": None, "group_state": "",
                    "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
                    "authorized_operations": -(2**31)} for gid in asked if gid in elsewhere]
        order = {g: i for i, g in enumerate(services.group_coordinator.store.by_coordinator_partition(asked))}
        groups.sort(key=lambda g: order.get(g["group_id"], len(order)))
    for g in groups:
        if request.include_authorized_operations and g["error_code"] == 0:
            g["authorized_operations"] = az.authorized_operations(context, ResourceType.GROUP, g["group_id"])
    groups += [{"group_id": gid, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_state": "",
                "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
                "authorized_operations": -(2**31)} for gid in wanted if gid in denied]
    return {"throttle_time": 0, "groups": groups}
