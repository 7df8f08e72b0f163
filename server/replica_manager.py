"""ReplicaManager: the one place the server appends to, flushes and reads a partition's Log.

Kafka's ReplicaManager role on a single node. Every writer goes through it: client produce
(``server/apis/produce.py``), the group coordinator (group metadata and offset commits in
``__consumer_offsets``), the transaction coordinator (``__transaction_state``) and the
transaction markers it writes to data partitions. The coordinators see it through the
narrow ``PartitionWriter`` interface, as Kafka's coordinator runtime does.

One durability rule, whoever writes: an append that reaches the log's flush policy
(``flush.messages``) starts an fsync on the storage thread, never on the event loop, and the
answer to that write is sent only once the fsync is done. A produce awaits the flushes of the
partitions it wrote (a failed fsync fails those partitions with KAFKA_STORAGE_ERROR); a
coordinator request awaits the flushes in flight of the coordinator partitions it wrote to or
read from (``pending_flush``, through server/coordinator/runtime.py), not those of unrelated
partitions. Flushes of one log run one after another.

After every append the partition's waiting fetches are woken (``DelayedFetchPurgatory``),
and client appends are counted in the metrics, here and nowhere else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from enum import Enum
from typing import TYPE_CHECKING, Protocol, TypeVar

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.record_batch import BatchHeader, read_header
from kafka_sidecar.storage import checkpoint
from kafka_sidecar.storage.log import AppendInfo, Log, StorageError
from kafka_sidecar.storage.log_segment import FileSlice
from kafka_sidecar.storage.producer_state import ProducerStateError
from kafka_sidecar.storage.txn_index import AbortedTxn

from .delayed_fetch import DelayedFetchPurgatory, TopicPartition

if TYPE_CHECKING:
    from pathlib import Path

    from kafka_sidecar.storage.log_manager import LogManager

    from .metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
# Kafka's high-watermark checkpoint, one per log dir (ReplicaManager.HighWatermarkFilename).
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


class AppendOrigin(Enum):
    """Who is appending (Kafka's AppendOrigin): only client appends count as produce traffic."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class NoSuchPartitionError(Exception):
    """The partition has no log on this broker (deleted, or not created yet)."""


class PartitionWriter(Protocol):
    """What a coordinator may do to its state partitions (Kafka's coordinator PartitionWriter)."""

    def get_log(self, topic: str, partition: int) -> Log | None: ...

    def append_batch(self, topic: str, partition: int, batch: bytearray) -> AppendInfo: ...

    def append_transaction_marker(self, lg: Log, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> int: ...

    def pending_flush(self, topic: str, partition: int) -> asyncio.Future[None] | None: ...


def append_error_code(e: Exception) -> int:
    """The Kafka error for a failed append (ReplicaManager's appendToLocalLog error handling)."""
    if isinstance(e, ProducerStateError):
        return e.error_code
    if isinstance(e, StorageError):
        return errors.KAFKA_STORAGE_ERROR
    if isinstance(e, NoSuchPartitionError):
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    return errors.UNKNOWN_SERVER_ERROR


class ReplicaManager:
    """Appends, flushes and reads of every partition on behalf of the server (see module doc)."""

    def __init__(self, log_manager: LogManager, metrics: Metrics | None = None, executor: Executor | None = None) -> None:
        self.log_manager = log_manager
        self.metrics = metrics
        self.executor = executor  # the storage thread(s); None: asyncio's default executor
        self.purgatory = DelayedFetchPurgatory()
        self._flushing: dict[TopicPartition, asyncio.Future[None]] = {}  # the newest flush of each log
        self._pending: set[asyncio.Future[None]] = set()

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.log_manager.get_log(topic, partition)

    def missing_log_error(self, topic: str, partition: int) -> int:
        """The error for a partition with no log here (Kafka's getPartitionOrError), for every
        handler that found none: NOT_LEADER_OR_FOLLOWER when the topic has that partition and
        another node of the cluster leads it (the client refreshes its metadata and goes
        there), else UNKNOWN_TOPIC_OR_PARTITION."""
        info = self.log_manager.metadata.topics.get(topic)
        if info is not None and 0 <= partition < info.partitions and self.log_manager.is_local is not None:
            return errors.NOT_LEADER_OR_FOLLOWER
        return errors.UNKNOWN_TOPIC_OR_PARTITION

    # ---- writes --------------------------------------------------------------------------

    def append_records(self, lg: Log, records: bytearray, headers: list[BatchHeader],
                       origin: AppendOrigin = AppendOrigin.CLIENT, now_ms: int | None = None) -> tuple[AppendInfo, asyncio.Future[None] | None]:
        """Append validated batches as the leader: (append info, the flush to await before
        acknowledging, or None when the flush policy does not ask for one). Raises
        ProducerStateError and StorageError (``append_error_code`` maps them). ``now_ms``: the
        time the records were validated against (the append time), else now."""
        info = lg.append_as_leader(records, headers, now_ms)
        self.purgatory.try_complete(lg.topic, lg.partition)
        if origin is AppendOrigin.CLIENT and self.metrics is not None:
            self.metrics.record_produce(lg.topic, len(records), info.last_offset - info.first_offset + 1)
        return info, (self.flush(lg) if info.needs_flush else None)

    def append_batch(self, topic: str, partition: int, batch: bytearray) -> AppendInfo:
        """A coordinator's append of one batch it built (PartitionWriter)."""
        lg = self.get_log(topic, partition)
        if lg is None:
            raise NoSuchPartitionError(f"{topic}-{partition}")
        info, _ = self.append_records(lg, batch, [read_header(batch)], AppendOrigin.COORDINATOR)
        return info

    def append_transaction_marker(self, lg: Log, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> int:
        """Write a COMMIT/ABORT marker for the transaction coordinator; returns its offset."""
        offset = lg.append_transaction_marker(producer_id, producer_epoch, coordinator_epoch, commit)
        self.purgatory.try_complete(lg.topic, lg.partition)
        if lg.flush_due:
            self.flush(lg)
        return offset

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords: move the log start offset; returns the new low watermark."""
        return self.log_manager.delete_records(topic, partition, offset)

    async def delete_topic(self, name: str) -> list[Path]:
        """Kafka's stopReplicas(delete=true) for every partition of ``name``: detached on the loop
        (no append or read reaches them after this), parked fetches woken, flushes in flight
        awaited, then closed and renamed on the storage thread (never an fsync on the loop).
        Returns the renamed dirs, removed later."""
        lm = self.log_manager
        # A cluster node records the deletion in the cluster's topic log first (an fsync: the storage thread).
        info, logs = lm.detach_topic(name) if lm.journal is None else await self._run(lambda: lm.detach_topic(name))
        for lg in logs:
            self.purgatory.try_complete(lg.topic, lg.partition)
        flushing = [f for lg in logs if (f := self._flushing.get((lg.topic, lg.partition))) is not None]
        if flushing:
            await asyncio.wait(flushing)
        return await self._run(lambda: self.log_manager.finish_topic_deletion(info, logs))

    # ---- durability ----------------------------------------------------------------------

    def flush(self, lg: Log) -> asyncio.Future[None]:
        """fsync ``lg`` up to its end on the storage thread, after any flush of it already started."""
        key = (lg.topic, lg.partition)
        fut = asyncio.ensure_future(self._flush_after(self._flushing.get(key), lg))
        self._flushing[key] = fut
        self._pending.add(fut)
        fut.add_done_callback(lambda f: self._flush_done(key, f))
        return fut

    async def _flush_after(self, previous: asyncio.Future[None] | None, lg: Log) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome is reported to its own waiters
        await self._run(lg.flush)

    def _flush_done(self, key: TopicPartition, fut: asyncio.Future[None]) -> None:
        self._pending.discard(fut)
        if self._flushing.get(key) is fut:
            del self._flushing[key]
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("flush of %s-%d failed: %s", key[0], key[1], fut.exception())

    def pending_flush(self, topic: str, partition: int) -> asyncio.Future[None] | None:
        """The newest flush in flight of the partition (it covers every append before it), or None."""
        return self._flushing.get((topic, partition))

    async def await_pending_flushes(self) -> None:
        """Wait for every flush in flight now (the durability barrier of coordinator answers)."""
        if self._pending:
            await asyncio.wait(list(self._pending))

    async def shutdown(self) -> None:
        """Cancel parked fetches, let flushes in flight finish and checkpoint the high
        watermarks, before the logs close (ReplicaManager.shutdown)."""
        self.purgatory.cancel_all()
        await self.await_pending_flushes()
        await self._run(self.checkpoint_high_watermarks)

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` as a one-node Kafka does: every partition's
        high watermark (here its log end: this node is the whole ISR). Blocking (storage thread)."""
        offsets = {tp: lg.high_watermark for tp, lg in list(self.log_manager.logs.items())}
        checkpoint.write_offsets(self.log_manager.data_dir / REPLICATION_OFFSET_CHECKPOINT, offsets)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    # ---- reads ---------------------------------------------------------------------------

    def read(self, lg: Log, fetch_offset: int, max_bytes: int, min_one_message: bool) -> FileSlice | None:
        """Records from ``fetch_offset`` up to the high watermark (FetchIsolation.HIGH_WATERMARK)."""
        return lg.read(fetch_offset, max_bytes, min_one_message)

    def read_committed(self, lg: Log, fetch_offset: int, max_bytes: int, min_one_message: bool) -> tuple[int, FileSlice | None, list[AbortedTxn]]:
        """Records below the last stable offset, with the aborted transactions they overlap
        (FetchIsolation.TXN_COMMITTED): (last stable offset, records, aborted)."""
        return lg.read_committed(fetch_offset, max_bytes, min_one_message)

    async def wait_for_data(self, partitions: list[TopicPartition], timeout: float) -> None:
        """Park a fetch that found too little until one of its partitions is appended to."""
        await self.purgatory.wait(partitions, timeout)
