"""Run an outside client suite against kafka-sidecar and the reference Apache Kafka, side by side.

    python -m tests.outside.run --suite franz --broker both
    python -m tests.outside.run --suite librdkafka --broker ours --tests 0001,0004
    python -m tests.outside.run --suite librdkafka --librdkafka-source ~/src/librdkafka --tests 0176
    python -m tests.outside.run --suite franz --tests TestGroupETL --records 100000

Each test runs in its own process against a broker started for the suite (a fresh one after a
broker that died), bounded by ``--timeout`` seconds. Logs go to ``.cache/outside/runs/<stamp>/``,
the results to ``.cache/outside/results-<suite>.json`` (``results-franz-records<N>.json`` with
``--records``, ``results-librdkafka-source-<version>.json`` with ``--librdkafka-source``), what
the README's tables are made from.
Exit status 1 when a test passes on the reference and not on ours, 2 when the harness failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tests.outside import franz
from tests.outside.brokers import (
    BROKERS,
    OURS,
    REFERENCE,
    SCRAM_PASSWORD,
    SCRAM_USER,
    RunningBroker,
    running,
)
from tests.outside.results import TestResult, counts, table

CACHE = franz.CACHE


class FranzSuite:
    name = "franz"

    def __init__(self, records: int | None) -> None:
        self.records = records
        self.binary: Path | None = None

    def prepare(self) -> None:
        self.binary = franz.prepare(log=_log)

    def tests(self) -> list[str]:
        return franz.integration_tests()

    def describe(self) -> str:
        return f"franz-go {franz.VERSION} pkg/kgo, KGO_TEST_RECORDS={self.records or 'default (500000)'}"

    def run(self, name: str, broker: RunningBroker, timeout: float, log_path: Path) -> TestResult:
        assert self.binary is not None
        extra = {"KGO_TEST_SCRAM_SEEDS": broker.sasl_bootstrap, "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}",
                 "KGO_TEST_OAUTH_SEEDS": broker.sasl_bootstrap}
        if self.records:
            extra["KGO_TEST_RECORDS"] = str(self.records)
        return franz.run_test(self.binary, name, broker.bootstrap, timeout, log_path, extra)


class LibrdkafkaSuite:
    name = "librdkafka"

    def __init__(self, source: Path | None = None) -> None:
        self.source = source
        self.build = None

    def prepare(self) -> None:
        from tests.outside import librdkafka

        self.build = librdkafka.prepare(log=_log, source=self.source)

    def tests(self) -> list[str]:
        from tests.outside import librdkafka

        return librdkafka.selected_tests(self.build)

    def describe(self) -> str:
        assert self.build is not None
        return f"librdkafka {self.build.version} tests/ ({self.build.origin}), full mode"

    def run(self, name: str, broker: RunningBroker, timeout: float, log_path: Path) -> TestResult:
        from tests.outside import librdkafka

        return librdkafka.run_test(self.build, name, broker.bootstrap, timeout, log_path)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_suite(suite, brokers: list[str], only: list[str] | None, timeout: float, work: Path) -> dict[str, dict[str, TestResult]]:
    suite.prepare()
    names = suite.tests()
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise SystemExit(f"not in the {suite.name} selection: {', '.join(unknown)} (selection: {', '.join(names)})")
        names = [n for n in names if n in only]
    _log(f"{suite.describe()}: {len(names)} tests on {', '.join(brokers)}")
    by_broker: dict[str, dict[str, TestResult]] = {}
    for broker in brokers:
        results: dict[str, TestResult] = {}
        by_broker[broker] = results
        logs = work / suite.name / broker
        logs.mkdir(parents=True, exist_ok=True)
        pending = list(names)
        restarts = 0
        while pending and restarts <= 3:
            with running(broker, logs) as b:
                _log(f"{broker}: {b.description} on {b.bootstrap}")
                while pending:
                    name = pending[0]
                    if not b.alive():
                        _log(f"{broker}: broker down before {name}; starting a new one")
                        restarts += 1
                        break
                    pending.pop(0)
                    r = suite.run(name, b, timeout, logs / f"{name}.log")
                    results[name] = r
                    _log(f"{broker}: {name}: {r.status} ({r.seconds:.0f} s){' - ' + r.detail[:200] if r.detail else ''}")
        for name in pending:
            results[name] = TestResult(name, "error", 0.0, "not run: the broker kept dying")
        _log(f"{broker}: {counts(results)}")
    return by_broker


def _merge_results(path: Path, describe: str, work: Path, by_broker: dict[str, dict[str, TestResult]]) -> None:
    """Update ``path`` with this run's results (a run of a few tests keeps the others' last ones)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {"results": {}}
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for broker, results in by_broker.items():
        for name, r in results.items():
            data["results"].setdefault(broker, {})[name] = {**r.to_json(), "suite": describe, "when": when}
    path.write_text(json.dumps(data, indent=1))


def report() -> str:
    """The last results of every suite as markdown tables (what the README shows)."""
    out = []
    for path in sorted(CACHE.glob("results-*.json")):
        data = json.loads(path.read_text())["results"]
        by_broker = {b: {n: TestResult(**{k: v for k, v in r.items() if k in ("name", "status", "seconds", "detail", "log")})
                         for n, r in data[b].items()} for b in (OURS, REFERENCE) if b in data}
        names = list(dict.fromkeys(n for rs in sorted(by_broker.values(), key=len, reverse=True) for n in rs))
        suites = sorted({r["suite"] for rs in data.values() for r in rs.values()})
        whens = sorted({r["when"] for rs in data.values() for r in rs.values()})
        out.append(f"{'; '.join(suites)} ({whens[0]} - {whens[-1]})\n\n{table(names, by_broker)}\n\n"
                   + "\n".join(f"{b}: {counts(rs)}" for b, rs in by_broker.items()))
    return "\n\n".join(out) or "no results yet"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.outside.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=["franz", "librdkafka", "all"], default="all")
    p.add_argument("--broker", choices=[*BROKERS, "both"], default="both")
    p.add_argument("--tests", default="", help="comma-separated names from the suite's selection (default: all of it)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per test (franz 600, librdkafka 600)")
    p.add_argument("--records", type=int, default=None, help="franz-go KGO_TEST_RECORDS (default: the suite's 500000)")
    p.add_argument("--librdkafka-source", type=Path, default=None, metavar="DIR",
                   help="build librdkafka's tests from this source tree (e.g. a git checkout) instead of Debian's package")
    p.add_argument("--report", action="store_true", help="print the last results (.cache/outside/results-*.json) and exit")
    args = p.parse_args(argv)
    if args.report:
        print(report())
        return 0
    brokers = [OURS, REFERENCE] if args.broker == "both" else [args.broker]
    only = [t.strip() for t in args.tests.split(",") if t.strip()] or None
    suites = []
    if args.suite in ("franz", "all"):
        suites.append(FranzSuite(args.records))
    if args.suite in ("librdkafka", "all"):
        suites.append(LibrdkafkaSuite(args.librdkafka_source))
    work = CACHE / "runs" / time.strftime("%Y%m%d-%H%M%S")
    regressions = 0
    for suite in suites:
        try:
            by_broker = run_suite(suite, brokers, only, args.timeout or 600.0, work)
        except (RuntimeError, OSError) as e:
            _log(f"{suite.name}: harness failed: {e}")
            return 2
        names = list(next(iter(by_broker.values())))
        print(f"\n{suite.describe()}\n\n{table(names, by_broker)}\n")
        for broker, results in by_broker.items():
            print(f"{broker}: {counts(results)}")
        if OURS in by_broker and REFERENCE in by_broker:
            worse = [n for n in names if by_broker[REFERENCE][n].status == "pass" and by_broker[OURS][n].status != "pass"]
            regressions += len(worse)
            print(f"pass on the reference, not on ours: {', '.join(worse) or 'none'}")
        tag = f"-records{args.records}" if args.records and suite.name == "franz" else ""
        if suite.name == "librdkafka" and suite.source is not None:  # kept apart from the Debian release's
            tag = f"-source-{suite.build.version}"
        out = CACHE / f"results-{suite.name}{tag}.json"
        _merge_results(out, suite.describe(), work, by_broker)
        print(f"results: {out}; logs: {work / suite.name}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
