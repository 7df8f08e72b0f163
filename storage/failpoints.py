"""Crash points for the crash harness: die (SIGKILL) at a named step of a storage operation.

Off unless the environment names one: ``KAFKA_SIDECAR_CRASH_AT=<point>:<n>`` makes
the process kill itself with SIGKILL the ``n``-th time it reaches ``<point>``
(``tests/crash/harness.py`` uses this to crash exactly inside a roll, a retention
delete, a compaction swap, a checkpoint write or between a segment write and its
index entries). With ``KAFKA_SIDECAR_CRASH_ARM=signal`` the point is armed only when
the process receives SIGUSR1. ``hit`` costs one global lookup when nothing is armed.

Points (see the callers): ``segment.append.torn`` (half of the batch bytes written),
``segment.append.before_index``, ``log.roll.after_snapshot``, ``log.roll.after_trim``,
``log.retention.after_rename``, ``log.swap.after_delete_rename``,
``log.swap.before_final_rename``, ``checkpoint.before_rename``,
``manager.delete_due.between_files``, ``cleaner.clean.after_buffer_write``.
"""

from __future__ import annotations

import os
import signal

ENV = "KAFKA_SIDECAR_CRASH_AT"
# "signal": the crash point is armed only once the process gets SIGUSR1 (so a harness can
# start the server, check it, then arm it without a restart).
ARM_ENV = "KAFKA_SIDECAR_CRASH_ARM"


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    name, _, count = spec.partition(":")
    try:
        return name.strip(), max(1, int(count or "1"))
    except ValueError:
        return None


_ARMED = _parse(os.environ.get(ENV))
_counts: dict[str, int] = {}

if _ARMED is not None and os.environ.get(ARM_ENV) == "signal":
    _PENDING, _ARMED = _ARMED, None

    def _arm(signum: int, frame: object) -> None:
        global _ARMED
        _ARMED = _PENDING

    try:
        signal.signal(signal.SIGUSR1, _arm)
    except ValueError:  # not the main thread: leave it unarmed
        pass


def hit(name: str) -> None:
    """Reached crash point ``name``: SIGKILL this process if it is armed and due."""
    if _ARMED is None or _ARMED[0] != name:
        return
    n = _counts.get(name, 0) + 1
    _counts[name] = n
    if n >= _ARMED[1]:
        os.kill(os.getpid(), signal.SIGKILL)


def due(name: str) -> bool:
    """Count a hit of ``name`` without dying; True when the armed count is reached.

    For points that must do something first (a torn write) and then die via ``die``.
    """
    if _ARMED is None or _ARMED[0] != name:
        return False
    n = _counts.get(name, 0) + 1
    _counts[name] = n
    return n >= _ARMED[1]


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
