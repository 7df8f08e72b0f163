"""Many connections: N producer connections and M consumers, kafka-sidecar and the reference Kafka.

    python -m bench.connections                         # 1/10/100/500 producers, 1/8 consumers, ~2 min
    python -m bench.connections --seconds 10 --connections 100
    python -m bench.connections --no-reference --json /tmp/ours.json
    python -m bench.connections --rounds 3              # ours, Kafka, ours, ... : medians per point
    python -m bench.connections --sidecar-pythonpath /tmp/base   # another build of ours (see README)
    python -m bench.connections --processes 2           # ours as `serve --processes 2`
    python -m bench.connections --processes 2 --server-cpus 0   # its nodes pinned to one core

The client is this process: raw requests over asyncio Protocols, each request frame built once
with the project's own encoders (``protocol/messages.py``, ``protocol/records.py``) and written
again as the same bytes, so it costs a few microseconds per request and is not what limits the
figures (its CPU share is printed). Every connection keeps one request outstanding (closed loop,
what a producer with ``max.in.flight.requests.per.connection=1`` does).

- **produce, N connections**: Produce v11, acks=1, one batch of ``--batch-records`` records of
  ``--value-size`` bytes (no key, no compression) per request; connection i writes partition
  i mod ``--partitions`` of one topic. After ``--warmup`` seconds untimed, ``--seconds`` timed:
  requests/s, MB/s of record values, latency p50/p99/max (request written -> answer read).
  Every answer's error code is checked.
- **fetch, M consumers**: a topic of ``--partitions`` partitions is filled with ``--fetch-mb`` MB
  (batches of 100 x 1,000 B); consumer j fetches the partitions p with p mod M = j (as a group
  of M would share them), Fetch v12 with ``max_wait_ms`` 500, 1 MiB per partition, from offset 0
  to the end and again from 0, for ``--seconds``: MB/s of record batch bytes.
- **--processes N**: ours as the real ``kafka-sidecar serve --processes N`` (one cluster, node k
  on port + k - 1). Every topic is created once through the bootstrap address and each
  connection goes to the node Metadata names as its partition's leader, as a client does.
  Broker CPU is the supervisor's and every node's. The reference stays one broker.
- **Kafka's JIT warm**: before Kafka's first point, ``--jit-warmup`` seconds (default 20) of the
  largest produce load, untimed, so its figures are a warm broker's.
- **--server-cpus LIST**: pin the broker (ours: every process; Kafka: the JVM) to these cores
  (``sched_setaffinity``), to see how requests/s grows with the cores given, on a machine with
  fewer cores than processes to compare (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.reference import ReferenceKafka, ReferenceUnavailable, unavailable_reason
from bench.run import ClientErrors, Sidecar, cpu_seconds, log, machine_info

REPO = Path(__file__).resolve().parents[1]
PRODUCE, FETCH = 0, 1
PRODUCE_VERSION, FETCH_VERSION = 11, 12
_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")


# --------------------------------------------------------------------------- requests


def produce_frame(topic: str, partition: int, records: int, value_size: int, correlation_id: int) -> bytes:
    """A whole Produce v11 request frame (acks=1) with one batch."""
    from kafka_sidecar.protocol.messages import encode_request
    from kafka_sidecar.protocol.records import encode_columns

    now = int(time.time() * 1000)
    value = os.urandom(value_size)
    batch = encode_columns(list(range(records)), [now] * records, [None] * records, [value] * records,
                           [[] for _ in range(records)])
    return encode_request(PRODUCE, PRODUCE_VERSION, correlation_id, "bench", {
        "transactional_id": None, "acks": 1, "timeout": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    })


def produce_error_offset(topic: str) -> int:
    """Where the partition's error code sits in a Produce v11 answer (payload, no size prefix):
    correlation id, header tags, responses count, name, partitions count, index."""
    return 4 + 1 + 1 + 1 + len(topic.encode()) + 1 + 4


def fetch_frame(topic: str, offsets: dict[int, int], correlation_id: int) -> bytes:
    from kafka_sidecar.protocol.messages import encode_request

    return encode_request(FETCH, FETCH_VERSION, correlation_id, "bench", {
        "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in sorted(offsets.items())]}],
        "forgotten_topics_data": [], "rack_id": "",
    })


def fetch_reader() -> Any:
    """kio's reader of a Fetch v12 answer body."""
    from kafka_sidecar.protocol import messages

    return messages._reader(messages.response_schema(FETCH, FETCH_VERSION))


def next_offset(records: bytes, offset: int) -> tuple[int, int]:
    """(the offset after the last complete batch, the bytes of complete batches)."""
    pos, n = 0, len(records)
    while pos + 12 <= n:
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > n:
            break
        (last_delta,) = struct.unpack_from(">i", records, pos + 23)
        offset = base + last_delta + 1
        pos += 12 + length
    return offset, pos


# --------------------------------------------------------------------------- the client


class _Frames(asyncio.Protocol):
    """Reads size-prefixed answers; ``answered(payload)`` is called for each one."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                return
            payload = bytes(buf[4: 4 + size])
            del buf[: 4 + size]
            self.answered(payload)

    def answered(self, payload: bytes) -> None:
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class ProduceConnection(_Frames):
    """One producer connection: the same request again as soon as the last one is answered."""

    def __init__(self, request: bytes, error_at: int, stats: dict[str, Any]) -> None:
        super().__init__()
        self.request = request
        self.error_at = error_at
        self.stats = stats
        self.sent = 0.0
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.send()

    def send(self) -> None:
        self.sent = time.perf_counter()
        assert self.transport is not None
        self.transport.write(self.request)

    def answered(self, payload: bytes) -> None:
        now = time.perf_counter()
        stats = self.stats
        (code,) = _I16.unpack_from(payload, self.error_at)
        if stats["measuring"]:
            if code:
                stats["errors"][code] = stats["errors"].get(code, 0) + 1
            else:
                stats["latencies"].append(now - self.sent)
        if self.running:
            self.send()


async def _connect(host: str, port: int, factory: Any) -> Any:
    loop = asyncio.get_running_loop()
    for attempt in range(50):
        try:
            _, proto = await loop.create_connection(factory, host, port)
            return proto
        except OSError:
            if attempt == 49:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError


def leaders(bootstrap: str, topic: str) -> list[str]:
    """Each partition's leader as ``host:port``, from Metadata (what a client routes by)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": ClientErrors()})
    md = admin.list_topics(topic, timeout=10)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    parts = md.topics[topic].partitions
    return [brokers[parts[p].leader] for p in range(len(parts))]


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


async def produce_load(routes: list[str], topic: str, connections: int, cfg: argparse.Namespace,
                       pids: list[int] | None = None) -> dict[str, Any]:
    """N producer connections: connection i writes partition i mod P to its leader
    (``routes[p]``, from Metadata). One pool of latencies; throughput and broker CPU are totals
    over the broker's processes."""
    pids = pids or []
    partitions = len(routes)
    requests = [produce_frame(topic, p, cfg.batch_records, cfg.value_size, 1) for p in range(partitions)]
    stats: dict[str, Any] = {"measuring": False, "latencies": [], "errors": {}}
    error_at = produce_error_offset(topic)
    conns: list[ProduceConnection] = []

    def target(i: int) -> tuple[str, int]:
        return _split(routes[i % partitions])

    for i in range(0, connections, 50):  # connect in steps: a listen backlog is not unbounded
        conns += await asyncio.gather(*[_connect(*target(j), lambda i=j: ProduceConnection(requests[i % partitions], error_at, stats))
                                        for j in range(i, min(i + 50, connections))])
    await asyncio.sleep(cfg.warmup)
    cpu0, t0, server0, host0 = time.process_time(), time.perf_counter(), _cpu_total(pids), host_cpu()
    stats["measuring"] = True
    await asyncio.sleep(cfg.seconds)
    stats["measuring"] = False
    elapsed, cpu, server1, host1 = time.perf_counter() - t0, time.process_time() - cpu0, _cpu_total(pids), host_cpu()
    for c in conns:
        c.running = False
    await asyncio.sleep(0.2)
    for c in conns:
        if c.transport is not None:
            c.transport.close()
    lat = sorted(stats["latencies"])
    n = len(lat)

    def pct(q: float) -> float | None:
        return round(lat[min(n - 1, int(q * n))] * 1000, 3) if n else None

    return {
        "connections": connections, "processes": len(set(routes)), "seconds": round(elapsed, 3), "requests": n,
        "requests_per_s": round(n / elapsed, 1),
        "mb_per_s": round(n * cfg.batch_records * cfg.value_size / elapsed / 1e6, 2),
        "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": round(lat[-1] * 1000, 3) if n else None,
        "errors": stats["errors"], "client_cpu_pct": round(100 * cpu / elapsed, 1),
        # The broker's CPU (all its threads, all its processes) per answered request: what noise
        # on a shared machine moves least, so the figure to compare builds of ours by.
        "server_cpu_pct": round(100 * (server1 - server0) / elapsed, 1) if server0 is not None and server1 is not None else None,
        "server_cpu_us_per_request": round(1e6 * (server1 - server0) / n, 1) if n and server0 is not None and server1 is not None else None,
        # The whole machine's busy share of all its cores over the window: on a shared machine,
        # busy minus the broker and the client is what other work took; but the kernel's softirq
        # time (loopback TCP delivery of both sides, charged to no process) is in it, and apart.
        "host_cpu_busy_pct": _share(host0, host1, 0),
        "host_softirq_pct": _share(host0, host1, 2),
        "load_average": round(os.getloadavg()[0], 2),
    }


def host_cpu() -> tuple[int, int, int] | None:
    """(busy, total, softirq) jiffies of all cores from /proc/stat's cpu line (busy: all but idle
    and iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user..steal; guest time is already counted in user
    return total - fields[3] - fields[4], total, fields[6]


def _share(before: tuple[int, int, int] | None, after: tuple[int, int, int] | None, field: int) -> float | None:
    """A /proc/stat figure's share of all cores' time between two ``host_cpu()`` readings, in %."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100 * (after[field] - before[field]) / (after[1] - before[1]), 1)


def _cpu_total(pids: list[int]) -> float | None:
    """utime + stime summed over the broker processes (None if any is unknown)."""
    if not pids:
        return None
    total = 0.0
    for pid in pids:
        got = cpu_seconds(pid)
        if got is None:
            return None
        total += got
    return total


class FetchConnection(_Frames):
    """One consumer: Fetch its partitions from 0 to the end, then from 0 again."""

    def __init__(self, topic: str, partitions: list[int], stats: dict[str, Any]) -> None:
        super().__init__()
        self.topic = topic
        self.offsets = dict.fromkeys(partitions, 0)
        self.stats = stats
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.send()

    def send(self) -> None:
        assert self.transport is not None
        self.transport.write(fetch_frame(self.topic, self.offsets, 1))

    def answered(self, payload: bytes) -> None:
        body = fetch_reader()(payload, 5)[0]
        got = 0
        for t in body.responses:
            for p in t.partitions:
                code = int(p.error_code)
                if code:
                    self.stats["errors"][code] = self.stats["errors"].get(code, 0) + 1
                    continue
                records = p.records or b""
                nxt, size = next_offset(records, self.offsets[p.partition_index])
                got += size
                self.offsets[p.partition_index] = 0 if nxt >= p.high_watermark else nxt
        if self.stats["measuring"]:
            self.stats["bytes"] += got
        if self.running:
            self.send()


async def fetch_load(routes: list[str], topic: str, consumers: int, cfg: argparse.Namespace) -> dict[str, Any]:
    """M consumers: consumer j's partitions (p mod M = j) are fetched from each one's leader
    (one connection per broker it needs, as a client keeps one per broker)."""
    stats: dict[str, Any] = {"measuring": False, "bytes": 0, "errors": {}}
    partitions = len(routes)
    wanted = []
    for j in range(consumers):
        for leader in sorted(set(routes)):
            mine = [p for p in range(partitions) if p % consumers == j and routes[p] == leader]
            if mine:
                wanted.append((*_split(leader), mine))
    conns = await asyncio.gather(*[_connect(host, port, lambda mine=mine: FetchConnection(topic, mine, stats))
                                   for host, port, mine in wanted])
    await asyncio.sleep(cfg.warmup)
    cpu0, t0 = time.process_time(), time.perf_counter()
    stats["measuring"] = True
    await asyncio.sleep(cfg.seconds)
    stats["measuring"] = False
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    for c in conns:
        c.running = False
    await asyncio.sleep(0.6)
    for c in conns:
        if c.transport is not None:
            c.transport.close()
    return {"consumers": consumers, "processes": len(set(routes)), "seconds": round(elapsed, 3),
            "mb_per_s": round(stats["bytes"] / elapsed / 1e6, 2), "errors": stats["errors"],
            "client_cpu_pct": round(100 * cpu / elapsed, 1), "load_average": round(os.getloadavg()[0], 2)}


async def fill(routes: list[str], topic: str, mb: float) -> None:
    """``mb`` MB of 100 x 1,000 B batches into the topic, spread over its partitions, each
    written to its leader."""
    per_request = 100 * 1000
    total = int(mb * 1e6 / per_request)
    chosen = list(range(len(routes)))
    requests = {p: produce_frame(topic, p, 100, 1000, 1) for p in chosen}
    error_at = produce_error_offset(topic)
    left = [total]
    done = asyncio.get_running_loop().create_future()
    failed: list[int] = []

    class Filler(ProduceConnection):
        def answered(self, payload: bytes) -> None:
            (code,) = _I16.unpack_from(payload, error_at)
            if code in (3, 5, 6):  # a new topic's leader is not ready yet on Kafka: again shortly
                asyncio.get_running_loop().call_later(0.05, self.send)
                return
            if code:
                failed.append(code)
            left[0] -= 1
            if left[0] <= 0:
                if not done.done():
                    done.set_result(None)
                return
            self.send()

    conns = [await _connect(*_split(routes[p]), lambda p=p: Filler(requests[p], error_at, {})) for p in chosen]
    await done
    for c in conns:
        c.transport.close()  # type: ignore[union-attr]
    if failed:
        raise RuntimeError(f"filling {topic}: errors {sorted(set(failed))}")


# --------------------------------------------------------------------------- one broker


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    errs = ClientErrors()
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errs})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(p.leader >= 0 for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} has no leader after 30 s")
        time.sleep(0.1)


def run_loads(bootstrap: str, label: str, cfg: argparse.Namespace, pids: Callable[[], list[int]]) -> dict[str, Any]:
    """Every point of the run against one broker or cluster: each topic is created through the
    bootstrap address and every request goes to its partition's leader (Metadata)."""
    out: dict[str, Any] = {"produce": [], "fetch": []}
    for n in cfg.connections:
        topic = f"conn{n}-{time.monotonic_ns()}"
        create_topic(bootstrap, topic, cfg.partitions)
        r = asyncio.run(produce_load(leaders(bootstrap, topic), topic, n, cfg, pids()))
        log(f"{label}: produce x{n}: {r['mb_per_s']} MB/s, {r['requests_per_s']} req/s, p50 {r['p50_ms']} ms, "
            f"p99 {r['p99_ms']} ms, errors {r['errors']}, client CPU {r['client_cpu_pct']}%, "
            f"broker CPU {r['server_cpu_pct']}% = {r['server_cpu_us_per_request']} us/request, "
            f"machine busy {r['host_cpu_busy_pct']}% of {os.cpu_count()} cores (softirq {r['host_softirq_pct']}%), "
            f"load average {r['load_average']}")
        out["produce"].append(r)
    if cfg.consumers:
        topic = f"fetch-{time.monotonic_ns()}"
        create_topic(bootstrap, topic, cfg.partitions)
        routes = leaders(bootstrap, topic)
        asyncio.run(fill(routes, topic, cfg.fetch_mb))
        for m in cfg.consumers:
            r = asyncio.run(fetch_load(routes, topic, m, cfg))
            log(f"{label}: fetch x{m}: {r['mb_per_s']} MB/s, errors {r['errors']}, client CPU {r['client_cpu_pct']}%, "
                f"load average {r['load_average']}")
            out["fetch"].append(r)
    return out


def pin(pids: list[int], cpus: list[int] | None) -> None:
    """Pin every thread of the broker's processes to ``cpus`` (``--server-cpus``)."""
    if not cpus:
        return
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), cpus)


def bench_ours(cfg: argparse.Namespace) -> dict[str, Any]:
    """Our broker: ``kafka-sidecar serve`` (``--processes N``: the real cluster of N nodes)."""
    with tempfile.TemporaryDirectory(prefix="bench-conn-") as tmp:
        server = Sidecar(Path(tmp), {"max.connections": "10000"}, processes=cfg.processes)
        try:
            env_before = os.environ.get("PYTHONPATH")
            if cfg.sidecar_pythonpath:
                os.environ["PYTHONPATH"] = cfg.sidecar_pythonpath
            try:
                server.start()
            finally:
                if cfg.sidecar_pythonpath:
                    if env_before is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = env_before
            pin(server.pids, cfg.server_cpus)
            label = "ours" if cfg.processes == 1 else f"ours --processes {cfg.processes}"
            return run_loads(server.bootstrap, label, cfg, lambda: server.pids)
        finally:
            server.stop()


def warm_jit(bootstrap: str, cfg: argparse.Namespace, pids: list[int]) -> None:
    """Kafka's JIT compiles the hot paths after a while: run the largest produce load untimed."""
    if cfg.jit_warmup <= 0:
        return
    topic = f"warm-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, cfg.partitions)
    warm = argparse.Namespace(**{**vars(cfg), "warmup": 0.0, "seconds": cfg.jit_warmup})
    r = asyncio.run(produce_load(leaders(bootstrap, topic), topic, max(cfg.connections), warm, pids))
    log(f"kafka: JIT warm-up, {cfg.jit_warmup:.0f} s of produce x{max(cfg.connections)}: {r['requests_per_s']} req/s")


def bench_reference(cfg: argparse.Namespace) -> dict[str, Any] | str:
    why = unavailable_reason()
    if why:
        return why
    try:
        with ReferenceKafka({"num.partitions": cfg.partitions}) as kafka:
            pids = [kafka.pid] if kafka.pid is not None else []
            pin(pids, cfg.server_cpus)
            warm_jit(kafka.bootstrap, cfg, pids)
            return run_loads(kafka.bootstrap, "kafka", cfg, lambda: pids)
    except ReferenceUnavailable as e:
        return f"reference unavailable: {e}"


# --------------------------------------------------------------------------- report


def _median(rounds: list[dict[str, Any]], kind: str, i: int, field: str) -> float | None:
    vals = [r[kind][i][field] for r in rounds if r[kind][i][field] is not None]
    return round(statistics.median(vals), 3) if vals else None


def summarize(ours: list[dict[str, Any]], ref: list[dict[str, Any]], cfg: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    processes = cfg.processes
    for i, n in enumerate(cfg.connections):
        for field, better in (("mb_per_s", "higher"), ("requests_per_s", "higher"), ("p50_ms", "lower"), ("p99_ms", "lower"),
                              ("server_cpu_us_per_request", "lower")):
            o = _median(ours, "produce", i, field)
            k = _median(ref, "produce", i, field) if ref else None
            rows.append({"load": f"produce x{n} connections", "figure": field, "ours": o, "kafka": k, "ours_processes": processes,
                         "ratio": round(o / k, 3) if o is not None and k else None, "better": better})
    for i, m in enumerate(cfg.consumers):
        o = _median(ours, "fetch", i, "mb_per_s")
        k = _median(ref, "fetch", i, "mb_per_s") if ref else None
        rows.append({"load": f"fetch x{m} consumers", "figure": "mb_per_s", "ours": o, "kafka": k, "ours_processes": processes,
                     "ratio": round(o / k, 3) if o is not None and k else None, "better": "higher"})
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:,.2f}" if isinstance(v, float) else str(v)

    processes = rows[0].get("ours_processes", 1) if rows else 1
    if processes > 1:
        print(f"ours: serve --processes {processes} (CPU: every process); kafka: one broker")

    print(f"{'load':<26} {'figure':<26} {'ours':>12} {'kafka':>12} {'ours/kafka':>11}  better")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        print(f"{r['load']:<26} {r['figure']:<26} {f(r['ours']):>12} {f(r['kafka']):>12} {ratio:>11}  {r['better']}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(prog="python -m bench.connections", description=__doc__.split("\n")[0])
    p.add_argument("--connections", type=ints, default=[1, 10, 100, 500], help="producer connection counts (default 1,10,100,500)")
    p.add_argument("--consumers", type=ints, default=[1, 8], help="consumer counts (default 1,8; empty for none)")
    p.add_argument("--seconds", type=float, default=5.0, help="timed seconds per point (default 5)")
    p.add_argument("--warmup", type=float, default=1.0, help="untimed seconds before each point (default 1)")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--batch-records", type=int, default=10)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--fetch-mb", type=float, default=64.0)
    p.add_argument("--rounds", type=int, default=1, help="ours then Kafka, this many times; medians per point")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--no-ours", action="store_true")
    p.add_argument("--sidecar-pythonpath", help="PYTHONPATH for our server (another build of ours)")
    p.add_argument("--processes", type=int, default=1, help="ours as `serve --processes N` (default 1)")
    p.add_argument("--jit-warmup", type=float, default=20.0, help="untimed seconds of load on Kafka first (default 20)")
    p.add_argument("--server-cpus", type=ints, default=None, help="pin the broker to these cores, e.g. 0 or 0,1")
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "connections.json"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.processes < 1:
        raise SystemExit("--processes must be at least 1")
    ours: list[dict[str, Any]] = []
    ref: list[dict[str, Any]] = []
    ref_problem = None
    started = time.time()
    for r in range(cfg.rounds):
        if not cfg.no_ours:
            log(f"round {r + 1}/{cfg.rounds}: ours (load average {os.getloadavg()[0]:.1f})")
            ours.append(bench_ours(cfg))
        if not cfg.no_reference:
            log(f"round {r + 1}/{cfg.rounds}: kafka (load average {os.getloadavg()[0]:.1f})")
            got = bench_reference(cfg)
            if isinstance(got, str):
                ref_problem = got
                log(got)
            else:
                ref.append(got)
    rows = summarize(ours, ref, cfg) if ours else summarize(ref, [], cfg)
    print_table(rows)
    if ref_problem:
        print(ref_problem)
    result = {"started": started, "machine": machine_info(), "config": {k: v for k, v in vars(cfg).items() if k != "json"},
              "summary": rows, "ours": ours, "kafka": ref, "reference_problem": ref_problem}
    Path(cfg.json).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"wrote {cfg.json}")
    return 1 if any(x["errors"] for run in [*ours, *ref] for kind in ("produce", "fetch") for x in run[kind]) else 0


if __name__ == "__main__":
    sys.exit(main())
