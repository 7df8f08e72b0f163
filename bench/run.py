"""Benchmark kafka-sidecar against the reference Apache Kafka, with the same client loads.

    python -m bench.run                 # full: 200,000 x 1 KB records (x3 runs), 10 s latency, 5 starts
    python -m bench.run --quick         # smaller: 50,000 records once, 3 s latency run, 3 starts
    python -m bench.run --no-reference  # our server only
    python -m bench.run --records N

The reference is ``KAFKA_REFERENCE_BOOTSTRAP`` when set (then its start time and RSS are
not measured), else a broker launched with ``bench/reference.py``. Results are printed as a
table (ours, reference, ours/reference) and written to ``bench/results/latest.json``.
See ``bench/README.md`` for what each figure means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.reference import (
    ReferenceKafka,
    ReferenceUnavailable,
    free_port,
    metadata_brokers,
    port_open,
    unavailable_reason,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "latest.json"
MB = 1_000_000  # throughput: MB/s = 10^6 payload bytes per second
MIB = 1024 * 1024  # memory: MiB

# (key, label, unit, better, decimals)
METRICS = [
    ("start_s", "start: exec -> port accepts (median)", "s", "lower", 3),
    ("ready_s", "start: exec -> Metadata lists broker", "s", "lower", 3),
    ("idle_rss_mib", "RSS idle after start", "MiB", "lower", 1),
    ("produce_acks1_mb_s", "produce acks=1, 1 KB, linger 5 ms", "MB/s", "higher", 1),
    ("produce_acks1_rec_s", "produce acks=1", "rec/s", "higher", 0),
    ("produce_acksall_mb_s", "produce acks=all, 1 KB, linger 5 ms", "MB/s", "higher", 1),
    ("produce_acksall_rec_s", "produce acks=all", "rec/s", "higher", 0),
    ("latency_p50_ms", "produce latency p50 (acks=all, fixed rate)", "ms", "lower", 2),
    ("latency_p99_ms", "produce latency p99", "ms", "lower", 2),
    ("latency_max_ms", "produce latency max", "ms", "lower", 2),
    ("fetch_mb_s", "fetch from start (consume)", "MB/s", "higher", 1),
    ("fetch_rec_s", "fetch from start", "rec/s", "higher", 0),
    ("load_rss_mib", "RSS after the loads", "MiB", "lower", 1),
    ("peak_rss_mib", "peak RSS (VmHWM)", "MiB", "lower", 1),
]

# Aims for our server (not applied to the reference).
AIMS = {
    "start_s": ("<", 0.3),
    "idle_rss_mib": ("<", 60.0),
    "produce_acks1_mb_s": (">=", 150.0),
    "produce_acksall_mb_s": (">=", 150.0),
    "fetch_mb_s": (">=", 400.0),
}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- process facts


def proc_status_kib(pid: int, field: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_mib(pid: int | None, field: str = "VmRSS") -> float | None:
    if pid is None:
        return None
    kib = proc_status_kib(pid, field)
    return None if kib is None else kib / 1024


def cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def machine_info() -> dict:
    info = {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_mib"] = int(f.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    info["loadavg_at_start"] = os.getloadavg()
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            info["git"] = head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        import confluent_kafka

        v = confluent_kafka.version()
        info["confluent_kafka"] = v[0] if isinstance(v, tuple) else v
        info["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    return info


def java_version() -> str | None:
    java = shutil.which("java")
    if not java:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stderr or out.stdout).splitlines()[0].strip() if (out.stderr or out.stdout) else None


# --------------------------------------------------------------------------- our server


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that were free a moment ago."""
    for _ in range(200):
        base = free_port()
        if all(not port_open("127.0.0.1", base + k, timeout=0.05) and _bindable(base + k) for k in range(1, count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports found")


def _bindable(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def sidecar_command() -> list[str]:
    """The installed console script next to this interpreter (what users run)."""
    exe = Path(sys.executable).parent / "kafka-sidecar"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("kafka-sidecar")
    if found:
        return [found]
    return [sys.executable, "-m", "kafka_sidecar.server"]


class Sidecar:
    """kafka-sidecar on a loopback port with a fresh temp data dir; start timed from Popen."""

    def __init__(self, work_dir: Path, overrides: dict[str, str] | None = None, processes: int = 1) -> None:
        self.work_dir = work_dir
        self.processes = processes  # ``serve --processes N``: node k on port + k - 1
        self.data_dir = work_dir / "data"
        self.log_path = work_dir / "server.log"
        self.overrides = dict(overrides or {})
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None
        self.ready_seconds: float | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self, timeout: float = 20.0) -> Sidecar:
        self.port = free_ports(self.processes)
        cmd = [*sidecar_command(), "serve", "--data-dir", str(self.data_dir), "--listen", self.bootstrap]
        if self.processes > 1:
            cmd += ["--processes", str(self.processes)]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._log = open(self.log_path, "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = t0 + timeout
        while self.start_seconds is None:
            if port_open("127.0.0.1", self.port, timeout=0.5):
                self.start_seconds = time.monotonic() - t0
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka-sidecar exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kafka-sidecar did not accept connections in {timeout}s: {self.log_tail()}")
            time.sleep(0.001)
        while self.ready_seconds is None:
            try:
                if len({node for node, _, _ in metadata_brokers("127.0.0.1", self.port, timeout=2.0)}) >= self.processes \
                        and all(port_open("127.0.0.1", self.port + k, timeout=0.5) for k in range(self.processes)):
                    self.ready_seconds = time.monotonic() - t0
                    break
            except (OSError, ValueError) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kafka-sidecar did not answer Metadata in {timeout}s: {e}") from e
            time.sleep(0.001)
        return self

    @property
    def pids(self) -> list[int]:
        """The server's processes: with ``--processes N`` the supervisor and its node processes."""
        pid = self.pid
        if pid is None:
            return []
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        return [pid, *(int(c) for c in children)]

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    log(f"kafka-sidecar did not stop in {timeout}s after SIGTERM: killing it")
                    self.proc.kill()
                    self.proc.wait(30)
            code = self.proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code


def server_log_problems(text: str, limit: int = 20) -> list[str]:
    """Lines of a server log that look like trouble (errors, tracebacks, warnings)."""
    keys = (" ERROR ", " CRITICAL ", "Traceback", " WARNING ", " WARN ", "Exception")
    return [line for line in text.splitlines() if any(k in line for k in keys)][:limit]


# --------------------------------------------------------------------------- loads (confluent-kafka)


class ClientErrors:
    """error_cb target: librdkafka's global errors (connection failures, all brokers down...)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, err) -> None:
        if len(self.errors) < 50:
            self.errors.append(str(err))


def create_topics(bootstrap: str, names: list[str], errors: ClientErrors, timeout: float = 30.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors})
    futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names], request_timeout=timeout)
    for name, fut in futures.items():
        fut.result(timeout)
        log(f"created topic {name}")
    # Wait (bounded) until every partition has a leader: a new topic on Kafka needs a moment.
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        ready = all(n in md.topics and md.topics[n].error is None and md.topics[n].partitions and all(p.leader >= 0 for p in md.topics[n].partitions.values()) for n in names)
        if ready:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {names} have no leader after {timeout}s")
        time.sleep(0.1)


def produce_throughput(bootstrap: str, topic: str, records: int, value_size: int, acks: str, errors: ClientErrors) -> dict:
    """Send ``records`` values of ``value_size`` bytes as fast as the client can; time to flush."""
    from confluent_kafka import Producer

    failed: list[str] = []

    def on_delivery(err, msg) -> None:  # called for failures only (delivery.report.only.error)
        if err is not None and len(failed) < 20:
            failed.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,  # librdkafka's max useful batch below message.max.bytes (1 MiB)
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
            "enable.idempotence": False,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            "error_cb": errors,
        }
    )
    value = os.urandom(value_size)
    # Warm-up: metadata, connection, and the topic's leader known before the clock starts.
    producer.produce(topic, value)
    if producer.flush(30) != 0:
        raise RuntimeError(f"warm-up record to {topic} not delivered in 30 s: {failed or errors.errors}")
    deadline = time.monotonic() + max(120.0, records / 2000)
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:  # local queue full: let librdkafka drain it
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"produce to {topic} stalled: local queue still full") from None
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"produce to {topic}: {left} records not delivered before the deadline")
    if failed:
        raise RuntimeError(f"produce to {topic}: delivery failures: {failed[:5]}")
    return {
        "records": records,
        "value_bytes": value_size,
        "seconds": elapsed,
        "mb_s": records * value_size / elapsed / MB,
        "rec_s": records / elapsed,
    }


def produce_latency(bootstrap: str, topic: str, rate: int, seconds: float, value_size: int, errors: ClientErrors, warmup_s: float = 1.0) -> dict:
    """acks=all, linger 0: ``rate`` records/s for ``seconds``; latency from each delivery report.

    Latency is librdkafka's ``Message.latency()`` (produce() call -> acknowledgement), read in
    the delivery callback. The first ``warmup_s`` seconds are sent but not counted.
    """
    from confluent_kafka import Producer

    latencies: list[float] = []
    failed: list[str] = []

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "compression.type": "none",
            "enable.idempotence": False,
            "error_cb": errors,
        }
    )
    value = os.urandom(value_size)
    producer.produce(topic, value)
    if producer.flush(30) != 0:
        raise RuntimeError(f"warm-up record to {topic} not delivered in 30 s: {errors.errors}")

    def send_for(duration: float, count: bool) -> int:
        interval = 1.0 / rate
        total = int(duration * rate)
        start = time.perf_counter()
        behind = 0
        for i in range(total):
            due = start + i * interval
            now = time.perf_counter()
            while now < due:  # serve delivery reports while waiting for the next send time
                producer.poll(due - now)
                now = time.perf_counter()
            if now - due > 0.01:
                behind += 1
            if count:
                producer.produce(topic, value, on_delivery=on_count)
            else:
                producer.produce(topic, value, on_delivery=on_warm)
        producer.flush(30)
        return behind

    def on_warm(err, msg) -> None:
        if err is not None and len(failed) < 20:
            failed.append(str(err))

    def on_count(err, msg) -> None:
        if err is not None:
            if len(failed) < 20:
                failed.append(str(err))
            return
        lat = msg.latency()
        if lat is not None:
            latencies.append(lat)

    send_for(warmup_s, count=False)
    t0 = time.perf_counter()
    behind = send_for(seconds, count=True)
    elapsed = time.perf_counter() - t0
    left = len(producer)
    if left:
        raise RuntimeError(f"latency run on {topic}: {left} records not delivered")
    if failed:
        raise RuntimeError(f"latency run on {topic}: delivery failures: {failed[:5]}")
    if not latencies:
        raise RuntimeError(f"latency run on {topic}: no delivery reports")
    lat_ms = sorted(x * 1000 for x in latencies)

    def pct(p: float) -> float:
        return lat_ms[min(len(lat_ms) - 1, int(round(p / 100 * (len(lat_ms) - 1))))]

    return {
        "rate": rate,
        "value_bytes": value_size,
        "seconds": elapsed,
        "count": len(lat_ms),
        "sent_late_over_10ms": behind,
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "p999_ms": pct(99.9),
        "max_ms": lat_ms[-1],
        "mean_ms": statistics.fmean(lat_ms),
    }


def fetch_throughput(bootstrap: str, topic: str, errors: ClientErrors, run_id: str) -> dict:
    """Consume ``topic`` partition 0 from the beginning to its high watermark (assign, no commits)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka insists on a group id; with assign() and no commits it only looks up
            # the coordinator (harmless if the broker has none).
            "group.id": f"bench-{run_id}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "error_cb": errors,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        want = high - low
        deadline = time.monotonic() + max(120.0, want / 5000)
        count = 0
        nbytes = 0
        t0 = time.perf_counter()
        # The absolute start offset, not OFFSET_BEGINNING: librdkafka resolves a logical offset
        # with a ListOffsets that, on a fresh consumer, waits for its 500 ms offset-query timer.
        consumer.assign([TopicPartition(topic, 0, low)])
        while count < want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fetch of {topic} stalled: {count}/{want} records after the deadline")
            # consume() returns early only once it has num_messages: never ask for more than remain.
            for msg in consumer.consume(num_messages=min(10_000, want - count), timeout=1.0):
                err = msg.error()
                if err is not None:
                    raise RuntimeError(f"fetch of {topic}: {err}")
                nbytes += len(msg.value())
                count += 1
        elapsed = time.perf_counter() - t0
    finally:
        consumer.close()
    return {"records": count, "bytes": nbytes, "seconds": elapsed, "mb_s": nbytes / elapsed / MB, "rec_s": count / elapsed}


def run_loads(bootstrap: str, pid: int | None, cfg: argparse.Namespace, label: str) -> dict:
    """The same client loads, whatever the broker. Returns metrics + details.

    Throughput loads run ``cfg.repeat`` times (each produce into its own fresh topic, each
    fetch re-reading the first acks=1 topic); the metric is the median of the runs.
    """
    run_id = uuid.uuid4().hex[:8]
    reps = range(cfg.repeat)
    acks1 = [f"bench-{run_id}-acks1-{i}" for i in reps]
    acksall = [f"bench-{run_id}-acksall-{i}" for i in reps]
    lat_topic = f"bench-{run_id}-latency"
    warm_topic = f"bench-{run_id}-warmup"
    errors = ClientErrors()
    out: dict = {"metrics": {}, "details": {}, "failures": {}}
    m, d = out["metrics"], out["details"]

    def step(name: str, fn):
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        try:
            result = fn()
        except Exception as e:  # report and go on with the other loads
            log(f"{label}: {name} FAILED: {e}")
            out["failures"][name] = f"{type(e).__name__}: {e}"
            return None
        cpu1, wall = cpu_seconds(pid), time.monotonic() - t0
        if cpu0 is not None and cpu1 is not None and isinstance(result, dict):
            result["broker_cpu_s"] = cpu1 - cpu0
            result["broker_cpu_pct_of_one_core"] = 100 * (cpu1 - cpu0) / wall if wall > 0 else None
        if isinstance(result, dict) and "mb_s" in result:
            log(f"{label}: {name}: {result['mb_s']:.1f} MB/s, {result['rec_s']:,.0f} rec/s in {result['seconds']:.2f} s")
        return result

    def repeated(name: str, fn) -> dict | None:
        samples = []
        for i in reps:
            r = step(f"{name} #{i + 1}", lambda i=i: fn(i))
            if r is None:
                return None
            samples.append(r)
        summary = {"samples": samples}
        for k in ("mb_s", "rec_s", "seconds", "broker_cpu_pct_of_one_core"):
            values = [x[k] for x in samples if x.get(k) is not None]
            summary[k] = statistics.median(values) if values else None
        d[name] = summary
        return summary

    log(f"{label}: creating topics")
    if step("create topics", lambda: create_topics(bootstrap, [*acks1, *acksall, lat_topic, warm_topic], errors) or {}) is None:
        out["client_errors"] = errors.errors
        return out
    if cfg.warmup:
        # Untimed warm-up (a JVM broker JITs its hot paths; page cache, connections): the
        # figures below are steady state. The warm-up's own figures are kept as "cold".
        log(f"{label}: warm-up, {cfg.warmup:,} records (not counted)")
        r = step("warm-up produce", lambda: produce_throughput(bootstrap, warm_topic, cfg.warmup, cfg.value_size, "1", errors))
        if r:
            d["cold produce acks=1"] = r
            r = step("warm-up fetch", lambda: fetch_throughput(bootstrap, warm_topic, errors, run_id))
            if r:
                d["cold fetch"] = r
    r = repeated("produce acks=1", lambda i: produce_throughput(bootstrap, acks1[i], cfg.records, cfg.value_size, "1", errors))
    if r:
        m["produce_acks1_mb_s"], m["produce_acks1_rec_s"] = r["mb_s"], r["rec_s"]
    r = repeated("produce acks=all", lambda i: produce_throughput(bootstrap, acksall[i], cfg.records, cfg.value_size, "all", errors))
    if r:
        m["produce_acksall_mb_s"], m["produce_acksall_rec_s"] = r["mb_s"], r["rec_s"]
    log(f"{label}: latency run, {cfg.rate} rec/s for {cfg.latency_seconds:g} s ...")
    r = step("latency", lambda: produce_latency(bootstrap, lat_topic, cfg.rate, cfg.latency_seconds, cfg.latency_value_size, errors))
    if r:
        d["latency"] = r
        m["latency_p50_ms"], m["latency_p99_ms"], m["latency_max_ms"] = r["p50_ms"], r["p99_ms"], r["max_ms"]
    if "produce acks=1" in d:
        r = repeated("fetch", lambda i: fetch_throughput(bootstrap, acks1[0], errors, run_id))
        if r:
            m["fetch_mb_s"], m["fetch_rec_s"] = r["mb_s"], r["rec_s"]
    if pid is not None:
        m["load_rss_mib"] = rss_mib(pid)
        m["peak_rss_mib"] = rss_mib(pid, "VmHWM")
    out["client_errors"] = errors.errors
    return out


# --------------------------------------------------------------------------- the two brokers


def bench_ours(cfg: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-sidecar-"))
    out: dict = {"name": "kafka-sidecar"}
    try:
        starts, readies = [], []
        server = None
        for i in range(cfg.starts):
            server = Sidecar(root / f"start{i}")
            server.work_dir.mkdir()
            try:
                server.start()
            except RuntimeError as e:
                server.stop()
                log(f"ours: start {i + 1} failed: {e}")
                return {**out, "failures": {"start": str(e)}, "metrics": {}}
            starts.append(server.start_seconds)
            readies.append(server.ready_seconds)
            log(f"ours: start {i + 1}/{cfg.starts}: port {server.start_seconds * 1000:.0f} ms, Metadata {server.ready_seconds * 1000:.0f} ms")
            if i < cfg.starts - 1:
                code = server.stop()
                if code != 0:
                    log(f"ours: exit status {code} after SIGTERM: {server.log_tail(500)}")
        assert server is not None
        time.sleep(cfg.settle)
        metrics = {
            "start_s": statistics.median(starts),
            "ready_s": statistics.median(readies),
            "idle_rss_mib": rss_mib(server.pid),
        }
        out["start_samples_s"] = starts
        out["ready_samples_s"] = readies
        out["loadavg_before"] = os.getloadavg()
        try:
            loads = run_loads(server.bootstrap, server.pid, cfg, "ours")
        finally:
            alive = server.pid is not None
            code = server.stop()
            out["exit_status"] = code if alive else f"died during the loads ({code})"
            out["server_log_problems"] = server_log_problems(server.log_tail(200_000))
        metrics.update(loads.pop("metrics"))
        out.update(loads)
        out["metrics"] = metrics
        return out
    finally:
        if cfg.keep:
            log(f"ours: kept data dirs and server logs in {root}")
            out["kept_dir"] = str(root)
        else:
            shutil.rmtree(root, ignore_errors=True)


def bench_reference(cfg: argparse.Namespace) -> dict:
    external = os.environ.get("KAFKA_REFERENCE_BOOTSTRAP")
    if external:
        log(f"reference: KAFKA_REFERENCE_BOOTSTRAP={external} (start time and RSS not measured)")
        out = {"name": f"Apache Kafka at {external}", "loadavg_before": os.getloadavg()}
        loads = run_loads(external, None, cfg, "reference")
        out["metrics"] = loads.pop("metrics")
        out.update(loads)
        return out
    reason = unavailable_reason()
    if reason:
        return {"name": "Apache Kafka", "unavailable": reason, "metrics": {}}
    home = ReferenceKafka().kafka_home
    out = {"name": "Apache Kafka (bench/reference.py)", "java": java_version()}
    starts, readies = [], []
    n = cfg.reference_starts
    for i in range(n):
        kafka = ReferenceKafka(keep_work_dir=cfg.keep and i == n - 1)
        try:
            kafka.start()
        except ReferenceUnavailable as e:
            return {**out, "unavailable": str(e), "metrics": {}}
        starts.append(kafka.start_seconds)
        readies.append(kafka.ready_seconds)
        log(f"reference: start {i + 1}/{n}: port {kafka.start_seconds:.2f} s, Metadata {kafka.ready_seconds:.2f} s")
        if i < n - 1:
            kafka.stop()
            continue
        try:
            home = kafka.kafka_home
            time.sleep(cfg.settle)
            metrics = {
                "start_s": statistics.median(starts),
                "ready_s": statistics.median(readies),
                "idle_rss_mib": rss_mib(kafka.pid),
            }
            out["loadavg_before"] = os.getloadavg()
            loads = run_loads(kafka.bootstrap, kafka.pid, cfg, "reference")
            metrics.update(loads.pop("metrics"))
            out.update(loads)
            out["metrics"] = metrics
        finally:
            code = kafka.stop()
            out["exit_status"] = code
            if cfg.keep:
                log(f"reference: kept its data dir and logs in {kafka.work_dir}")
                out["kept_dir"] = str(kafka.work_dir)
    out["kafka_home"] = str(home)
    out["start_samples_s"] = starts
    out["ready_samples_s"] = readies
    return out


# --------------------------------------------------------------------------- report


def fmt(value, decimals: int) -> str:
    if value is None:
        return "-"
    if decimals == 0:
        return f"{value:,.0f}"
    return f"{value:,.{decimals}f}"


def aim_verdict(key: str, value) -> tuple[str, str]:
    if key not in AIMS:
        return "", ""
    op, target = AIMS[key]
    text = f"{op} {target:g}"
    if value is None:
        return text, "?"
    ok = value < target if op == "<" else value >= target
    return text, "met" if ok else "MISSED"


def ratios(ours: dict, ref: dict) -> dict:
    out = {}
    for key, *_ in METRICS:
        a, b = ours.get(key), ref.get(key)
        out[key] = a / b if a is not None and b not in (None, 0) else None
    return out


def render(results: dict) -> str:
    ours = results["ours"]["metrics"]
    ref = (results.get("reference") or {}).get("metrics", {})
    rat = results.get("ratios", {})
    header = ["metric", "unit", "ours", "reference", "ours/ref", "better", "aim (ours)", ""]
    rows = []
    for key, label, unit, better, dec in METRICS:
        aim, verdict = aim_verdict(key, ours.get(key))
        r = rat.get(key)
        rows.append([label, unit, fmt(ours.get(key), dec), fmt(ref.get(key), dec), "-" if r is None else (f"{r:.2f}x" if r >= 0.1 else f"{r:.3f}x"), better, aim, verdict])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    align = ["<", "<", ">", ">", ">", "<", "<", "<"]

    def line(cells):
        return "  ".join(f"{str(c):{a}{w}}" for c, a, w in zip(cells, align, widths, strict=True)).rstrip()

    lines = [line(header), line(["-" * w for w in widths])]
    lines += [line(row) for row in rows]
    return "\n".join(lines)


def print_report(results: dict) -> None:
    m = results["machine"]
    cfg = results["config"]
    print()
    print(
        f"machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {m.get('mem_total_mib', '?')} MiB RAM, "
        f"Python {m['python']} ({m['implementation']}), {m['platform']}"
    )
    if m.get("git"):
        print(f"code: {m['git']}")
    print(f"clients: confluent-kafka {m.get('confluent_kafka')} / librdkafka {m.get('librdkafka')}, in the benchmark process (same machine)")
    ref = results.get("reference")
    if ref:
        print(f"reference: {ref.get('name')}{' — ' + ref['java'] if ref.get('java') else ''}")
        if ref.get("unavailable"):
            print(f"  {ref['unavailable']}")
    print(
        f"loads: {cfg['records']:,} records x {cfg['value_size']} B, 1 partition (produce acks=1 and acks=all, then fetch the acks=1 topic); "
        f"latency: {cfg['rate']} rec/s x {cfg['latency_value_size']} B for {cfg['latency_seconds']:g} s, acks=all, linger 0; "
        f"starts: median of {cfg['starts']} (ours), {cfg['reference_starts']} (reference); "
        f"throughput: median of {cfg['repeat']} run(s) after an untimed warm-up of {cfg['warmup']:,} records"
    )
    busy = [f"{side} {results[side]['loadavg_before'][0]:.1f}" for side in ("ours", "reference") if (results.get(side) or {}).get("loadavg_before") and results[side]["loadavg_before"][0] > 0.5 * (m.get("nproc") or 1)]
    if busy:
        print(f"WARNING: the machine was busy with other work (1-min load average before the run: {', '.join(busy)}; {m.get('nproc')} CPUs): figures are noisy, compare ratios")
    print("ratios are ours/reference; 'better' says which direction wins (start time, latency and RSS: lower is better)")
    print()
    print(render(results))
    print()
    for side in ("ours", "reference"):
        r = results.get(side)
        if not r:
            continue
        if r.get("loadavg_before"):
            print(f"{side}: machine load average before its run (1/5/15 min): {' '.join(f'{x:.2f}' for x in r['loadavg_before'])}")
        cpu, samples = [], []
        for name in ("produce acks=1", "produce acks=all", "latency", "fetch"):
            detail = r.get("details", {}).get(name) or {}
            pct = detail.get("broker_cpu_pct_of_one_core")
            if pct is not None:
                cpu.append(f"{name} {pct:.0f}%")
            if len(detail.get("samples", [])) > 1:
                samples.append(f"{name} " + "/".join(f"{x['mb_s']:.0f}" for x in detail["samples"]))
        if cpu:
            print(f"{side} broker CPU (% of one core) during: " + ", ".join(cpu))
        if samples:
            print(f"{side} runs (MB/s): " + ", ".join(samples))
        cold = [f"{name.removeprefix('cold ')} {r['details'][name]['mb_s']:.0f} MB/s" for name in ("cold produce acks=1", "cold fetch") if name in r.get("details", {})]
        if cold:
            print(f"{side} cold (the untimed warm-up, first contact after start): " + ", ".join(cold))
        lat = (r.get("details", {}).get("latency")) or {}
        if lat:
            print(
                f"{side} latency detail: n={lat['count']}, p90 {lat['p90_ms']:.2f} ms, p99.9 {lat['p999_ms']:.2f} ms, "
                f"mean {lat['mean_ms']:.2f} ms, sent >10 ms late: {lat['sent_late_over_10ms']}"
            )
        for name, why in (r.get("failures") or {}).items():
            print(f"{side} FAILED {name}: {why}")
        if r.get("client_errors"):
            print(f"{side} client errors ({len(r['client_errors'])}): {r['client_errors'][:5]}")
        if r.get("server_log_problems"):
            print(f"{side} server log problems ({len(r['server_log_problems'])}):")
            for line in r["server_log_problems"][:10]:
                print(f"  {line}")
        if "exit_status" in r:
            print(f"{side} exit status after SIGTERM: {r['exit_status']}")
    print(f"\nresults written to {results['json_path']}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller run: 50,000 records, 1 run each, 3 s latency, 3 starts, 1 reference start")
    p.add_argument("--no-reference", action="store_true", help="our server only")
    p.add_argument("--records", type=int, default=None, help="records per produce run (default 200,000; --quick 50,000)")
    p.add_argument("--value-size", type=int, default=1000, help="bytes per value for throughput runs (default 1000)")
    p.add_argument("--rate", type=int, default=1000, help="records/s for the latency run (default 1000)")
    p.add_argument("--latency-seconds", type=float, default=None, help="latency run length (default 10; --quick 3)")
    p.add_argument("--latency-value-size", type=int, default=100)
    p.add_argument("--starts", type=int, default=None, help="starts of our server for the median (default 5; --quick 3)")
    p.add_argument("--reference-starts", type=int, default=None, help="starts of the reference (default as --starts; --quick 1)")
    p.add_argument("--repeat", type=int, default=None, help="runs of each throughput load, median reported (default 3; --quick 1)")
    p.add_argument("--warmup", type=int, default=None, help="records produced and fetched untimed before the loads (default 50,000; --quick 20,000; 0: none)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds idle after start before reading RSS")
    p.add_argument("--keep", action="store_true", help="keep our server's data dirs and logs (temp dir printed)")
    p.add_argument("--json", type=Path, default=RESULTS, help=f"where to write results (default {RESULTS.relative_to(REPO)})")
    args = p.parse_args(argv)
    if args.records is None:
        args.records = 50_000 if args.quick else 200_000
    if args.latency_seconds is None:
        args.latency_seconds = 3.0 if args.quick else 10.0
    if args.starts is None:
        args.starts = 3 if args.quick else 5
    if args.warmup is None:
        args.warmup = 20_000 if args.quick else 50_000
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.reference_starts is None:
        args.reference_starts = 1 if args.quick else args.starts
    for name in ("records", "rate", "starts", "reference_starts", "value_size", "latency_value_size", "repeat"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    results: dict = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "config": {
            k: getattr(cfg, k)
            for k in ("quick", "records", "value_size", "rate", "latency_seconds", "latency_value_size", "starts", "reference_starts", "repeat", "warmup", "settle")
        },
        "units": {key: unit for key, _, unit, _, _ in METRICS},
        "better": {key: better for key, _, _, better, _ in METRICS},
        "aims": {k: f"{op} {v:g}" for k, (op, v) in AIMS.items()},
    }
    log("benchmarking kafka-sidecar")
    results["ours"] = bench_ours(cfg)
    if not cfg.no_reference:
        log("benchmarking the reference Apache Kafka")
        results["reference"] = bench_reference(cfg)
        results["ratios"] = ratios(results["ours"]["metrics"], results["reference"].get("metrics", {}))
    results["aims_met"] = {k: aim_verdict(k, results["ours"]["metrics"].get(k))[1] for k in AIMS}
    cfg.json.parent.mkdir(parents=True, exist_ok=True)
    cfg.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    results["json_path"] = str(cfg.json)
    print_report(results)
    failed = bool(results["ours"].get("failures")) or bool((results.get("reference") or {}).get("failures"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
