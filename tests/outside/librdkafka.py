"""librdkafka's own test harness (``tests/``: test.c, the 0nnn-*.c/.cpp tests, ``test-runner``),
from Debian's librdkafka source package, the one registry this machine reaches that carries it
(PyPI's confluent-kafka sdist has only the Python binding; the Go, npm, Maven and crates
registries have none), or from a librdkafka source tree the user gives (``prepare(source=...)``,
``--librdkafka-source``: a git checkout of upstream, for tests newer than any registry's release,
such as the share-consumer tests 0170-0190 that librdkafka 2.14.2 lacks).

- ``prepare()``: ``apt-get source --download-only librdkafka`` from Debian ``LIBRDKAFKA_SUITE``
  (default ``sid``: bookworm's 2.0.2 predates the KIP-848 and newer tests) with an apt
  configuration of our own under ``.cache/outside/librdkafka/apt`` (the system's sources stay as
  they are; the mirror is the one the system's Debian sources name), ``dpkg-source -x`` of the
  upstream tree (without Debian's build patches), the codecs' -dev packages when missing and
  apt-get can install them, then ``./configure`` (no dependency download) and ``make`` of the libraries and
  ``tests/test-runner``, built once per version;
- ``prepare(source=DIR)``: the tree is copied (without ``.git``) under
  ``.cache/outside/librdkafka/source-<version>-<hash of its path>`` and built there the same way,
  once (the checkout itself is left untouched);
- ``selected_tests()``: the 0000-0999 series of ``tests/test.c`` (what librdkafka's ``make`` runs)
  less the tests flagged ``TEST_F_LOCAL`` (no broker: mock cluster, config, unit tests),
  ``TEST_F_MANUAL`` and ``TEST_F_KNOWN_ISSUE``;
- ``run_test()``: ``TESTS=0nnn ./test-runner -L`` in full mode (no ``-Q``) with a ``test.conf``
  holding ``bootstrap.servers``, ``TEST_KAFKA_VERSION`` the reference's (4.3.1), the classic
  group protocol (the harness's default), one test per process, bounded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.reference import kafka_version
from tests.outside.results import TestResult, shorten_log

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "outside" / "librdkafka"
SUITE = os.environ.get("LIBRDKAFKA_SUITE", "sid")
# Debian packages of the compression and SASL libraries librdkafka's configure looks for.
BUILD_DEPS = {"zstd.h": "libzstd-dev", "lz4.h": "liblz4-dev", "sasl/sasl.h": "libsasl2-dev",
              "zlib.h": "zlib1g-dev", "openssl/ssl.h": "libssl-dev"}
# What test.conf adds besides bootstrap.servers: the shared machine is slow.
TEST_CONF = {"test.timeout.multiplier": os.environ.get("LIBRDKAFKA_TIMEOUT_MULTIPLIER", "3")}
_ENTRY = re.compile(r"_TEST\(\s*(\d{4})_(\w+)\s*,\s*([^,)]*)")


@dataclass
class Build:
    version: str  # Debian's, e.g. 2.14.2-1, or a source tree's rdkafka.h version, e.g. 2.15.0
    root: Path  # the unpacked source tree
    origin: str = "Debian source package"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"


def _debian_mirror() -> str:
    """The Debian archive URI the system's apt sources use (deb822 or one-line)."""
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for stanza in path.read_text().split("\n\n"):
            uri = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            if uri and "security" not in uri.group(1) and re.search(r"^Types:.*\bdeb\b", stanza, re.M) \
                    and "debian" in uri.group(1):
                return uri.group(1)
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt").glob("sources.list.d/*.list"))]:
        if path.is_file():
            m = re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)\s", path.read_text(), re.M)
            if m:
                return m.group(1)
    raise RuntimeError("no Debian archive in /etc/apt's sources: librdkafka's test sources come from Debian")


def _apt_options() -> list[str]:
    apt = CACHE / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb-src {_debian_mirror()} {SUITE} main\n")
    return ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", f"Dir::Cache={apt / 'cache'}"]


def _run(cmd: list[str], cwd: Path, timeout: float, what: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {(done.stdout + done.stderr)[-2500:]}")
    return done.stdout


def _install_build_deps(log) -> None:
    missing = [pkg for header, pkg in BUILD_DEPS.items() if not Path("/usr/include", header).exists()]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(f"librdkafka: {', '.join(missing)} missing and apt-get unavailable: built without them")
        return
    log(f"librdkafka: apt-get install {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600, env=env)
    done = subprocess.run(["apt-get", "install", "-y", "-qq", *missing], capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        log(f"librdkafka: could not install {' '.join(missing)}: built without them")


def _build(root: Path, log) -> None:
    """``./configure && make`` of the libraries and tests/test-runner in ``root`` (bounded)."""
    _install_build_deps(log)
    jobs = str(min(2, os.cpu_count() or 1))
    _run(["./configure", "--disable-curl", "--disable-gssapi"], root, 900, "./configure")
    _run(["make", "-j", jobs, "libs"], root, 3600, "make libs")
    _run(["make", "-j", jobs, "-C", "tests", "build"], root, 3600, "make -C tests build")
    if not (root / "tests" / "test-runner").is_file():
        raise RuntimeError(f"no tests/test-runner after the build in {root}")


def source_version(source: Path) -> str:
    """A librdkafka tree's version from ``src/rdkafka.h``'s RD_KAFKA_VERSION (0xMMmmrrpp)."""
    header = source / "src" / "rdkafka.h"
    m = re.search(r"^#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", header.read_text(), re.M) if header.is_file() else None
    if m is None:
        raise RuntimeError(f"{source} is not a librdkafka source tree (no RD_KAFKA_VERSION in src/rdkafka.h)")
    v = int(m.group(1), 16)
    return f"{v >> 24}.{(v >> 16) & 0xFF}.{(v >> 8) & 0xFF}"


def prepare_source(source: Path, log=print) -> Build:
    """Build librdkafka's tests from the source tree ``source`` (a copy of it, once per tree)."""
    source = source.resolve()
    version = source_version(source)
    if not (source / "tests" / "test.c").is_file():
        raise RuntimeError(f"{source} has no tests/test.c: librdkafka's test sources are needed")
    origin = f"source tree {source}"
    tag = hashlib.sha1(str(source).encode()).hexdigest()[:8]
    root = CACHE / f"source-{version}-{tag}"
    if (root / ".built").is_file() and (root / "tests" / "test-runner").is_file():
        return Build(version, root, origin)
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    log(f"librdkafka {version}: copying {source} to {root}")
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    log(f"librdkafka {version}: ./configure && make (libraries and tests/test-runner)")
    _build(root, log)
    (root / ".built").write_text(f"{version} {source}\n")
    return Build(version, root, origin)


def prepare(log=print, source: Path | None = None) -> Build:
    """Download, unpack and build librdkafka and its test-runner (once per Debian version), or
    build the given source tree's (``source``)."""
    if source is not None:
        return prepare_source(source, log)
    CACHE.mkdir(parents=True, exist_ok=True)
    done_marker = CACHE / "built"
    if done_marker.is_file():
        version, root = done_marker.read_text().split()
        if (Path(root) / "tests" / "test-runner").is_file():
            return Build(version, Path(root))
    if not shutil.which("apt-get") or not shutil.which("dpkg-source"):
        raise RuntimeError("librdkafka's test sources come from Debian's source package: needs apt-get and dpkg-source")
    opts = _apt_options()
    log(f"librdkafka: apt-get update (deb-src {SUITE})")
    _run(["apt-get", *opts, "update"], CACHE, 900, "apt-get update")
    src = CACHE / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    log("librdkafka: apt-get source --download-only librdkafka")
    _run(["apt-get", *opts, "source", "--download-only", "librdkafka"], src, 900, "apt-get source librdkafka")
    dsc = next(src.glob("librdkafka_*.dsc"))
    version = dsc.name[len("librdkafka_"):-len(".dsc")]
    root = src / f"librdkafka-{version}"
    # Upstream's tree as released (Debian's patches make the build use system nanopb/cJSON and
    # regenerated OpenTelemetry headers; upstream's vendored copies need nothing more).
    _run(["dpkg-source", "--no-check", "--skip-patches", "-x", dsc.name, root.name], src, 600, "dpkg-source -x")
    log(f"librdkafka {version}: ./configure && make (libraries and tests/test-runner)")
    _build(root, log)
    done_marker.write_text(f"{version} {root}\n")
    return Build(version, root)


def test_entries(build: Build) -> list[tuple[str, str, str]]:
    """(number, name, flags) of each test in tests/test.c's tests[] table."""
    text = (build.tests_dir / "test.c").read_text()
    table = text[text.index("struct test tests[]"):]
    return [(m.group(1), m.group(2), m.group(3).strip()) for m in _ENTRY.finditer(table)]


def _selected(flags: str, number: str) -> bool:
    return int(number) < 1000 and not any(f in flags for f in ("TEST_F_LOCAL", "TEST_F_MANUAL", "TEST_F_KNOWN_ISSUE"))


def selected_tests(build: Build) -> list[str]:
    """The 0nnn tests that need a broker and run unattended (see the module docstring); a number
    once even when two tests share it (upstream's 0173-0184 have a ``_local`` twin)."""
    return list(dict.fromkeys(number for number, _name, flags in test_entries(build) if _selected(flags, number)))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STATES = ("FAILED", "RUNNING", "DNS", "SKIPPED", "PASSED")  # the worst one decides


def _verdict(number: str, output: str, code: int | None, names: list[str] | None = None) -> tuple[str, str]:
    """(status, detail) from test-runner's report of one test number; ``names``: the selected
    tests of that number (``TESTS=0176`` also reports its ``_local`` twin, skipped by ``-L``)."""
    output = _ANSI.sub("", output)
    if code is None:
        return "timeout", _fail_lines(output)
    # The summary table (in colour, codes removed): "| 0001_multiobj   |     PASSED |   1.234s |".
    rows = re.findall(rf"^\|\s*({number}_\w+)\s*\|\s*(\w+)\s*\|", output, re.M)
    wanted = None if names is None else {f"{number}_{n}" for n in names}
    states = [state for name, state in rows if wanted is None or name in wanted]
    state = min(states, key=lambda st: _STATES.index(st) if st in _STATES else -1) if states else ""
    if state == "PASSED" and code == 0:
        return "pass", ""
    if state == "SKIPPED":
        why = re.findall(r"(?:SKIPPING|[Ss]kipping)[^\n]*", output)
        return "skip", " | ".join(w.strip() for w in why[:2])[:300]
    return "fail", _fail_lines(output)


def _fail_lines(output: str, limit: int = 4) -> str:
    lines = [line.strip() for line in output.splitlines() if "FAIL" in line or "Test assert" in line or "### Test" in line]
    return " | ".join(lines[:limit])[:600]


def run_test(build: Build, number: str, bootstrap: str, timeout: float, log_path: Path) -> TestResult:
    """``TESTS=<number> ./test-runner -L`` against ``bootstrap``; output to ``log_path``."""
    conf = log_path.with_suffix(".conf")
    conf.write_text(f"bootstrap.servers={bootstrap}\n" + "".join(f"{k}={v}\n" for k, v in TEST_CONF.items()))
    env = {**os.environ, "TESTS": number, "RDKAFKA_TEST_CONF": str(conf), "TEST_LEVEL": "2",
           # The broker version the tests gate features on (test-runner's default is 2.4.0).
           "TEST_KAFKA_VERSION": kafka_version(),
           "LD_LIBRARY_PATH": f"{build.root / 'src'}:{build.root / 'src-cpp'}"}
    t0 = time.monotonic()
    with open(log_path, "w") as out:
        proc = subprocess.Popen(["./test-runner", "-L"], cwd=build.tests_dir, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            code = None
    names = [name for n, name, flags in test_entries(build) if n == number and _selected(flags, n)]
    status, detail = _verdict(number, shorten_log(log_path), code, names)
    return TestResult(number, status, round(time.monotonic() - t0, 1), detail, str(log_path))
