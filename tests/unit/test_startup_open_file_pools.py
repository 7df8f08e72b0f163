"""The two pools of open files (index descriptors, storage/index.py INDEX_FILES; inactive
segments' logs, storage/log_segment.py SEGMENT_FILES) are sized from the soft RLIMIT_NOFILE.
They are first sized at import, before the broker raises the soft limit to the hard one; the
raise (server/broker.py raise_open_file_limit) sizes them again from the limit in effect after
it. Each case runs a real process whose limits are lowered before it starts."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

_CAPS = ("from kafka_sidecar.storage import index, log_segment; "
         "caps = lambda: (index.INDEX_FILES.cap, log_segment.SEGMENT_FILES.cap); ")


def _run(code: str, soft: int, hard: int, *args: str) -> list[int]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    out = subprocess.run([sys.executable, "-c", code, *args], preexec_fn=lower, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return [int(v) for v in out.stdout.split()]


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 8192, reason="hard limit too low to raise the soft one past 8192")
def test_the_caps_follow_the_soft_limit_the_broker_raised(tmp_path: Path) -> None:
    code = (_CAPS + "import sys; from pathlib import Path; "
            "from kafka_sidecar.server.broker import raise_open_file_limit; "
            "before = caps(); soft = raise_open_file_limit(10, Path(sys.argv[1])); "
            "print(*before, soft, *caps())")
    index_before, segments_before, soft, index_after, segments_after = _run(code, 1024, 8192, str(tmp_path))
    # At import: an eighth and a quarter of the lowered soft limit.
    assert (index_before, segments_before) == (128, 256)
    # After the raise to the hard limit: the same fractions of it.
    assert soft == 8192
    assert (index_after, segments_after) == (1024, 2048)


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 1024, reason="hard limit too low")
def test_the_caps_stay_when_the_limit_is_already_at_the_hard_limit(tmp_path: Path) -> None:
    code = (_CAPS + "import sys; from pathlib import Path; "
            "from kafka_sidecar.server.broker import raise_open_file_limit; "
            "before = caps(); raise_open_file_limit(10, Path(sys.argv[1])); print(*before, *caps())")
    assert _run(code, 1024, 1024, str(tmp_path)) == [128, 256, 128, 256]


def test_follow_open_file_limit_resizes_both_pools_in_place() -> None:
    # Without the broker: the soft limit is raised by hand, then the pools follow it (the
    # segment pool keeps its identity, as readers hold the module's SEGMENT_FILES).
    code = (_CAPS + "import resource; pool = log_segment.SEGMENT_FILES; before = caps(); "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (2048, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
            "got = log_segment.follow_open_file_limit(); "
            "assert pool is log_segment.SEGMENT_FILES and got == caps(); print(*before, *got)")
    hard = HARD if HARD != resource.RLIM_INFINITY else 4096
    if hard < 2048:
        pytest.skip("hard limit too low")
    assert _run(code, 512, min(hard, 4096)) == [64, 128, 256, 512]


def test_a_log_manager_made_before_the_raise_follows_it_too(tmp_path: Path) -> None:
    # Broker makes its LogManager (and its pools) before raise_open_file_limit runs.
    code = ("import resource, sys; from pathlib import Path; "
            "from kafka_sidecar.storage.log_manager import LogManager; "
            "lm = LogManager(Path(sys.argv[1])); before = (lm.pools.indexes.cap, lm.pools.segments.cap); "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (2048, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
            "from kafka_sidecar.storage.log_segment import follow_open_file_limit; follow_open_file_limit(); "
            "print(*before, lm.pools.indexes.cap, lm.pools.segments.cap)")
    hard = HARD if HARD != resource.RLIM_INFINITY else 4096
    if hard < 2048:
        pytest.skip("hard limit too low")
    assert _run(code, 512, min(hard, 4096), str(tmp_path)) == [64, 128, 256, 512]


def test_each_log_manager_owns_its_pools(tmp_path: Path) -> None:
    """Two brokers in one process: a log's segments and indexes count in its own manager's pools,
    not in the other's nor in the process default."""
    from kafka_sidecar.storage import index, log_segment
    from kafka_sidecar.storage.log_manager import LogManager

    a, b = LogManager(tmp_path / "a"), LogManager(tmp_path / "b")
    a.startup()
    b.startup()
    try:
        assert a.pools is not b.pools and a.pools is not log_segment.DEFAULT_POOLS
        a.create_topic("t", 1)
        lg = a.get_log("t", 0)
        assert lg.pools is a.pools and lg.active_segment._pools is a.pools
        assert lg.active_segment.offset_index._pool is a.pools.indexes is not index.INDEX_FILES
        a_segments_before = len(a.pools.segments)
        lg.active_segment.offset_index.open()  # an index descriptor: counted in a's pool only
        assert lg.active_segment.offset_index in a.pools.indexes.indexes
        assert len(b.pools.indexes) == 0 and len(b.pools.segments) == 0
        assert len(a.pools.segments) == a_segments_before
    finally:
        a.shutdown()
        b.shutdown()
