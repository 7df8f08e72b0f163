"""Reading one topic-partition offset range over the wire (runs in Spark executors).

``read_range`` fetches ``[start, end)`` from the partition leader and yields
decoded columns in chunks. Records below the log start offset (retention,
DeleteRecords) are data loss: raised when ``failOnDataLoss`` (Spark's default),
otherwise skipped by moving to the new log start. Gaps that compaction leaves
inside the log are not data loss (Kafka's consumers skip them silently).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from kafka_sidecar.client import KafkaClientError
from kafka_sidecar.protocol.control_records import ABORT, control_type
from kafka_sidecar.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
from kafka_sidecar.protocol.records import decode_batches

from ._options import data_loss
from ._records import Columns, decode_into, iter_batches, new_columns
from ._wire import OFFSET_OUT_OF_RANGE, RETRIABLE, Broker, KafkaError, error_name

CHUNK_RECORDS = 8192


def read_range(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    fail_on_data_loss: bool = True,
    include_headers: bool = False,
    fetch_bytes: int = 8 << 20,
    isolation_level: int = 0,
    timeout_s: float = 30.0,
    chunk_records: int = CHUNK_RECORDS,
    broker: Broker | None = None,
) -> Iterator[Columns]:
    """Yield the records of ``topic``-``partition`` with ``start <= offset < end``."""
    if start >= end:
        return
    own = broker is None
    if broker is None:
        broker = Broker(bootstrap, timeout=timeout_s)
    try:
        yield from _read(broker, topic, partition, start, end, fail_on_data_loss, include_headers,
                         fetch_bytes, isolation_level, chunk_records)
    finally:
        if own:
            broker.close()


READ_COMMITTED = 1


class AbortedBatches:
    """Kafka's consumer rule (Fetcher's CompletedFetch) for read_committed: a transactional batch is
    skipped if its producer has an aborted transaction (from the Fetch response) that started at or
    before the batch's last offset and whose ABORT marker has not been passed yet."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.pending = sorted(aborted, key=lambda a: a[1])  # by first offset
        self.producers: set[int] = set()

    def aborted(self, buf: bytes, pos: int, h: BatchHeader) -> bool:
        """Whether the batch at ``pos`` is to be skipped (call it for every batch, in order)."""
        if h.producer_id < 0:
            return False
        last = h.base_offset + h.last_offset_delta
        while self.pending and self.pending[0][1] <= last:
            self.producers.add(self.pending.pop(0)[0])
        if h.attributes & CONTROL_MASK:
            if h.producer_id in self.producers and _is_abort_marker(buf, pos, h):
                self.producers.discard(h.producer_id)
            return False
        return bool(h.attributes & TRANSACTIONAL_MASK) and h.producer_id in self.producers


def _is_abort_marker(buf: bytes, pos: int, h: BatchHeader) -> bool:
    """The control record's key is (version int16, type int16): type 0 is ABORT."""
    (batch,) = decode_batches(buf[pos:pos + h.size], verify_crc=False)
    return bool(batch.records) and control_type(batch.records[0].key) == ABORT


def _read(broker: Broker, topic: str, partition: int, start: int, end: int, fail_on_data_loss: bool,
          include_headers: bool, fetch_bytes: int, isolation_level: int, chunk_records: int) -> Iterator[Columns]:
    tp = f"{topic}-{partition}"
    offset = start
    cols = new_columns(include_headers)
    max_bytes = fetch_bytes
    retries = 0
    while offset < end:
        try:
            code, hw, _lso, records, aborted = broker.fetch(topic, partition, offset, max_bytes=max_bytes,
                                                            isolation_level=isolation_level)
        except KafkaError as e:
            if e.code in RETRIABLE and retries < 5:
                retries += 1
                time.sleep(0.1 * retries)
                broker.metadata([topic])
                continue
            raise
        except (OSError, KafkaClientError):
            if retries >= 5:
                raise
            retries += 1
            time.sleep(0.1 * retries)
            broker.reconnect()
            continue
        if code == OFFSET_OUT_OF_RANGE:
            earliest = broker.earliest([(topic, partition)], isolation_level)[(topic, partition)]
            latest = broker.latest([(topic, partition)], isolation_level)[(topic, partition)]
            if offset < earliest:
                lost_to = min(earliest, end)
                if fail_on_data_loss:
                    raise data_loss(
                        "COULD_NOT_READ_OFFSET_RANGE",
                        f"Could not read records in offset [{offset}, {lost_to}) for topic partition {tp}: "
                        f"the log now starts at offset {earliest}.",
                    )
                offset = earliest
                continue
            if offset > latest:
                if fail_on_data_loss:
                    raise data_loss(
                        "COULD_NOT_READ_OFFSET_RANGE",
                        f"Could not read records in offset [{offset}, {end}) for topic partition {tp}: "
                        f"the log now ends at offset {latest} (topic deleted or recreated?).",
                    )
                break
            retries += 1
            if retries > 5:
                raise KafkaError(f"Fetch of {tp} at offset {offset} keeps failing: {error_name(code)}", code)
            continue
        if code in RETRIABLE:
            retries += 1
            if retries > 5:
                raise KafkaError(f"Fetch of {tp} at offset {offset} failed: {error_name(code)}", code)
            time.sleep(0.1 * retries)
            broker.metadata([topic])
            continue
        if code != 0:
            raise KafkaError(f"Fetch of {tp} at offset {offset} failed: {error_name(code)}", code)
        retries = 0
        progressed = False
        done = False
        skip = AbortedBatches(aborted) if isolation_level == READ_COMMITTED else None
        for pos, h in iter_batches(records):
            if h.base_offset >= end:
                done = True
                break
            last = h.base_offset + h.last_offset_delta
            if last < offset:
                continue  # a fetch starting mid-batch returns the whole batch
            # Every batch goes through the aborted-transaction filter (a marker ends an aborted range).
            in_aborted_txn = skip is not None and skip.aborted(records, pos, h)
            if not h.attributes & CONTROL_MASK and not in_aborted_txn:
                decode_into(cols, records, pos, h, offset, end)
            offset = last + 1
            progressed = True
            if len(cols) >= chunk_records:
                yield cols
                cols = new_columns(include_headers)
        if done:
            break
        if not progressed:
            if records:
                # One batch larger than the limit (only possible against brokers that do not
                # return the first batch whole): ask for more.
                max_bytes *= 2
                if max_bytes > (1 << 30):
                    raise KafkaError(f"Fetch of {tp} at offset {offset} returned no complete batch")
                continue
            if offset >= hw and end > hw:
                if fail_on_data_loss:
                    raise data_loss(
                        "COULD_NOT_READ_OFFSET_RANGE",
                        f"Could not read records in offset [{offset}, {end}) for topic partition {tp}: "
                        f"the high watermark is now {hw}.",
                    )
            break  # nothing more below the high watermark (compacted away)
    if len(cols):
        yield cols
