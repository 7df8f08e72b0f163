"""DescribeProducers (API 61, KIP-664): the active producers of partitions.

What ``kafka-transactions.sh describe-producers`` shows: per partition, each producer id the
partition's producer state (storage/producer_state.py) remembers, with its epoch, the sequence
of its last batch, that batch's timestamp and the coordinator epoch. There are no transactions
yet, so ``current_txn_start_offset`` is always -1. Errors follow KafkaApis
handleDescribeProducersRequest: an invalid topic name, no READ on the topic or an unknown
topic fail every requested partition with the error's default message; an unknown partition
of a known topic is UNKNOWN_TOPIC_OR_PARTITION without one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.topic import InvalidTopicError, validate_topic_name
from kafka_sidecar.storage.log import Log

from ..security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


def _partition(index: int, code: int = errors.NONE, message: str | None = None,
               producers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "error_message": message, "active_producers": producers or []}


def active_producers(lg: Log) -> list[dict[str, Any]]:
    """UnifiedLog.activeProducers, in producer id order (Kafka's HashMap of small ids)."""
    with lg.lock:
        entries = sorted(lg.producer_state.producers.values(), key=lambda e: e.producer_id)
        return [
            {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch, "last_sequence": e.last_seq,
             "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
             "current_txn_start_offset": e.current_txn_first_offset}
            for e in entries
        ]


async def handle_describe_producers(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    header = context.header
    lm = services.log_manager
    az = services.authorizer
    topics = []
    for t in request.topics:
        error: tuple[int, str] | None = None
        try:
            validate_topic_name(t.name)
        except InvalidTopicError as e:
            error = (errors.INVALID_TOPIC_EXCEPTION, str(e))
        if error is None and az.enabled and not az.authorize(context, header, AclOperation.READ, ResourceType.TOPIC, t.name):
            error = (errors.TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED_MESSAGE)
        if error is None and t.name not in services.metadata.topics:
            error = (errors.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
        parts = []
        for index in t.partition_indexes:
            if error is not None:
                parts.append(_partition(index, *error))
                continue
            lg = lm.get_log(t.name, index)
            if lg is None:
                parts.append(_partition(index, errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                parts.append(_partition(index, producers=active_producers(lg)))
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
