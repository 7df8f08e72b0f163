"""Run a crash harness as several independent jobs at once, and add up their summaries.

    python -m tests.crash.parallel --jobs 2 --iterations 1000 --seed 13            # tests/crash/harness.py
    python -m tests.crash.parallel --harness cluster_harness --jobs 2 --iterations 100

A 1,000-iteration run takes hours on one job; ``--jobs K`` (up to one per core: each job's
client is itself CPU-bound, ~85% of a core checking the ledger and the files) runs K harness
processes, each with its own server, data dir and seed (``seed * 100 + k``),
doing ``iterations / K`` iterations (the first ones one more when it does not divide). Each
job checks its own ledger exactly as a single run does, including the final clean stop and the
strict file check. Output lines are prefixed with the job; at the end the jobs' summaries are
added up (counts summed, kills merged, the slowest start the largest, seconds the wall time).
Exit status 1 if any job failed.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

MAX_FIELDS = ("slowest_start_ms",)


def _pump(job: int, proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        print(f"[job {job}] {line}", end="", flush=True)


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM: stop as on Ctrl-C (the jobs are stopped, and they kill their servers)."""
    raise KeyboardInterrupt


def combine(summaries: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """The jobs' summaries as one: counts summed, kills merged, maxima kept."""
    out: dict[str, Any] = {"jobs": len(summaries), "seeds": [s["seed"] for s in summaries]}
    kills: Counter[str] = Counter()
    for s in summaries:
        kills.update(s.get("kills", {}))
        for key, value in s.items():
            if key in ("seed", "kills", "seconds") or not isinstance(value, int | float):
                continue
            out[key] = max(out.get(key, value), value) if key in MAX_FIELDS else out.get(key, 0) + value
    out["kills"] = dict(sorted(kills.items()))
    out["seconds"] = round(seconds, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.crash.parallel", description=__doc__.split("\n\n")[0])
    p.add_argument("--harness", default="harness", choices=["harness", "cluster_harness"])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--iterations", type=int, default=100, help="in all, split over the jobs")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)
    if args.jobs < 1 or args.iterations < args.jobs:
        raise SystemExit("--jobs must be at least 1 and at most --iterations")
    module = f"tests.crash.{args.harness}"
    if args.jobs == 1:
        return subprocess.call([sys.executable, "-m", module, "--iterations", str(args.iterations), "--seed", str(args.seed)])
    started = time.monotonic()
    procs, outputs, pumps = [], [], []
    for k in range(args.jobs):
        n = args.iterations // args.jobs + (1 if k < args.iterations % args.jobs else 0)
        proc = subprocess.Popen([sys.executable, "-m", module, "--iterations", str(n), "--seed", str(args.seed * 100 + k)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        pump = threading.Thread(target=_pump, args=(k + 1, proc, lines), daemon=True)
        pump.start()
        procs.append(proc)
        outputs.append(lines)
        pumps.append(pump)
    try:
        codes = [proc.wait() for proc in procs]
    except KeyboardInterrupt:  # stopped: each job's SIGTERM handler kills its own server first
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            proc.wait(60)
        return 130
    for pump in pumps:
        pump.join()
    summaries = []
    for k, (code, lines) in enumerate(zip(codes, outputs, strict=True)):
        text = "".join(lines)
        start = text.rfind("\n{") + 1 or (0 if text.startswith("{") else -1)  # the summary ends the output
        if code != 0 or start < 0:
            print(f"job {k + 1} failed (exit {code})", file=sys.stderr)
            continue
        summaries.append(json.loads(text[start:]))
    if len(summaries) != args.jobs:
        return 1
    print(json.dumps(combine(summaries, time.monotonic() - started), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
