"""Timer: keyed one-shot timers on the coordinator runtime's clock (Kafka's CoordinatorTimer), and
the keys the group coordinator schedules under (Kafka's classic-group timer keys). With a runtime,
a callback runs in a write scope of its own: the writes it starts are tracked by the runtime."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from ..coordinator.clock import SYSTEM_CLOCK, Clock, TimerHandle
from ..coordinator.runtime import CoordinatorRuntime

# The group coordinator's modules log under one name, so its log lines read as before the split.
log = logging.getLogger(__name__.rpartition(".")[0] + ".coordinator")


class Timer:
    """Keyed one-shot timers on ``clock`` (scheduling a key replaces its timer): the event loop's
    by default, a ManualClock's in tests."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, runtime: CoordinatorRuntime | None = None) -> None:
        self.clock = clock
        self.runtime = runtime
        self._handles: dict[tuple[Any, ...], TimerHandle] = {}

    def schedule(self, key: tuple[Any, ...], delay_ms: int, fn: Callable[[], None]) -> None:
        self.cancel(key)
        self._handles[key] = self.clock.call_later(delay_ms, functools.partial(self._run, key, fn))

    def _run(self, key: tuple[Any, ...], fn: Callable[[], None]) -> None:
        self._handles.pop(key, None)
        if self.runtime is not None:
            self.runtime.run_in_scope(fn, f"group coordinator timer {key}")
            return
        try:
            fn()
        except Exception:
            log.exception("group coordinator timer %s failed", key)

    def cancel(self, key: tuple[Any, ...]) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return key in self._handles


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A member's session (or a new member's join) timeout."""
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    """The group's delayed join (rebalance timeout, or the initial rebalance delay)."""
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    """The group's pending SyncGroup expiration."""
    return ("sync", group_id)
