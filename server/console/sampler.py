"""The Activity page's history: the broker's own counters (server/metrics.py) sampled every
``INTERVAL_S`` seconds into a ring of ``KEEP`` samples (10 minutes).

A sample is a handful of sums over the counters the request path already bumps (no new work on
the hot path): records and bytes in and out, per-API request counts and time, open connections.
Rates and mean latencies are differences of two neighbouring samples. This timer is the only
thing the console does while nobody looks (a few microseconds every 5 s, measured in
tests/integration/test_console.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..broker import Broker

INTERVAL_S = 5.0
KEEP = 120
# Long-poll APIs: their request time includes the wait for data (max.wait.ms).
LONG_POLL = frozenset(("Fetch", "ShareFetch"))


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    messages_in: int
    bytes_in: int
    messages_out: int
    bytes_out: int
    requests: dict[str, tuple[int, float]]  # API -> (requests answered, seconds spent)
    connections: int


def take_sample(broker: Broker) -> Sample:
    m = broker.metrics
    requests = {api: (sum(st.buckets), st.sum) for api, st in list(m.apis.items())}
    return Sample(time.monotonic(), sum(m.messages_in.values()), sum(m.bytes_in.values()), sum(m.messages_out.values()),
                  sum(m.bytes_out.values()), requests, len(broker.connections))


class ActivitySampler:
    """Keeps the last ``KEEP`` samples; ``start`` runs the timer on the broker's loop."""

    def __init__(self, broker: Broker, interval_s: float = INTERVAL_S, keep: int = KEEP) -> None:
        self.broker = broker
        self.interval_s = interval_s
        self.samples: deque[Sample] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.samples.append(take_sample(self.broker))
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.samples.append(take_sample(self.broker))

    def series(self, now: Sample | None = None) -> dict[str, dict[str, list[tuple[float, float | None]]]]:
        """Chart data, each point (seconds ago, value): rates per second and mean latencies in ms
        between neighbouring samples (the newest against ``now``, a sample taken for the page)."""
        samples = list(self.samples)
        if now is not None:
            samples.append(now)
        end = samples[-1].at if samples else time.monotonic()
        out: dict[str, dict[str, list[tuple[float, float | None]]]] = {
            "records": {"produced": [], "consumed": []},
            "bytes": {"in": [], "out": []},
            "latency": {"Produce": [], "Fetch (with wait)": [], "other APIs": []},
            "connections": {"open": []},
        }
        for a, b in zip(samples, samples[1:], strict=False):
            dt = b.at - a.at
            if dt <= 0:
                continue
            age = end - b.at
            out["records"]["produced"].append((age, (b.messages_in - a.messages_in) / dt))
            out["records"]["consumed"].append((age, (b.messages_out - a.messages_out) / dt))
            out["bytes"]["in"].append((age, (b.bytes_in - a.bytes_in) / dt))
            out["bytes"]["out"].append((age, (b.bytes_out - a.bytes_out) / dt))
            out["latency"]["Produce"].append((age, _mean_ms(a, b, {"Produce"})))
            out["latency"]["Fetch (with wait)"].append((age, _mean_ms(a, b, {"Fetch"})))
            others = (set(b.requests) - LONG_POLL) - {"Produce"}
            out["latency"]["other APIs"].append((age, _mean_ms(a, b, others)))
        for s in samples:
            out["connections"]["open"].append((end - s.at, float(s.connections)))
        return out


def _mean_ms(a: Sample, b: Sample, apis: set[str]) -> float | None:
    count = total = 0.0
    for api in apis:
        n1, s1 = b.requests.get(api, (0, 0.0))
        n0, s0 = a.requests.get(api, (0, 0.0))
        count += n1 - n0
        total += s1 - s0
    return total / count * 1000 if count > 0 else None
