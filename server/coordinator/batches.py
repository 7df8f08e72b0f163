"""The batches the coordinators write (Kafka's coordinator runtime builds them the same way):
one RecordBatch v2 per write, every record stamped with the write's time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_sidecar.protocol import compression
from kafka_sidecar.protocol.records import Record as BatchRecord
from kafka_sidecar.protocol.records import encode_batch, encode_columns

if TYPE_CHECKING:
    from kafka_sidecar.storage.log import Log

Record = tuple[bytes, bytes | None]  # (key, value or None for a tombstone)


@dataclass(frozen=True)
class Producer:
    """The producer of a transactional coordinator batch (TxnOffsetCommit)."""

    producer_id: int
    producer_epoch: int


def build_batch(records: list[Record], timestamp_ms: int, codec: int = compression.NONE) -> bytes:
    """One RecordBatch v2 holding ``records`` (key, value-or-None), offsets from 0, every
    record and the batch stamped ``timestamp_ms``, base sequence 0 (as Kafka's coordinator)."""
    n = len(records)
    return encode_columns(
        range(n), [timestamp_ms] * n, [k for k, _ in records], [v for _, v in records], [None] * n,
        compression=codec, base_sequence=0, base_timestamp=timestamp_ms, max_timestamp=timestamp_ms,
    )


def transactional_batch(lg: Log, producer: Producer, records: list[Record], ts: int, codec: int) -> bytes:
    """A transactional batch of ``producer``. Kafka writes coordinator batches without sequence
    checks; our producer state checks them, so the batch continues the producer's sequence."""
    seq = 0
    entry = lg.producer_state.producers.get(producer.producer_id)
    if entry is not None and entry.producer_epoch == producer.producer_epoch and entry.last_seq >= 0:
        seq = entry.last_seq + 1
    return encode_batch(
        [BatchRecord(i, ts, key, value) for i, (key, value) in enumerate(records)],
        compression=codec, producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
        base_sequence=seq, is_transactional=True, base_timestamp=ts, max_timestamp=ts,
    )
