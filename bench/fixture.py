"""Start-to-ready of the test fixture (``kafka_sidecar.testing.broker``), and of the alternatives.

    .venv/bin/python -m bench.fixture [--runs 20]

For each run: from calling ``broker()`` to a real client's Metadata answer (confluent-kafka's
``list_topics``). The first run includes importing the server (a test session pays it once).
For comparison the same for ``kafka-sidecar serve`` as a subprocess (interpreter start and
imports every time), and, when ``--reference`` is given and a reference Kafka is at hand
(``bench.reference``), for Apache Kafka. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient


def _metadata(bootstrap: str) -> None:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert md.brokers, "no broker in the Metadata answer"


def _timed(start: Callable[[], AbstractContextManager[Any]], bootstrap: Callable[[Any], str], runs: int) -> list[float]:
    """Seconds from entering ``start()`` to a Metadata answer, per run."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with start() as b:
            _metadata(bootstrap(b))
            out.append(time.perf_counter() - t0)
    return out


def embedded(runs: int) -> list[float]:
    from kafka_sidecar.testing import broker

    return _timed(broker, lambda b: b.bootstrap_servers, runs)


def subprocess_serve(runs: int) -> list[float]:
    exe = Path(sys.executable).parent / "kafka-sidecar"
    out = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            p = subprocess.Popen([str(exe), "serve", "--data-dir", d, "--listen", "127.0.0.1:0"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                line = p.stdout.readline() if p.stdout else ""
                port = line.split(" (")[0].rsplit(":", 1)[1]
                _metadata(f"127.0.0.1:{port}")
                out.append(time.perf_counter() - t0)
            finally:
                p.terminate()
                p.wait(30)
    return out


def reference(runs: int) -> list[float]:
    from bench.reference import ReferenceKafka

    return _timed(ReferenceKafka, lambda k: k.bootstrap, runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--reference", action="store_true", help="also time Apache Kafka (slow: ~5 s a run)")
    args = ap.parse_args(argv)
    rows = [("kafka_sidecar.testing.broker()", embedded(args.runs)),
            ("kafka-sidecar serve (subprocess)", subprocess_serve(max(3, args.runs // 4)))]
    if args.reference:
        rows.append(("Apache Kafka (bench.reference)", reference(3)))
    print(f"{'start -> Metadata answered':34} {'first':>8} {'median':>8} {'p90':>8} {'runs':>5}")
    for name, xs in rows:
        rest = sorted(xs[1:] or xs)
        p90 = rest[min(len(rest) - 1, int(len(rest) * 0.9))]
        print(f"{name:34} {xs[0]:8.3f} {statistics.median(rest):8.3f} {p90:8.3f} {len(xs):5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
