"""A damaged group-configs or client-metrics file stops the start and names the file.

Ignoring it would serve groups with the wrong configs and let the next change write over what
could not be read (as the quotas, ACLs and SCRAM credentials files already are: read at start).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.reference import free_port


@pytest.mark.parametrize(("name", "what", "content"), [
    ("sidecar-group-configs.json", "group configs", '{"groups": {"g": '),
    ("sidecar-group-configs.json", "group configs", '{"groups": {"g": 5}}'),
    ("sidecar-client-metrics.json", "client metrics subscriptions", "{not json"),
    ("sidecar-client-metrics.json", "client metrics subscriptions", '{"subscriptions": ["a"]}'),
])
def test_damaged_store_stops_the_start(tmp_path: Path, name: str, what: str, content: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / name).write_text(content)
    run = subprocess.run([sys.executable, "-m", "kafka_sidecar.server", "serve", "--data-dir", str(data),
                          "--listen", f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"cannot read {what} {data / name}" in run.stderr
    assert (data / name).read_text() == content  # left as found, for the operator to fix
