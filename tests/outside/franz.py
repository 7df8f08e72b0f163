"""franz-go's kgo integration tests (``github.com/twmb/franz-go/pkg/kgo/*_test.go``), built from the
module zip that the Go module proxy serves (it carries the ``_test.go`` files).

- ``prepare()``: ``go mod download`` of ``github.com/twmb/franz-go@FRANZ_GO_VERSION`` into a module
  cache under ``.cache/outside/go``, a writable copy of the module, and ``go test -c`` of
  ``pkg/kgo`` into ``.cache/outside/franz-go-<version>/kgo.test`` (built once per version);
- ``integration_tests()``: the top-level ``Test*`` functions that talk to a broker: those whose
  body calls one of the suite's broker helpers (``newTestClient``, ``adm``, ``tmpTopic``...); the
  other ~110 are unit tests of the client that need no broker;
- ``run_test()``: one test in its own process (``-test.run '^Name$'``), bounded by ``-test.timeout``
  and a kill shortly after, with the settings franz-go's own CI uses against one Kafka broker
  (``KGO_TEST_RF=1``, ``KGO_SEEDS``); ``KGO_TEST_RECORDS`` is left at the suite's default
  (500,000) unless given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

from tests.outside.results import TestResult, shorten_log

MODULE = "github.com/twmb/franz-go"
VERSION = os.environ.get("FRANZ_GO_VERSION", "v1.22.3")
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "outside"

# Helpers of pkg/kgo's tests that reach a broker (helpers_test.go); a test calling none of them
# is a unit test. The SCRAM/OAuth tests read their own seeds (KGO_TEST_SCRAM_SEEDS, ...).
BROKER_HELPERS = ("adm()", "newTestClient(", "testClientOpts(", "getSeedBrokers(", "tmpTopic", "tmpGroup",
                  "tmpShareGroup", "newTestConsumer", "testChainETL", "internalTopic(", "scramSeeds", "oauthSeeds")
_TEST_FUNC = re.compile(r"^func (Test\w+)\(t \*testing\.T\) \{\n(.*?)^\}", re.S | re.M)


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not found:
        raise RuntimeError("no Go toolchain (go on PATH or /usr/local/go/bin/go): install Go 1.26+")
    return found


def go_env() -> dict[str, str]:
    """Go's environment for the download and the build: a module cache of our own, removable
    (-modcacherw), no toolchain download (GOTOOLCHAIN=local), modules through the proxy."""
    return {
        **os.environ,
        "GOMODCACHE": str(CACHE / "go" / "mod"),
        "GOCACHE": str(CACHE / "go" / "build"),
        "GOFLAGS": "-mod=mod -modcacherw",
        "GOTOOLCHAIN": "local",
    }


def build_dir(version: str = VERSION) -> Path:
    return CACHE / f"franz-go-{version}"


def _make_writable(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        os.chmod(dirpath, os.stat(dirpath).st_mode | stat.S_IWUSR)
        for f in files:
            p = os.path.join(dirpath, f)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)


def prepare(version: str = VERSION, log=print) -> Path:
    """The compiled kgo test binary for ``version`` (downloaded and built when missing)."""
    out = build_dir(version)
    binary = out / "kgo.test"
    if binary.is_file() and (out / ".complete").is_file():
        return binary
    go, env = go_binary(), go_env()
    CACHE.mkdir(parents=True, exist_ok=True)
    log(f"franz-go: go mod download {MODULE}@{version}")
    done = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{version}"], env=env, cwd=CACHE,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {MODULE}@{version} failed: {(done.stdout + done.stderr)[-2000:]}")
    module_dir = Path(json.loads(done.stdout)["Dir"])
    src = out / "src"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(module_dir, src)
    _make_writable(src)
    log(f"franz-go: go test -c ./pkg/kgo (in {src})")
    done = subprocess.run([go, "test", "-c", "-o", str(binary), "./pkg/kgo"], env=env, cwd=src,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0 or not binary.is_file():
        raise RuntimeError(f"go test -c ./pkg/kgo failed: {(done.stdout + done.stderr)[-3000:]}")
    (out / ".complete").write_text(version + "\n")
    return binary


def integration_tests(version: str = VERSION) -> list[str]:
    """The kgo tests that need a broker, in file order (see BROKER_HELPERS)."""
    names = []
    for path in sorted((build_dir(version) / "src" / "pkg" / "kgo").glob("*_test.go")):
        for m in _TEST_FUNC.finditer(path.read_text()):
            if any(h in m.group(2) for h in BROKER_HELPERS):
                names.append(m.group(1))
    return names


def _verdict(name: str, output: str, returncode: int | None) -> tuple[str, str]:
    """(status, detail) from ``go test -v`` output of one top-level test."""
    if re.search(rf"^--- PASS: {re.escape(name)} ", output, re.M):
        return "pass", ""
    if re.search(rf"^--- SKIP: {re.escape(name)} ", output, re.M):
        return "skip", _failure_lines(output)
    if "panic: test timed out after" in output or returncode is None:
        return "timeout", _failure_lines(output)
    return "fail", _failure_lines(output)


def _failure_lines(output: str, limit: int = 6) -> str:
    """The test's own log lines (``file_test.go:NN: ...``: errors, a skip's reason), first few."""
    lines = [line.strip() for line in output.splitlines() if re.search(r"\w+_test\.go:\d+: ", line)]
    if not lines:
        lines = [line.strip() for line in output.splitlines() if line.startswith(("panic:", "--- FAIL"))]
    return " | ".join(lines[:limit])[:600]


def run_test(binary: Path, name: str, bootstrap: str, timeout: float, log_path: Path,
             extra_env: dict[str, str] | None = None) -> TestResult:
    """Run kgo test ``name`` against ``bootstrap``; its output goes to ``log_path``."""
    env = {**os.environ, "KGO_SEEDS": bootstrap, "KGO_TEST_RF": "1", **(extra_env or {})}
    cmd = [str(binary), "-test.run", f"^{name}$", "-test.v", "-test.count=1", f"-test.timeout={int(timeout)}s"]
    cwd = build_dir() / "src" / "pkg" / "kgo"
    t0 = time.monotonic()
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout + 60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            code = None
    seconds = time.monotonic() - t0
    status, detail = _verdict(name, shorten_log(log_path), code)
    return TestResult(name, status, round(seconds, 1), detail, str(log_path))

