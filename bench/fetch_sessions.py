"""Broker CPU per Fetch for one consumer of many partitions, with and without fetch sessions (KIP-227).

    python -m bench.fetch_sessions                        # ours: 1,000 partitions, 10 s per mode
    python -m bench.fetch_sessions --reference            # and the reference Kafka after it
    python -m bench.fetch_sessions --sidecar-pythonpath /tmp/base/pp   # another build of ours
    python -m bench.fetch_sessions --partitions 2000 --seconds 20 --json /tmp/fs.json

One consumer, caught up: ``--partitions`` partitions (topics of 100) each hold one record and the
consumer fetches at offset 1 of every one of them, Fetch v16 by topic id, ``max_wait_ms`` 0, in a
closed loop (one request outstanding, as a consumer's fetcher has). The client follows Kafka's
FetchSessionHandler: a full request with session id 0 and epoch 0 first; if the answer carries a
session id, every next request is incremental (that id, the next epoch, no partitions listed);
an answer with session id 0 keeps it on full requests (what a broker without sessions makes a
client do); a session error sends it back to a full request. ``--sessionless`` sends epoch -1
(FINAL: no session wanted) on every request instead.

Figures per mode: fetches/s, the broker's CPU per fetch (utime+stime of the whole process over
the timed window, ``/proc/<pid>/stat``, divided by the fetches answered), request and answer
bytes per fetch, the session ids and last epoch seen. A 2 s untimed warm-up comes first.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.reference import ReferenceKafka, ReferenceUnavailable, unavailable_reason
from bench.run import Sidecar, cpu_seconds, log, machine_info

REPO = Path(__file__).resolve().parents[1]
FETCH, METADATA = 1, 3
FETCH_VERSION = 16
PER_TOPIC = 100
_SIZE = struct.Struct(">i")
_TOP = struct.Struct(">ihi")  # throttle, error, session id (after the v12+ response header)


def _call(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    return _read_answer(sock)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _read_answer(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(_read_exact(sock, 4))
    return _read_exact(sock, size)


def setup(bootstrap: str, partitions: int) -> dict[str, uuid.UUID]:
    """Topics of ``PER_TOPIC`` partitions, one record in each; their topic ids."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    names = [f"fs-{i}-{time.monotonic_ns()}" for i in range(max(1, partitions // PER_TOPIC))]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, num_partitions=PER_TOPIC, replication_factor=1) for n in names]).values():
        f.result(60)
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics(timeout=10).topics
        if all(n in md and md[n].error is None and len(md[n].partitions) == PER_TOPIC
               and all(p.leader >= 0 for p in md[n].partitions.values()) for n in names):
            break
        if time.monotonic() > deadline:
            raise RuntimeError("topics have no leader after 60 s")
        time.sleep(0.2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    failed: list[str] = []
    for n in names:
        for p in range(PER_TOPIC):
            producer.produce(n, b"x" * 100, partition=p, on_delivery=lambda err, _m: err and failed.append(str(err)))
    if producer.flush(60) or failed:
        raise RuntimeError(f"produce failed: {failed[:3]}")
    return topic_ids(bootstrap, names)


def topic_ids(bootstrap: str, names: list[str]) -> dict[str, uuid.UUID]:
    from kafka_sidecar.protocol.messages import decode_response, encode_request

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        frame = encode_request(METADATA, 12, 1, "bench", {
            "topics": [{"name": n, "topic_id": None} for n in names], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        _, body = decode_response(METADATA, 12, _call(s, frame))
    return {t.name: t.topic_id for t in body.topics}


def fetch_frame(ids: dict[str, uuid.UUID], session_id: int, epoch: int, full: bool, correlation_id: int) -> bytes:
    from kafka_sidecar.protocol.messages import encode_request

    topics = [{"topic_id": tid, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": 1, "last_fetched_epoch": -1,
         "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(PER_TOPIC)]}
        for tid in ids.values()] if full else []
    return encode_request(FETCH, FETCH_VERSION, correlation_id, "bench", {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "topics": topics,
        "forgotten_topics_data": [], "rack_id": "",
    })


def run_mode(bootstrap: str, pid: int | None, ids: dict[str, uuid.UUID], sessionless: bool,
             seconds: float, warmup: float) -> dict[str, Any]:
    """The closed fetch loop of one consumer; figures over the timed window."""
    host, port = bootstrap.rsplit(":", 1)
    # A full request is the same bytes each time but for the correlation id (patched in place).
    full_frame = bytearray(fetch_frame(ids, 0, -1 if sessionless else 0, True, 0))
    session_id, epoch = 0, 0
    correlation = 0
    stats = {"fetches": 0, "full": 0, "incremental": 0, "request_bytes": 0, "answer_bytes": 0,
             "session_errors": 0, "session_ids": set(), "last_epoch": 0}
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t_end_warm = time.monotonic() + warmup
        timed = False
        t0 = cpu0 = 0.0
        while True:
            now = time.monotonic()
            if not timed and now >= t_end_warm:
                timed, t0, cpu0 = True, now, cpu_seconds(pid) or 0.0
                stats.update(fetches=0, full=0, incremental=0, request_bytes=0, answer_bytes=0, session_errors=0)
            if timed and now - t0 >= seconds:
                break
            correlation += 1
            if session_id == 0:
                struct.pack_into(">i", full_frame, 8, correlation)
                frame = bytes(full_frame)
                stats["full"] += 1
            else:
                frame = fetch_frame(ids, session_id, epoch, False, correlation)
                stats["incremental"] += 1
            answer = _call(s, frame)
            # answer: correlation id, header tags (1 byte), then throttle, error, session id
            _throttle, error, answered_session = _TOP.unpack_from(answer, 5)
            stats["fetches"] += 1
            stats["request_bytes"] += len(frame)
            stats["answer_bytes"] += len(answer) + 4
            if error:
                stats["session_errors"] += 1
                session_id, epoch = 0, 0
            elif answered_session and not sessionless:
                stats["session_ids"].add(answered_session)
                if session_id == 0:
                    session_id, epoch = answered_session, 1
                else:
                    epoch = epoch + 1 if epoch < 2**31 - 1 else 1
                stats["last_epoch"] = epoch
            else:
                session_id, epoch = 0, 0
        elapsed = time.monotonic() - t0
        cpu = (cpu_seconds(pid) or 0.0) - cpu0 if pid else None
    n = max(1, stats["fetches"])
    return {
        "mode": "sessionless (epoch -1)" if sessionless else "as a client (sessions if offered)",
        "fetches": stats["fetches"], "fetches_per_s": round(stats["fetches"] / elapsed, 1),
        "full_requests": stats["full"], "incremental_requests": stats["incremental"],
        "broker_cpu_us_per_fetch": round(cpu / n * 1e6, 1) if cpu is not None else None,
        "broker_cpu_pct": round(cpu / elapsed * 100, 1) if cpu is not None else None,
        "request_bytes_per_fetch": round(stats["request_bytes"] / n),
        "answer_bytes_per_fetch": round(stats["answer_bytes"] / n),
        "session_errors": stats["session_errors"],
        "session_ids": len(stats["session_ids"]), "last_epoch": stats["last_epoch"],
        "load_average": round(os.getloadavg()[0], 2),
    }


def run_against(label: str, bootstrap: str, pid: int | None, cfg: argparse.Namespace) -> dict[str, Any]:
    ids = setup(bootstrap, cfg.partitions)
    out: dict[str, Any] = {"label": label, "partitions": len(ids) * PER_TOPIC, "modes": []}
    for sessionless in (False, True):
        r = run_mode(bootstrap, pid, ids, sessionless, cfg.seconds, cfg.warmup)
        log(f"{label}: {r['mode']}: {r['fetches_per_s']} fetches/s, broker CPU {r['broker_cpu_us_per_fetch']} us/fetch "
            f"({r['broker_cpu_pct']}% of a core), request {r['request_bytes_per_fetch']} B, answer {r['answer_bytes_per_fetch']} B, "
            f"full/incremental {r['full_requests']}/{r['incremental_requests']}, session ids {r['session_ids']}, "
            f"last epoch {r['last_epoch']}, load {r['load_average']}")
        out["modes"].append(r)
    return out


def bench_ours(cfg: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-fs-") as tmp:
        server = Sidecar(Path(tmp))
        env_before = os.environ.get("PYTHONPATH")
        if cfg.sidecar_pythonpath:
            os.environ["PYTHONPATH"] = cfg.sidecar_pythonpath
        try:
            server.start(60)
        finally:
            if cfg.sidecar_pythonpath:
                if env_before is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = env_before
        try:
            return run_against("ours" + (f" ({cfg.sidecar_pythonpath})" if cfg.sidecar_pythonpath else ""),
                               server.bootstrap, server.pid, cfg)
        finally:
            server.stop()


def bench_reference(cfg: argparse.Namespace) -> dict[str, Any]:
    why = unavailable_reason()
    if why:
        log(why)
        return {"label": "reference", "unavailable": why}
    try:
        with ReferenceKafka({"num.partitions": 1}, heap_opts="-Xmx1g") as kafka:
            return run_against("reference", kafka.bootstrap, kafka.pid, cfg)
    except ReferenceUnavailable as e:
        log(f"reference unavailable: {e}")
        return {"label": "reference", "unavailable": str(e)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000, help="partitions of the consumer (topics of 100)")
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per mode")
    ap.add_argument("--warmup", type=float, default=2.0, help="untimed seconds first, per mode")
    ap.add_argument("--reference", action="store_true", help="also the reference Kafka (bench.reference)")
    ap.add_argument("--no-ours", action="store_true")
    ap.add_argument("--sidecar-pythonpath", help="PYTHONPATH for our server (another build of ours)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    cfg = ap.parse_args(argv)
    results: dict[str, Any] = {"config": vars(cfg) | {"json": str(cfg.json) if cfg.json else None}, "machine": machine_info(), "runs": []}
    if not cfg.no_ours:
        results["runs"].append(bench_ours(cfg))
    if cfg.reference:
        results["runs"].append(bench_reference(cfg))
    if cfg.json:
        cfg.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
