"""``broker(processes=N)``: a ``serve --processes N`` cluster for tests, as a child process.

The nodes are processes of their own (that is the point of N), so unlike the one-process
``EmbeddedBroker`` this starts the real command, ``python -m kafka_sidecar.server serve
--processes N``, on free loopback ports with the same test defaults, and waits for its ready
line. ``bootstrap_servers`` lists every node; the server's log is ``log_path``.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_PORTS = re.compile(r"127\.0\.0\.1:(\d+) \[node \d+\]")


class ClusterBroker:
    """A cluster of ``processes`` kafka-sidecar nodes on 127.0.0.1 (free ports)."""

    def __init__(self, overrides: Mapping[str, str], processes: int, *, data_dir: Path | str | None = None,
                 start_timeout: float = 120.0) -> None:
        self.overrides = dict(overrides)
        self.processes = processes
        self._own_dir = data_dir is None
        self._tmp: Path | None = None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.start_timeout = start_timeout
        self.ports: list[int] = []
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[str] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ClusterBroker:
        if self.running:
            raise RuntimeError("the cluster is already running")
        if self.data_dir is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="kafka-sidecar-test-"))
            self.data_dir = self._tmp / "data"
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.server.log"
        cmd = [sys.executable, "-m", "kafka_sidecar.server", "serve", "--processes", str(self.processes),
               "--data-dir", str(self.data_dir), "--listen", "127.0.0.1:0"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.log_path, "a") as log:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            line = self._proc.stdout.readline()
            if not line and self._proc.poll() is not None:
                raise RuntimeError(f"kafka-sidecar --processes {self.processes} exited with {self._proc.returncode}: "
                                   f"{self.log_path.read_text()[-2000:]}")
            if line.startswith("kafka-sidecar listening on "):
                self.ports = [int(p) for p in _PORTS.findall(line)]
                return self
        self.stop()
        raise RuntimeError(f"kafka-sidecar --processes {self.processes} did not start in {self.start_timeout} s")

    def stop(self, *, keep_data: bool = False) -> None:
        """SIGTERM (every node stops cleanly); remove a temporary data dir."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(90)
                except subprocess.TimeoutExpired:
                    self._proc.kill()  # its nodes follow it (PR_SET_PDEATHSIG)
                    self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        if self._own_dir and not keep_data and self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = self.data_dir = None

    def restart(self) -> ClusterBroker:
        """Stop and start again with the same data (on new free ports: read ``bootstrap_servers`` again)."""
        self.stop(keep_data=True)
        return self.start()

    def __enter__(self) -> ClusterBroker:
        return self if self.running else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ClusterBroker of {self.processes} {'on ' + self.bootstrap_servers if self.running else 'stopped'}>"
