"""CoordinatorRuntime: how every coordinator's state reaches its internal partition and comes
back (Kafka's CoordinatorRuntime, for one node).

A coordinator (groups, share groups, share-partition state, transactions) is a shard of this
runtime. A write is an operation on the shard that returns ``(records, response)`` without
touching the shard's memory; the runtime appends the records as one batch through the
ReplicaManager (the PartitionWriter) to the shard's partition and, only once the append
succeeded, replays them into the shard at their offsets. A failed append changes nothing in
memory: the caller gets the error code and answers with Kafka's error for its API.

Durability: a request that wrote (or read state of) a coordinator partition is answered once
that partition's flush in flight is done, not every flush of the broker (``WriteScope``: the
dispatcher opens one per coordinator request, ``await_durable`` waits for the partitions it
names). Writes made outside a request (timers, background tasks) are tracked here: their
flushes are awaited by ``shutdown`` and their failures logged.

The runtime also owns the shards' clock and timers (``timer``: callbacks run inside a scope,
so the writes they start are tracked) and the load of a partition at start-up (``load``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kafka_sidecar.protocol import compression, errors

from ..replica_manager import append_error_code
from ..transactions.records import replay_log
from .batches import Producer, Record, build_batch, transactional_batch
from .clock import SYSTEM_CLOCK, Clock, TimerHandle

if TYPE_CHECKING:
    from kafka_sidecar.storage.log import Log

    from ..replica_manager import PartitionWriter

log = logging.getLogger(__name__)

R = TypeVar("R")
Replay = Callable[[bytes, bytes | None, int], None]  # (key, value, offset): applies one record
TopicPartition = tuple[str, int]


@dataclass
class CoordinatorResult(Generic[R]):
    """What a write operation returns (Kafka's CoordinatorResult): the records to append, and
    the response to answer with once they are appended and replayed."""

    records: list[Record]
    response: R


@dataclass
class WriteScope:
    """The coordinator partitions one request (or one timer callback) wrote to or read from:
    its answer waits for their flushes in flight (and only theirs), and for the writes it asked
    another node of the cluster to make (share-partition state, server/cluster/share_state.py)."""

    partitions: set[TopicPartition] = field(default_factory=set)
    remote: list[asyncio.Future[Any]] = field(default_factory=list)


_SCOPE: contextvars.ContextVar[WriteScope | None] = contextvars.ContextVar("coordinator_write_scope", default=None)


class CoordinatorRuntime:
    """Appends, replays, durability, timers and loads of the coordinator shards (module doc)."""

    def __init__(self, writer: PartitionWriter, clock: Clock = SYSTEM_CLOCK) -> None:
        self.writer = writer
        self.clock = clock
        self._background: set[asyncio.Future[Any]] = set()
        self.failed_appends = 0  # appends refused by the log (counted for tests and metrics)
        # Failure injection (tests): called before each append with (topic, partition); an
        # exception it raises is the append's failure, as the log's would be.
        self.before_append: Callable[[str, int], None] | None = None

    # ---- writes --------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: list[Record], *, codec: int = compression.NONE,
               producer: Producer | None = None, not_available: int = errors.COORDINATOR_NOT_AVAILABLE) -> tuple[int, int]:
        """Append ``records`` as one batch to ``topic-partition``: (error code, first offset).
        No log: ``not_available``; a refused append: the ReplicaManager's error for it."""
        lg = self.writer.get_log(topic, partition)
        if lg is None:
            return not_available, -1
        ts = self.clock.now_ms()
        if producer is None:
            batch = bytearray(build_batch(records, ts, codec))
        else:
            batch = bytearray(transactional_batch(lg, producer, records, ts, codec))
        try:
            if self.before_append is not None:
                self.before_append(topic, partition)
            info = self.writer.append_batch(topic, partition, batch)
        except Exception as e:
            self.failed_appends += 1
            log.warning("cannot append %d coordinator records to %s-%d: %r", len(records), topic, partition, e)
            return append_error_code(e), -1
        self.touch(topic, partition)
        return errors.NONE, info.first_offset

    def write(self, topic: str, partition: int, records: list[Record], replay: Replay, *,
              codec: int = compression.NONE, not_available: int = errors.COORDINATOR_NOT_AVAILABLE) -> int:
        """Append ``records``, then replay each into the shard at its offset: the error code
        (the shard unchanged unless NONE). No records: nothing written, NONE."""
        if not records:
            self.touch(topic, partition)  # a read: it waits for the writes before it (Kafka's deferred read)
            return errors.NONE
        error, first = self.append(topic, partition, records, codec=codec, not_available=not_available)
        if error == errors.NONE:
            for i, (key, value) in enumerate(records):
                replay(key, value, first + i)
        return error

    def run_write(self, topic: str, partition: int, op: Callable[[], CoordinatorResult[R]], replay: Replay, *,
                  codec: int = compression.NONE, not_available: int = errors.COORDINATOR_NOT_AVAILABLE) -> tuple[int, R]:
        """Kafka's scheduleWriteOperation: run ``op`` (it must not change the shard), write its
        records and replay them: (error code, the op's response). The response stands for
        the write only when the error is NONE."""
        result = op()
        return self.write(topic, partition, result.records, replay, codec=codec, not_available=not_available), result.response

    # ---- durability ------------------------------------------------------------------------

    def touch(self, topic: str, partition: int) -> None:
        """The current request (or timer) depends on ``topic-partition``: its answer waits for
        that partition's flush in flight. Outside a scope the flush is tracked in the background."""
        scope = _SCOPE.get()
        if scope is not None:
            scope.partitions.add((topic, partition))
            return
        flush = self._pending_flush(topic, partition)
        if flush is not None:
            self.track(flush, f"flush of {topic}-{partition}")

    @contextlib.contextmanager
    def scope(self) -> Iterator[WriteScope]:
        """Collect the coordinator partitions the code inside touches (contextvars: tasks created
        inside share the scope)."""
        scope = WriteScope()
        token = _SCOPE.set(scope)
        try:
            yield scope
        finally:
            _SCOPE.reset(token)

    def durable(self, scope: WriteScope) -> list[asyncio.Future[Any]]:
        """The flushes in flight of the scope's partitions (each log's newest covers the earlier),
        and its writes on other nodes not answered yet."""
        return [f for tp in scope.partitions if (f := self._pending_flush(*tp)) is not None] + \
            [f for f in scope.remote if not f.done()]

    def await_remote(self, fut: asyncio.Future[Any], what: str) -> None:
        """The current request (or timer) wrote through another node: its answer waits for
        ``fut``. Outside a scope it is tracked in the background."""
        scope = _SCOPE.get()
        if scope is not None:
            scope.remote.append(fut)
        else:
            self.track(fut, what)

    async def await_durable(self, scope: WriteScope) -> None:
        """Wait until the scope's partitions are flushed as far as they were written (a failed
        flush is logged by the ReplicaManager; the answer goes out as before)."""
        flushes = self.durable(scope)
        if flushes:
            await asyncio.wait(flushes)

    def _pending_flush(self, topic: str, partition: int) -> asyncio.Future[None] | None:
        pending = getattr(self.writer, "pending_flush", None)
        return None if pending is None else pending(topic, partition)

    # ---- background work ---------------------------------------------------------------------

    def track(self, aw: Awaitable[Any], what: str) -> None:
        """Keep ``aw`` (a write's flush, a write started by a timer) until it is done: its failure
        is logged, and ``shutdown`` waits for it."""
        fut = asyncio.ensure_future(aw)
        self._background.add(fut)
        fut.add_done_callback(functools.partial(self._background_done, what))

    def _background_done(self, what: str, fut: asyncio.Future[Any]) -> None:
        self._background.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.error("coordinator background work failed (%s): %r", what, fut.exception())

    def run_in_scope(self, fn: Callable[[], Any], what: str) -> None:
        """Run ``fn`` (a timer's callback) in a scope of its own; the flushes of the partitions it
        wrote are tracked. An exception is logged, not lost."""
        with self.scope() as scope:
            try:
                fn()
            except Exception:
                log.exception("coordinator timer %s failed", what)
        for flush in self.durable(scope):
            self.track(flush, what)

    @property
    def in_flight(self) -> int:
        """Background work (flushes, writes) not done yet."""
        return len(self._background)

    async def shutdown(self) -> None:
        """Wait for the background work (flushes of writes made by timers) before the logs close."""
        while self._background:
            await asyncio.wait(list(self._background))

    # ---- timers and load ---------------------------------------------------------------------

    def call_later(self, delay_ms: int, fn: Callable[[], None], what: str = "timer") -> TimerHandle:
        """A one-shot timer on the runtime's clock whose writes are tracked (``run_in_scope``)."""
        return self.clock.call_later(delay_ms, functools.partial(self.run_in_scope, fn, what))

    @staticmethod
    def load(logs: list[Log], apply: Callable[..., bool]) -> int:
        """Replay ``logs`` in log order into a shard (blocking: the storage thread, before serving).
        ``apply`` gets (offset, producer id, producer epoch, key, value, marker) and returns
        whether it counted the record. Returns how many it counted."""
        return sum(replay_log(lg, apply) for lg in logs)


def coordinator_runtime(broker: Any) -> CoordinatorRuntime:
    """The broker's runtime (``Broker.coordinator_runtime``); a test's stand-in broker gets one
    over its ReplicaManager and clock on first use."""
    runtime = getattr(broker, "coordinator_runtime", None)
    if runtime is None:
        runtime = CoordinatorRuntime(broker.replica_manager, getattr(broker, "clock", SYSTEM_CLOCK))
        broker.coordinator_runtime = runtime
    return runtime
