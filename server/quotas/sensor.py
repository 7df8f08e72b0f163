"""Kafka's sampled rate (``Rate`` over a ``WindowedSum``) and a quota sensor on it.

The rate a quota is checked against is Kafka's: ``quota.window.num`` samples of
``quota.window.size.seconds`` each, a sample purged once nothing was recorded in it for the whole
window, and the elapsed time stretched to at least ``samples - 1`` full windows (so a first burst
is measured over ~10 s, not over the milliseconds it took). A violation's throttle time is
QuotaUtils.throttleTime: the delay X with ``O * W / (W + X) = T``, ``X = (O - T) / T * W``.
No I/O, no clock of its own: callers pass the time in milliseconds.
"""

from __future__ import annotations

import math


class Sample:
    """SampledStat.Sample: a window's sum and when it started and last saw an event."""

    __slots__ = ("value", "event_count", "start_ms", "last_event_ms")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """Kafka's Rate(WindowedSum) with a MetricConfig of ``samples`` windows of ``window_ms``."""

    __slots__ = ("samples", "window_ms", "_samples", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> Sample:
        # One extra slot for the "overlapping sample" (SampledStat keeps samples + 1).
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire:
                s.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: elapsed since the oldest sample, at least ``samples - 1`` windows."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(Sample(now_ms))
        oldest = min(s.start_ms for s in self._samples)
        total = now_ms - oldest
        full = total // self.window_ms
        if full < self.samples - 1:
            total += (self.samples - 1 - full) * self.window_ms
        return max(total, 1)

    def average(self, now_ms: int) -> float:
        """Kafka's Avg over the same samples: NaN when nothing was recorded in the window."""
        self._purge(now_ms)
        count = sum(s.event_count for s in self._samples)
        return sum(s.value for s in self._samples) / count if count else math.nan

    def measure(self, now_ms: int) -> float:
        """The rate per second now."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def java_round(x: float) -> int:
    """Math.round: half up (Python's round is half to even)."""
    return math.floor(x + 0.5)


class QuotaSensor:
    """A client's sensor for one quota type: the rate and its upper bound (Kafka's Quota)."""

    __slots__ = ("rate", "bound", "max_throttle_ms", "throttle_time", "last_record_ms")

    def __init__(self, rate: Rate, bound: float, max_throttle_ms: int | None = None, now_ms: int = 0) -> None:
        self.rate = rate
        self.bound = bound
        # The request quota caps its throttle at one window (ClientRequestQuotaManager).
        self.max_throttle_ms = max_throttle_ms
        # The client's throttle-time sensor (an Avg of the throttle times given, for /metrics).
        self.throttle_time = Rate(rate.samples, rate.window_ms)
        # When it last recorded: sensors idle for an hour are dropped (ClientQuotaManager).
        self.last_record_ms = now_ms

    def record(self, value: float, now_ms: int) -> int:
        """Sensor.record(value, now, checkQuotas=true): the throttle time in ms, 0 within quota."""
        rate = self.rate
        rate.record(value, now_ms)
        self.last_record_ms = now_ms
        measured = rate.measure(now_ms)
        if measured <= self.bound:
            return 0
        throttle = java_round((measured - self.bound) / self.bound * rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        throttle = max(throttle, 0)
        if throttle:
            self.throttle_time.record(throttle, now_ms)
        return throttle

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back a recorded value without a quota check (a throttled fetch sends no data)."""
        self.rate.record(-value, now_ms)
