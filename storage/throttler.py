"""Kafka's Throttler: keeps the cleaner's I/O (bytes read + written) under a rate on average.

Observed bytes are summed over periods of ``check_interval_ms``; when a period ends with a
rate above the desired one, the caller sleeps as long as the period should have lasted at
the desired rate (``log.cleaner.io.max.bytes.per.second``, shared by the cleaner threads).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

NO_LIMIT = 1.7976931348623157e308  # Kafka's default: Double.MaxValue


class Throttler:
    def __init__(self, desired_rate_per_sec: float, check_interval_ms: int = 300, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self.check_interval_ms = check_interval_ms
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.throttled_ms = 0.0  # total time slept, for tests and metrics

    @property
    def enabled(self) -> bool:
        return 0 < self.desired_rate_per_sec < NO_LIMIT

    @property
    def period_bytes(self) -> float:
        """Bytes counted in the current period, not yet checked against the rate (the tail of a
        cleaning that ends before its period does is never slept for, as in Kafka)."""
        return self._observed

    def maybe_throttle(self, observed: float, sleep: Callable[[float], None] | None = None) -> None:
        """Count ``observed`` bytes; sleep if the current period is ahead of the desired rate
        (with ``sleep`` if given: the cleaner's sleeps notice an abort)."""
        if not self.enabled:
            return
        sleep_s = 0.0
        with self._lock:
            self._observed += observed
            now = self._clock()
            elapsed_ms = (now - self._period_start) * 1000
            if elapsed_ms > self.check_interval_ms and self._observed > 0:
                rate_per_ms = self._observed / elapsed_ms
                desired_per_ms = self.desired_rate_per_sec / 1000
                if rate_per_ms > desired_per_ms:
                    # How long the observed bytes should have taken, minus what they did take.
                    sleep_s = (self._observed / desired_per_ms - elapsed_ms) / 1000
                    self.throttled_ms += sleep_s * 1000
                self._period_start = now + sleep_s
                self._observed = 0.0
        if sleep_s > 0:
            (sleep or self._sleep)(sleep_s)
