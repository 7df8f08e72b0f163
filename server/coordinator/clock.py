"""Clock: the time the coordinators read and schedule their timers by (Kafka's Time / MockTime,
and the scheduling half of MockCoordinatorTimer).

``SYSTEM_CLOCK`` is wall-clock time with timers on the running event loop. ``ManualClock`` is
for tests: time stands still until ``advance`` moves it, firing the timers that fall due in
order, so a session timeout or a refresh interval is tested without sleeping (a timer due at
once still fires at the loop's next turn).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (Kafka's Time.SYSTEM.milliseconds())."""
    return int(time.time() * 1000)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """Run ``fn`` once, ``delay_ms`` from now (at once for 0 or less), unless cancelled."""
        ...


class SystemClock:
    """Wall-clock time; timers on the running asyncio loop."""

    def now_ms(self) -> int:
        return now_ms()

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn)


SYSTEM_CLOCK = SystemClock()


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock for tests (Kafka's MockTime): ``now_ms`` moves only by ``advance``."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._seq = itertools.count()  # timers due at the same time fire in scheduling order
        self._timers: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """A timer already due (``delay_ms`` <= 0) fires at the running loop's next turn, as the
        system clock's does; a later one when ``advance`` reaches it."""
        if delay_ms <= 0:
            try:
                return asyncio.get_running_loop().call_soon(fn)
            except RuntimeError:  # no loop: the next advance fires it
                pass
        handle = _ManualHandle()
        heapq.heappush(self._timers, (self._now + max(delay_ms, 0), next(self._seq), handle, fn))
        return handle

    def advance(self, ms: int) -> int:
        """Move time ``ms`` forward, firing every timer due by then (those the fired ones
        schedule within the window too), each with the clock at its due time; returns how
        many fired."""
        target = self._now + ms
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            due, _, handle, fn = heapq.heappop(self._timers)
            if handle.cancelled:
                continue
            self._now = max(self._now, due)
            fn()
            fired += 1
        self._now = target
        return fired

    @property
    def pending(self) -> int:
        """Timers scheduled and not yet fired or cancelled."""
        return sum(not h.cancelled for _, _, h, _ in self._timers)
