"""DeleteRecords (API 21): raise partitions' log start offsets.

The new start is checkpointed before the answer, so a crash right after cannot
bring the deleted records back; the segments wholly below it are removed by
the next retention check, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.messages import ms
from kafka_sidecar.storage.log import OffsetOutOfRangeError

from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import TOPIC_AUTHORIZATION_FAILED

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)


def _delete_partition(services: BrokerServices, topic: str, partition: int, offset: int) -> tuple[int, int]:
    """(error code, low watermark) for one partition; runs in the storage thread."""
    lm = services.log_manager
    lg = lm.get_log(topic, partition)
    if lg is None:
        return services.replica_manager.missing_log_error(topic, partition), -1
    if not lg.config.delete:
        log.info("DeleteRecords on %s-%d refused: cleanup.policy=%s has no delete", topic, partition, lg.config.cleanup_policy)
        return errors.POLICY_VIOLATION, -1
    if offset < -1:
        return errors.OFFSET_OUT_OF_RANGE, -1
    try:
        return errors.NONE, services.replica_manager.delete_records(topic, partition, offset)
    except OffsetOutOfRangeError as e:
        log.info("DeleteRecords on %s-%d refused: %s", topic, partition, e)
        return errors.OFFSET_OUT_OF_RANGE, -1


def _delete_all(services: BrokerServices, request: Any, deletable: set[str] | None = None) -> list[dict[str, Any]]:
    """Every requested partition; those of topics not in ``deletable`` (None: all are) get
    TOPIC_AUTHORIZATION_FAILED, before their existence is looked at (KafkaApis)."""
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if deletable is not None and t.name not in deletable:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1, "error_code": TOPIC_AUTHORIZATION_FAILED})
                continue
            code, low = _delete_partition(services, t.name, p.partition_index, p.offset)
            parts.append({"partition_index": p.partition_index, "low_watermark": low, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    return topics


async def handle_delete_records(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    timeout = ms(request.timeout) / 1000
    deletable = None
    if services.authorizer.enabled:  # DELETE on each topic
        deletable = services.authorizer.filter(context, header, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in request.topics])
    work = services.run_blocking(_delete_all, services, request, deletable)
    try:
        topics = await asyncio.wait_for(asyncio.shield(work), timeout) if timeout > 0 else await work
    except TimeoutError:
        # The offsets still move (the work was started); the client is told it timed out, as Kafka's purgatory does.
        topics = [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "low_watermark": -1,
                                             "error_code": errors.REQUEST_TIMED_OUT if deletable is None or t.name in deletable else TOPIC_AUTHORIZATION_FAILED}
                                            for p in t.partitions]}
            for t in request.topics
        ]
    return {"throttle_time": 0, "topics": topics}
