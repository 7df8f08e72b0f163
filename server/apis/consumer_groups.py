"""Consumer group APIs of the KIP-848 protocol: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

The request side of ``server/groups/consumer_manager.py``: each handler turns the kio request into
plain values, checks the ACLs Kafka's request handler checks (READ on the group and DESCRIBE on
each subscribed topic for a heartbeat, DESCRIBE on each group described), and asks the coordinator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.messages import ms

from ..groups.consumer_group import owned_partitions
from ..groups.consumer_manager import HeartbeatRequest
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED
from .groups import _context, not_coordinator

# Errors.NOT_COORDINATOR's default message: Kafka's coordinator runtime answers with it.
NOT_COORDINATOR_MESSAGE = "This is not the correct coordinator."

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def handle_consumer_group_heartbeat(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    if not services.authorizer.authorize(context, header, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    az = services.authorizer
    names = request.subscribed_topic_names
    if names and len(az.filter(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        # Kafka's KafkaApis: a member may only subscribe to topics it may DESCRIBE (no message)
        return {"throttle_time": 0, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": None, "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    if not_coordinator(services, request.group_id):
        return {"throttle_time": 0, "error_code": errors.NOT_COORDINATOR, "error_message": NOT_COORDINATOR_MESSAGE, "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    coordinator = services.group_coordinator
    await coordinator.ensure_offsets_topic()
    owned = request.topic_partitions
    req = HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=ms(request.rebalance_timeout),
        subscribed_topic_names=tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None,
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1 on (KIP-848 regexes)
        server_assignor=request.server_assignor,
        owned=owned_partitions(None if owned is None else [(t.topic_id, t.partitions) for t in owned]),
        # regexes resolve to the topics this member may DESCRIBE (Kafka filters them quietly)
        topic_authorized=lambda topic: az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_denied=False),
    )
    response = dict(coordinator.consumer_group_heartbeat(_context(context, header), req))
    response["throttle_time"] = 0
    return response


async def handle_consumer_group_describe(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    az = services.authorizer
    wanted = list(request.group_ids)
    denied = {g for g in wanted if not az.authorize(context, header, AclOperation.DESCRIBE, ResourceType.GROUP, g)}
    # the coordinator answers in its own order (by __consumer_offsets partition), as Kafka's
    asked = [g for g in wanted if g not in denied]
    elsewhere = {g for g in asked if not_coordinator(services, g)}
    groups = services.group_coordinator.consumer_group_describe([g for g in asked if g not in elsewhere])
    if elsewhere:  # Kafka answers by coordinator partition, each with its error (getErrorDescribedGroupList)
        groups += [{"group_id": gid, "error_code": errors.NOT_COORDINATOR, "error_message": None, "group_state": "",
                    "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                    "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED} for gid in asked if gid in elsewhere]
        order = {g: i for i, g in enumerate(services.group_coordinator.store.by_coordinator_partition(asked))}
        groups.sort(key=lambda g: order.get(g["group_id"], len(order)))
    for g in groups:
        if request.include_authorized_operations and g["error_code"] == 0:
            g["authorized_operations"] = az.authorized_operations(context, ResourceType.GROUP, g["group_id"])
    groups += [{"group_id": gid, "error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_state": "",
                "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED} for gid in wanted if gid in denied]
    return {"throttle_time": 0, "groups": groups}
