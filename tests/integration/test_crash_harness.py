"""A short run of the crash harness (tests/crash/harness.py; ``make crash-test`` runs hundreds).

kill -9 (at random moments and at named crash points inside rolls, retention deletes,
compaction swaps, checkpoint writes, torn segment writes), restart, and check that every
acknowledged record is there once, in order, at its offset (the latest per key on a
compacted topic), and that every segment's indexes match its batches; and that a share
consumer acknowledging through the crashes never gets an acknowledged record again.
"""

from __future__ import annotations

import os

from tests.crash.harness import run

ITERATIONS = int(os.environ.get("CRASH_ITERATIONS", "12"))


def test_crash_harness_short_run(tmp_path):
    stats = run(ITERATIONS, seed=20251123, data_dir=tmp_path / "data", verbose=False)
    assert stats.iterations == ITERATIONS
    assert stats.acked > 0 and stats.records_checked > 0 and stats.segments_checked > 0
    assert sum(stats.kills.values()) >= ITERATIONS  # every iteration ended in a crash
    # The share consumer (tests/crash/share_scenario.py) acknowledged records, and released ones came back.
    assert stats.share_acknowledged > 0 and stats.share_redeliveries > 0
