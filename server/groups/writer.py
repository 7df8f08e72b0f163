"""GroupRecordWriter: how the group coordinator's records reach ``__consumer_offsets`` (the part
of Kafka's CoordinatorRuntime that appends a shard's records through the PartitionWriter), then
are replayed into the state, as Kafka applies a write's records to the shard after the append."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.records import Record as BatchRecord
from kafka_sidecar.protocol.records import encode_batch

from ..replica_manager import append_error_code
from .group import now_ms
from .records import OFFSETS_TOPIC, build_batch
from .store import GroupStore, Record

if TYPE_CHECKING:
    from ..replica_manager import PartitionWriter

log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")

Replay = Callable[[bytes, bytes | None, int], None]


class GroupRecordWriter:
    """Appends a group's records as one batch to the group's partition."""

    def __init__(self, partition_writer: PartitionWriter, store: GroupStore, compression_codec: int, replay: Replay) -> None:
        self.partition_writer = partition_writer
        self.store = store
        self.compression_codec = compression_codec
        self.replay = replay  # the coordinator's: applies a record to the manager of its key
        self.writes = 0  # non-transactional writes so far (JoinGroup checks whether it wrote)

    def write(self, group_id: str, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` as one batch to the group's partition: (error code, first offset)."""
        self.writes += 1
        partition = self.store.partition_for(group_id)
        writer = self.partition_writer
        if writer.get_log(OFFSETS_TOPIC, partition) is None:
            return errors.COORDINATOR_NOT_AVAILABLE, -1
        batch = bytearray(build_batch(records, now_ms(), self.compression_codec))
        try:
            info = writer.append_batch(OFFSETS_TOPIC, partition, batch)
        except Exception as e:
            log.exception("cannot append to %s-%d", OFFSETS_TOPIC, partition)
            return append_error_code(e), -1  # the caller translates it as Kafka does
        return errors.NONE, info.first_offset

    def write_and_replay(self, group_id: str, records: list[Record]) -> int:
        """Append, then apply each record to the state at its offset: the error code."""
        error, first = self.write(group_id, records)
        if error == errors.NONE:
            for i, (key, value) in enumerate(records):
                self.replay(key, value, first + i)
        return error

    def write_transactional(self, group_id: str, producer_id: int, producer_epoch: int, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` as one transactional batch of the producer: (error code, first offset)."""
        partition = self.store.partition_for(group_id)
        writer = self.partition_writer
        lg = writer.get_log(OFFSETS_TOPIC, partition)
        if lg is None:
            return errors.COORDINATOR_NOT_AVAILABLE, -1
        # Kafka writes coordinator batches without sequence checks; our producer state checks them,
        # so the batch continues the producer's sequence on this partition.
        seq = 0
        entry = lg.producer_state.producers.get(producer_id)
        if entry is not None and entry.producer_epoch == producer_epoch and entry.last_seq >= 0:
            seq = entry.last_seq + 1
        ts = now_ms()
        batch = bytearray(encode_batch(
            [BatchRecord(i, ts, key, value) for i, (key, value) in enumerate(records)],
            compression=self.compression_codec, producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=seq, is_transactional=True, base_timestamp=ts, max_timestamp=ts,
        ))
        try:
            info = writer.append_batch(OFFSETS_TOPIC, partition, batch)
        except Exception as e:
            log.warning("cannot append transactional offsets to %s-%d: %s", OFFSETS_TOPIC, partition, e)
            return append_error_code(e), -1
        return errors.NONE, info.first_offset
