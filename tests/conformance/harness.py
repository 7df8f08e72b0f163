"""The conformance harness: targets (our server, the reference Kafka), scenario contexts,
side-by-side runs and the field-by-field comparison of what clients observed.

A scenario is a function ``scenario(ctx) -> observation``: it drives one broker (``ctx.target``)
with real clients and raw requests and returns what a client saw, as plain data (dicts, lists,
ints, str, bytes, None) that does not depend on the broker's identity: topic and group names are
made unique per run (``ctx.topic("t")``) and written back as ``<t>`` by ``ctx.normalize``;
times are relative to the scenario's own clock; producer ids are replaced by what matters
about them. Two observations of the same scenario must then be equal.

``compare`` returns the differences as ``path: ours=... reference=...`` lines. Differences that
are known (``known_differences.KNOWN``) are reported as expected failures (xfail) instead of
failures, and a known difference that is no longer observed fails the test (strict), so the
list stays true.
"""

from __future__ import annotations

import fnmatch
import os
import re
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conformance.wire import BROKER_RESOURCE, Wire, parse_bootstrap

# Broker settings both targets run with (Kafka's names; both accept them): fast retention and
# cleaner timers, no initial rebalance delay. The reference launcher also gets them; an external
# broker (KAFKA_REFERENCE_BOOTSTRAP / SIDECAR_BOOTSTRAP, e.g. compose/) must be started with them.
BROKER_OVERRIDES: dict[str, str] = {
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "0",
    "log.segment.delete.delay.ms": "1000",
    "log.cleaner.backoff.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    # What the reference launcher writes into server.properties anyway (so both report them as
    # static broker configs in DescribeConfigs).
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}
# Settings a time-dependent scenario relies on, checked on external brokers by DescribeConfigs
# (num.partitions is only relied upon by auto-creation, checked there).
TIMER_SETTINGS = ("log.retention.check.interval.ms", "log.segment.delete.delay.ms", "log.cleaner.backoff.ms")

OURS, REFERENCE = "ours", "reference"


@dataclass
class Target:
    """One broker under test."""

    name: str  # OURS or REFERENCE
    bootstrap: str
    description: str
    external: bool = False
    log_path: Path | None = None
    node_id: int = 1
    settings_problem: str | None = None  # set when an external broker lacks BROKER_OVERRIDES

    def require_fast_timers(self) -> None:
        if self.settings_problem:
            raise AssertionError(f"{self.name} target {self.bootstrap}: {self.settings_problem}")

    def __str__(self) -> str:
        return f"{self.name} ({self.description})"


def check_external_settings(target: Target) -> None:
    """Read the broker's timer settings (DescribeConfigs); note any that differ from ours."""
    try:
        with Wire(target.bootstrap, client_id="conformance-probe", timeout=10) as w:
            md = w.metadata([])
            target.node_id = md["brokers"][0]["node_id"] if md["brokers"] else 1
            res = w.describe_configs(BROKER_RESOURCE, str(target.node_id), list(TIMER_SETTINGS))
    except OSError as e:
        target.settings_problem = f"cannot read its settings: {e}"
        return
    have = {c["name"]: c["value"] for c in res["configs"]}
    wrong = {k: have.get(k) for k in TIMER_SETTINGS if have.get(k) != BROKER_OVERRIDES[k]}
    if wrong:
        want = " ".join(f"{k}={BROKER_OVERRIDES[k]}" for k in wrong)
        target.settings_problem = (
            f"time-dependent scenarios need {want} (it has {wrong}); start it with those settings "
            "(compose/docker-compose.yml does)"
        )


def wait_for_port(bootstrap: str, timeout: float) -> bool:
    host, port = parse_bootstrap(bootstrap)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


# --------------------------------------------------------------------------- scenario context


class Ctx:
    """What a scenario gets: its target, unique names, raw connections, clients to close."""

    def __init__(self, target: Target, scenario: str) -> None:
        self.target = target
        self.scenario = scenario
        self.bootstrap = target.bootstrap
        self.run_id = uuid.uuid4().hex[:8]
        self.names: dict[str, str] = {}  # actual name -> logical name
        self._closers: list[Callable[[], Any]] = []

    def topic(self, logical: str) -> str:
        """A unique valid topic name for ``logical`` (reported back as ``<logical>``)."""
        actual = f"cf-{self.scenario[:40]}-{logical}-{self.run_id}".replace("_", "-")
        self.names[actual] = logical
        return actual

    group = topic

    def alias(self, actual: str, logical: str) -> str:
        """Report another actual name (e.g. a derived one) as ``<logical>``."""
        self.names[actual] = logical
        return actual

    def wire(self, client_id: str = "conformance") -> Wire:
        w = Wire(self.bootstrap, client_id=client_id)
        self._closers.append(w.close)
        return w

    def on_close(self, fn: Callable[[], Any]) -> None:
        self._closers.append(fn)

    def close(self) -> None:
        for fn in reversed(self._closers):
            try:
                fn()
            except Exception:  # noqa: BLE001 - closing is best effort; the observation is what counts
                pass
        self._closers.clear()

    def normalize(self, value: Any) -> Any:
        """Actual topic/group names -> ``<logical>`` in every string (longest first)."""
        names = sorted(self.names, key=len, reverse=True)
        pattern = re.compile("|".join(re.escape(n) for n in names)) if names else None

        def fix(v: Any) -> Any:
            if isinstance(v, str):
                return pattern.sub(lambda m: f"<{self.names[m.group(0)]}>", v) if pattern else v
            if isinstance(v, dict):
                return {fix(k): fix(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [fix(x) for x in v]
            return v

        return fix(value)


def run_scenario(target: Target, name: str, scenario: Callable[[Ctx], Any]) -> Any:
    ctx = Ctx(target, name)
    try:
        return ctx.normalize(scenario(ctx))
    finally:
        ctx.close()


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


def run_outcome(target: Target, name: str, scenario: Callable[[Ctx], Any]) -> Outcome:
    t0 = time.monotonic()
    try:
        return Outcome(value=run_scenario(target, name, scenario), seconds=time.monotonic() - t0)
    except BaseException as e:  # noqa: BLE001 - re-raised by the half that owns it
        return Outcome(error=e, seconds=time.monotonic() - t0)


def run_side_by_side(targets: list[Target], name: str, scenario: Callable[[Ctx], Any]) -> list[Outcome]:
    """The same scenario on each target at once (one thread each: timers overlap)."""
    if len(targets) == 1:
        return [run_outcome(targets[0], name, scenario)]
    with ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix=f"conformance-{name}") as pool:
        futures = [pool.submit(run_outcome, t, name, scenario) for t in targets]
        return [f.result() for f in futures]


# --------------------------------------------------------------------------- comparison


_LONG_NUMBER = re.compile(r"-?\d{10,}")


def _scalar(v: Any) -> Any:
    # Long numbers inside messages are times or ids of this run (e.g. a rejected timestamp).
    return _LONG_NUMBER.sub("<n>", v) if isinstance(v, str) else v


def _show(v: Any, limit: int = 300) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + f"...({len(s)} chars)"


def diff(ours: Any, ref: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, ours, reference) for every leaf where the two observations differ."""
    out: list[tuple[str, Any, Any]] = []
    if isinstance(ours, dict) and isinstance(ref, dict):
        for k in list(ours) + [k for k in ref if k not in ours]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in ours:
                out.append((sub, "<absent>", ref[k]))
            elif k not in ref:
                out.append((sub, ours[k], "<absent>"))
            else:
                out += diff(ours[k], ref[k], sub)
    elif isinstance(ours, list) and isinstance(ref, list):
        if len(ours) != len(ref):
            out.append((f"{path}[len]", len(ours), len(ref)))
            out.append((path, ours, ref))
        else:
            for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
                out += diff(a, b, f"{path}[{i}]")
    elif _scalar(ours) != _scalar(ref) or type(ours) is not type(ref) and not (
        isinstance(ours, int | float) and isinstance(ref, int | float)
    ):
        out.append((path, ours, ref))
    return out


@dataclass
class Known:
    """A difference from Apache Kafka we know about (see known_differences.py)."""

    scenario: str
    paths: tuple[str, ...]  # fnmatch patterns over diff paths
    what: str  # what differs
    where: str  # where in our code it comes from (best understanding)
    intermittent: bool = False  # seen in some runs only: its absence does not fail the test

    def matches(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, p) for p in self.paths)


@dataclass
class Comparison:
    unknown: list[tuple[str, Any, Any]] = field(default_factory=list)
    known_seen: list[tuple[Known, list[tuple[str, Any, Any]]]] = field(default_factory=list)
    known_gone: list[Known] = field(default_factory=list)

    def render(self, rows: list[tuple[str, Any, Any]]) -> str:
        return "\n".join(f"  {p}: ours={_show(a)} reference={_show(b)}" for p, a, b in rows)


def compare(scenario: str, ours: Any, ref: Any, known: list[Known]) -> Comparison:
    mine = [k for k in known if k.scenario == scenario]
    result = Comparison()
    seen: dict[int, list[tuple[str, Any, Any]]] = {}
    for row in diff(ours, ref):
        k = next((i for i, kd in enumerate(mine) if kd.matches(row[0])), None)
        if k is None:
            result.unknown.append(row)
        else:
            seen.setdefault(k, []).append(row)
    result.known_seen = [(mine[i], rows) for i, rows in sorted(seen.items())]
    result.known_gone = [kd for i, kd in enumerate(mine) if i not in seen and not kd.intermittent]
    return result


# --------------------------------------------------------------------------- small helpers


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    """Poll ``predicate`` (bounded); returns its last value, truthy or not (the caller observes)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")

