"""Helpers of the cluster crash harness (tests/crash/cluster_harness.py). Its live-node exemption
in ``check_disk``: a node still running appends to its preallocated active segment, whose zero
tail the verifier (storage/verify.py) reports in two ways; only zeros are exempt, never real
bytes. And ``_zombie``, which tells a node process that died at its crash point."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kafka_sidecar.storage.verify import verify_partition

from tests.crash.cluster_harness import _zero_tail, _zombie


def _segment(tmp_path: Path, tail: bytes) -> tuple[Path, list[str]]:
    d = tmp_path / "crash-keep-0"
    d.mkdir()
    path = d / "00000000000000000000.log"
    path.write_bytes(tail)
    (segment,) = verify_partition(d)
    return path, segment.problems


def test_a_short_zero_tail_is_exempt(tmp_path: Path) -> None:
    path, problems = _segment(tmp_path, bytes(55))  # fewer bytes than a batch header
    assert problems and "stray bytes at position 0" in problems[0], problems
    assert _zero_tail(path, problems[0])


def test_a_long_zero_tail_is_exempt(tmp_path: Path) -> None:
    path, problems = _segment(tmp_path, bytes(200))
    assert problems and "magic 0, not a v2 batch" in problems[0], problems
    assert _zero_tail(path, problems[0])


def test_stray_bytes_that_are_not_zeros_are_a_failure(tmp_path: Path) -> None:
    path, problems = _segment(tmp_path, bytes(20) + b"\x01" + bytes(34))
    assert problems and "stray bytes" in problems[0], problems
    assert not _zero_tail(path, problems[0])


def test_zombie_says_dead_for_a_zombie_and_a_reaped_process_alive_for_a_live_one() -> None:
    assert not _zombie(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while not _zombie(child.pid):  # exited, not yet reaped: a zombie
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    child.wait()
    assert _zombie(child.pid)  # reaped: no /proc entry at all
