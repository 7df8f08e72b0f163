"""Test support: run kafka-sidecar as a real subprocess through its installed CLI."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What Apache Kafka 4.0.0 wrote and answered for fixed scenarios (see its README.md).
GOLDEN = REPO / "tests" / "data" / "kafka-4.0.0"


def kafka_bin(script: str) -> Path:
    """Apache Kafka's ``bin/<script>`` in the reference distribution (``bench.reference``:
    ``KAFKA_HOME`` or what ``make reference`` assembled); a path that does not exist when there
    is none, so ``.exists()`` tells a test to skip and say why."""
    from bench.reference import assembled_home, find_kafka_home

    home = find_kafka_home() or assembled_home()
    return home / "bin" / script


def kafka_tool_missing(script: str) -> str | None:
    """Why Kafka's ``script`` cannot run here, or None when it can (a skip reason)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java to run Kafka's tools"
    if not kafka_bin(script).exists():
        return f"no reference Kafka with bin/{script} (run `make reference` or set KAFKA_HOME)"
    return None

# Record timestamps for servers that keep running: ten minutes before the test session started.
# Records older than retention.ms (7 days by default) are deleted by the first retention check
# (30 s after start, then every 5 min), active segment included, as Kafka does; a test that
# produced such records to a long-lived broker could find them gone (and Kafka rejects records
# more than message.timestamp.after.max.ms, 1 h, in the future).
RECENT_TS = (int(time.time()) - 600) * 1000

_LISTENING = re.compile(r"listening on ([\w.:\[\]-]+):(\d+)")


def sidecar_command() -> list[str]:
    """The installed console script next to this interpreter (what users run)."""
    exe = Path(sys.executable).parent / "kafka-sidecar"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("kafka-sidecar")
    if found:
        return [found]
    return [sys.executable, "-m", "kafka_sidecar.server"]


@contextmanager
def running(proc: SidecarProcess, timeout: float = 120.0) -> Iterator[SidecarProcess]:
    """``proc`` started for the block: SIGTERM at the end (a cluster's supervisor stops its
    nodes), SIGKILL if that fails (the nodes follow their supervisor: PR_SET_PDEATHSIG)."""
    proc.start(timeout=timeout)
    try:
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            try:
                proc.stop(timeout=60)
            except Exception:
                proc.kill()


def cluster_node_pids(supervisor_pid: int) -> dict[int, int]:
    """The node processes of a ``serve --processes N`` supervisor: node id -> pid, read from the
    children's command lines (``--cluster-node K``); empty once the supervisor is gone."""
    out: dict[int, int] = {}
    try:
        children = Path(f"/proc/{supervisor_pid}/task/{supervisor_pid}/children").read_text().split()
    except FileNotFoundError:
        return out
    for pid in map(int, children):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if b"--cluster-node" in argv:
            out[int(argv[argv.index(b"--cluster-node") + 1])] = pid
    return out


class SidecarProcess:
    """A kafka-sidecar server on a loopback port, with a given data dir."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, port: int = 0, env: dict[str, str] | None = None,
                 processes: int = 1) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.port = port
        self.processes = processes  # > 1: `serve --processes N`, one cluster of N node processes
        self.ports: list[int] = []  # every node's port, node 1 first (from the ready line)
        self.env = dict(env or {})  # extra environment variables (e.g. a crash point)
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.server.log"
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> SidecarProcess:
        cmd = [*sidecar_command(), "serve", "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.port}"]
        if self.processes > 1:
            cmd += ["--processes", str(self.processes)]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._log_file = open(self.log_path, "a")
        env = {**os.environ, **self.env} if self.env else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log_file, text=True, env=env)
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"kafka-sidecar exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
                continue
            m = _LISTENING.search(line)
            if m:
                self.port = int(m.group(2))
                where = line[m.start():].partition(" (data dir")[0]
                self.ports = [int(p) for p in re.findall(r":(\d+)(?: \[node \d+\])?(?:,|$)", where)] or [self.port]
                return self
        raise RuntimeError(f"kafka-sidecar did not start in {timeout}s: {self.log_text()[-2000:]}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text()
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        self._close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._close()

    def node_pids(self) -> dict[int, int]:
        """A ``--processes N`` cluster's node processes: node id -> pid (from their command lines)."""
        assert self.proc is not None
        return cluster_node_pids(self.proc.pid)

    def restart(self) -> SidecarProcess:
        self.stop()
        return self.start()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, message: str = "condition"):
    """Poll ``predicate`` until truthy (bounded); returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
