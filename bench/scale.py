"""Scale: many partitions, one big partition killed mid-produce, many connections; kafka-sidecar
and the reference Kafka in the same run, with ratios and the goals (met or not).

    python -m bench.scale                                   # the full run (see below for its length)
    python -m bench.scale --partitions 1,100 --big-mb 50 --connections 1,10 --consumers 1
    python -m bench.scale --no-reference --json out.json
    python -m bench.scale --skip-connections --skip-big     # the partition axis only
    python -m bench.scale --sidecar-python /tmp/old/.venv/bin/python   # another build of ours

The default is the whole load of issue #18 (``--partitions 1,100,1000,2000,10000``, ``--big-mb 2048``,
1/10/100/500 producer connections, 1/8 consumers): about 20-30 min on 2 quiet cores (an
estimate from the 1,000-partition point, ~100 s for both), most of it the reference's
10,000-partition point. It is the default because
the figures are only comparable at those sizes; pass smaller lists to check the bench itself.

**Partitions** (each point on a fresh data dir, ours then the reference): ``P`` partitions
(topics of ``--per-topic`` partitions) are created and get one record each (confluent-kafka,
acks=all), then

- **clean restart**: SIGTERM, wait for the exit, start again: exec until every partition
  answers ListOffsets(latest) = 1 (what a client needs to be served);
- **restart after kill -9**: SIGKILL, start again, the same clock;
- after each start the broker's RSS (/proc/<pid>/status VmRSS) and open descriptors
  (/proc/<pid>/fd);
- **produce spread** (after the kill -9 restart): one confluent-kafka producer (acks=all, linger
  5 ms, no idempotence) sends ``max(--spread-records, 10 x P)`` records of ``--value-size`` bytes
  round-robin over every partition, once untimed (the "cold" figure: Kafka's JIT makes its first
  ones up to 10x slower at 1,000 partitions) and ``--spread-runs`` times timed; records/s and
  MB/s of the median run, from the first ``produce()`` to the end of ``flush()``.

**Big partition** (fresh data dirs again): one partition is filled by a producer (acks=all,
``--big-value-size`` records) until ``--big-mb`` MB are acknowledged; the broker is then killed
with SIGKILL while the producer still has records in flight, and started again: seconds from
the exec until ListOffsets(latest) answers, and until the high watermark is above the last
acknowledged offset and a Fetch at that offset returns it (serving again). ``lost`` is true if
an acknowledged record is not there after the restart.

**Connections**: bench/connections.py's loads (its ``bench_ours``/``bench_reference``): N producer
connections (requests/s, MB/s, p50/p99) and M consumers on one topic; ``--skip-connections``
leaves them out.

The reference is Kafka (``bench/reference.py``: ``KAFKA_HOME`` or ``.cache/kafka-<version>``,
``-Xmx1g``), restarted on its own data dir (not formatted again), same ports. One table at the
end: ours, Kafka, ours/Kafka and the goal (throughput >= 1.0x, time and memory <= 0.5x);
``--json`` (default bench/results/scale.json) gets every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import reference as reference_module
from bench.reference import (
    ReferenceKafka,
    ReferenceUnavailable,
    free_port,
    port_open,
    unavailable_reason,
)

REPO = Path(__file__).resolve().parents[1]
LIST_OFFSETS, FETCH = 2, 1
BIG_TOPIC = "big"
GOAL_THROUGHPUT, GOAL_TIME = 1.0, 0.5


def log(msg: str) -> None:
    print(f"[scale] {msg}", file=sys.stderr, flush=True)


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


def wait_listening(bootstrap: str, timeout: float) -> None:
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    while not port_open(host, int(port)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listens on {bootstrap} after {timeout:.0f} s")
        time.sleep(0.05)


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 300.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    wait_listening(bootstrap, timeout)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = list(topics)
    for i in range(0, len(names), 20):  # a few CreateTopics requests, not one huge one
        chunk = names[i: i + 20]
        futures = admin.create_topics([NewTopic(n, num_partitions=topics[n], replication_factor=1) for n in chunk], request_timeout=timeout)
        for fut in futures.values():
            fut.result(timeout)


def create_and_fill(bootstrap: str, topics: dict[str, int], timeout: float = 300.0) -> None:
    """Create the topics and write one record to every partition."""
    from confluent_kafka import Producer

    create_topics(bootstrap, topics, timeout)
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
            if int(p.error_code) == 0:
                out[(t.name, p.partition_index)] = p.offset
    return out


def fetch_has(bootstrap: str, topic: str, partition: int, offset: int) -> bool:
    """A Fetch (v4-12) at ``offset`` answers without error and returns the batch holding it."""
    from kafka_sidecar.client.blocking import KafkaClient

    from bench.connections import next_offset

    client = KafkaClient(bootstrap, timeout=30.0)
    try:
        _, body = client.bootstrap.request(FETCH, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": "",
        }, max_version=12, min_version=4)
    finally:
        client.close()
    for t in body.responses:
        for p in t.partitions:
            if int(p.error_code) == 0 and p.records:
                return next_offset(bytes(p.records), offset)[0] > offset
    return False


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


def _producer(bootstrap: str, on_delivery: Callable[[Any, Any], None], **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                     "batch.num.messages": 100_000, "queue.buffering.max.messages": 500_000,
                     "queue.buffering.max.kbytes": 1_048_576, "compression.type": "none", "enable.idempotence": False,
                     "log_level": 0, "on_delivery": on_delivery, **extra})


def _produce(producer: Any, topic: str, value: bytes, partition: int, deadline: float) -> None:
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            return
        except BufferError:  # local queue full: let librdkafka drain it
            producer.poll(0.005)
            if time.monotonic() > deadline:
                raise RuntimeError(f"produce to {topic} stalled: local queue still full") from None


def produce_spread(bootstrap: str, topics: dict[str, int], records: int, value_size: int, warmup: int, runs: int = 3,
                   pid: int | None = None) -> dict[str, Any]:
    """acks=all, ``records`` values round-robin over every partition of ``topics``, ``runs`` times
    after ``warmup`` records untimed: the median run's records/s and MB/s, every run, the warm-up
    as "cold" (a JVM serves its first records after a start several times slower), and the
    broker's CPU (% of one core) per run."""
    from bench.run import cpu_seconds

    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:  # failures only (delivery.report.only.error)
        if err is not None and len(failed) < 20:
            failed.append(str(err))

    producer = _producer(bootstrap, on_delivery, **{"delivery.report.only.error": True})
    spread = [(t, p) for t, n in topics.items() for p in range(n)]
    value = os.urandom(value_size)

    def send(count: int) -> dict[str, Any]:
        deadline = time.monotonic() + max(600.0, count / 200)
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        for i in range(count):
            t, p = spread[i % len(spread)]
            _produce(producer, t, value, p, deadline)
        left = producer.flush(max(1.0, deadline - time.monotonic()))
        if left or failed:
            raise RuntimeError(f"produce spread: {left} not delivered, failures {failed[:3]}")
        elapsed, cpu1 = time.perf_counter() - t0, cpu_seconds(pid)
        return {"records": count, "seconds": round(elapsed, 3), "records_per_s": round(count / elapsed, 1),
                "mb_per_s": round(count * value_size / elapsed / 1e6, 2),
                "server_cpu_pct": round(100 * (cpu1 - cpu0) / elapsed, 1) if cpu0 is not None and cpu1 is not None else None}

    cold = send(warmup) if warmup else None
    timed = sorted((send(records) for _ in range(max(1, runs))), key=lambda r: r["records_per_s"])
    median = timed[len(timed) // 2]
    return {"records": records, "partitions": len(spread), "value_size": value_size, "seconds": median["seconds"],
            "records_per_s": median["records_per_s"], "mb_per_s": median["mb_per_s"], "server_cpu_pct": median["server_cpu_pct"],
            "runs": timed, "cold": cold}


# --------------------------------------------------------------------------- the systems


_PACKAGES = ("kafka_sidecar.protocol", "kafka_sidecar.storage", "kafka_sidecar.client", "kafka_sidecar.server", "kafka_sidecar.spark")


def precompile(python: str) -> None:
    """Byte-compile kafka-sidecar's modules before the clock runs, as ``pip install`` does for a
    user (an editable install under PYTHONDONTWRITEBYTECODE=1, as on the CI machines, would
    otherwise compile ~200 modules at every start: ~0.25 s of each start figure)."""
    code = ("import compileall, importlib.util as u\n"
            f"for name in {_PACKAGES!r}:\n"
            "    spec = u.find_spec(name)\n"
            "    for path in (spec.submodule_search_locations or []) if spec else []:\n"
            "        compileall.compile_dir(path, quiet=1)\n")
    subprocess.run([python, "-c", code], check=False, stdout=subprocess.DEVNULL)


class Sidecar:
    """``kafka-sidecar serve`` as a subprocess on a fixed port and data dir."""

    name = "kafka-sidecar"

    def __init__(self, work: Path, python: str) -> None:
        work.mkdir(parents=True, exist_ok=True)
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
        """Exec; returns the monotonic time of the exec (``ReferenceKafka.start`` returns once
        Metadata lists the broker; ListOffsets is waited for by the caller)."""
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


System = Sidecar | Reference


# --------------------------------------------------------------------------- the loads


def measure_partitions(system: System, topics: dict[str, int], cfg: argparse.Namespace) -> dict[str, Any]:
    """One partition-count point on a fresh data dir: create+fill, clean and kill -9 restarts,
    then the produce load spread over every partition."""
    out: dict[str, Any] = {}
    try:
        t0 = system.start()
        create_and_fill(system.bootstrap, topics)
        out["create_fill_seconds"] = round(wait_ready(system.bootstrap, topics, expected=1) - t0, 2)
        out["after_create"] = proc_figures(system.pid)
        for case, halt in (("clean_restart", system.stop), ("kill9_restart", system.kill)):
            halt()
            t0 = system.start()
            ready = wait_ready(system.bootstrap, topics, expected=1)
            out[case] = {"seconds": round(ready - t0, 2), **proc_figures(system.pid)}
            log(f"{system.name} {sum(topics.values())} partitions {case}: {out[case]}")
        partitions = sum(topics.values())
        records = max(cfg.spread_records, 10 * partitions)
        out["produce_spread"] = produce_spread(system.bootstrap, topics, records, cfg.value_size,
                                               records if cfg.spread_warmup is None else cfg.spread_warmup,
                                               cfg.spread_runs, system.pid)
        out["after_produce"] = proc_figures(system.pid)
        log(f"{system.name} {partitions} partitions produce spread: {out['produce_spread']}")
    finally:
        system.stop()
    return out


def measure_big(system: System, cfg: argparse.Namespace) -> dict[str, Any]:
    """Fill one partition to ``--big-mb`` MB acknowledged, SIGKILL the broker with records still
    in flight, start it again: time to serve the last acknowledged offset, and whether it is there."""
    target = int(cfg.big_mb * 1e6)
    value = os.urandom(cfg.big_value_size)
    state = {"acked": 0, "last_acked": -1, "failed": 0}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            state["acked"] += 1
            state["last_acked"] = max(state["last_acked"], msg.offset())
        else:
            state["failed"] += 1

    out: dict[str, Any] = {"value_size": cfg.big_value_size}
    try:
        system.start()
        create_topics(system.bootstrap, {BIG_TOPIC: 1})
        wait_ready(system.bootstrap, {BIG_TOPIC: 1}, expected=0)
        producer = _producer(system.bootstrap, on_delivery)
        deadline = time.monotonic() + max(600.0, cfg.big_mb)
        sent = 0
        t0 = time.perf_counter()
        while state["acked"] * cfg.big_value_size < target:  # still producing when the target is acknowledged
            _produce(producer, BIG_TOPIC, value, 0, deadline)
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
        fill_seconds = time.perf_counter() - t0
        out["in_flight_at_kill"] = sent - state["acked"] - state["failed"]
        system.kill()
        producer.poll(0.5)  # acknowledgements already received are reported now
        producer.purge(in_queue=True, in_flight=True)
        producer.flush(10)
        out.update({"acked_records": state["acked"], "acked_mb": round(state["acked"] * cfg.big_value_size / 1e6, 1),
                    "last_acked_offset": state["last_acked"], "fill_seconds": round(fill_seconds, 2),
                    "fill_mb_per_s": round(state["acked"] * cfg.big_value_size / fill_seconds / 1e6, 2)})
        log(f"{system.name} big partition killed: {out}")
        out.update(wait_serving(system, state["last_acked"], cfg.serve_timeout))
        out["after_restart"] = proc_figures(system.pid)
        log(f"{system.name} big partition restart: {out}")
    finally:
        system.stop()
    return out


def wait_serving(system: System, last_acked: int, timeout: float) -> dict[str, Any]:
    """Start; seconds from the exec to the first ListOffsets answer, then to the high watermark
    above ``last_acked`` and a Fetch there returning it. If the watermark stays at or below it
    for 30 s after the first answer, the record is lost."""
    t0 = system.start()
    deadline = t0 + timeout
    out: dict[str, Any] = {"list_offsets_seconds": None, "serve_seconds": None, "high_watermark": None, "lost": None}
    first: float | None = None
    while time.monotonic() < deadline:
        try:
            hw = latest_offsets(system.bootstrap, {BIG_TOPIC: 1}).get((BIG_TOPIC, 0))
        except Exception:  # not listening yet
            hw = None
        if hw is not None:
            now = time.monotonic()
            if first is None:
                first = now
                out["list_offsets_seconds"] = round(now - t0, 3)
            out["high_watermark"] = hw
            if hw > last_acked:
                with contextlib.suppress(Exception):
                    if fetch_has(system.bootstrap, BIG_TOPIC, 0, max(last_acked, 0)):
                        out["serve_seconds"] = round(time.monotonic() - t0, 3)
                        out["lost"] = False
                        return out
            elif now - first > 30:
                out["lost"] = True
                return out
        time.sleep(0.02)
    raise RuntimeError(f"{system.name}: the big partition not served {timeout:.0f} s after the restart: {out}")


def connection_axis(cfg: argparse.Namespace) -> dict[str, Any]:
    """bench/connections.py's producer-connection and consumer loads, ours then the reference."""
    from bench import connections

    ccfg = connections.parse_args(["--connections", ",".join(map(str, cfg.connections)),
                                   "--consumers", ",".join(map(str, cfg.consumers)),
                                   "--seconds", str(cfg.connection_seconds), "--fetch-mb", str(cfg.fetch_mb)])
    out: dict[str, Any] = {"config": {k: v for k, v in vars(ccfg).items() if k != "json"}, "kafka": None, "reference_problem": None}
    out["kafka-sidecar"] = connections.bench_ours(ccfg)
    ref: list[dict[str, Any]] = []
    if not cfg.no_reference:
        got = connections.bench_reference(ccfg)
        if isinstance(got, str):
            out["reference_problem"] = got
        else:
            out["kafka"] = got
            ref.append(got)
    out["summary"] = connections.summarize([out["kafka-sidecar"]], ref, ccfg)
    return out


def run_both(make: Callable[[Path], System], measure: Callable[[System], dict[str, Any]], work: Path,
             cfg: argparse.Namespace, ref_problem: str | None) -> dict[str, Any]:
    """The same load on ours then the reference, each on a fresh data dir deleted afterwards;
    a failure is recorded and the run goes on."""
    out: dict[str, Any] = {}
    for name, factory in (("kafka-sidecar", lambda d: Sidecar(d, cfg.sidecar_python)), ("kafka", make)):
        if name == "kafka" and (cfg.no_reference or ref_problem):
            out[name] = {"unavailable": ref_problem or "--no-reference"}
            continue
        d = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
        try:
            out[name] = measure(factory(d))
        except ReferenceUnavailable as e:
            out[name] = {"unavailable": str(e)}
        except Exception as e:  # recorded and printed: one failed point does not lose the others
            log(f"{name} failed: {e!r}")
            out[name] = {"error": repr(e)}
        finally:
            if not cfg.keep:
                shutil.rmtree(d, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- report


def _get(d: dict[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def rows_for(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure as one row: ours, Kafka, ours/Kafka and the goal (throughput >= 1.0x,
    time and memory <= 0.5x; none for descriptors, creation time, p50 and CPU per request)."""
    rows: list[dict[str, Any]] = []

    def add(load: str, figure: str, ours: Any, kafka: Any, kind: str) -> None:
        ratio = round(ours / kafka, 3) if isinstance(ours, int | float) and isinstance(kafka, int | float) and kafka else None
        goal, met = {"throughput": (f">= {GOAL_THROUGHPUT}x", None if ratio is None else ratio >= GOAL_THROUGHPUT),
                     "time": (f"<= {GOAL_TIME}x", None if ratio is None else ratio <= GOAL_TIME)}.get(kind, ("-", None))
        rows.append({"load": load, "figure": figure, "ours": ours, "kafka": kafka, "ratio": ratio, "goal": goal, "met": met})

    for p, point in results.get("partitions", {}).items():
        o, k = point.get("kafka-sidecar"), point.get("kafka")
        load = f"{int(p):,} partitions"
        add(load, "create + 1 record each (s)", _get(o, "create_fill_seconds"), _get(k, "create_fill_seconds"), "-")
        for case, label in (("clean_restart", "start after clean stop"), ("kill9_restart", "restart after kill -9")):
            add(load, f"{label} (s)", _get(o, case, "seconds"), _get(k, case, "seconds"), "time")
            add(load, f"{label}: RSS (MB)", _get(o, case, "rss_mb"), _get(k, case, "rss_mb"), "time")
            add(load, f"{label}: open fds", _get(o, case, "open_fds"), _get(k, case, "open_fds"), "-")
        add(load, "produce spread acks=all (records/s)", _get(o, "produce_spread", "records_per_s"),
            _get(k, "produce_spread", "records_per_s"), "throughput")
        add(load, "produce spread acks=all (MB/s)", _get(o, "produce_spread", "mb_per_s"), _get(k, "produce_spread", "mb_per_s"), "throughput")
        add(load, "produce spread, cold (records/s)",
            _get(o, "produce_spread", "cold", "records_per_s"), _get(k, "produce_spread", "cold", "records_per_s"), "-")
        add(load, "RSS after the produce (MB)", _get(o, "after_produce", "rss_mb"), _get(k, "after_produce", "rss_mb"), "time")
    big = results.get("big_partition")
    if big:
        o, k = big.get("kafka-sidecar"), big.get("kafka")
        load = f"1 partition, {results['config']['big_mb']:g} MB"
        add(load, "fill acks=all (MB/s)", _get(o, "fill_mb_per_s"), _get(k, "fill_mb_per_s"), "throughput")
        add(load, "kill -9 mid-produce: ListOffsets (s)", _get(o, "list_offsets_seconds"), _get(k, "list_offsets_seconds"), "time")
        add(load, "kill -9 mid-produce: serving (s)", _get(o, "serve_seconds"), _get(k, "serve_seconds"), "time")
        add(load, "RSS after the restart (MB)", _get(o, "after_restart", "rss_mb"), _get(k, "after_restart", "rss_mb"), "time")
        add(load, "open fds after the restart", _get(o, "after_restart", "open_fds"), _get(k, "after_restart", "open_fds"), "-")
        for who, r in (("ours", o), ("kafka", k)):
            lost = _get(r, "lost")
            if lost is not None:
                rows.append({"load": load, "figure": f"acknowledged records lost ({who})", "ours": lost if who == "ours" else None,
                             "kafka": lost if who == "kafka" else None, "ratio": None, "goal": "none lost", "met": not lost})
    for r in _get(results, "connections", "summary") or []:
        kind = {"mb_per_s": "throughput", "requests_per_s": "throughput", "p99_ms": "time"}.get(r["figure"], "-")
        add(r["load"], r["figure"], r["ours"], r["kafka"], kind)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    def f(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, bool):
            return "yes" if v else "no"
        return f"{v:,.2f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)

    print(f"{'load':<26} {'figure':<40} {'ours':>12} {'kafka':>12} {'ours/kafka':>10}  {'goal':<10} met")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        met = "-" if r["met"] is None else "met" if r["met"] else "MISSED"
        print(f"{r['load']:<26} {r['figure']:<40} {f(r['ours']):>12} {f(r['kafka']):>12} {ratio:>10}  {r['goal']:<10} {met}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=ints, default=[1, 100, 1000, 2000, 10000], help="partition counts (default 1,100,1000,2000,10000)")
    ap.add_argument("--per-topic", type=int, default=100, help="partitions per topic (default 100)")
    ap.add_argument("--spread-records", type=int, default=200_000, help="records of the spread produce (at least 10 per partition)")
    ap.add_argument("--spread-warmup", type=int, default=None, help="records produced untimed first (default: one run's worth)")
    ap.add_argument("--spread-runs", type=int, default=3, help="timed runs of the spread produce, median reported (default 3)")
    ap.add_argument("--value-size", type=int, default=100, help="bytes per record of the spread produce (default 100)")
    ap.add_argument("--big-mb", type=float, default=2048, help="MB acknowledged in the big partition before the kill (default 2048)")
    ap.add_argument("--big-value-size", type=int, default=1000, help="bytes per record of the big fill (default 1000)")
    ap.add_argument("--skip-big", action="store_true", help="leave out the big partition")
    ap.add_argument("--serve-timeout", type=float, default=900.0, help="seconds a restart may take to serve (default 900)")
    ap.add_argument("--connections", type=ints, default=[1, 10, 100, 500], help="producer connections (default 1,10,100,500)")
    ap.add_argument("--consumers", type=ints, default=[1, 8], help="consumers on one topic (default 1,8)")
    ap.add_argument("--connection-seconds", type=float, default=5.0, help="timed seconds per connection point (default 5)")
    ap.add_argument("--fetch-mb", type=float, default=64.0, help="MB the consumers read from (default 64)")
    ap.add_argument("--skip-connections", action="store_true", help="leave out the connection and consumer loads")
    ap.add_argument("--no-reference", action="store_true", help="kafka-sidecar only")
    ap.add_argument("--sidecar-python", default=sys.executable, help="the Python that runs kafka-sidecar (another build; "
                    "the connection loads use bench/run.py's installed server)")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "scale.json")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from bench.run import machine_info

    cfg = parse_args(argv)
    ref_problem = None if cfg.no_reference else unavailable_reason()
    if ref_problem:
        log(ref_problem)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    precompile(cfg.sidecar_python)
    results: dict[str, Any] = {"started": time.time(), "machine": machine_info(),
                               "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(cfg).items()},
                               "reference_problem": ref_problem, "partitions": {}}
    try:
        for p in cfg.partitions:
            topics = topics_for(p, cfg.per_topic)
            log(f"{p} partitions in {len(topics)} topics (load average {os.getloadavg()[0]:.1f})")
            results["partitions"][str(p)] = {"topics": len(topics), **run_both(
                Reference, lambda s, topics=topics: measure_partitions(s, topics, cfg), work, cfg, ref_problem)}
        if not cfg.skip_big:
            log(f"big partition: {cfg.big_mb:g} MB (load average {os.getloadavg()[0]:.1f})")
            results["big_partition"] = run_both(Reference, lambda s: measure_big(s, cfg), work, cfg, ref_problem)
        if not cfg.skip_connections:
            log(f"connections {cfg.connections}, consumers {cfg.consumers} (load average {os.getloadavg()[0]:.1f})")
            results["connections"] = connection_axis(cfg)
    finally:
        if not cfg.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"data kept in {work}")
    results["seconds"] = round(time.time() - results["started"], 1)
    results["rows"] = rows_for(results)
    print_table(results["rows"])
    if ref_problem:
        print(ref_problem)
    cfg.json.parent.mkdir(parents=True, exist_ok=True)
    cfg.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"wrote {cfg.json} ({results['seconds']:.0f} s)")
    failed = [name for point in [*results["partitions"].values(), results.get("big_partition") or {}]
              for name, r in point.items() if isinstance(r, dict) and "error" in r]
    lost = [r for r in results["rows"] if r["goal"] == "none lost" and not r["met"]]
    return 1 if failed or lost else 0


if __name__ == "__main__":
    sys.exit(main())
