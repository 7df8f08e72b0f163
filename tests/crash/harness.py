"""Crash harness: kill -9 kafka-sidecar at random points, restart, check nothing acknowledged is lost.

    python -m tests.crash.harness --iterations 300 --seed 7 [--data-dir DIR] [--keep]

One server (a subprocess, loopback only) with tiny segments and short retention,
cleaner, flush and checkpoint intervals, so that segment rolls, retention
deletes, compaction swaps and checkpoint writes happen all the time. Each
iteration:

1. start the server (recovery runs: no clean-shutdown marker);
2. check every partition through the Kafka protocol against the ledger of
   acknowledged records, and every segment's files on disk
   (``kafka_sidecar.storage.verify``: index entries = batch last offsets,
   time index entries = batch max timestamps, CRCs, offsets in order);
3. produce with acks=all from real clients (confluent-kafka; one idempotent
   producer, one with retries off) and record what was acknowledged;
4. crash the server: SIGKILL after a random time, or at a named crash point
   inside the storage engine (``KAFKA_SIDECAR_CRASH_AT``, see
   ``storage/failpoints.py``: torn segment write, between a write and its index
   entries, inside a roll, a retention delete, a compaction swap, a checkpoint
   write, a deferred delete), or while it is starting (recovering).
   Meanwhile a share consumer (raw ShareFetch, tests/crash/share_scenario.py) acquires and
   acknowledges the records of a share topic.

Checks, per topic:
- ``keep`` (no retention): every acknowledged record present once, at its
  acknowledged offset, in send order; offsets contiguous from 0;
- ``retain`` (retention.bytes): the same for every acknowledged offset at or
  above the log start offset, which never goes back;
- ``compact`` (cleanup.policy=compact): every acknowledged record still present
  has its acknowledged value; for every key, its latest acknowledged record or a
  later record of that key is present; no value twice;
- ``share`` (a share group's topic, no retention): as ``retain``; and no record whose
  acknowledgement was answered is delivered again, and at the end every acknowledged
  record was delivered and the share-partition has no lag (tests/crash/share_scenario.py).

At the end the server is stopped cleanly and every segment must pass the strict
check (trimmed indexes). Prints one line per iteration and a JSON summary;
exits 1 on the first failure (the data dir is kept for inspection).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from kafka_sidecar.client import KafkaClient, KafkaClientError
from kafka_sidecar.protocol.records import decode_batches
from kafka_sidecar.storage.failpoints import ARM_ENV
from kafka_sidecar.storage.failpoints import ENV as CRASH_ENV
from kafka_sidecar.storage.verify import problems, verify_partition

from tests.crash.share_scenario import CONNECTION_ERRORS as SHARE_CONNECTION_ERRORS
from tests.crash.share_scenario import (
    SHARE,
    ShareConsumer,
    ShareFailure,
    ShareLedger,
    drain,
    try_step,
)
from tests.integration.test_bad_input import RawClient, create_topic, fetch_once, list_offset
from tests.support import SidecarProcess

OFFSET_OUT_OF_RANGE = 1

SERVER_OVERRIDES = {
    "log.segment.bytes": "16384",  # a roll every ~30 batches
    "log.index.interval.bytes": "512",  # many index entries
    "log.retention.check.interval.ms": "150",
    "log.initial.task.delay.ms": "0",
    "log.flush.interval.ms": "300",  # the recovery point moves...
    "log.flush.offset.checkpoint.interval.ms": "200",  # ...and is checkpointed
    "log.cleaner.backoff.ms": "50",
    "log.segment.delete.delay.ms": "1000",  # deferred deletes (long enough for in-flight fetches)
    "producer.id.expiration.check.interval.ms": "10000",
}

KEEP, RETAIN, COMPACT = "crash-keep", "crash-retain", "crash-compact"
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    # preallocate: appends at positions inside a file of segment.bytes, a zero tail after each crash.
    KEEP: (2, {"retention.ms": "-1", "preallocate": "true"}),
    RETAIN: (1, {"retention.bytes": "49152", "retention.ms": "-1"}),
    COMPACT: (1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": "8192"}),
    SHARE: (1, {"retention.ms": "-1"}),
}
COMPACT_KEYS = 150

# Crash points (storage/failpoints.py) and how many hits to allow before dying.
CRASH_POINTS: dict[str, tuple[int, int]] = {
    "segment.append.torn": (1, 400),
    "segment.append.before_index": (1, 400),
    "log.roll.after_trim": (1, 12),
    "log.roll.after_snapshot": (1, 12),
    "log.retention.after_rename": (1, 4),
    "log.swap.after_delete_rename": (1, 4),
    "log.swap.before_final_rename": (1, 4),
    "checkpoint.before_rename": (1, 10),
    "manager.delete_due.between_files": (1, 6),
    "cleaner.clean.after_buffer_write": (1, 4),
}


class HarnessFailure(AssertionError):
    pass


@dataclass
class Acked:
    """A record the broker acknowledged (acks=all)."""

    offset: int
    key: bytes | None
    value: bytes
    order: tuple[int, int]  # (iteration, sequence): send order


@dataclass
class Ledger:
    # (topic, partition) -> offset -> acknowledged record
    acked: dict[tuple[str, int], dict[int, Acked]] = field(default_factory=lambda: defaultdict(dict))
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    # DeleteRecords on the keep topic: the start it answered, and one sent but never answered.
    deleted_to: dict[tuple[str, int], int] = field(default_factory=dict)
    deleting_to: dict[tuple[str, int], int] = field(default_factory=dict)

    def total(self) -> int:
        return sum(len(v) for v in self.acked.values())


@dataclass
class CrashStats:
    """What every crash harness counts (this one's Stats, the cluster harness's)."""

    iterations: int = 0
    kills: Counter = field(default_factory=Counter)
    acked: int = 0
    records_checked: int = 0
    segments_checked: int = 0
    startup_crashes: int = 0


@dataclass
class Stats(CrashStats):
    recovery_ms_max: float = 0.0
    share_deliveries: int = 0
    share_redeliveries: int = 0
    share_acknowledged: int = 0


def _value(tag: str, iteration: int, seq: int, key: bytes | None, pad: int) -> bytes:
    return b"%s|%d|%d|%s|" % (tag.encode(), iteration, seq, key or b"-") + b"." * pad


def _parse(value: bytes) -> tuple[str, int, int, bytes]:
    tag, it, seq, key, _ = value.split(b"|", 4)
    return tag.decode(), int(it), int(seq), key


# ---------------------------------------------------------------------------- reading


def read_partition(port: int, topic: str, partition: int, timeout: float = 20.0) -> tuple[int, int, list[Any]]:
    """(log start, high watermark, records from the log start), retrying if retention moves the start."""
    deadline = time.monotonic() + timeout
    client = RawClient(port, client_id="crash-check")
    try:
        while True:
            start = list_offset(client, topic, partition, -2)
            offset = start
            out: list[Any] = []
            restart = False
            while True:
                p, raw = fetch_once(client, topic, partition, offset)
                if p.error_code == OFFSET_OUT_OF_RANGE:
                    restart = True  # retention deleted what we were reading: read again from the new start
                    break
                if p.error_code != 0:
                    raise HarnessFailure(f"{topic}-{partition}: fetch at {offset} failed with error {p.error_code}")
                for batch in decode_batches(raw, verify_crc=True):
                    out.extend(r for r in batch.records if r.offset >= offset)
                    offset = max(offset, batch.next_offset)
                if offset >= p.high_watermark:
                    return start, p.high_watermark, out
                if time.monotonic() > deadline:
                    raise HarnessFailure(f"{topic}-{partition}: fetching stalled at offset {offset}")
            if not restart or time.monotonic() > deadline:
                raise HarnessFailure(f"{topic}-{partition}: could not read the partition")
    finally:
        client.close()


# --------------------------------------------------------------------------- checking


def check_partition(port: int, topic: str, partition: int, ledger: Ledger) -> int:
    tp = (topic, partition)
    start, end, records = read_partition(port, topic, partition)
    acked = ledger.acked[tp]
    where = f"{topic}-{partition}"
    prev_start = ledger.log_start.get(tp, 0)
    if start < prev_start:
        raise HarnessFailure(f"{where}: log start offset went back from {prev_start} to {start}")
    ledger.log_start[tp] = start
    if acked and end <= max(acked):
        raise HarnessFailure(f"{where}: high watermark {end} is not above the last acknowledged offset {max(acked)}")
    offsets = [r.offset for r in records]
    if any(b <= a for a, b in zip(offsets, offsets[1:], strict=False)):
        raise HarnessFailure(f"{where}: offsets not increasing")
    if offsets and (offsets[0] < start or offsets[-1] >= end):
        raise HarnessFailure(f"{where}: records {offsets[0]}..{offsets[-1]} outside [{start}, {end})")
    values = [r.value for r in records]
    if len(set(values)) != len(values):
        dup = next(v for v, n in Counter(values).items() if n > 1)
        raise HarnessFailure(f"{where}: a record is in the log twice: {dup[:40]!r}")
    for r in records:
        tag, _, _, key = _parse(r.value)
        if tag != topic or (r.key or b"-") != key:
            raise HarnessFailure(f"{where}: offset {r.offset} holds a record of another topic or key: {r.value[:40]!r}")
    by_offset = {r.offset: r for r in records}
    if topic == COMPACT:
        latest: dict[bytes, int] = {}
        for a in acked.values():
            r = by_offset.get(a.offset)
            if r is not None and r.value != a.value:
                raise HarnessFailure(f"{where}: offset {a.offset} holds {r.value[:40]!r}, acknowledged {a.value[:40]!r}")
            assert a.key is not None
            latest[a.key] = max(latest.get(a.key, -1), a.offset)
        newest_in_log: dict[bytes, int] = {}
        for r in records:
            newest_in_log[r.key] = r.offset
        for key, off in latest.items():
            if newest_in_log.get(key, -1) < off:
                raise HarnessFailure(f"{where}: key {key!r}: latest acknowledged offset {off} is gone (newest in log: {newest_in_log.get(key)})")
        # Drop superseded acknowledgements: compaction may remove them.
        ledger.acked[tp] = {off: a for off, a in acked.items() if off == latest[a.key]}
    else:
        if topic == KEEP:
            # No retention: the start moves only by DeleteRecords, and one that was answered stays.
            allowed = {ledger.deleted_to.get(tp, 0)}
            if tp in ledger.deleting_to:
                allowed.add(ledger.deleting_to.pop(tp))
            if start not in allowed:
                raise HarnessFailure(f"{where}: log start offset {start}, expected {sorted(allowed)} (DeleteRecords)")
            ledger.deleted_to[tp] = start
        if offsets != list(range(start, end)):
            raise HarnessFailure(f"{where}: offsets not contiguous from {start} to {end}")
        for off, a in acked.items():
            if off < start:
                continue
            r = by_offset.get(off)
            if r is None or r.value != a.value:
                raise HarnessFailure(
                    f"{where}: acknowledged offset {off} ({a.value[:30]!r}) holds {None if r is None else r.value[:30]!r}"
                )
        orders = [_parse(v)[1:3] for v in values]
        if orders != sorted(orders):
            raise HarnessFailure(f"{where}: records out of send order")
        ledger.acked[tp] = {off: a for off, a in acked.items() if off >= start}
    return len(records)


def check_disk(data_dir: Path, strict: bool = False, attempts: int = 4, *, where: str = "",
               adjust: Callable[[dict[str, list[Any]]], None] | None = None) -> int:
    """Every segment of the harness's topics passes the verifier (retried: the live server
    may be swapping or deleting a segment while it is read); ``adjust`` may drop problems of the
    reports first (the cluster harness's live nodes' zero tails); ``where`` prefixes the failure."""
    last: list[str] = []
    for attempt in range(attempts):
        try:
            # Only the harness's topics: the share group's internal topics (100 partitions, each
            # with a preallocated index) would take most of a run to read.
            reports = {d.name: verify_partition(d, strict=strict) for d in sorted(data_dir.glob("crash-*-[0-9]*")) if d.is_dir()}
        except (FileNotFoundError, ValueError) as e:
            last = [f"{type(e).__name__}: {e}"]
        else:
            if adjust is not None:
                adjust(reports)
            last = problems(reports)
            if not last:
                return sum(len(v) for v in reports.values())
        time.sleep(0.3 * (attempt + 1))
    raise HarnessFailure(f"{where}segments fail verification:\n  " + "\n  ".join(last[:20]))


def check_all(server: SidecarProcess, ledger: Ledger, stats: Stats) -> None:
    for topic, (partitions, _) in TOPICS.items():
        for p in range(partitions):
            stats.records_checked += check_partition(server.port, topic, p, ledger)
    stats.segments_checked += check_disk(server.data_dir)


def delete_records(port: int, topic: str, partition: int, offset: int) -> int | None:
    """DeleteRecords v2; the new low watermark, or None if the broker did not answer."""
    try:
        client = KafkaClient(f"127.0.0.1:{port}", client_id="crash-trim", timeout=5)
    except OSError:
        return None
    try:
        _, body = client.bootstrap.request(21, {
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout": 5000,
        }, max_version=2, min_version=2)
    except (OSError, KafkaClientError):
        return None
    finally:
        client.close()
    p = body.topics[0].partitions[0]
    if p.error_code.value != 0:
        raise HarnessFailure(f"DeleteRecords {topic}-{partition} to {offset} failed: error {p.error_code.value}")
    return p.low_watermark


def trim_keep_topic(port: int, ledger: Ledger, rng: random.Random, keep: int = 2500) -> None:
    """DeleteRecords on the keep topic, so the check stays bounded (and the start checkpoint is exercised)."""
    trim_partitions(lambda _p: port, TOPICS[KEEP][0], ledger, rng, keep)


def trim_partitions(port_of: Callable[[int], int], partitions: int, ledger: Ledger, rng: random.Random, keep: int) -> None:
    """DeleteRecords on each partition of the keep topic at ``port_of(partition)`` (its leader),
    to ``keep`` (less up to 500) below its last acknowledged offset; the ledger notes the new
    log start, or the one asked if no answer came (the check accepts either)."""
    for p in range(partitions):
        tp = (KEEP, p)
        acked = ledger.acked[tp]
        if not acked:
            continue
        target = max(acked) + 1 - keep - rng.randrange(500)
        if target <= ledger.deleted_to.get(tp, 0):
            continue
        ledger.deleting_to[tp] = target
        low = delete_records(port_of(p), KEEP, p, target)
        if low is not None:
            if low != target:
                raise HarnessFailure(f"DeleteRecords {KEEP}-{p} to {target} answered low watermark {low}")
            ledger.deleting_to.pop(tp)
            ledger.deleted_to[tp] = target


# -------------------------------------------------------------------------- producing


class LifeTimer:
    """When a server's life (one iteration's producing) ends by the timer, and when the keep
    topic is trimmed in it. The kill timer mostly counts from the first acknowledgement (clients
    take a moment to connect); half the lives trim once, within their first second."""

    def __init__(self, rng: random.Random, kill_after: float | None) -> None:
        self.started = time.monotonic()
        self.kill_after = kill_after
        self.from_first_ack = kill_after is not None and rng.random() < 0.75
        self.first_ack_at: float | None = None
        self.trim_at = rng.uniform(0.0, 1.0) if rng.random() < 0.5 else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def trim_due(self, elapsed: float) -> bool:
        """True once, when the trim's time has come."""
        if self.trim_at is not None and elapsed >= self.trim_at:
            self.trim_at = None
            return True
        return False

    def kill_due(self, acknowledged: bool) -> bool:
        """Whether the kill timer ran out (``acknowledged``: a record was acknowledged yet)."""
        if self.from_first_ack and self.first_ack_at is None and acknowledged:
            self.first_ack_at = time.monotonic()
        base = self.first_ack_at if self.from_first_ack else self.started
        return self.kill_after is not None and base is not None and time.monotonic() - base >= self.kill_after


def book_acks(ledger: Ledger, acks: list[tuple[tuple[str, int], Acked]]) -> int:
    """The life's acknowledged records into the ledger (an offset acknowledged twice fails); how many."""
    for tp, a in acks:
        book = ledger.acked[tp]
        if a.offset in book:
            raise HarnessFailure(f"{tp[0]}-{tp[1]}: offset {a.offset} acknowledged twice")
        book[a.offset] = a
    return len(acks)


def _producer(server: SidecarProcess, idempotent: bool) -> Producer:
    conf = {
        "bootstrap.servers": server.bootstrap,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 50,
        "message.timeout.ms": 15000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
        "log_level": 0,
    }
    if idempotent:
        conf["enable.idempotence"] = True
    else:
        conf.update({"enable.idempotence": False, "retries": 0})  # a value is sent at most once
    return Producer(conf)


def _share_consumer(server: SidecarProcess, ledger: Ledger, share: ShareLedger) -> ShareConsumer | None:
    try:
        return ShareConsumer(server.port, share, {o: a.value for o, a in ledger.acked[(SHARE, 0)].items()})
    except SHARE_CONNECTION_ERRORS:
        return None  # the server died already


def produce_until_dead(server: SidecarProcess, ledger: Ledger, iteration: int, rng: random.Random, kill_after: float | None,
                       max_seconds: float, share: ShareLedger | None = None) -> tuple[int, bool]:
    """Produce to every topic until the server dies (crash point) or ``kill_after`` seconds pass
    (then SIGKILL), a share consumer acknowledging as it goes. Returns (records acknowledged,
    whether the server died by itself)."""
    died = False
    lock_free: list[tuple[tuple[str, int], Acked]] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            key = msg.key()
            tag, it, seq, _ = _parse(msg.value())
            lock_free.append(((msg.topic(), msg.partition()), Acked(msg.offset(), key, msg.value(), (it, seq))))

    keep_producer = _producer(server, idempotent=True)
    other_producer = _producer(server, idempotent=False)
    consumer = None if share is None else _share_consumer(server, ledger, share)
    pad = rng.randint(20, 300)
    timer = LifeTimer(rng, kill_after)
    seq = 0
    try:
        while True:
            elapsed = timer.elapsed()
            if timer.trim_due(elapsed):
                trim_keep_topic(server.port, ledger, rng)  # may be cut short by the crash
            if server.proc is not None and server.proc.poll() is not None:
                died = True  # at its crash point
                break
            if timer.kill_due(bool(lock_free)):
                server.kill()
                break
            if elapsed > max_seconds:
                server.kill()
                break
            try:
                for _ in range(20):
                    seq += 1
                    keep_producer.produce(KEEP, value=_value(KEEP, iteration, seq, None, pad), partition=seq % 2, on_delivery=on_delivery)
                    other_producer.produce(RETAIN, value=_value(RETAIN, iteration, seq, None, pad), partition=0, on_delivery=on_delivery)
                    key = b"k%03d" % rng.randrange(COMPACT_KEYS)
                    other_producer.produce(COMPACT, key=key, value=_value(COMPACT, iteration, seq, key, pad), partition=0, on_delivery=on_delivery)
                    if seq % 4 == 0:
                        other_producer.produce(SHARE, value=_value(SHARE, iteration, seq, None, pad), partition=0, on_delivery=on_delivery)
            except BufferError:
                pass
            consumer = try_step(consumer)
            keep_producer.poll(0.002)
            other_producer.poll(0)
    finally:
        server.kill()  # SIGKILL if still running; reaps and closes files either way
        if consumer is not None:
            consumer.close()
        for p in (keep_producer, other_producer):
            # Nothing may reach the restarted server: drop what is queued or in flight.
            p.purge(in_queue=True, in_flight=True)
            p.flush(10)
    return book_acks(ledger, lock_free), died


# ------------------------------------------------------------------------------ main


def start_server(server: SidecarProcess, stats: Stats, rng: random.Random, env: dict[str, str] | None = None) -> None:
    """Start (recovering); sometimes crash it while it starts, then start again."""
    for _ in range(5):
        server.env = dict(env or {})
        roll = rng.random()
        if roll < 0.08:
            # SIGKILL during start-up (loading, recovery).
            server.env = {}
            _start_and_kill_early(server, rng.uniform(0.05, 0.6))
            stats.startup_crashes += 1
            stats.kills["startup-timer"] += 1
            continue
        t0 = time.monotonic()
        try:
            server.start(timeout=60)
        except RuntimeError as e:
            raise HarnessFailure(f"server did not start: {e}") from None
        stats.recovery_ms_max = max(stats.recovery_ms_max, (time.monotonic() - t0) * 1000)
        return
    server.start(timeout=60)


def _start_and_kill_early(server: SidecarProcess, delay: float) -> None:
    import subprocess

    from tests.support import sidecar_command

    cmd = [*sidecar_command(), "serve", "--data-dir", str(server.data_dir), "--listen", f"127.0.0.1:{server.port}"]
    for k, v in server.overrides.items():
        cmd += ["--override", f"{k}={v}"]
    with open(server.log_path, "a") as log_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file)
        time.sleep(delay)
        proc.kill()
        proc.wait()


def run(iterations: int, seed: int, data_dir: Path, verbose: bool = True) -> Stats:
    rng = random.Random(seed)
    stats = Stats()
    ledger = Ledger()
    share = ShareLedger()
    server = SidecarProcess(data_dir, SERVER_OVERRIDES)
    try:
        return _run(server, iterations, rng, stats, ledger, share, data_dir, verbose)
    finally:  # stopped or failed midway (SIGTERM from tests/crash/parallel.py): no server outlives the harness
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


def _run(server: SidecarProcess, iterations: int, rng: random.Random, stats: Stats, ledger: Ledger, share: ShareLedger,
         data_dir: Path, verbose: bool) -> Stats:
    server.start(timeout=60)
    for topic, (partitions, configs) in TOPICS.items():
        create_topic(server.port, topic, partitions=partitions, configs=configs)
    server.kill()
    for iteration in range(1, iterations + 1):
        # How this iteration's server dies: a crash point inside storage, or a timer. The crash
        # point is armed (SIGUSR1) only after the checks, so it hits while producing.
        point = rng.choice(sorted(CRASH_POINTS)) if rng.random() < 0.6 else None
        env = {}
        if point is not None:
            lo, hi = CRASH_POINTS[point]
            env = {CRASH_ENV: f"{point}:{rng.randint(lo, hi)}", ARM_ENV: "signal"}
        start_server(server, stats, rng, env)
        check_all(server, ledger, stats)
        if point is not None:
            assert server.proc is not None
            server.proc.send_signal(signal.SIGUSR1)
            kind, kill_after = point, None
        else:
            kind, kill_after = "timer", rng.uniform(0.05, 1.0)
        acks, died = produce_until_dead(server, ledger, iteration, rng, kill_after, max_seconds=3.0, share=share)
        if kill_after is None and not died:
            kind = f"{kind} (not reached in time: SIGKILL)"
        stats.kills[kind] += 1
        stats.acked += acks
        stats.iterations = iteration
        if verbose:
            print(f"iteration {iteration}: {kind}, {acks} acknowledged, ledger {ledger.total()}", flush=True)
    # Final: recover, check, stop cleanly, and check the files strictly.
    server.env = {}
    start_server(server, stats, random.Random(0))
    check_all(server, ledger, stats)
    drain(server.port, share, {o: a.value for o, a in ledger.acked[(SHARE, 0)].items()})
    stats.share_deliveries, stats.share_redeliveries, stats.share_acknowledged = share.deliveries, share.redeliveries, len(share.done)
    code = server.stop()
    if code != 0:  # the log's end says why (one such failure in a loaded full run left no trace)
        raise HarnessFailure(f"clean stop failed (exit {code}): {server.log_text()[-3000:]}")
    stats.segments_checked += check_disk(data_dir, strict=True, attempts=1)
    return stats


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(143)


def cli(argv: list[str] | None, prog: str, doc: str, tmp_prefix: str, run_fn: Callable[[int, int, Path, bool], Any],
        summary: Callable[[Any], dict[str, Any]], failures: tuple[type[BaseException], ...]) -> int:
    """A crash harness's command line: ``run_fn(iterations, seed, data dir, verbose)``, then a
    JSON summary (``summary(stats)`` between the common head and the time taken); exits 1 on a
    failure (one of ``failures``), keeping the data dir."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the data dir after a successful run")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    # SIGTERM (tests/crash/parallel.py stopping its jobs) unwinds like Ctrl-C, so run_fn's
    # finally kills the server it started.
    signal.signal(signal.SIGTERM, _terminated)
    tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix))
    data_dir = args.data_dir or tmp / "data"
    started = time.monotonic()
    try:
        stats = run_fn(args.iterations, args.seed, data_dir, not args.quiet)
    except SystemExit:  # stopped (SIGTERM): the server is already killed; nothing to keep
        if not args.keep and args.data_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    except failures as e:
        print(f"FAILED: {e}\ndata dir kept: {data_dir} (server log: {data_dir.parent / (data_dir.name + '.server.log')})", file=sys.stderr)
        return 1
    print(json.dumps({
        "iterations_survived": stats.iterations,
        "seed": args.seed,
        "kills": dict(sorted(stats.kills.items())),
        "startup_crashes": stats.startup_crashes,
        "records_acknowledged": stats.acked,
        "records_checked": stats.records_checked,
        **summary(stats),
        "seconds": round(time.monotonic() - started, 1),
    }, indent=1))
    if not args.keep and args.data_dir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    def summary(stats: Stats) -> dict[str, Any]:
        return {
            "segments_verified": stats.segments_checked,
            "share_deliveries": stats.share_deliveries,
            "share_redeliveries": stats.share_redeliveries,
            "share_acknowledged": stats.share_acknowledged,
            "slowest_start_ms": round(stats.recovery_ms_max),
        }

    return cli(argv, "python -m tests.crash.harness", __doc__ or "", "kafka-sidecar-crash-",
               lambda n, seed, data_dir, verbose: run(n, seed, data_dir, verbose=verbose), summary, (HarnessFailure, ShareFailure))


if __name__ == "__main__":
    sys.exit(main())
