"""Fetch long-polls waiting for data: Kafka's DelayedFetch in its purgatory.

A Fetch that found less than ``min_bytes`` parks here on the partitions it read, keyed by
(topic, partition) as Kafka's DelayedOperationPurgatory keys by TopicPartition, and is
woken by the next append to any of them (``try_complete``) or by its ``max_wait`` expiring.
The ReplicaManager calls ``try_complete`` after every append, whoever wrote it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class DelayedFetchPurgatory:
    """Parked fetches by partition; one future per waiting fetch, shared by its partitions."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[asyncio.Future[None]]] = defaultdict(set)

    def try_complete(self, topic: str, partition: int) -> None:
        """Wake every fetch waiting on this partition (Kafka's checkAndComplete)."""
        watchers = self._watchers.pop((topic, partition), None)
        if watchers:
            for fut in watchers:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, partitions: Iterable[TopicPartition], timeout: float) -> None:
        """Return when one of ``partitions`` is appended to, or after ``timeout`` seconds."""
        if timeout <= 0:
            return
        keys = list(partitions)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in keys:
            self._watchers[tp].add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for tp in keys:
                watchers = self._watchers.get(tp)
                if watchers is not None:
                    watchers.discard(fut)
                    if not watchers:
                        self._watchers.pop(tp, None)

    def cancel_all(self) -> None:
        """Shutdown: every parked fetch ends (cancelled) now."""
        for watchers in self._watchers.values():
            for fut in watchers:
                if not fut.done():
                    fut.cancel()

    def watched(self) -> int:
        """Partitions with at least one parked fetch (Kafka's purgatory size, for metrics/tests)."""
        return len(self._watchers)
