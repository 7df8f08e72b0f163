"""server/malloc_tuning.py: after tune_malloc() a freed large buffer is reused, not faulted in again.

Each case runs in a fresh interpreter (the allocator's settings are per process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# 40 rounds of a 4 MiB buffer allocated, written and freed; minor page faults counted.
_PROBE = """
import resource, sys
from kafka_sidecar.server.malloc_tuning import tune_malloc
tuned = tune_malloc()
buf = bytearray(4 << 20); del buf  # the first one may fault
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    buf = bytearray(4 << 20)  # zero-filled: every page touched
    del buf
print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if "CS_GNU_LIBC_VERSION" in os.confstr_names else False


def _probe(**env: str) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env}, capture_output=True, text=True, check=True).stdout
    tuned, faults = out.split()
    return tuned == "True", int(faults)


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's; other C libraries keep their own defaults")
def test_large_buffers_are_reused_after_tuning() -> None:
    tuned, faults = _probe()
    assert tuned
    # 40 x 1,024 pages would fault without reuse; a reused heap block faults almost none.
    assert faults < 400, faults


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's; other C libraries keep their own defaults")
def test_a_users_own_malloc_setting_is_left_alone() -> None:
    """With a user's MALLOC_* setting tune_malloc changes nothing. (Also shows the probe can
    fail: a user's setting switches glibc's dynamic mmap threshold off, so at its fixed 128 KiB
    each 4 MiB buffer gets a mapping of its own and faults every page again.)"""
    tuned, faults = _probe(MALLOC_TOP_PAD_="131072")
    assert not tuned
    assert faults > 20 * 1024, faults
