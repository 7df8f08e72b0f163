"""Records of the internal topic ``__transaction_state``, in Kafka's exact formats.

Kafka's ``TransactionLogKey``/``TransactionLogValue`` (apache/kafka
``transaction-coordinator/src/main/resources/common/message``), version-prefixed:

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
import struct
from collections.abc import Callable, Iterator

from kafka_sidecar.protocol.control_records import ABORT as ABORT_MARKER
from kafka_sidecar.protocol.control_records import COMMIT as COMMIT_MARKER
from kafka_sidecar.protocol.control_records import control_type
from kafka_sidecar.protocol.record_batch import CONTROL_MASK, iter_headers
from kafka_sidecar.protocol.records import decode_records, iter_batches
from kafka_sidecar.protocol.topic import TRANSACTION_STATE_TOPIC  # noqa: F401 (re-exported)
from kafka_sidecar.storage.log import Log

from ..groups.records import RecordFormatError, _Reader, partition_for
from .state import NO_PRODUCER_ID, TransactionMetadata, TransactionState

log = logging.getLogger(__name__)

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")



def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def key_bytes(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def value_bytes(m: TransactionMetadata) -> bytes:
    """Kafka's TransactionLog.valueToBytes (version 0)."""
    if m.state == TransactionState.EMPTY and m.topic_partitions:
        raise ValueError(f"transaction {m.transactional_id} in state Empty with partitions {m.topic_partitions}")
    parts = [
        _I16.pack(VALUE_VERSION), _I64.pack(m.producer_id), _I16.pack(m.producer_epoch),
        _I32.pack(m.txn_timeout_ms), _I8.pack(m.state.id),
    ]
    if m.state == TransactionState.EMPTY:
        parts.append(_I32.pack(-1))
    else:
        by_topic = m.partitions_by_topic()
        parts.append(_I32.pack(len(by_topic)))
        for topic, ids in by_topic.items():
            parts.append(_string(topic))
            parts.append(_I32.pack(len(ids)))
            parts += [_I32.pack(p) for p in ids]
    parts += [_I64.pack(m.txn_last_update_timestamp), _I64.pack(m.txn_start_timestamp)]
    return b"".join(parts)


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a key version this broker does not know."""
    r = _Reader(data)
    if r.i16() != KEY_VERSION:
        return None
    return r.string()


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """Kafka's TransactionLog.readTxnRecordValue (versions 0 and 1)."""
    r = _Reader(data)
    version = r.i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    r.flexible = version >= 1
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout = r.i32()
    status = r._take(1)[0]
    state = TransactionState.from_id(status - 256 if status > 127 else status)
    partitions: set[tuple[str, int]] = set()
    n = r.uvarint() - 1 if r.flexible else r.i32()
    for _ in range(max(n, 0)):
        topic = r.string()
        for _ in range(r.array_len()):
            partitions.add((topic, r.i32()))
        r.tagged_fields()
    last_update = r.i64()
    start = r.i64()
    previous_pid = next_pid = NO_PRODUCER_ID
    client_tv = 0
    if r.flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            field = r._take(size)
            if tag == 0:
                previous_pid = _I64.unpack(field)[0]
            elif tag == 1:
                next_pid = _I64.unpack(field)[0]
            elif tag == 2:
                client_tv = _I16.unpack(field)[0]
    return TransactionMetadata(
        transactional_id, producer_id, producer_epoch, timeout, state,
        partitions if state != TransactionState.EMPTY else set(), start, last_update,
        previous_producer_id=previous_pid, next_producer_id=next_pid, client_transaction_version=client_tv,
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
