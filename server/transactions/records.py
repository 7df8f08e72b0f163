"""Records of the internal topic ``__transaction_state``, in Kafka's exact formats.

Kafka's ``TransactionLogKey``/``TransactionLogValue``, encoded by the schema-driven codec
(``protocol/coordinator_records.py``), version-prefixed:

- key version 0: transactionalId string.
- value version 0 (what Kafka writes until transaction.version 1 is finalized, and what this
  broker writes): producerId int64, producerEpoch int16, transactionTimeoutMs int32,
  transactionStatus int8, transactionPartitions nullable [topic string, partitionIds [int32]]
  (null in state Empty), transactionLastUpdateTimestampMs int64,
  transactionStartTimestampMs int64.
- value version 1 (read only): the same fields, flexible encoding, with tagged fields
  previousProducerId (tag 0), nextProducerId (tag 1), clientTransactionVersion (tag 2).

A tombstone (null value) removes the transactional id (expiration). The partition of a
transactional id is ``abs(transactionalId.hashCode()) % transaction.state.log.num.partitions``.
Batches are written without compression (Kafka's TransactionLog.EnforcedCompression).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from kafka_sidecar.protocol.control_records import ABORT as ABORT_MARKER
from kafka_sidecar.protocol.control_records import COMMIT as COMMIT_MARKER
from kafka_sidecar.protocol.control_records import control_type
from kafka_sidecar.protocol.coordinator_records import (
    RecordFormatError,
    encode_key,
    encode_value,
    record_type,
)
from kafka_sidecar.protocol.coordinator_records import decode_key as _decode_key
from kafka_sidecar.protocol.coordinator_records import decode_value as _decode_value
from kafka_sidecar.protocol.record_batch import CONTROL_MASK, iter_headers
from kafka_sidecar.protocol.records import decode_records, iter_batches
from kafka_sidecar.protocol.topic import TRANSACTION_STATE_TOPIC  # noqa: F401 (re-exported)
from kafka_sidecar.storage.log import Log

from ..groups.records import partition_for
from .state import TransactionMetadata, TransactionState

log = logging.getLogger(__name__)

KEY_VERSION = 0
VALUE_VERSION = 0


def key_bytes(transactional_id: str) -> bytes:
    return encode_key("TransactionLogKey", {"TransactionalId": transactional_id})


def value_bytes(m: TransactionMetadata) -> bytes:
    """Kafka's TransactionLog.valueToBytes (version 0)."""
    if m.state == TransactionState.EMPTY and m.topic_partitions:
        raise ValueError(f"transaction {m.transactional_id} in state Empty with partitions {m.topic_partitions}")
    partitions = None if m.state == TransactionState.EMPTY else [
        {"Topic": topic, "PartitionIds": list(ids)} for topic, ids in m.partitions_by_topic().items()]
    return encode_value("TransactionLogValue", {
        "ProducerId": m.producer_id, "ProducerEpoch": m.producer_epoch, "TransactionTimeoutMs": m.txn_timeout_ms,
        "TransactionStatus": m.state.id, "TransactionPartitions": partitions,
        "TransactionLastUpdateTimestampMs": m.txn_last_update_timestamp,
        "TransactionStartTimestampMs": m.txn_start_timestamp,
    }, VALUE_VERSION)


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a key version this broker does not know."""
    if record_type(data) != KEY_VERSION:
        return None
    return _decode_key("TransactionLogKey", data)["TransactionalId"]


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """Kafka's TransactionLog.readTxnRecordValue (versions 0 and 1)."""
    _version, v = _decode_value("TransactionLogValue", data)
    state = TransactionState.from_id(v["TransactionStatus"])
    partitions = set() if state == TransactionState.EMPTY else {
        (t["Topic"], p) for t in v["TransactionPartitions"] or () for p in t["PartitionIds"]}
    return TransactionMetadata(
        transactional_id, v["ProducerId"], v["ProducerEpoch"], v["TransactionTimeoutMs"], state, partitions,
        v["TransactionStartTimestampMs"], v["TransactionLastUpdateTimestampMs"],
        previous_producer_id=v["PreviousProducerId"], next_producer_id=v["NextProducerId"],
        client_transaction_version=v["ClientTransactionVersion"],
    )


def transaction_partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor."""
    return partition_for(transactional_id, num_partitions)


def iter_records_and_markers(data: bytes) -> Iterator[tuple[int, int, int, bytes | None, bytes | None, int | None]]:
    """(offset, producer id, producer epoch, key, value, marker) of each record of the complete
    batches of ``data`` in log order; ``marker`` is ABORT_MARKER/COMMIT_MARKER for a control
    record (key and value then None), None for a data record."""
    for pos, h in iter_batches(data, verify_crc=False):
        offsets: list[int] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        decode_records(data, pos, h, offsets, [], keys, values, [])
        control = h.attributes & CONTROL_MASK
        for offset, key, value in zip(offsets, keys, values, strict=True):
            if control:
                marker = control_type(key)
                if marker in (ABORT_MARKER, COMMIT_MARKER):
                    yield offset, h.producer_id, h.producer_epoch, None, None, marker
                continue
            yield offset, h.producer_id, h.producer_epoch, key, value, None


# How much of an internal topic's log is read at a time while loading it.
LOAD_READ_BYTES = 8 << 20
RecordHandler = Callable[[int, int, int, "bytes | None", "bytes | None", "int | None"], bool]


def replay_log(lg: Log, apply: RecordHandler) -> int:
    """Feed every record and transaction marker of ``lg``, from its log start, to ``apply`` (offset,
    producer id, producer epoch, key, value, marker), in log order: how the group and transaction
    coordinators load their internal topic at start. Unreadable data is logged and skipped a
    chunk at a time, a record ``apply`` cannot read (RecordFormatError, ValueError, IndexError)
    by itself. Returns how many records ``apply`` counted (it returns True for those)."""
    where = f"{lg.topic}-{lg.partition}"
    count = 0
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, LOAD_READ_BYTES, True)
        if data is None:
            break
        raw = data.read()
        next_offset = offset
        for _pos, h in iter_headers(raw):
            next_offset = max(next_offset, h.last_offset + 1)
        try:
            for record in iter_records_and_markers(raw):
                if record[0] < offset:
                    continue
                try:
                    count += bool(apply(*record))
                except (RecordFormatError, ValueError, IndexError) as e:
                    log.error("skipping unreadable record in %s at offset %d: %s", where, record[0], e)
        except (RecordFormatError, ValueError, IndexError) as e:
            log.error("skipping unreadable data in %s at offset %d: %s", where, offset, e)
        if next_offset <= offset:
            break
        offset = next_offset
    return count
