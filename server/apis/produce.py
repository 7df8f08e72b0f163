"""Produce (API 0): validate batch headers, assign offsets, append, answer.

Per batch work only: the 61-byte header is read with ``struct`` and the CRC-32C
checked over the batch bytes; records are decoded only where Kafka's LogValidator
rules need them (storage/log_validator.py: keys on compacted topics, timestamps
a header cannot vouch for).
A bad batch fails its own partition only.

v13 (KIP-516) names topics by id instead of by name, in the request and the answer: an id no
topic has (or the zero id) fails each of its partitions with UNKNOWN_TOPIC_ID, as Kafka's
KafkaApis.handleProduceRequest does before it checks authorization or the partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.record_batch import (
    CONTROL_MASK,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionError,
    check_produce_records,
    validate_batches,
)
from kafka_sidecar.storage.log import Log, StorageError
from kafka_sidecar.storage.log_validator import RecordValidationError, validate_records
from kafka_sidecar.storage.producer_state import ProducerStateError

from ..request_context import Throttled
from ..security.acls import AclOperation, ResourceType
from ..security.authorizer import (
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    has_transactional_records,
)
from .leader_hints import current_leader, node_endpoints

if TYPE_CHECKING:
    from ..request_context import RequestContext
    from ..services import BrokerServices

log = logging.getLogger(__name__)


FIRST_LEADER_HINTS = 10  # KIP-951: Produce answers carry CurrentLeader and NodeEndpoints from v10


def _partition_result(index: int, code: int, message: str | None = None, base_offset: int = -1, log_append_time: int = -1, log_start_offset: int = -1, record_errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time": log_append_time,
        "log_start_offset": log_start_offset,
        "record_errors": record_errors or [],
        "error_message": message,
    }


# Errors the coordinator's verification may answer that older clients would not retry: Kafka
# turns them into NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh.
_RETRIABLE_VERIFICATION = {
    errors.CONCURRENT_TRANSACTIONS: "CONCURRENT_TRANSACTIONS",
    errors.COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS",
    errors.COORDINATOR_NOT_AVAILABLE: "COORDINATOR_NOT_AVAILABLE",
    errors.NOT_COORDINATOR: "NOT_COORDINATOR",
}


def verify_transactional_partition(services: BrokerServices, lg: Log, headers: list[BatchHeader], transactional_id: str | None,
                                   version: int, verified: dict[tuple[str, int], int] | None = None) -> tuple[int, str | None]:
    """KIP-890 part 1 (``transaction.partition.verification.enable``, on by default): before the
    first transactional batch of a transaction is appended to a partition, ask the transaction
    coordinator whether the partition was added to it (ReplicaManager's verification, with
    AddPartitionsToTxnManager's error translation). Returns (error code, error message)."""
    coordinator = services.transaction_coordinator
    if transactional_id is None or coordinator is None or not services.config.get("transaction.partition.verification.enable"):
        return errors.NONE, None
    h = next(h for h in headers if h.is_transactional)
    if lg.has_ongoing_transaction(h.producer_id):
        return errors.NONE, None  # already verified: the transaction is open here (Kafka's SENTINEL guard)
    if verified is not None and (lg.topic, lg.partition) in verified:  # asked of the coordinator node (server/cluster/txn_verify.py)
        code = verified[lg.topic, lg.partition]
    else:
        code = coordinator.verify_partition(transactional_id, h.producer_id, h.producer_epoch, lg.topic, lg.partition)
    if code == errors.NONE:
        return errors.NONE, None
    if code == errors.PRODUCER_FENCED:
        return errors.INVALID_PRODUCER_EPOCH, None
    if code == errors.TRANSACTION_ABORTABLE and version <= 10:  # before Produce v11 clients know only INVALID_TXN_STATE
        code = errors.INVALID_TXN_STATE
    if code == errors.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRIABLE_VERIFICATION:
        return errors.NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added to the transaction. "
                                            f"Underlying error: {_RETRIABLE_VERIFICATION[code]}")
    return code, None


def append_to_log(services: BrokerServices, lg: Log, index: int, records: bytes | None, version: int, client: str | None,
                  flushes: list[tuple[asyncio.Future[None], dict[str, Any]]], transactional_id: str | None = None,
                  verified: dict[tuple[str, int], int] | None = None) -> dict[str, Any]:
    """Validate and append one partition's records, in Kafka's order: the request checks
    (ProduceRequest.validateRecords), the batch checks (size, CRC), the record checks
    (LogValidator), the segment size. Like Kafka, only record-validation errors carry an
    error_message and the log start offset; the others send null and -1 (our log line says why)."""
    topic = lg.topic
    records = records or b""
    try:
        valid = check_produce_records(version, records)
        if valid < len(records):
            log.info("produce to %s-%d from %s: ignoring %d bytes after the batch that are not a complete batch",
                     topic, index, client, len(records) - valid)
            records = records[:valid]
        headers = validate_batches(records)
    except InvalidRecordError as e:
        log.warning("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        return _partition_result(index, errors.INVALID_RECORD)
    except UnsupportedCompressionError as e:
        log.warning("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        return _partition_result(index, errors.UNSUPPORTED_COMPRESSION_TYPE)
    except CorruptRecordError as e:
        log.warning("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        return _partition_result(index, errors.CORRUPT_MESSAGE)
    config = lg.config
    max_message_bytes = config.max_message_bytes
    # One pass over the headers: the first batch over max.message.bytes, and the attribute bits
    # of all of them (control: refused below; transactional: verified before the append).
    too_large = None
    attributes = 0
    for h in headers:
        if too_large is None and h.batch_length + LOG_OVERHEAD > max_message_bytes:
            too_large = h
        attributes |= h.attributes
    if too_large is not None:
        log.info("rejected produce to %s-%d from %s: batch of %d bytes > max.message.bytes %d",
                 topic, index, client, too_large.size, max_message_bytes)
        return _partition_result(index, errors.MESSAGE_TOO_LARGE)
    if attributes & CONTROL_MASK:
        # Kafka's LogValidator.validateBatch: only the broker writes control batches (transaction markers).
        log.warning("rejected produce to %s-%d from %s: clients are not allowed to write control records", topic, index, client)
        return _partition_result(index, errors.INVALID_RECORD)
    now_ms = int(time.time() * 1000)  # validated against, and the append time
    try:
        validate_records(records, headers, config, topic, index, now_ms)
    except RecordValidationError as e:
        log.info("rejected produce to %s-%d from %s: %s (first: %s)", topic, index, client, e, e.record_errors[0][1])
        return _partition_result(
            index, e.error_code, e.message, log_start_offset=lg.log_start_offset,
            record_errors=[{"batch_index": i, "batch_index_error_message": m} for i, m in e.record_errors],
        )
    if len(records) > config.segment_bytes:
        log.info("rejected produce to %s-%d from %s: batch of %d bytes > segment.bytes %d",
                 topic, index, client, len(records), config.segment_bytes)
        return _partition_result(index, errors.RECORD_LIST_TOO_LARGE)
    if attributes & TRANSACTIONAL_MASK:
        code, message = verify_transactional_partition(services, lg, headers, transactional_id, version, verified)
        if code != errors.NONE:
            log.info("rejected transactional produce to %s-%d from %s (transactional id %r): error %d", topic, index, client, transactional_id, code)
            return _partition_result(index, code, message)
    try:
        info, flush = services.replica_manager.append_records(lg, bytearray(records), headers, now_ms=now_ms)
    except ProducerStateError as e:
        log.info("rejected produce to %s-%d from %s: %s", topic, index, client, e)
        # Kafka answers these with no message and the partition's log start offset.
        return _partition_result(index, e.error_code, None, log_start_offset=lg.log_start_offset)
    except StorageError as e:
        # Disk full, read-only file system...: nothing of the batch stays in the log.
        log.warning("produce to %s-%d from %s failed: %s", topic, index, client, e)
        return _partition_result(index, errors.KAFKA_STORAGE_ERROR)
    result = _partition_result(index, errors.NONE, None, info.first_offset, info.log_append_time, info.log_start_offset)
    if flush is not None:
        flushes.append((flush, result))
    return result


def _topic_names(services: BrokerServices, request: Any, version: int) -> list[str | None]:
    """Each request topic's name: by name before v13, by topic id from v13 (None: no such id)."""
    if version < 13:
        return [t.name for t in request.topic_data]
    by_id = services.metadata.topics_by_id
    return [by_id[t.topic_id].name if t.topic_id in by_id else None for t in request.topic_data]


def _topic_key(t: Any, name: str | None) -> dict[str, Any]:
    """The answer's topic field: the name (v3-12) and the topic id as the request named it (v13)."""
    return {"name": name if name is not None else "", "topic_id": getattr(t, "topic_id", None)}


async def handle_produce(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any] | Throttled | None:
    header = context.header
    lm = services.log_manager
    # Client quotas (server/quotas): nothing more than this attribute while none is set.
    quotas = services.client_quotas
    started = time.perf_counter_ns() if quotas.active else 0
    names = _topic_names(services, request, header.api_version)
    acks = request.acks
    responses = []
    # flush.messages reached: (the fsync the ReplicaManager started off the loop, the result it holds back)
    flushes: list[tuple[asyncio.Future[None], dict[str, Any]]] = []
    writable = None
    az = services.authorizer
    # KafkaApis.handleProduceRequest: transactional records need a transactional id and WRITE on it
    # (else the whole request fails; without an authorizer only the id is required), then each
    # topic needs WRITE.
    if has_transactional_records(request) and (
        request.transactional_id is None
        or (az.enabled and not az.authorize(context, header, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id))
    ):
        if acks == 0:
            return None
        return {"responses": [
            {**_topic_key(t, name), "partition_responses": [_partition_result(p.index, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for p in t.partition_data]}
            for t, name in zip(request.topic_data, names, strict=True)
        ], "throttle_time": 0}
    if az.enabled:
        writable = az.filter(context, header, AclOperation.WRITE, ResourceType.TOPIC, [n for n in names if n is not None])
    # A topic named twice gets one answer, its partitions in request order (Kafka answers from a
    # map keyed by topic and partition).
    by_topic: dict[tuple[str | None, Any], list[dict[str, Any]]] = {}
    acks_valid = acks in (0, 1, -1)
    version, client_id = header.api_version, header.client_id
    transactional_id = getattr(request, "transactional_id", None)
    verified = None
    leaders: set[int] = set()  # KIP-951: nodes named as the current leader of a partition
    if services.cluster is not None and transactional_id is not None and has_transactional_records(request):
        from ..cluster.txn_verify import (
            verify_elsewhere,  # a coordinator on another node of the cluster
        )

        verified = await verify_elsewhere(services, request, names, transactional_id)
    for t, name in zip(request.topic_data, names, strict=True):
        topic_id = getattr(t, "topic_id", None)
        key = (name, topic_id)
        results = by_topic.get(key)
        if results is None:
            results = by_topic[key] = []
            # _topic_key's fields, then the partitions (the answer's dict, in that key order)
            responses.append({"name": name if name is not None else "", "topic_id": topic_id,
                              "partition_responses": results})
        for p in t.partition_data:
            if name is None:
                log.info("rejected produce to topic id %s from %s: unknown topic id", t.topic_id, client_id)
                results.append(_partition_result(p.index, errors.UNKNOWN_TOPIC_ID))
                continue
            if writable is not None and name not in writable:
                results.append(_partition_result(p.index, TOPIC_AUTHORIZATION_FAILED))
                continue
            if not acks_valid:
                results.append(_partition_result(p.index, errors.INVALID_REQUIRED_ACKS))
                continue
            lg = lm.get_log(name, p.index)
            if lg is None:
                log.info("rejected produce to %s-%d from %s: unknown topic or partition", name, p.index, client_id)
                result = _partition_result(p.index, services.replica_manager.missing_log_error(name, p.index))
                if result["error_code"] == errors.NOT_LEADER_OR_FOLLOWER and version >= FIRST_LEADER_HINTS:
                    result["current_leader"] = leader = current_leader(services, name, p.index)  # KIP-951
                    leaders.add(leader["leader_id"])
                results.append(result)
                continue
            results.append(append_to_log(services, lg, p.index, p.records, version, client_id, flushes, transactional_id, verified))
    throttle = 0
    if started:
        # KafkaApis: the request's bytes against producer_byte_rate, its handler time against
        # request_percentage; over quota, the answer says how long and the connection is muted
        # for that long after it (KIP-219).
        throttle = quotas.throttle_produce(context.principal, header.client_id, context.request_size,
                                           time.perf_counter_ns() - started, acks)
    for flush, result in flushes:
        # The durability rule (server/replica_manager.py): acknowledged only once fsynced.
        try:
            await flush
        except OSError:  # logged by the ReplicaManager
            result.update(error_code=errors.KAFKA_STORAGE_ERROR, base_offset=-1, log_append_time=-1, log_start_offset=-1)
    response = None if acks == 0 else {"responses": responses, "throttle_time": throttle}
    if response is not None and leaders:
        response["node_endpoints"] = node_endpoints(services, context.listener, leaders)
    return Throttled(response, throttle) if throttle else response
