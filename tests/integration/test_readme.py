"""The README runs as written, so it cannot go stale.

- Every fenced ```sh and ```python block runs, unless the line before it is
  ``<!-- readme-test: skip: REASON -->``; the blocks so marked are exactly ``SKIPPED`` below
  (`make run`/`make test` themselves, the install from the repository's URL, the SASL_SSL
  client settings and the ACL commands, each run by another test named in its reason).
- The server the blocks talk to is started as the README says: ``make run`` (with ``LISTEN``
  and ``DATA_DIR``, on a free port), in a scratch directory holding the repository's Makefile,
  pyproject.toml and .venv; its ready line must have the shape of the README's example. The one
  change made to the blocks: the README's ``localhost:9092`` / ``127.0.0.1:9092`` become that
  server's address (the "First message" block starts its own ``serve``, on a free port given
  as ``KAFKA_LISTENERS``, the README's configuration by environment).
- Every ``kafka-sidecar COMMAND --flag`` written anywhere in the README (synopses included)
  names a real command and flags it has.
- The "What is implemented" table lists exactly the APIs and versions the broker serves.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO

README = REPO / "README.md"
TIMEOUT = 240
MARK = re.compile(r"<!-- readme-test: skip: (.+?) -->")
SKIPPED = {  # first line of each block that may not run here, and why
    "make run     # creates .venv, installs, serves on localhost:9092 (127.0.0.1 and ::1) with data in ./data",
    "pipx install 'git+<repository URL>'               # or: pip install 'git+<repository URL>'",
    "# confluent-kafka",
    "kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:alice \\",
}


def fenced_blocks() -> list[tuple[str, str, int, str | None]]:
    """(language, code, line number, skip reason) of every fenced block."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = MARK.fullmatch(before.strip())
        out.append((m.group(1), m.group(2), line, skip.group(1) if skip else None))
    return out


def runnable(lang: str) -> list[tuple[str, int]]:
    return [(code, line) for lg, code, line, skip in fenced_blocks() if lg == lang and skip is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scratch(path: Path) -> Path:
    """A directory a newcomer's clone would be: the Makefile, pyproject.toml and .venv."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("Makefile", "pyproject.toml", ".venv"):
        (path / name).symlink_to(REPO / name)
    return path


def ready_line_pattern() -> re.Pattern[str]:
    """The README's example ready line, with its variable parts (address, data dir, cluster id,
    milliseconds) as patterns."""
    m = re.search(r"`(kafka-sidecar listening on [^`]+)`", README.read_text())
    assert m, "the README shows no ready line"
    example = m.group(1)
    pattern = re.escape(example)
    pattern = pattern.replace(re.escape("localhost:9092"), r"(?P<host>[\w.\[\]:]+):(?P<port>\d+)")
    pattern = re.sub(r"data\\ dir\\ [^,]+,", r"data\\ dir\\ [^,]+,", pattern)
    pattern = re.sub(r"cluster\\ id\\ [\w-]+,", r"cluster\\ id\\ [\\w-]{22},", pattern)
    pattern = re.sub(r"ready\\ in\\ \d+\\ ms", r"ready\\ in\\ \\d+\\ ms", pattern)
    return re.compile(pattern)


class MakeRun:
    """`make run LISTEN=127.0.0.1:0 DATA_DIR=./data` in a scratch clone, until stopped."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen(["make", "--no-print-directory", "run", "LISTEN=127.0.0.1:0", "DATA_DIR=./data"], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + TIMEOUT
        pattern = ready_line_pattern()
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic())).rstrip("\n")
            if line.startswith("kafka-sidecar listening on"):
                m = pattern.fullmatch(line)
                assert m, f"ready line {line!r} has not the shape of the README's example ({pattern.pattern})"
                self.ready_line = line
                self.bootstrap = f"127.0.0.1:{m.group('port')}"
                return

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C, as the README says
        try:
            assert self.proc.wait(60) in (0, 2, 130, -signal.SIGINT)  # make stops as its recipe was interrupted
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MakeRun, Path]]:
    cwd = scratch(tmp_path_factory.mktemp("readme") / "clone")
    run = MakeRun(cwd)
    try:
        yield run, cwd
    finally:
        run.stop()
    assert (cwd / "data" / ".kafka_cleanshutdown").exists()


def as_run_here(code: str, bootstrap: str) -> str:
    return code.replace("localhost:9092", bootstrap).replace("127.0.0.1:9092", bootstrap)


def test_the_marked_blocks_are_the_stated_ones() -> None:
    marked = {code.splitlines()[0] for lang, code, _, skip in fenced_blocks() if skip is not None}
    assert marked == SKIPPED
    assert runnable("sh") and runnable("python")


PYTHON_BLOCKS = [(code, line) for code, line in runnable("python") if "pyspark" not in code]
SPARK_BLOCKS = [(code, line) for code, line in runnable("python") if "pyspark" in code]


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_python_block(index: int, make_run: tuple[MakeRun, Path]) -> None:
    run, cwd = make_run
    code, line = PYTHON_BLOCKS[index]
    done = subprocess.run([sys.executable, "-c", as_run_here(code, run.bootstrap)], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, f"README.md:{line}\n{code}\n{done.stderr[-3000:]}"


try:  # test_spark.py's SparkSession fixture (Java 17 and pyspark, both dev requirements)
    from tests.integration.test_spark import spark  # noqa: F401
except (ImportError, pytest.skip.Exception) as e:
    _why = str(e)

    @pytest.fixture
    def spark():
        pytest.skip(f"no Spark here: {_why}")


def test_spark_block(spark, make_run: tuple[MakeRun, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The Spark snippet, in this process: its getOrCreate() returns the session test_spark.py's
    fixture started, so it costs a read, not another Spark start."""
    run, cwd = make_run
    (code, line), = SPARK_BLOCKS
    monkeypatch.chdir(cwd)
    scope: dict[str, object] = {}
    exec(compile(as_run_here(code, run.bootstrap), f"README.md:{line}", "exec"), scope)  # noqa: S102
    assert scope["df"].columns[:3] == ["key", "value", "topic"]  # Spark's kafka source schema


@pytest.mark.parametrize("index", range(len(runnable("sh"))))
def test_shell_block(index: int, make_run: tuple[MakeRun, Path], tmp_path: Path) -> None:
    run, _ = make_run
    code, line = runnable("sh")[index]
    cwd = scratch(tmp_path / "clone")
    env = dict(os.environ)
    own_server = re.search(r"kafka-sidecar serve\b.*&", code) is not None
    bootstrap = run.bootstrap
    if own_server:  # the block starts its own server: a free port for it, by KAFKA_LISTENERS
        bootstrap = f"127.0.0.1:{free_port()}"
        env["KAFKA_LISTENERS"] = f"PLAINTEXT://{bootstrap}"
    env["PATH"] = f"{REPO / '.venv' / 'bin'}:{env['PATH']}"
    # Output to files: a server the block leaves in the background keeps a pipe open.
    with open(tmp_path / "out", "w") as out_f, open(tmp_path / "err", "w") as err_f:
        proc = subprocess.Popen(["bash", "-e", "-c", as_run_here(code, bootstrap)], cwd=cwd, env=env, stdout=out_f,
                                stderr=err_f, text=True, start_new_session=True)
    try:
        proc.wait(timeout=TIMEOUT)
        out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # a server the block left running in the background
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"README.md:{line}\n{code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    if own_server:
        assert "user-1\thello" in out and "world" in out and '"key": "user-1"' in out, out
    if "kcat -C" in code:
        assert "hello" in out


def command_lines() -> list[tuple[str, str]]:
    """(command, rest of the line) for every ``kafka-sidecar COMMAND ...`` in the README's code."""
    text = README.read_text()
    code = "\n".join(m.group(1) for m in re.finditer(r"^```\w*\n(.*?)^```$", text, re.M | re.S))
    code += "\n" + "\n".join(line for line in text.splitlines() if line.startswith("    "))
    out = []
    for line in code.splitlines():
        for m in re.finditer(r"(?:^\s*|[|;&]\s*)kafka-sidecar ([a-z][a-z-]+)((?:[^|#]*?))(?=$|\||#)", line):
            out.append((m.group(1), m.group(2)))
    return out


def test_every_command_and_flag_written_exists() -> None:
    from kafka_sidecar.server.cli import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    checked = 0
    for command, rest in command_lines():
        if command in ("listening", "metrics"):  # the ready and metrics lines, not commands
            continue
        assert command in COMMANDS, f"README writes `kafka-sidecar {command}`, which is not a command"
        flags = set(sub.choices[command]._option_string_actions)
        for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", rest):
            assert flag in flags, f"README writes `kafka-sidecar {command} ... {flag}`, which it does not take"
            checked += 1
    assert checked > 50


def test_the_api_table_is_what_the_broker_serves() -> None:
    from kafka_sidecar.server.dispatch import SUPPORTED_APIS

    text = README.read_text()
    section = text[text.index("## What is implemented"):]
    section = section[:section.index("\n### ")]
    listed: dict[int, tuple[str, int, int]] = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        apis = re.findall(r"(\w+) \((\d+)\)", cells[0])
        if not apis:
            continue
        versions = [v.strip() for v in cells[1].split(",")]
        if len(versions) == 1:
            versions *= len(apis)
        assert len(versions) == len(apis), row
        for (name, key), v in zip(apis, versions, strict=True):
            lo, _, hi = v.partition("-")
            assert int(key) not in listed, f"{name} ({key}) listed twice"
            listed[int(key)] = (name, int(lo), int(hi or lo))
    served = {k: (a.name, a.min_version, a.max_version) for k, a in SUPPORTED_APIS.items()}
    assert listed == served
