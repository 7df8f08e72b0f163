"""GroupRecordWriter: the group coordinator's writes to ``__consumer_offsets`` through the
coordinator runtime (server/coordinator/runtime.py): records first, appended to the group's
partition, then replayed into the state; a failed append changes nothing in memory."""

from __future__ import annotations

from collections.abc import Callable

from kafka_sidecar.protocol import errors

from ..coordinator.runtime import CoordinatorRuntime, Producer
from .records import OFFSETS_TOPIC
from .store import GroupStore, Record

Replay = Callable[[bytes, bytes | None, int], None]


class GroupRecordWriter:
    """Appends a group's records as one batch to the group's partition."""

    def __init__(self, runtime: CoordinatorRuntime, store: GroupStore, compression_codec: int, replay: Replay) -> None:
        self.runtime = runtime
        self.store = store
        self.compression_codec = compression_codec
        self.replay = replay  # the coordinator's: applies a record to the manager of its key
        self.writes = 0  # non-transactional writes so far (JoinGroup checks whether it wrote)

    def write(self, group_id: str, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` as one batch to the group's partition, without replaying them
        (the caller applies them itself): (error code, first offset)."""
        self.writes += 1
        return self.runtime.append(OFFSETS_TOPIC, self.store.partition_for(group_id), records, codec=self.compression_codec)

    def write_and_replay(self, group_id: str, records: list[Record]) -> int:
        """Append, then apply each record to the state at its offset: the error code (the state
        unchanged unless NONE)."""
        self.writes += 1
        if not records:
            return errors.NONE
        return self.runtime.write(OFFSETS_TOPIC, self.store.partition_for(group_id), records, self.replay, codec=self.compression_codec)

    def write_transactional(self, group_id: str, producer_id: int, producer_epoch: int, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` as one transactional batch of the producer: (error code, first offset)."""
        return self.runtime.append(OFFSETS_TOPIC, self.store.partition_for(group_id), records,
                                   codec=self.compression_codec, producer=Producer(producer_id, producer_epoch))

    def touch(self, group_id: str) -> None:
        """The request depends on the group's partition (a parked join): its answer waits for that
        partition's writes to be durable."""
        self.runtime.touch(OFFSETS_TOPIC, self.store.partition_for(group_id))
