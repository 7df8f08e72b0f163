"""The ``kafka-sidecar serve`` command line, run as users run it (a real subprocess).

Errors a user can fix exit 2 with one ``kafka-sidecar: error: ...`` line and no
traceback; signals stop the server cleanly (exit 0, ``.kafka_cleanshutdown``).
"""

from __future__ import annotations

import json
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.test_bad_input import (
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    RawClient,
    api_versions_request,
    metadata_request,
)
from tests.support import sidecar_command

_LISTENING = re.compile(r"kafka-sidecar listening on 127\.0\.0\.1:(\d+) ")
RUN_TIMEOUT = 20.0


def run_cli(args: list[str], cwd: Path, command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion (bounded): for invocations that must fail at once."""
    return subprocess.run([*(command or sidecar_command()), *args], cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *mentions: str) -> str:
    assert result.returncode == 2, f"exit {result.returncode}; stderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    assert "listening on" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one stderr line, got:\n{result.stderr}"
    assert lines[0].startswith("kafka-sidecar: error: "), lines[0]
    for m in mentions:
        assert m in lines[0], f"error line does not mention {m!r}: {lines[0]}"
    return lines[0]


class ServerRun:
    """A ``serve`` process started with any arguments; stdout read by a thread (never blocks)."""

    def __init__(self, args: list[str], cwd: Path, command: list[str] | None = None) -> None:
        self.stderr_path = cwd / f"stderr-{time.monotonic_ns()}.log"
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([*(command or sidecar_command()), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.stdout_lines: queue.Queue[str | None] = queue.Queue()
        self.stdout_seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.port = self._wait_listening()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout_lines.put(line)
        self.stdout_lines.put(None)

    def _wait_listening(self) -> int:
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise AssertionError(f"no 'listening' line within {RUN_TIMEOUT}s; stderr:\n{self.stderr_text()}")
            try:
                line = self.stdout_lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(5)
                raise AssertionError(f"server exited with {self.proc.returncode} before listening; stderr:\n{self.stderr_text()}")
            self.stdout_seen.append(line)
            m = _LISTENING.search(line)
            if m:
                return int(m.group(1))

    def stderr_text(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text()

    def signal(self, sig: int) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(RUN_TIMEOUT)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture
def servers():
    started: list[ServerRun] = []
    yield started
    for s in started:
        s.kill()


def start(servers: list[ServerRun], args: list[str], cwd: Path, command: list[str] | None = None) -> ServerRun:
    run = ServerRun(args, cwd, command)
    servers.append(run)
    return run


def serve_args(data_dir: Path, *extra: str) -> list[str]:
    return ["serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *extra]


def assert_answers(port: int) -> None:
    client = RawClient(port, client_id="cli-test")
    try:
        assert client.request(api_versions_request()).error_code == NONE
    finally:
        client.close()


# ------------------------------------------------------------------------ bad flags


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--bogus"],
        ["serve", "--listen", "nonsense"],
        ["serve", "--listen", "127.0.0.1:99999"],
        ["serve", "--listen", "127.0.0.1:"],
        ["serve", "--log-level", "LOUD"],
        ["serve", "--data-dir"],
        ["frobnicate"],
    ],
    # (No command at all prints the usage and the command list: test_console_tools.)
    ids=["unknown-flag", "listen-no-port", "listen-port-range", "listen-empty-port", "log-level", "missing-value", "unknown-command"],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, args):
    assert_one_line_error(run_cli(args, tmp_path))
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("log.segment.bytes=abc", "log.segment.bytes"),
        ("log.segment.bytes=13", "log.segment.bytes"),  # Kafka's minimum is 14
        ("num.partitions=0", "num.partitions"),
        ("num.partitions=", "num.partitions"),
        ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
        ("message.max.bytes=-5", "message.max.bytes"),
        ("log.retention.hours=1.5", "log.retention.hours"),
        ("num.partitions", "num.partitions"),  # no '='
    ],
)
def test_bad_override_value_exits_2_with_one_line(tmp_path, override, key):
    result = run_cli(serve_args(tmp_path / "data", "--override", override), tmp_path)
    assert_one_line_error(result, key)


def test_bad_value_in_config_file_exits_2_with_one_line(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a Kafka server.properties\nnum.partitions=three\n")
    assert_one_line_error(run_cli(serve_args(tmp_path / "data", "--config", str(props)), tmp_path), "num.partitions")


def test_missing_config_file_exits_2_with_one_line(tmp_path):
    missing = tmp_path / "nope.properties"
    assert_one_line_error(run_cli(serve_args(tmp_path / "data", "--config", str(missing)), tmp_path), str(missing))


def test_unknown_override_key_warns_and_runs(tmp_path, servers):
    run = start(servers, serve_args(tmp_path / "data", "--override", "no.such.setting=1"), tmp_path)
    assert_answers(run.port)
    warnings = [line for line in run.stderr_text().splitlines() if "no.such.setting" in line]
    assert len(warnings) == 1, warnings
    assert re.search(r"WARN", warnings[0]), warnings[0]
    assert run.signal(signal.SIGTERM) == 0


# ------------------------------------------------------------------- data dir, port


def test_data_dir_that_is_a_file_exits_2_with_one_line(tmp_path):
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("I am a file")
    assert_one_line_error(run_cli(serve_args(not_a_dir), tmp_path), str(not_a_dir))
    assert not_a_dir.read_text() == "I am a file"


def test_data_dir_below_a_file_exits_2_with_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    line = assert_one_line_error(run_cli(serve_args(tmp_path / "file" / "data"), tmp_path), str(tmp_path / "file" / "data"))
    # It names the data dir and the file in the way, not a file the server would write inside.
    assert line == f"kafka-sidecar: error: data dir {tmp_path / 'file' / 'data'} cannot be created: {tmp_path / 'file'} is a file, not a directory"


def test_unknown_override_near_miss_exits_2_with_did_you_mean(tmp_path):
    line = assert_one_line_error(run_cli(serve_args(tmp_path / "data", "--override", "num.partition=3"), tmp_path))
    assert line == "kafka-sidecar: error: unknown config num.partition in --override; did you mean num.partitions?"
    assert not (tmp_path / "data").exists()


def test_data_dir_locked_by_a_running_server_exits_2_with_one_line(tmp_path, sidecar_factory):
    first = sidecar_factory()
    meta = (first.data_dir / "meta.properties").read_text()
    assert_one_line_error(run_cli(serve_args(first.data_dir), tmp_path), str(first.data_dir))
    # The running server is untouched and still stops cleanly.
    assert_answers(first.port)
    assert (first.data_dir / "meta.properties").read_text() == meta
    assert first.stop() == 0
    assert (first.data_dir / ".kafka_cleanshutdown").exists()


def test_port_in_use_exits_2_with_one_error_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["serve", "--data-dir", str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}"]
        result = run_cli(args, tmp_path)
    # Checked before the data dir is touched: one line, nothing created.
    line = assert_one_line_error(result, f"127.0.0.1:{port}", "Address already in use", "--listen")
    assert line.startswith(f"kafka-sidecar: error: cannot listen on PLAINTEXT://127.0.0.1:{port}: ")
    assert not (tmp_path / "data").exists()


def test_listen_port_0_prints_the_actual_port(tmp_path, servers):
    run = start(servers, serve_args(tmp_path / "data"), tmp_path)
    assert run.port != 0
    assert len(run.stdout_seen) == 1 and str(tmp_path / "data") in run.stdout_seen[0]
    assert_answers(run.port)
    assert run.signal(signal.SIGTERM) == 0


# -------------------------------------------------------------------------- signals


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_cleanly(tmp_path, servers, sig):
    data = tmp_path / "data"
    run = start(servers, serve_args(data), tmp_path)
    client = RawClient(run.port, client_id="cli-signal")
    assert client.request(metadata_request(["signal-topic"])).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert client.request(metadata_request(["signal-topic"])).topics[0].error_code == NONE
    client.close()
    assert run.signal(sig) == 0
    stderr = run.stderr_text()
    assert "Traceback" not in stderr
    marker = data / ".kafka_cleanshutdown"
    assert marker.exists()
    content = json.loads(marker.read_text())
    assert content["version"] == 0 and isinstance(content["brokerEpoch"], int)
    # Kafka's clean-shutdown layout: an empty partition has zero-byte, trimmed files.
    part = data / "signal-topic-0"
    for suffix in (".log", ".index", ".timeindex"):
        assert (part / f"{0:020d}{suffix}").stat().st_size == 0


def test_python_dash_m_serve_works(tmp_path, servers):
    command = [sys.executable, "-m", "kafka_sidecar.server"]
    run = start(servers, serve_args(tmp_path / "data"), tmp_path, command=command)
    assert_answers(run.port)
    assert run.signal(signal.SIGTERM) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert_one_line_error(run_cli(["serve", "--bogus"], tmp_path, command=command))


# --------------------------------------------------------------------- configuration


def _metadata_topic(port: int, topic: str, allow_auto_create: bool = True):
    client = RawClient(port, client_id="cli-config")
    try:
        (t,) = client.request(metadata_request([topic], allow_auto_create)).topics
        return t
    finally:
        client.close()


def _all_topic_names(port: int) -> set[str]:
    client = RawClient(port, client_id="cli-config")
    try:
        return {t.name for t in client.request(metadata_request(None)).topics}
    finally:
        client.close()


def test_config_file_num_partitions_applies_to_auto_created_topics(tmp_path, servers):
    props = tmp_path / "server.properties"
    props.write_text(
        "# Kafka-style server.properties\n"
        "num.partitions=3\n"
        "log.dirs=/ignored/because/--data-dir/wins\n"
        "listeners=PLAINTEXT://127.0.0.1:9092\n"
    )
    data = tmp_path / "data"
    run = start(servers, serve_args(data, "--config", str(props)), tmp_path)
    first = _metadata_topic(run.port, "auto-three")
    assert first.error_code == UNKNOWN_TOPIC_OR_PARTITION  # Kafka's first answer while creating
    deadline = time.monotonic() + 10
    t = _metadata_topic(run.port, "auto-three")
    while t.error_code != NONE and time.monotonic() < deadline:
        time.sleep(0.05)
        t = _metadata_topic(run.port, "auto-three")
    assert t.error_code == NONE
    assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
    assert sorted(p.name for p in data.glob("auto-three-*")) == ["auto-three-0", "auto-three-1", "auto-three-2"]
    assert run.signal(signal.SIGTERM) == 0


@pytest.mark.parametrize("source", ["config-file", "override"])
def test_auto_create_disabled_answers_unknown_and_creates_nothing(tmp_path, servers, source):
    data = tmp_path / "data"
    if source == "config-file":
        props = tmp_path / "server.properties"
        props.write_text("auto.create.topics.enable=false\n")
        extra = ["--config", str(props)]
    else:
        extra = ["--override", "auto.create.topics.enable=false"]
    run = start(servers, serve_args(data, *extra), tmp_path)
    for _ in range(3):  # also the second time: nothing was created in between
        t = _metadata_topic(run.port, "never-created", allow_auto_create=True)
        assert t.error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert list(t.partitions) == []
    assert "never-created" not in _all_topic_names(run.port)
    assert not list(data.glob("never-created*"))
    assert run.signal(signal.SIGTERM) == 0
