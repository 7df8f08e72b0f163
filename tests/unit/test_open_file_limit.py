"""The open file limit at start: the soft RLIMIT_NOFILE is raised to the hard limit, and a limit
still too low for the partitions on disk stops the start with an error that names it.
Each case runs a real process whose limits are lowered before it starts.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def _lower(soft: int, hard: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 512, reason="hard limit too low to lower the soft one below it")
def test_the_soft_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    hard = 4096 if HARD == resource.RLIM_INFINITY or HARD > 4096 else HARD
    code = (
        "import resource, sys; from pathlib import Path; "
        "from kafka_sidecar.server.broker import raise_open_file_limit; "
        "before = resource.getrlimit(resource.RLIMIT_NOFILE)[0]; "
        "after = raise_open_file_limit(10, Path(sys.argv[1])); "
        "print(before, after, resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], preexec_fn=_lower(300, hard),
                         capture_output=True, text=True, timeout=60, check=True)
    before, after, now = map(int, out.stdout.split())
    assert (before, after, now) == (300, hard, hard)


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 400, reason="hard limit too low")
def test_a_limit_too_low_for_the_partitions_stops_the_start_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for p in range(200):
        (data / f"t-{p}").mkdir()
    cmd = [sys.executable, "-m", "kafka_sidecar.server.cli", "serve", "--data-dir", str(data), "--listen", "127.0.0.1:0"]
    out = subprocess.run(cmd, preexec_fn=_lower(300, 400), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "open file limit (RLIMIT_NOFILE: soft 400, hard 400)" in out.stderr
    assert "200 partitions" in out.stderr and "at least 456" in out.stderr
