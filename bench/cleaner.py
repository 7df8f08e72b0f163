"""Throughput of the log cleaner and of the record codec it uses (no server, no client).

    python -m bench.cleaner                      # 64 MB per codec (none, lz4, zstd), one pass each
    python -m bench.cleaner --mb 16 --codecs none
    python -m bench.cleaner --codec-only         # only the decode/encode figures of a typical batch
    python -m bench.cleaner --profile            # also a cProfile of the cleaning pass (top 25)
    python -m bench.cleaner --side-by-side 100   # the same cleaning over the wire, kafka-sidecar then
                                                 # the reference Kafka (KAFKA_HOME): time, RSS growth,
                                                 # worst ApiVersions latency during the cleaning
    python -m bench.cleaner --broker-mb 200      # a broker (subprocess) cleaning one 200 MB segment:
                                                 # peak RSS growth, worst ApiVersions latency, and
                                                 # (--delete) a DeleteTopics during the cleaning

Codec: ``decode_batches`` / ``encode_batch`` (``protocol/records.py``) on a typical batch: 50
records, 8-16 byte keys, 100-1000 byte compressible values (mean ~550 B), a header on one record
in ten; MB/s of batch bytes (as stored: compressed for lz4/zstd) and records/s, median of
``--repeat`` timed loops of at least 0.3 s each.

Cleaner: a compacted partition (``storage.log.Log`` with a ``LogConfig``: ``cleanup.policy=
compact``, 8 MiB segments) is filled with ``--mb`` MB of such batches (keys drawn from a key
space of records/3, so each key is written ~3 times; 2% tombstones), the active segment is
rolled, and one ``LogCleaner.clean_one`` round (offset map over the whole dirty log, then the
rewrite of every segment) is timed. Then round 2, the steady state: a dirty tail of a quarter of
``--mb`` (same keys) is appended and the log cleaned again (the map covers the tail; every
segment, clean head included, is read and rewritten). MB/s = log bytes before the round / wall
time of the round, records/s = records read / the same time. Filling is not timed. The data dir is a fresh temp
dir, removed afterwards (``--keep`` keeps it).

Broker (``--broker-mb``): a compacted topic's log is written offline as one segment of that
size (plus an empty active segment) with ``min.compaction.lag.ms`` holding the cleaning back
until a few seconds after the broker (``kafka-sidecar serve``, a subprocess, default cleaner
settings) has started. Its RSS is sampled every 20 ms from /proc (baseline: before the cleaning
is due; growth: peak during the cleaning minus baseline), and a client sends ApiVersions every
10 ms on its own connection: the worst and p99 latencies during the cleaning are reported.
With ``--delete`` the topic is deleted (DeleteTopics) one second into the cleaning: its latency
and the worst ApiVersions latency meanwhile.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafka_sidecar.protocol.compression import CODECS_BY_NAME
from kafka_sidecar.protocol.record_batch import validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage.cleaner import LogCleaner
from kafka_sidecar.storage.log import Log
from kafka_sidecar.storage.log_config import LogConfig

MB = 1_000_000
T0 = 1_700_000_000_000
RECORDS_PER_BATCH = 50
SEGMENT_BYTES = 8 * 1024 * 1024

_WORDS = (
    b"order customer id amount currency EUR USD status shipped pending created updated "
    b"address street city zip country sku quantity price total discount tax true false null"
).split()


class Data:
    """Deterministic keyed records with compressible, JSON-ish values."""

    def __init__(self, seed: int = 1) -> None:
        self.rnd = random.Random(seed)
        rnd = self.rnd
        # A corpus to cut values from: repetitive like real payloads (lz4/zstd get ~2-4x).
        parts = []
        size = 0
        while size < 1 << 20:
            w = rnd.choice(_WORDS)
            part = b'"%s": "%s-%d", ' % (w, rnd.choice(_WORDS), rnd.randrange(100_000))
            parts.append(part)
            size += len(part)
        self.corpus = b"".join(parts)

    def value(self) -> bytes:
        n = self.rnd.randint(100, 1000)
        start = self.rnd.randrange(len(self.corpus) - n)
        return self.corpus[start : start + n]

    def records(self, n: int, key_space: int, first_offset: int = 0, tombstones: float = 0.0) -> list[Record]:
        rnd = self.rnd
        out = []
        for i in range(n):
            key = b"key-%d" % rnd.randrange(key_space)
            value = None if rnd.random() < tombstones else self.value()
            headers = [("trace-id", rnd.randbytes(16))] if rnd.random() < 0.1 else []
            out.append(Record(first_offset + i, T0 + first_offset + i, key, value, headers))
        return out


def _loop(fn, min_s: float = 0.3) -> float:
    """Seconds per call of ``fn``, timed over at least ``min_s``."""
    n = 0
    t0 = time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_s:
            return elapsed / n


def bench_codec(codecs: list[str], repeat: int) -> list[dict]:
    data = Data(seed=7)
    records = data.records(RECORDS_PER_BATCH, 1_000_000)
    out = []
    for name in codecs:
        codec = CODECS_BY_NAME[name]
        raw = encode_batch(records, compression=codec)
        assert decode_batches(raw)[0].records == records
        dec = statistics.median(_loop(lambda raw=raw: decode_batches(raw)) for _ in range(repeat))
        enc = statistics.median(
            _loop(lambda codec=codec: encode_batch(records, compression=codec)) for _ in range(repeat)
        )
        out.append({
            "codec": name, "batch_bytes": len(raw), "records": len(records),
            "decode_mb_s": len(raw) / dec / MB, "decode_rec_s": len(records) / dec,
            "encode_mb_s": len(raw) / enc / MB, "encode_rec_s": len(records) / enc,
        })  # fmt: skip
    return out


def key_space_for(log_bytes: int) -> int:
    """Keys for a log of this size (uncompressed) with each key written ~3 times."""
    avg_record = 600  # ~550 B value + key, framing, the odd header
    return max(1, log_bytes // avg_record // 3)


def fill(lg: Log, data: Data, target_bytes: int, codec: int, key_space: int) -> int:
    """Append batches until the log holds ``target_bytes``, then roll; returns the records."""
    n = 0
    while lg.size_in_bytes < target_bytes:
        recs = data.records(RECORDS_PER_BATCH, key_space, tombstones=0.02)
        raw = bytearray(encode_batch(recs, compression=codec))
        lg.append_as_leader(raw, validate_batches(raw), now_ms=T0 + n)
        n += len(recs)
    lg.roll()  # everything below the new (empty) active segment is cleanable
    return n


def timed_round(lc: LogCleaner, now: int, prof: cProfile.Profile | None) -> float:
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    cleaned = lc.clean_one(now_ms=now)
    if prof:
        prof.disable()
    elapsed = time.perf_counter() - t0
    assert cleaned and lc.last_stats is not None, "the cleaner found nothing to clean"
    return elapsed


def drop_retired(lg: Log) -> None:
    """What the log manager does with replaced segments after file.delete.delay.ms."""
    for seg in lg.take_retired_segments():
        seg.close()
        for path in seg.paths():
            path.unlink(missing_ok=True)


def bench_cleaner(codec_name: str, mb: float, keep: bool, profile: bool) -> dict:
    codec = CODECS_BY_NAME[codec_name]
    work = Path(tempfile.mkdtemp(prefix="bench-cleaner-"))
    try:
        config = LogConfig(None, {"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES,
                                  "min.cleanable.dirty.ratio": 0.01})  # fmt: skip
        lg = Log(work / "t-0", "t", 0, config)
        data = Data(seed=11)
        key_space = key_space_for(int(mb * MB))
        t0 = time.perf_counter()
        records = fill(lg, data, int(mb * MB), codec, key_space)
        fill_s = time.perf_counter() - t0
        size_before = lg.size_in_bytes
        segments_before = len(lg.segments)
        lc = LogCleaner(work, lambda: [lg], enabled=False)
        now = T0 + 3_600_000
        prof = cProfile.Profile() if profile else None
        clean_s = timed_round(lc, now, prof)
        stats = lc.last_stats
        result = {
            "codec": codec_name, "log_bytes": size_before, "segments": segments_before,
            "records": records, "key_space": key_space, "fill_s": fill_s, "clean_s": clean_s,
            "clean_mb_s": size_before / clean_s / MB, "clean_rec_s": stats.records_read / clean_s,
            "records_read": stats.records_read, "records_removed": stats.records_removed,
            "bytes_written": stats.bytes_written, "map_entries": stats.map_entries,
        }  # fmt: skip
        # Round 2, the steady state: the cleaned log plus a dirty tail of a quarter of --mb,
        # same keys. Every segment is read and rewritten again, as Kafka's cleaner does.
        drop_retired(lg)
        fill(lg, data, lg.size_in_bytes + int(mb * MB / 4), codec, key_space)
        size2 = lg.size_in_bytes
        clean2_s = timed_round(lc, now, None)
        stats2 = lc.last_stats
        result.update({
            "round2_log_bytes": size2, "round2_clean_s": clean2_s,
            "round2_mb_s": size2 / clean2_s / MB, "round2_rec_s": stats2.records_read / clean2_s,
            "round2_records_read": stats2.records_read, "round2_records_removed": stats2.records_removed,
        })  # fmt: skip
        if prof:
            print(f"\n--- cProfile of the cleaning pass ({codec_name}) ---", flush=True)
            pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        lg.close()
        return result
    finally:
        if keep:
            print(f"[bench] data kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


# ---- broker mode: RSS and request latency while the broker cleans ------------------------------


def _machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or 'unknown CPU'}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}"


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api_versions_probe(port: int, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    """ApiVersions v0 every 10 ms on one connection: (send time, latency s) of each."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    client_id = b"bench"
    corr = 0
    try:
        while not stop.is_set():
            corr += 1
            body = struct.pack(">hhih", 18, 0, corr, len(client_id)) + client_id
            t0 = time.monotonic()
            sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            _recv(sock, size)
            out.append((t0, time.monotonic() - t0))
            time.sleep(0.01)
    finally:
        sock.close()


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _prepare_broker_log(data_dir: Path, mb: float, codec: int, lag_ms: int) -> tuple[int, int]:
    """One compacted segment of ``mb`` MB, cleanable ``lag_ms`` after now; (log bytes, records)."""
    from kafka_sidecar.storage.log_manager import CleanerConfig, LogManager

    lm = LogManager(data_dir, cleaner_config=CleanerConfig(enabled=False))
    lm.startup()
    try:
        lm.create_topic("compacted", 1, {"cleanup.policy": "compact", "segment.bytes": 1 << 30})
        lg = lm.get_log("compacted", 0)
        data = Data(seed=5)
        key_space = key_space_for(int(mb * MB))
        ts = int(time.time() * 1000)
        n = 0
        while lg.size_in_bytes < mb * MB:
            recs = [Record(r.offset, ts, r.key, r.value, r.headers) for r in data.records(RECORDS_PER_BATCH, key_space, tombstones=0.02)]
            raw = bytearray(encode_batch(recs, compression=codec))
            lg.append_as_leader(raw, validate_batches(raw), now_ms=ts)
            n += len(recs)
        lg.roll()
        size = lg.size_in_bytes
        # The segment's records are all stamped ``ts``: cleanable once now > ts + lag.
        lag = int(time.time() * 1000) - ts + lag_ms
        lm.alter_topic_configs("compacted", {"cleanup.policy": "compact", "segment.bytes": 1 << 30, "min.compaction.lag.ms": lag})
        return size, n
    finally:
        lm.shutdown()


def bench_broker(mb: float, codec_name: str, delete: bool, keep: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-cleaner-broker-"))
    data_dir = work / "data"
    lag_ms = 8000
    try:
        t0 = time.monotonic()
        log_bytes, records = _prepare_broker_log(data_dir, mb, CODECS_BY_NAME[codec_name], lag_ms)
        due = time.monotonic() + lag_ms / 1000  # when the cleaning may start
        print(f"[bench] {log_bytes / MB:.0f} MB written in {time.monotonic() - t0:.0f} s; starting the broker", flush=True)
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_sidecar.server", "serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}",
             "--override", "log.cleaner.backoff.ms=200"],
            stdout=subprocess.DEVNULL, stderr=open(work / "broker.log", "wb"),
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"the broker did not start (see {work / 'broker.log'})") from None
                    time.sleep(0.1)
            stop = threading.Event()
            latencies: list[tuple[float, float]] = []
            probe = threading.Thread(target=_api_versions_probe, args=(port, stop, latencies), daemon=True)
            probe.start()
            time.sleep(1.0)
            baseline = max(_rss_bytes(proc.pid) for _ in range(5) if time.sleep(0.02) is None)
            checkpoint_file = data_dir / "cleaner-offset-checkpoint"
            peak = baseline
            started = finished = None
            delete_result: dict = {}
            deadline = due + 600
            while time.monotonic() < deadline:
                rss = _rss_bytes(proc.pid)
                peak = max(peak, rss)
                now = time.monotonic()
                if started is None and now >= due:
                    started = now
                if started is not None and checkpoint_file.exists() and b"compacted" in checkpoint_file.read_bytes():
                    finished = now
                    break
                if delete and started is not None and not delete_result and now - started > 1.0:
                    delete_result = _delete_topic(port, latencies)
                    finished = time.monotonic()
                    break
                time.sleep(0.02)
            stop.set()
            probe.join(10)
            during = [lat for t, lat in latencies if started is not None and finished is not None and started <= t <= finished]
            before = [lat for t, lat in latencies if started is None or t < started]
            result = {
                "log_bytes": log_bytes, "records": records, "codec": codec_name,
                "baseline_rss_mb": baseline / MB, "peak_rss_mb": peak / MB, "rss_growth_mb": (peak - baseline) / MB,
                "clean_s": (finished - started) if started and finished else None,
                "api_versions_during": len(during),
                "api_versions_max_ms": max(during, default=0) * 1000,
                "api_versions_p99_ms": (sorted(during)[int(len(during) * 0.99)] * 1000) if during else 0,
                "api_versions_max_before_ms": max(before, default=0) * 1000,
                # The five worst during the cleaning: (seconds into it, latency ms).
                "api_versions_worst": sorted(((round(t - started, 2), round(lat * 1000, 1)) for t, lat in latencies
                                              if started is not None and finished is not None and started <= t <= finished),
                                             key=lambda x: -x[1])[:5],
                **delete_result,
            }
            return result
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        if keep:
            print(f"[bench] data kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _delete_topic(port: int, latencies: list[tuple[float, float]]) -> dict:
    from kafka_sidecar.client.blocking import KafkaClient

    client = KafkaClient(f"127.0.0.1:{port}")
    try:
        t0 = time.monotonic()
        _, body = client.bootstrap.request(20, {"topic_names": ["compacted"], "topics": [{"name": "compacted", "topic_id": None}],
                                                "timeout": 30000}, max_version=6)
        elapsed = time.monotonic() - t0
        time.sleep(0.1)  # the probe's requests sent while it ran have come back
        meanwhile = [lat for t, lat in latencies if t <= t0 + elapsed and t + lat >= t0]  # in flight while it ran
        codes = [getattr(r, "error_code", None) for r in getattr(body, "responses", [])]
        return {"delete_ms": elapsed * 1000, "delete_error_codes": codes,
                "api_versions_max_during_delete_ms": max(meanwhile, default=0) * 1000}
    finally:
        client.bootstrap.close()


# --------------------------------------------------------------------------- side by side with Kafka

SIDE_TOPIC = "compacted"
SIDE_SEGMENT_BYTES = 16 * 1024 * 1024
SIDE_BROKER_OVERRIDES = {"log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "300000"}


def _dir_log_bytes(part_dir: Path) -> int:
    return sum(p.stat().st_size for p in part_dir.glob("*.log"))


def _active_base(part_dir: Path) -> int:
    return max(int(p.name[:20]) for p in part_dir.glob("*.log"))


def _cleaner_offset(data_dir: Path) -> int | None:
    """The partition's offset in cleaner-offset-checkpoint (the same file in both brokers)."""
    try:
        lines = (data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    except OSError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == SIDE_TOPIC and parts[1] == "0":
            return int(parts[2])
    return None


def _produce_keyed(bootstrap: str, mb: float) -> tuple[int, int]:
    """``mb`` MB of keyed records (bench's Data, seed 11: each key ~3 times, 2% tombstones) with
    confluent-kafka into partition 0; the same sequence for both brokers. (records, value bytes)."""
    from confluent_kafka import Producer

    data = Data(seed=11)
    key_space = key_space_for(int(mb * MB))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "none",
                         "enable.idempotence": False, "acks": "1", "queue.buffering.max.kbytes": 262144})
    n = sent = 0
    while sent < mb * MB:
        for r in data.records(RECORDS_PER_BATCH, key_space, tombstones=0.02):
            while True:
                try:
                    producer.produce(SIDE_TOPIC, key=r.key, value=r.value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.05)
            sent += len(r.key) + len(r.value or b"")
            n += 1
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left unsent")
    return n, sent


def _alter_topic(admin, configs: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource("TOPIC", SIDE_TOPIC, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


def side_by_side_run(name: str, bootstrap: str, port: int, pid: int, data_dir: Path, mb: float, timeout_s: float = 900) -> dict:
    """One broker: create the topic (compact, 16 MiB segments, cleaning held back by
    min.compaction.lag.ms), produce, measure the RSS baseline, release the cleaner
    (min.compaction.lag.ms=0) and time it until cleaner-offset-checkpoint reaches the active
    segment, sampling RSS every 20 ms and ApiVersions every 10 ms meanwhile."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(SIDE_TOPIC, 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(SIDE_SEGMENT_BYTES),
                                               "min.compaction.lag.ms": str(24 * 3600 * 1000)})
    admin.create_topics([topic])[SIDE_TOPIC].result(30)
    t0 = time.monotonic()
    records, value_bytes = _produce_keyed(bootstrap, mb)
    produce_s = time.monotonic() - t0
    part = data_dir / f"{SIDE_TOPIC}-0"
    time.sleep(2.0)
    before_bytes = _dir_log_bytes(part)
    target = _active_base(part)
    stop = threading.Event()
    latencies: list[tuple[float, float]] = []
    probe = threading.Thread(target=_api_versions_probe, args=(port, stop, latencies), daemon=True)
    probe.start()
    time.sleep(1.0)
    baseline = max(_rss_bytes(pid) for _ in range(10) if time.sleep(0.02) is None)
    started = time.monotonic()
    _alter_topic(admin, {"min.compaction.lag.ms": "0"})
    peak = baseline
    finished = None
    while time.monotonic() < started + timeout_s:
        peak = max(peak, _rss_bytes(pid))
        off = _cleaner_offset(data_dir)
        if off is not None and off >= target:
            finished = time.monotonic()
            break
        time.sleep(0.02)
    stop.set()
    probe.join(10)
    time.sleep(1.0)
    during = [lat for t, lat in latencies if started <= t <= (finished or time.monotonic())]
    before = [lat for t, lat in latencies if t < started]
    return {
        "broker": name, "records": records, "produced_value_bytes": value_bytes, "produce_s": produce_s,
        "log_bytes_before": before_bytes, "log_bytes_after": _dir_log_bytes(part), "cleaned_up_to": target,
        "clean_s": (finished - started) if finished else None,
        "clean_mb_s": (before_bytes / MB / (finished - started)) if finished else None,
        "baseline_rss_mb": baseline / MB, "peak_rss_mb": peak / MB, "rss_growth_mb": (peak - baseline) / MB,
        "api_versions_during": len(during), "api_versions_max_ms": max(during, default=0) * 1000,
        "api_versions_p99_ms": (sorted(during)[int(len(during) * 0.99)] * 1000) if during else 0,
        "api_versions_max_before_ms": max(before, default=0) * 1000,
    }


def bench_side_by_side(mb: float, keep: bool, which: list[str]) -> list[dict]:
    """The same cleaning scenario over the wire against kafka-sidecar and the reference Kafka
    (``bench/reference.py``: ``KAFKA_HOME`` or ``make reference``), one after the other, each
    with default cleaner settings but ``log.cleaner.backoff.ms=200``."""
    out = []
    if "ours" in which:
        work = Path(tempfile.mkdtemp(prefix="bench-cleaner-side-"))
        port = _free_port()
        overrides = [a for k, v in SIDE_BROKER_OVERRIDES.items() for a in ("--override", f"{k}={v}")]
        proc = subprocess.Popen([sys.executable, "-m", "kafka_sidecar.server", "serve", "--data-dir", str(work / "data"),
                                 "--listen", f"127.0.0.1:{port}", *overrides],
                                stdout=subprocess.DEVNULL, stderr=open(work / "broker.log", "wb"))
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"the broker did not start (see {work / 'broker.log'})") from None
                    time.sleep(0.1)
            out.append(side_by_side_run("kafka-sidecar", f"127.0.0.1:{port}", port, proc.pid, work / "data", mb))
        finally:
            proc.terminate()
            proc.wait(30)
            if keep:
                print(f"[bench] kept {work}", file=sys.stderr)
            else:
                shutil.rmtree(work, ignore_errors=True)
    if "kafka" in which:
        from bench.reference import ReferenceKafka, kafka_version

        kafka = ReferenceKafka(SIDE_BROKER_OVERRIDES, keep_work_dir=keep).start()
        try:
            assert kafka.pid is not None and kafka.port is not None
            r = side_by_side_run(f"Apache Kafka {kafka_version()}", kafka.bootstrap, kafka.port, kafka.pid, kafka.data_dir, mb)
            r["heap_opts"] = kafka.heap_opts
            out.append(r)
        finally:
            kafka.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cleaner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=64, help="log size per codec (MB, 10^6 bytes)")
    parser.add_argument("--codecs", default="none,lz4,zstd", help="comma-separated: none,gzip,snappy,lz4,zstd")
    parser.add_argument("--repeat", type=int, default=3, help="codec loops per figure (median)")
    parser.add_argument("--codec-only", action="store_true", help="skip the cleaner pass")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each cleaning pass")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--broker-mb", type=float, default=0, help="only the broker measure: one segment of this many MB")
    parser.add_argument("--broker-codec", default="none", help="codec of the broker measure's batches")
    parser.add_argument("--delete", action="store_true", help="broker measure: DeleteTopics one second into the cleaning")
    parser.add_argument("--side-by-side", type=float, default=0, metavar="MB",
                        help="only the over-the-wire cleaning of MB MB against kafka-sidecar and the reference Kafka")
    parser.add_argument("--brokers", default="ours,kafka", help="--side-by-side: which of ours,kafka to run")
    args = parser.parse_args(argv)
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    for c in codecs:
        if c not in CODECS_BY_NAME:
            parser.error(f"unknown codec {c!r}")

    results: dict = {"cpus": os.cpu_count(), "loadavg": os.getloadavg()[0], "python": sys.version.split()[0]}
    print(f"load average (1 min) {results['loadavg']:.1f}, {results['cpus']} cpus, Python {results['python']}")
    if args.side_by_side:
        results["machine"] = _machine()
        runs = bench_side_by_side(args.side_by_side, args.keep, [b.strip() for b in args.brokers.split(",")])
        results["side_by_side"] = runs
        print(f"\nside by side: {args.side_by_side:g} MB of keyed records (confluent-kafka) into a compacted topic, "
              f"{SIDE_SEGMENT_BYTES >> 20} MiB segments; {results['machine']}")
        print(f"{'broker':<20} {'log MB':>7} {'-> MB':>7} {'clean s':>8} {'MB/s':>6} {'RSS base':>9} {'peak':>6} {'growth':>7} "
              f"{'ApiV worst ms':>14} {'p99 ms':>7}")  # fmt: skip
        for r in runs:
            clean = f"{r['clean_s']:.1f}" if r["clean_s"] is not None else "timeout"
            rate = f"{r['clean_mb_s']:.1f}" if r["clean_mb_s"] is not None else "-"
            print(f"{r['broker']:<20} {r['log_bytes_before'] / MB:>7.1f} {r['log_bytes_after'] / MB:>7.1f} {clean:>8} {rate:>6} "
                  f"{r['baseline_rss_mb']:>9.0f} {r['peak_rss_mb']:>6.0f} {r['rss_growth_mb']:>7.0f} "
                  f"{r['api_versions_max_ms']:>14.1f} {r['api_versions_p99_ms']:>7.1f}")  # fmt: skip
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        return 0
    if args.broker_mb:
        r = bench_broker(args.broker_mb, args.broker_codec, args.delete, args.keep)
        results["broker"] = r
        print(f"\nbroker cleaning one {r['log_bytes'] / MB:.0f} MB segment ({r['records']:,} records, {r['codec']}):")
        print(f"  RSS {r['baseline_rss_mb']:.0f} MB -> peak {r['peak_rss_mb']:.0f} MB (growth {r['rss_growth_mb']:.0f} MB)")
        if r["clean_s"] is not None:
            print(f"  cleaning (until the checkpoint or the delete) {r['clean_s']:.1f} s")
        print(f"  ApiVersions during the cleaning: {r['api_versions_during']} requests, worst {r['api_versions_max_ms']:.1f} ms, "
              f"p99 {r['api_versions_p99_ms']:.1f} ms (worst before it: {r['api_versions_max_before_ms']:.1f} ms)")
        print(f"  the five worst (s into the cleaning, ms): {r['api_versions_worst']}")
        if "delete_ms" in r:
            print(f"  DeleteTopics during the cleaning: {r['delete_ms']:.1f} ms (errors {r['delete_error_codes']}), "
                  f"worst ApiVersions meanwhile {r['api_versions_max_during_delete_ms']:.1f} ms")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        return 0
    results["codec"] = bench_codec(codecs, args.repeat)
    print(f"\ncodec: one batch of {RECORDS_PER_BATCH} records, values 100-1000 B (median of {args.repeat})")
    print(f"{'codec':<7} {'batch B':>8} {'decode MB/s':>12} {'decode rec/s':>13} {'encode MB/s':>12} {'encode rec/s':>13}")
    for r in results["codec"]:
        print(f"{r['codec']:<7} {r['batch_bytes']:>8} {r['decode_mb_s']:>12.1f} {r['decode_rec_s']:>13,.0f} "
              f"{r['encode_mb_s']:>12.1f} {r['encode_rec_s']:>13,.0f}")  # fmt: skip

    if not args.codec_only:
        results["cleaner"] = []
        print(f"\ncleaner: one round over a {args.mb:g} MB compacted partition (fill not timed)", flush=True)
        print(f"{'codec':<7} {'log MB':>7} {'records':>9} {'kept':>8} {'written MB':>11} {'clean s':>8} {'MB/s':>7} {'rec/s':>9}"
              f"  | round 2: {'log MB':>7} {'clean s':>8} {'MB/s':>7} {'rec/s':>9}")  # fmt: skip
        for c in codecs:
            r = bench_cleaner(c, args.mb, args.keep, args.profile)
            results["cleaner"].append(r)
            kept = r["records_read"] - r["records_removed"]
            print(f"{c:<7} {r['log_bytes'] / MB:>7.1f} {r['records_read']:>9,} {kept:>8,} "
                  f"{r['bytes_written'] / MB:>11.1f} {r['clean_s']:>8.2f} {r['clean_mb_s']:>7.2f} "
                  f"{r['clean_rec_s']:>9,.0f}  |          {r['round2_log_bytes'] / MB:>7.1f} "
                  f"{r['round2_clean_s']:>8.2f} {r['round2_mb_s']:>7.2f} {r['round2_rec_s']:>9,.0f}",
                  flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
