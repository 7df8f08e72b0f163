"""A short run of the cluster crash harness (tests/crash/cluster_harness.py; ``make
crash-test-cluster`` runs hundreds): the real ``serve --processes 2``, one node or the whole group
killed with SIGKILL (at random moments and at storage crash points armed in one node), restarted,
and checked: every acknowledged record once, in order, at its offset, on partitions led by both
nodes; transactions spanning both nodes whole or absent to read_committed (committed ones whole,
aborted ones never); offset commits to groups coordinated by each node never lost; every segment
of each node's dir verified.
"""

from __future__ import annotations

import os

from tests.crash.cluster_harness import KILLS, run

ITERATIONS = int(os.environ.get("CRASH_CLUSTER_ITERATIONS", "4"))


def test_cluster_crash_harness_short_run(tmp_path):
    stats = run(ITERATIONS, seed=20261129, data_dir=tmp_path / "data", verbose=False)
    assert stats.iterations == ITERATIONS
    assert sum(stats.kills.values()) >= ITERATIONS  # every iteration ended in a crash
    assert {kind.split(" ")[0] for kind in stats.kills} >= set(KILLS)  # one node and the whole group, timer and crash point
    assert stats.acked > 0 and stats.records_checked > 0 and stats.segments_checked > 0
    assert stats.txn_records_checked > 0 and sum(stats.txns.values()) > 0
    assert stats.commits_checked > 0
