"""The coordinators' Clock (server/coordinator/clock.py): ManualClock fires timers only when a test
advances it, in due order, and the group coordinator's keyed Timer runs on it."""

from __future__ import annotations

import asyncio

from kafka_sidecar.server.coordinator.clock import SYSTEM_CLOCK, ManualClock, now_ms
from kafka_sidecar.server.groups.timer import Timer


def test_manual_time_moves_only_when_advanced_and_fires_in_due_order() -> None:
    clock = ManualClock(1_000)
    seen: list[tuple[str, int]] = []
    clock.call_later(30, lambda: seen.append(("c", clock.now_ms())))
    clock.call_later(10, lambda: seen.append(("a", clock.now_ms())))
    later = clock.call_later(10, lambda: seen.append(("b", clock.now_ms())))
    later.cancel()
    # A timer fired in the window schedules another one within it: it fires too.
    clock.call_later(20, lambda: clock.call_later(5, lambda: seen.append(("d", clock.now_ms()))))
    assert clock.now_ms() == 1_000 and seen == []
    assert clock.advance(9) == 0 and seen == []
    assert clock.advance(21) == 4
    assert seen == [("a", 1_010), ("d", 1_025), ("c", 1_030)] and clock.now_ms() == 1_030
    assert clock.pending == 0


def test_the_group_timer_runs_on_the_clock_it_is_given() -> None:
    async def scenario() -> list[str]:
        clock = ManualClock()
        timer = Timer(clock)
        fired: list[str] = []
        timer.schedule(("heartbeat", "g", "m"), 300, lambda: fired.append("first"))
        timer.schedule(("heartbeat", "g", "m"), 300, lambda: fired.append("replaced"))  # same key: replaces
        timer.schedule(("join", "g"), 100, lambda: fired.append("join"))
        timer.cancel(("join", "g"))
        timer.schedule(("sync", "g"), 0, lambda: fired.append("due now"))  # at the loop's next turn
        await asyncio.sleep(0)
        assert fired == ["due now"] and ("heartbeat", "g", "m") in timer
        clock.advance(299)
        assert fired == ["due now"]
        clock.advance(1)
        assert ("heartbeat", "g", "m") not in timer
        return fired

    assert asyncio.run(scenario()) == ["due now", "replaced"]


def test_the_system_clock_is_wall_time() -> None:
    import time

    before = int(time.time() * 1000)
    assert before <= SYSTEM_CLOCK.now_ms() <= now_ms() <= int(time.time() * 1000)
