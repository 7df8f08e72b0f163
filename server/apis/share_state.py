"""The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState (83),
ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87), as Kafka's KafkaApis hands them to its share coordinator.

Sent by the other nodes of a ``serve --processes N`` cluster (server/cluster/share_state.py) for
the share-partitions whose ``__share_group_state`` partition this node leads; answered by
server/share/state_shard.py. Any client with CLUSTER_ACTION on the cluster may send them, as to
Kafka (else CLUSTER_AUTHORIZATION_FAILED per partition); a partition this node's state topic does
not hold is NOT_COORDINATOR. A write's answer waits for its flush (coordinator_write).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..security.acls import AclOperation
from ..security.authorizer import CLUSTER_AUTHORIZATION_FAILED
from ..share.records import StateBatch
from ..share.state_shard import ShareStateShard

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices


def _shard(services: BrokerServices) -> ShareStateShard:
    return ShareStateShard(services.share_coordinator.persister)


async def _each(services: BrokerServices, context: RequestContext, request: Any,
                answer: Callable[[tuple[Any, Any, int], Any], dict[str, Any]], error_row: Callable[[int, int], dict[str, Any]]) -> dict[str, Any]:
    """``answer((group, topic id, partition), partition data)`` for every partition of the
    request, or ``error_row(partition, error)`` for all when the sender may not."""
    allowed = services.authorizer.authorize_cluster(context, context.header, AclOperation.CLUSTER_ACTION)
    if allowed:
        await services.share_coordinator.persister.ensure_topic()
    results = []
    for t in request.topics:
        rows = []
        for p in t.partitions:
            if not allowed:
                rows.append(error_row(p.partition, CLUSTER_AUTHORIZATION_FAILED))
            else:
                rows.append(answer((request.group_id, t.topic_id, p.partition), p))
        results.append({"topic_id": t.topic_id, "partitions": rows})
    return {"results": results}


def _status(partition: int, answer: tuple[int, str | None]) -> dict[str, Any]:
    return {"partition": partition, "error_code": answer[0], "error_message": answer[1]}


def _denied(partition: int, error: int) -> dict[str, Any]:
    return _status(partition, (error, None))


def _read_error(partition: int, answer: tuple[int, str | None]) -> dict[str, Any]:
    return {**_status(partition, answer), "state_epoch": 0, "start_offset": 0, "state_batches": []}


def _summary_row(partition: int, answer: tuple[int, str | None], start: int) -> dict[str, Any]:
    return {**_status(partition, answer), "state_epoch": 0, "leader_epoch": 0, "start_offset": start,
            "delivery_complete_count": -1}


async def handle_initialize_share_group_state(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    shard = _shard(services)
    return await _each(services, context, request,
                       lambda key, p: _status(p.partition, shard.initialize(key, p.state_epoch, p.start_offset)), _denied)


async def handle_write_share_group_state(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    shard = _shard(services)

    def write(key: Any, p: Any) -> dict[str, Any]:
        batches = tuple(StateBatch(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count) for b in p.state_batches)
        complete = getattr(p, "delivery_complete_count", -1)  # v1 (KIP-1226)
        return _status(p.partition, shard.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches, complete))

    return await _each(services, context, request, write, _denied)


async def handle_delete_share_group_state(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    shard = _shard(services)
    return await _each(services, context, request, lambda key, p: _status(p.partition, shard.delete(key)), _denied)


def _batch(b: StateBatch) -> dict[str, Any]:
    return {"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
            "delivery_count": b.delivery_count}


async def handle_read_share_group_state(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    shard = _shard(services)

    def read(key: Any, p: Any) -> dict[str, Any]:
        answer, w = shard.read(key, p.leader_epoch)
        if w is None:
            return _read_error(p.partition, answer)
        return {**_status(p.partition, answer), "state_epoch": w.state_epoch, "start_offset": w.state[0],
                "state_batches": [_batch(b) for b in w.state[1]]}

    return await _each(services, context, request, read, lambda partition, error: _read_error(partition, (error, None)))


async def handle_read_share_group_state_summary(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    shard = _shard(services)

    def summary(key: Any, p: Any) -> dict[str, Any]:
        answer, w = shard.summary(key)
        if answer[0]:
            return _summary_row(p.partition, answer, 0)
        if w is None:  # never initialized: no state, as Kafka answers it
            return _summary_row(p.partition, answer, -1)
        return {**_status(p.partition, answer), "state_epoch": w.state_epoch, "leader_epoch": w.leader_epoch,
                "start_offset": w.state[0], "delivery_complete_count": w.delivery_complete_count}

    return await _each(services, context, request, summary,
                       lambda partition, error: _summary_row(partition, (error, None), 0))
