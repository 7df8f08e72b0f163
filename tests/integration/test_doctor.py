"""``kafka-sidecar doctor``: one ``ok:``/``problem:`` line per check (config, data dir, each
listener), run as a user runs it, never changing what it looks at."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.support import sidecar_command


def doctor(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sidecar_command(), "doctor", *args], cwd=cwd, capture_output=True, text=True, timeout=30)


def lines_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr and result.stderr == "", result.stderr
    return result.stdout.splitlines()


def test_all_well_on_a_fresh_machine(tmp_path: Path) -> None:
    result = doctor(tmp_path, "--data-dir", "data", "--listen", "127.0.0.1:0")
    assert result.returncode == 0
    assert lines_of(result) == [
        "ok: config: every value valid, every name known",
        "ok: data dir data: does not exist yet, will be created",
        "ok: listener PLAINTEXT://127.0.0.1:0: a free port is picked at start",
    ]
    assert not (tmp_path / "data").exists()  # doctor creates nothing


def test_config_file_problems(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text("num.partition 3\nlog.segment.bytes=1048576\n")
    result = doctor(tmp_path, "--config", "server.properties", "--data-dir", "data", "--listen", "127.0.0.1:0")
    assert result.returncode == 1
    assert lines_of(result)[0] == "problem: config file server.properties: unknown config num.partition, ignored; did you mean num.partitions?"
    (tmp_path / "bad.properties").write_text("num.partitions=three\n")
    result = doctor(tmp_path, "--config", "bad.properties", "--data-dir", "data")
    assert result.returncode == 1
    assert lines_of(result) == ["problem: config file bad.properties: Invalid value three for configuration num.partitions: "
                                "Not a number of type INT (from bad.properties)"]


def test_data_dir_problems(tmp_path: Path, sidecar_factory) -> None:
    (tmp_path / "afile").write_text("x")
    result = doctor(tmp_path, "--data-dir", "afile", "--listen", "127.0.0.1:0")
    assert result.returncode == 1 and lines_of(result)[1] == "problem: data dir afile is a file, not a directory"
    result = doctor(tmp_path, "--data-dir", "afile/data", "--listen", "127.0.0.1:0")
    assert lines_of(result)[1] == "problem: data dir afile/data cannot be created: afile is a file, not a directory"
    running = sidecar_factory()
    result = doctor(tmp_path, "--data-dir", str(running.data_dir), "--listen", "127.0.0.1:0")
    assert result.returncode == 1
    assert lines_of(result)[1] == f"problem: data dir {running.data_dir} is in use by another process (lock held on .lock)"
    assert running.stop() == 0
    result = doctor(tmp_path, "--data-dir", str(running.data_dir), "--listen", "127.0.0.1:0")
    assert result.returncode == 0
    assert lines_of(result)[1] == f"ok: data dir {running.data_dir}: writable, 0 partition(s), last stop was clean"


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = doctor(tmp_path, "--data-dir", "data", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert lines_of(result)[2] == (f"problem: cannot listen on PLAINTEXT://127.0.0.1:{port}: Address already in use (another "
                                   "process listens there: pick another with --listen HOST:PORT, or LISTEN=... for make run)")
    result = doctor(tmp_path, "--data-dir", "data", "--override", "listeners=PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2")
    assert result.returncode == 1 and lines_of(result)[-1].startswith("problem: listeners: Invalid value PLAINTEXT://127.0.0.1:1")
