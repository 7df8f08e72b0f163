"""Start and restart with many partitions: kafka-sidecar and (if present) the reference Kafka.

    python -m bench.scale                          # 2,000 partitions, ours and the reference
    python -m bench.scale --partitions 10000
    python -m bench.scale --no-reference --json out.json
    python -m bench.scale --sidecar-python /tmp/old/.venv/bin/python   # another build of ours

Per system, in one data dir: ``--partitions`` partitions (topics of ``--per-topic`` partitions)
are created and get one record each (confluent-kafka), then

- **clean restart**: SIGTERM, wait for the exit, start again; the time from the exec until
  every partition answers ListOffsets(latest) = 1 (what a client needs to be served);
- **restart after kill -9**: SIGKILL, start again, the same time;

and after each start the broker's RSS (/proc/<pid>/status VmRSS) and open file descriptors
(/proc/<pid>/fd). The reference is Kafka (``bench/reference.py``: ``KAFKA_HOME`` or
``.cache/kafka-<version>``) restarted on its own data dir (not formatted again), same ports.
Prints one table, and the JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import reference as reference_module
from bench.reference import ReferenceKafka, ReferenceUnavailable, free_port, port_open

REPO = Path(__file__).resolve().parents[1]
LIST_OFFSETS = 2


# --------------------------------------------------------------------------- measuring


def proc_figures(pid: int) -> dict[str, Any]:
    """RSS (MB) and open file descriptors of a running process."""
    rss_kb = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = -1
    return {"rss_mb": round(rss_kb / 1024, 1), "open_fds": fds}


def topics_for(partitions: int, per_topic: int) -> dict[str, int]:
    out: dict[str, int] = {}
    left, i = partitions, 0
    while left > 0:
        out[f"scale{i}"] = min(per_topic, left)
        left -= out[f"scale{i}"]
        i += 1
    return out


def create_and_fill(bootstrap: str, topics: dict[str, int], timeout: float = 300.0) -> None:
    """Create the topics and write one record to every partition."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    while not port_open(host, int(port)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listens on {bootstrap} after {timeout:.0f} s")
        time.sleep(0.05)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = list(topics)
    for i in range(0, len(names), 20):  # a few CreateTopics requests, not one huge one
        chunk = names[i: i + 20]
        futures = admin.create_topics([NewTopic(n, num_partitions=topics[n], replication_factor=1) for n in chunk], request_timeout=timeout)
        for fut in futures.values():
            fut.result(timeout)
    wait_ready(bootstrap, topics, expected=0, timeout=timeout)
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0, "acks": "all",
                         "on_delivery": lambda err, msg: err is not None and failed.append(str(err))})
    for name, n in topics.items():
        for p in range(n):
            producer.produce(name, b"v", key=b"k", partition=p)
            producer.poll(0)
    left = producer.flush(timeout)
    if left or failed:
        raise RuntimeError(f"one record per partition: {left} not delivered, failures {failed[:3]}")


def latest_offsets(bootstrap: str, topics: dict[str, int]) -> dict[tuple[str, int], int]:
    """ListOffsets(latest) of every partition (one request); a partition in error is left out."""
    from kafka_sidecar.client.blocking import KafkaClient

    client = KafkaClient(bootstrap, timeout=30.0)
    try:
        _, body = client.bootstrap.request(LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(n)]}
                       for t, n in topics.items()],
        }, max_version=7, min_version=1)
    finally:
        client.close()
    out = {}
    for t in body.topics:
        for p in t.partitions:
            code = p.error_code.value if hasattr(p.error_code, "value") else int(p.error_code)
            if code == 0:
                out[(t.name, p.partition_index)] = p.offset
    return out


def wait_ready(bootstrap: str, topics: dict[str, int], expected: int, timeout: float = 600.0) -> float:
    """Wait until every partition's latest offset is ``expected``; returns when (monotonic)."""
    want = sum(topics.values())
    deadline = time.monotonic() + timeout
    while True:
        try:
            offsets = latest_offsets(bootstrap, topics)
            if len(offsets) == want and all(v == expected for v in offsets.values()):
                return time.monotonic()
        except Exception:  # not listening yet, connection reset while starting
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"partitions not all served with offset {expected} after {timeout:.0f} s")
        time.sleep(0.05)


# --------------------------------------------------------------------------- the systems


class Sidecar:
    """``kafka-sidecar serve`` as a subprocess on a fixed port and data dir."""

    name = "kafka-sidecar"

    def __init__(self, work: Path, python: str) -> None:
        self.data = work / "sidecar-data"
        self.python = python
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_path = work / "sidecar.stderr"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> float:
        """Exec; returns the monotonic time of the exec."""
        t0 = time.monotonic()
        cmd = [self.python, "-m", "kafka_sidecar.server.cli", "serve", "--data-dir", str(self.data),
               "--listen", self.bootstrap, "--log-level", "INFO"]
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        return t0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(300)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(60)
        self.proc = None


class Reference:
    """The reference Kafka, restartable on its data dir and ports."""

    name = "kafka"

    def __init__(self, work: Path) -> None:
        self.kafka = _RestartableKafka(work_dir=work / "kafka", keep_work_dir=True, heap_opts="-Xmx1g", start_timeout=600)
        self._ports: tuple[int, int] | None = None

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def pid(self) -> int:
        pid = self.kafka.pid
        assert pid is not None
        return pid

    def start(self) -> float:
        t0 = time.monotonic()
        with _fixed_ports(self._ports):
            self.kafka.start()
        self._ports = (self.kafka.port or 0, self.kafka.controller_port or 0)
        return t0

    def stop(self) -> None:
        self.kafka.stop()

    def kill(self) -> None:
        proc = self.kafka.proc
        if proc is not None:
            proc.kill()
            proc.wait(60)
        self.kafka.stop()  # closes its console; the work dir is kept


class _RestartableKafka(ReferenceKafka):
    def _format(self, home: Path, env: dict[str, str]) -> None:
        if not (self.data_dir / "meta.properties").exists():
            super()._format(home, env)


@contextlib.contextmanager
def _fixed_ports(ports: tuple[int, int] | None) -> Iterator[None]:
    """Make ReferenceKafka.start take the same client and controller ports again."""
    if ports is None:
        yield
        return
    queue = list(ports)
    real: Callable[..., int] = reference_module.free_port
    reference_module.free_port = lambda host="127.0.0.1": queue.pop(0) if queue else real(host)  # type: ignore[assignment]
    try:
        yield
    finally:
        reference_module.free_port = real  # type: ignore[assignment]


def measure(system: Sidecar | Reference, topics: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    system.start()
    create_and_fill(system.bootstrap, topics)
    wait_ready(system.bootstrap, topics, expected=1)
    out["after_create"] = proc_figures(system.pid)
    for case, halt in (("clean_restart", system.stop), ("kill9_restart", system.kill)):
        halt()
        t0 = system.start()
        ready = wait_ready(system.bootstrap, topics, expected=1)
        out[case] = {"seconds": round(ready - t0, 2), **proc_figures(system.pid)}
        print(f"  {system.name} {case}: {out[case]}", file=sys.stderr, flush=True)
    system.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    ap.add_argument("--no-reference", action="store_true", help="kafka-sidecar only")
    ap.add_argument("--sidecar-python", default=sys.executable, help="the Python that runs kafka-sidecar (another build)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    args = ap.parse_args(argv)
    topics = topics_for(args.partitions, args.per_topic)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    results: dict[str, Any] = {"partitions": args.partitions, "topics": len(topics)}
    try:
        print(f"{args.partitions} partitions in {len(topics)} topics, data in {work}", file=sys.stderr)
        results["kafka-sidecar"] = measure(Sidecar(work, args.sidecar_python), topics)
        if not args.no_reference:
            try:
                results["kafka"] = measure(Reference(work), topics)
            except ReferenceUnavailable as e:
                results["kafka"] = {"unavailable": str(e)}
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    ours, ref = results["kafka-sidecar"], results.get("kafka", {})
    print(f"{'':16}{'kafka-sidecar':>16}{'kafka':>12}{'ratio':>8}")
    for case in ("clean_restart", "kill9_restart"):
        for key, unit in (("seconds", "s"), ("rss_mb", "MB"), ("open_fds", "fds")):
            a = ours[case][key]
            b = ref.get(case, {}).get(key)
            ratio = f"{a / b:.2f}x" if b else "-"
            print(f"{case[:5] + ' ' + key:16}{a:>14} {unit:<3}{b if b is not None else '-':>10}{ratio:>8}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
