"""Logging: plain lines by default, JSON lines with ``--log-format json``; start-up progress.

Plain: ``2026-11-23 08:00:00,123 INFO kafka_sidecar.storage.log: rolled t-0: new segment ...``.
JSON: one object per line, ``{"ts": "2026-11-23T08:00:00.123Z", "level": "INFO",
"logger": "kafka_sidecar.storage.log", "message": "rolled ...", "thread": "storage_0"}`` plus
``"exception"`` when a traceback is attached; easy to ship to Loki/ELK as is.

:class:`Progress` reports a long start-up (loading many partitions): nothing if it is over within
a second, then a progress bar redrawn in place on a terminal, or one log line every few seconds
when stderr is not a terminal (or the format is JSON).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import TextIO

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FORMATS = ("plain", "json")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        out = {
            "ts": ts,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


class _ProgressAwareHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that clears a progress bar drawn on the same terminal before a log line
    and draws it again after, so lines and bar never overwrite each other."""

    def emit(self, record: logging.LogRecord) -> None:
        progress = _state.get("progress")
        if isinstance(progress, Progress) and progress.stream is self.stream:
            with progress._lock:
                progress._clear()
                super().emit(record)
                progress._redraw()
        else:
            super().emit(record)


def setup_logging(level: str = "INFO", fmt: str = "plain", stream: TextIO | None = None) -> None:
    """Configure the root logger once (replacing earlier handlers, so it can be called again)."""
    stream = stream or sys.stderr
    handler = _ProgressAwareHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(PLAIN_FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, str(level).upper(), logging.INFO))
    _state["format"] = fmt
    _state["stream"] = stream


_state: dict[str, object] = {"format": "plain", "stream": None, "progress": None}


class Progress:
    """Progress of ``total`` steps, reported only when the work takes longer than ``delay`` s.

    ``update(done)`` may be called from any thread, as often as wanted: it only draws every
    ``interval`` s (a TTY bar every 0.2 s). ``finish()`` clears the bar.
    """

    def __init__(self, what: str, total: int, unit: str = "partitions", *, delay: float = 1.0, interval: float = 5.0,
                 logger: logging.Logger | None = None, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.delay = delay
        self.interval = interval
        self.log = logger or logging.getLogger("kafka_sidecar.startup")
        self.stream = stream or _state.get("stream") or sys.stderr  # type: ignore[assignment]
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty()) and _state.get("format") != "json"
        self.tty = tty
        self.started = time.monotonic()
        self.done = 0
        self._last = 0.0
        self._drawn = False
        self._line = ""  # the bar as last drawn (a terminal only)
        self._lock = threading.RLock()

    def describe(self) -> str:
        return f"{self.what}: {self.done}/{self.total} {self.unit}"

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        elapsed = now - self.started
        if elapsed < self.delay:
            return
        step = 0.2 if self.tty else self.interval
        if self._drawn and now - self._last < step:
            return
        with self._lock:
            self._last = now
            self._drawn = True
            pct = 100.0 * done / self.total if self.total else 100.0
            rate = done / elapsed if elapsed > 0 else 0.0
            eta = (self.total - done) / rate if rate > 0 else float("inf")
            eta_text = f", about {eta:.0f} s left" if eta != float("inf") else ""
            if self.tty:
                width = 30
                filled = int(width * done / self.total) if self.total else width
                bar = "#" * filled + "-" * (width - filled)
                self._line = f"{self.what} [{bar}] {done}/{self.total} {self.unit} ({pct:.0f}%){eta_text}   "
                self.stream.write("\r" + self._line)
                self.stream.flush()
                _state["progress"] = self
            else:
                self.log.info("%s: %d/%d %s (%.0f%%) after %.1f s%s", self.what, done, self.total, self.unit, pct, elapsed, eta_text)

    def _clear(self) -> None:
        if self.tty and self._line:
            self.stream.write("\r" + " " * max(100, len(self._line)) + "\r")
            self.stream.flush()

    def _redraw(self) -> None:
        if self.tty and self._line:
            self.stream.write("\r" + self._line)
            self.stream.flush()

    def finish(self) -> None:
        with self._lock:
            if _state.get("progress") is self:
                _state["progress"] = None
            if self.tty and self._drawn:
                self._clear()
            self._line = ""
