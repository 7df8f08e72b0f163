"""Fixtures of the conformance suite: one broker of each kind per session, and ``conform``.

Targets (session-scoped, started once, in parallel):

- ours: ``SIDECAR_BOOTSTRAP=host:port`` if set (an already running kafka-sidecar, e.g. the
  compose/ one), else a kafka-sidecar subprocess on a loopback port with ``BROKER_OVERRIDES``;
- reference: ``KAFKA_REFERENCE_BOOTSTRAP=host:port`` if set; else Apache Kafka launched from
  ``KAFKA_HOME`` or the distribution ``make reference`` assembles (``bench/reference.py``) with the same
  overrides; else a testcontainers ``KafkaContainer`` (apache/kafka) when a Docker engine
  answers; else the reference half of every test skips, saying why. ``CONFORMANCE_REQUIRE_REFERENCE=1``
  turns that skip into an error (CI, where the reference is present).

Each test is parametrized over the two targets. The ``[ours]`` half runs the scenario on both
brokers side by side (threads) and fails on any difference not listed in
``known_differences.py``; the ``[reference]`` half reuses the reference's run and checks the
test's own assertions against Kafka (so they are known to describe Kafka).
``CONFORMANCE_STRICT=1`` makes known differences fail too.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.harness import (
    BROKER_OVERRIDES,
    OURS,
    REFERENCE,
    Ctx,
    Outcome,
    Target,
    check_external_settings,
    compare,
    env_flag,
    run_outcome,
    run_side_by_side,
    wait_for_port,
)
from tests.conformance.known_differences import KNOWN
from tests.support import SidecarProcess


def _reference_image() -> str:
    from bench.reference import kafka_version

    return os.environ.get("KAFKA_REFERENCE_IMAGE") or f"apache/kafka:{kafka_version()}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: scenario compared between kafka-sidecar and Apache Kafka")


_HERE = Path(__file__).parent
_LAST_ITEM: list[str] = []  # node id of the last conformance test of the session
_SESSION_BROKERS: list[Brokers] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mine = [item for item in items if Path(str(item.fspath)).parent == _HERE]
    for item in mine:
        item.add_marker(pytest.mark.conformance)
    _LAST_ITEM[:] = [mine[-1].nodeid] if mine else []


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # In a whole-suite run, stop both brokers after the last conformance test rather than at the
    # end of the session (the reference JVM holds ~400 MB).
    if _LAST_ITEM and item.nodeid == _LAST_ITEM[0]:
        for b in _SESSION_BROKERS:
            b.stop()


# --------------------------------------------------------------------------- launching


class Brokers:
    """The session's targets; ``reference`` is None when none is available (``reason`` says why)."""

    def __init__(self) -> None:
        self.ours: Target | None = None
        self.reference: Target | None = None
        self.reason: str | None = None
        self.ours_error: BaseException | None = None
        self._stops: list[Callable[[], Any]] = []
        self.outcomes: dict[tuple[str, str], Outcome] = {}
        self.known_report: list[str] = []

    def stop(self) -> None:
        stops, self._stops = self._stops, []
        for fn in reversed(stops):
            try:
                fn()
            except Exception:  # noqa: BLE001 - stop the rest anyway
                pass


def _start_ours(brokers: Brokers, work: Path) -> None:
    external = os.environ.get("SIDECAR_BOOTSTRAP", "").strip()
    if external:
        if not wait_for_port(external, 30):
            raise RuntimeError(f"SIDECAR_BOOTSTRAP={external}: nothing accepts connections there")
        target = Target(OURS, external, f"kafka-sidecar at SIDECAR_BOOTSTRAP={external}", external=True)
        check_external_settings(target)
        brokers.ours = target
        return
    server = SidecarProcess(work / "sidecar-data", dict(BROKER_OVERRIDES)).start()
    brokers._stops.append(server.stop)
    brokers.ours = Target(OURS, server.bootstrap, f"kafka-sidecar pid {server.proc.pid if server.proc else '?'}, log {server.log_path}",
                          log_path=server.log_path)


def _docker_answers() -> bool:
    """True when a Docker engine answers /_ping (DOCKER_HOST tcp:// or unix://, else the default socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            path = host[len("unix://"):]
            if not os.path.exists(path):
                return False
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(2)
            sock.connect(path)
        elif host.startswith("tcp://"):
            h, _, p = host[len("tcp://"):].rstrip("/").rpartition(":")
            sock = socket.create_connection((h, int(p)), timeout=2)
        else:
            return False
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b"OK" in sock.recv(4096)
    except (OSError, ValueError):
        return False


def _start_reference(brokers: Brokers) -> None:
    external = os.environ.get("KAFKA_REFERENCE_BOOTSTRAP", "").strip()
    if external:
        if not wait_for_port(external, 60):
            raise RuntimeError(f"KAFKA_REFERENCE_BOOTSTRAP={external}: nothing accepts connections there")
        target = Target(REFERENCE, external, f"Apache Kafka at KAFKA_REFERENCE_BOOTSTRAP={external}", external=True)
        check_external_settings(target)
        brokers.reference = target
        return

    from bench.reference import ReferenceKafka, ReferenceUnavailable, unavailable_reason

    why = unavailable_reason()
    if why is None:
        try:
            kafka = ReferenceKafka(dict(BROKER_OVERRIDES), start_timeout=150).start()
        except ReferenceUnavailable as e:
            raise RuntimeError(str(e)) from e
        brokers._stops.append(kafka.stop)
        brokers.reference = Target(
            REFERENCE, kafka.bootstrap, f"Apache Kafka from {kafka.kafka_home}, pid {kafka.pid}, logs {kafka.log_dir}",
            log_path=kafka.log_dir / "server.log",
        )
        return

    if not _docker_answers():
        brokers.reason = f"{why}; no KAFKA_REFERENCE_BOOTSTRAP; no Docker engine answers for a testcontainers KafkaContainer"
        return
    try:
        from testcontainers.kafka import KafkaContainer  # type: ignore[import-not-found]
    except ImportError:
        brokers.reason = f"{why}; a Docker engine answers but testcontainers is not installed (pip install 'testcontainers[kafka]')"
        return
    image = _reference_image()
    container = KafkaContainer(image=image)
    for key, value in BROKER_OVERRIDES.items():
        container.with_env("KAFKA_" + key.upper().replace(".", "_"), value)
    container.start()
    brokers._stops.append(container.stop)
    bootstrap = container.get_bootstrap_server()
    brokers.reference = Target(REFERENCE, bootstrap, f"testcontainers {image} at {bootstrap}", external=True)
    check_external_settings(brokers.reference)


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    b = Brokers()
    _SESSION_BROKERS.append(b)
    work = tmp_path_factory.mktemp("conformance")
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="conformance-start") as pool:
        ours = pool.submit(_start_ours, b, work)
        ref = pool.submit(_start_reference, b)
        errors = []
        for fut in (ours, ref):
            try:
                fut.result()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
    try:
        if errors:
            raise errors[0]
        if b.reference is None and env_flag("CONFORMANCE_REQUIRE_REFERENCE"):
            raise RuntimeError(f"CONFORMANCE_REQUIRE_REFERENCE is set but {b.reason}")
        yield b
    finally:
        b.stop()


@pytest.fixture(params=[OURS, REFERENCE])
def target(request: pytest.FixtureRequest, brokers: Brokers) -> Target:
    if request.param == REFERENCE and brokers.reference is None:
        pytest.skip(f"reference half: {brokers.reason}")
    t = brokers.ours if request.param == OURS else brokers.reference
    assert t is not None
    return t


# --------------------------------------------------------------------------- conform


_KNOWN_KEY = pytest.StashKey[list[str]]()


@pytest.fixture
def conform(request: pytest.FixtureRequest, brokers: Brokers, target: Target) -> Callable[[Callable[[Ctx], Any]], Any]:
    """``conform(scenario)``: run it (side by side from the ours half), compare, return this target's observation."""
    strict = env_flag("CONFORMANCE_STRICT")

    def run(scenario: Callable[[Ctx], Any], name: str | None = None) -> Any:
        name = name or request.node.originalname.removeprefix("test_")
        key_ours, key_ref = (name, OURS), (name, REFERENCE)
        if target.name == REFERENCE:
            outcome = brokers.outcomes.get(key_ref) or run_outcome(target, name, scenario)
            brokers.outcomes[key_ref] = outcome
            if outcome.error is not None:
                raise outcome.error
            return outcome.value

        todo = [target] + ([brokers.reference] if brokers.reference is not None and key_ref not in brokers.outcomes else [])
        for t, outcome in zip(todo, run_side_by_side(todo, name, scenario), strict=True):
            brokers.outcomes[(name, t.name)] = outcome
        mine = brokers.outcomes[key_ours]
        if mine.error is not None:
            raise mine.error
        if brokers.reference is None:
            return mine.value
        theirs = brokers.outcomes[key_ref]
        if theirs.error is not None:
            pytest.fail(f"cannot compare: the scenario failed on the reference ({brokers.reference}): "
                        f"{type(theirs.error).__name__}: {theirs.error}", pytrace=False)
        result = compare(name, mine.value, theirs.value, KNOWN)
        problems = []
        if result.unknown:
            problems.append(f"kafka-sidecar differs from Apache Kafka in scenario {name!r}:\n{result.render(result.unknown)}")
        for kd in result.known_gone:
            problems.append(f"known difference no longer observed (fixed? remove it from known_differences.py): "
                            f"{kd.scenario}: {kd.what}")
        known_lines = [
            f"{kd.what} [{kd.where}]\n{result.render(rows)}" for kd, rows in result.known_seen
        ]
        if strict and known_lines:
            problems += [f"known difference (CONFORMANCE_STRICT): {line}" for line in known_lines]
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)
        if known_lines:
            request.node.stash[_KNOWN_KEY] = known_lines
            brokers.known_report += [f"{name}: {line}" for line in known_lines]
        return mine.value

    return run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    known = item.stash.get(_KNOWN_KEY, None)
    if known and report.when == "call" and report.passed:
        # Everything else matched: the known differences make this an expected failure.
        report.outcome = "skipped"
        report.wasxfail = "known differences from Apache Kafka:\n" + "\n".join(known)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = []
    for item_known in terminalreporter.stats.get("xfailed", []):
        reason = getattr(item_known, "wasxfail", "")
        if reason.startswith("known differences from Apache Kafka"):
            lines.append(f"{item_known.nodeid}\n{reason}")
    if lines:
        terminalreporter.section("conformance: known differences from Apache Kafka")
        for line in lines:
            terminalreporter.write_line(line)
            terminalreporter.write_line("")

