"""Retention over TCP: kafka-sidecar with retention checks every 200 ms from start-up
(``log.retention.check.interval.ms=200``, ``log.initial.task.delay.ms=0``) and
``.deleted`` files removed 200 ms later (``log.segment.delete.delay.ms``, the broker
name of ``file.delete.delay.ms``), small ``segment.bytes`` per topic, real clients.

Kafka's behaviour is the reference: retention by time compares the largest record
timestamp of each segment (old CreateTime records go at the first check, the active
segment rolled first), by size deletes the oldest segments while the excess is at
least a segment, deleted segments are renamed ``.deleted`` and removed after the
delay, and a restart (clean or kill -9) brings nothing deleted back and loses
nothing kept.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.retention_helpers import (
    FAST_RETENTION,
    Raw,
    consume,
    create_topic,
    files_of,
    live_bases,
    offsets,
    segment_files,
)
from tests.support import wait_until

OLD_TS = 1_700_000_000_000  # November 2023: far beyond the default 7-day retention
VALUE_SIZE = 1000
OFFSET_OUT_OF_RANGE = 1


def value(i: int, size: int = VALUE_SIZE) -> bytes:
    return (b"%010d" % i).ljust(size, b".")


def produce_one_per_batch(bootstrap: str, topic: str, first: int, count: int, timestamp) -> list[int]:
    """``count`` records, each in its own batch (one flush per send); returns their offsets."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=60_000)
    out = []
    try:
        for i in range(first, first + count):
            fut = producer.send(topic, key=b"key-%06d" % i, value=value(i), partition=0, timestamp_ms=timestamp(i))
            producer.flush(timeout=10)
            out.append(fut.get(timeout=10).offset)
    finally:
        producer.close()
    return out


def one_batch_size(bootstrap: str, data_dir: Path, probe: str) -> int:
    """Bytes of one single-record batch as the producer writes it (measured on a probe topic)."""
    create_topic(bootstrap, probe, {"retention.ms": "-1"})
    produce_one_per_batch(bootstrap, probe, 0, 1, lambda _i: int(time.time() * 1000))
    return (data_dir / f"{probe}-0" / f"{0:020d}.log").stat().st_size


class DirWatcher(threading.Thread):
    """Polls a partition directory every 2 ms; remembers when each file was first and last seen."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.first_seen: dict[str, float] = {}
        self.last_seen: dict[str, float] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            now = time.monotonic()
            for name in segment_files(self.path):
                self.first_seen.setdefault(name, now)
                self.last_seen[name] = now
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)

    def lifetime(self, name: str) -> float:
        return self.last_seen[name] - self.first_seen[name]


def no_deleted_files(pdir: Path) -> bool:
    return not any(f.endswith(".deleted") for f in segment_files(pdir))


def live_log_bytes(pdir: Path) -> int:
    """Total size of the live .log files (a file renamed meanwhile counts as gone)."""
    total = 0
    for base in live_bases(pdir):
        try:
            total += (pdir / f"{base:020d}.log").stat().st_size
        except FileNotFoundError:
            pass
    return total


def restart_both_ways(server, check) -> None:
    """A clean restart, then a crash (kill -9) and start; ``check(how)`` after each."""
    server.stop()
    server.start()
    check("clean restart")
    server.kill()
    server.start()
    check("kill -9")


# ----------------------------------------------------------------------------- by time


def test_old_create_time_records_all_deleted_at_first_check_active_rolled(sidecar_factory, topic_name):
    # The first check comes 2.5 s after start-up, so the test sees the log it is given.
    started = time.monotonic()
    server = sidecar_factory({**FAST_RETENTION, "log.initial.task.delay.ms": "2500"})
    topic = topic_name
    create_topic(server.bootstrap, topic, {"segment.bytes": str(VALUE_SIZE + 600)})  # default retention.ms: 7 days
    pdir = server.data_dir / f"{topic}-0"
    watcher = DirWatcher(pdir)
    watcher.start()
    try:
        assert produce_one_per_batch(server.bootstrap, topic, 0, 12, lambda i: OLD_TS + i) == list(range(12))
        assert time.monotonic() - started < 2.5, "the first retention check came before the test could look"
        assert live_bases(pdir) == list(range(12))
        assert offsets(server.bootstrap, topic) == (0, 12)
        # The first check deletes every segment, the active one included (rolled first):
        # a new empty segment at 12 remains.
        wait_until(lambda: segment_files(pdir) == files_of(12), timeout=10, message="all old segments deleted")
    finally:
        watcher.stop()
    assert (pdir / f"{12:020d}.log").stat().st_size == 0
    assert offsets(server.bootstrap, topic) == (12, 12)
    # Each segment was renamed .deleted in that one pass, then removed no sooner than the 200 ms delay.
    renamed_at = []
    for base in range(12):
        for name in files_of(base, suffix=".deleted"):
            assert name in watcher.first_seen, f"{name} never seen"
            assert watcher.lifetime(name) >= 0.15, (name, watcher.lifetime(name))
            renamed_at.append(watcher.first_seen[name])
    assert max(renamed_at) - min(renamed_at) < 0.15
    with Raw(server.bootstrap) as raw:
        p = raw.fetch(topic, 0, 0)
        assert (p.error_code.value, p.high_watermark, p.log_start_offset) == (OFFSET_OUT_OF_RANGE, -1, -1)
        p = raw.fetch(topic, 0, 12)
        assert (p.error_code.value, p.high_watermark, p.log_start_offset) == (0, 12, 12)

    # Appends continue at the log end; recent records stay.
    now = int(time.time() * 1000)
    assert produce_one_per_batch(server.bootstrap, topic, 12, 3, lambda _i: now) == [12, 13, 14]
    got = consume(server.bootstrap, topic, 15)
    assert [(m.offset, m.value, m.timestamp) for m in got] == [(i, value(i), now) for i in range(12, 15)]
    time.sleep(0.5)  # two more retention checks
    assert live_bases(pdir) == [12, 13, 14]

    def check(how: str) -> None:
        assert offsets(server.bootstrap, topic) == (12, 15), how
        assert live_bases(pdir) == [12, 13, 14], how
        assert no_deleted_files(pdir), how
        got = consume(server.bootstrap, topic, 15)
        assert [(m.offset, m.value) for m in got] == [(i, value(i)) for i in range(12, 15)], how

    restart_both_ways(server, check)


def test_time_retention_keeps_segments_with_recent_records(sidecar_factory, topic_name):
    server = sidecar_factory(FAST_RETENTION)
    topic = topic_name
    create_topic(server.bootstrap, topic, {"segment.bytes": str(VALUE_SIZE + 600), "retention.ms": "60000"})
    pdir = server.data_dir / f"{topic}-0"
    now = int(time.time() * 1000)
    # Offsets 0..7 are an hour old, 8..11 recent; each record is its own segment.
    produce_one_per_batch(server.bootstrap, topic, 0, 8, lambda i: now - 3_600_000 + i)
    produce_one_per_batch(server.bootstrap, topic, 8, 4, lambda _i: now)
    wait_until(lambda: segment_files(pdir) == files_of(8, 9, 10, 11), timeout=10, message="old segments deleted")
    assert offsets(server.bootstrap, topic) == (8, 12)
    time.sleep(0.5)  # more checks change nothing
    assert live_bases(pdir) == [8, 9, 10, 11]

    def check(how: str) -> None:
        assert offsets(server.bootstrap, topic) == (8, 12), how
        assert live_bases(pdir) == [8, 9, 10, 11], how
        assert no_deleted_files(pdir), how
        got = consume(server.bootstrap, topic, 12)
        assert [(m.offset, m.key, m.value, m.timestamp) for m in got] == [(i, b"key-%06d" % i, value(i), now) for i in range(8, 12)], how
        with Raw(server.bootstrap) as raw:
            assert raw.fetch(topic, 0, 7).error_code.value == OFFSET_OUT_OF_RANGE, how

    restart_both_ways(server, check)


def test_topic_file_delete_delay_and_crash_with_pending_deleted_files(sidecar_factory, topic_name):
    """file.delete.delay.ms (topic) overrides log.segment.delete.delay.ms (broker): the
    .deleted files stay 1.5 s; a kill -9 meanwhile leaves them to start-up, which removes
    them without bringing their records back."""
    server = sidecar_factory(FAST_RETENTION)
    topic = topic_name
    create_topic(server.bootstrap, topic, {"segment.bytes": str(VALUE_SIZE + 600), "file.delete.delay.ms": "1500"})
    pdir = server.data_dir / f"{topic}-0"
    watcher = DirWatcher(pdir)
    watcher.start()
    try:
        produce_one_per_batch(server.bootstrap, topic, 0, 4, lambda i: OLD_TS + i)
        doomed = files_of(0, 1, 2, 3, suffix=".deleted")
        wait_until(lambda: segment_files(pdir) == files_of(4), timeout=10, message=".deleted files removed")
    finally:
        watcher.stop()
    for name in doomed:
        assert watcher.lifetime(name) >= 1.4, (name, watcher.lifetime(name))
    assert offsets(server.bootstrap, topic) == (4, 4)

    # Again, and crash while the .deleted files wait.
    produce_one_per_batch(server.bootstrap, topic, 4, 3, lambda i: OLD_TS + i)
    wait_until(lambda: files_of(4, 5, 6, suffix=".deleted") <= segment_files(pdir), timeout=10, message="segments renamed .deleted")
    assert live_bases(pdir) == [7]
    server.kill()
    assert files_of(4, 5, 6, suffix=".deleted") <= segment_files(pdir)
    server.start()
    assert segment_files(pdir) == files_of(7)
    assert offsets(server.bootstrap, topic) == (7, 7)
    assert consume(server.bootstrap, topic, 7, timeout=1.0) == []


# ----------------------------------------------------------------------------- by size


def test_size_retention_deletes_oldest_while_excess_is_a_segment(sidecar_factory, topic_name):
    server = sidecar_factory(FAST_RETENTION)
    topic = topic_name
    batch = one_batch_size(server.bootstrap, server.data_dir, f"{topic}-probe")
    # One batch per segment, all of ``batch`` bytes; 3.5 segments allowed. With n segments
    # the excess is (n - 3.5) segments: n - 4 go, the newest 4 stay (the active one included).
    create_topic(server.bootstrap, topic, {
        "segment.bytes": str(batch + batch // 2), "retention.bytes": str(3 * batch + batch // 2), "retention.ms": "-1",
    })
    pdir = server.data_dir / f"{topic}-0"
    now = int(time.time() * 1000)
    assert produce_one_per_batch(server.bootstrap, topic, 0, 10, lambda _i: now) == list(range(10))
    wait_until(lambda: segment_files(pdir) == files_of(6, 7, 8, 9), timeout=10, message="size retention")
    assert all((pdir / f"{b:020d}.log").stat().st_size == batch for b in (6, 7, 8, 9))
    assert offsets(server.bootstrap, topic) == (6, 10)
    time.sleep(0.5)  # 0.5 segment over: nothing more goes
    assert live_bases(pdir) == [6, 7, 8, 9]

    def check(how: str) -> None:
        time.sleep(0.3)  # a retention check after start-up
        assert offsets(server.bootstrap, topic) == (6, 10), how
        assert segment_files(pdir) == files_of(6, 7, 8, 9), how
        got = consume(server.bootstrap, topic, 10)
        assert [(m.offset, m.value) for m in got] == [(i, value(i)) for i in range(6, 10)], how

    restart_both_ways(server, check)

    # One more record: 5 segments, 1.5 over: the oldest goes.
    produce_one_per_batch(server.bootstrap, topic, 10, 1, lambda _i: now)
    wait_until(lambda: segment_files(pdir) == files_of(7, 8, 9, 10), timeout=10, message="size retention after restart")
    assert offsets(server.bootstrap, topic) == (7, 11)


# ---------------------------------------------------- produce and fetch during retention


def test_produce_and_fetch_keep_working_during_retention(sidecar_factory, topic_name):
    server = sidecar_factory(FAST_RETENTION)
    topic = topic_name
    # Batches of 50 records (~11 KiB) stay under segment.bytes, as Kafka requires.
    segment_bytes, retention_bytes = 16 * 1024, 256 * 1024
    create_topic(server.bootstrap, topic, {"segment.bytes": str(segment_bytes), "retention.bytes": str(retention_bytes), "retention.ms": "-1"})
    pdir = server.data_dir / f"{topic}-0"
    total, per_round, size = 5000, 50, 200
    tp = TopicPartition(topic, 0)
    received: list[tuple[int, bytes]] = []
    consumer_error: list[BaseException] = []
    done = threading.Event()
    ready = threading.Event()

    def consume_loop() -> None:
        try:
            consumer = KafkaConsumer(
                bootstrap_servers=server.bootstrap, group_id=None, enable_auto_commit=False,
                auto_offset_reset="earliest", fetch_max_wait_ms=50, request_timeout_ms=10_000,
            )
            try:
                consumer.assign([tp])
                assert consumer.position(tp) == 0
                ready.set()
                deadline = time.monotonic() + 40
                while time.monotonic() < deadline and not done.is_set():
                    for msgs in consumer.poll(timeout_ms=100).values():
                        received.extend((m.offset, m.value) for m in msgs)
                    if received and received[-1][0] == total - 1:
                        break
            finally:
                consumer.close()
        except BaseException as e:  # reported by the test thread
            consumer_error.append(e)
            ready.set()

    thread = threading.Thread(target=consume_loop, daemon=True)
    thread.start()
    assert ready.wait(15)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=5)
    acked: list[int] = []
    max_log_bytes = 0
    try:
        for r in range(total // per_round):
            futs = [producer.send(topic, value=value(i, size), partition=0) for i in range(r * per_round, (r + 1) * per_round)]
            producer.flush(timeout=10)
            acked += [f.get(timeout=10).offset for f in futs]
            max_log_bytes = max(max_log_bytes, live_log_bytes(pdir))
            time.sleep(0.02)
    finally:
        producer.close()
    thread.join(timeout=45)
    done.set()
    assert not consumer_error, consumer_error
    assert not thread.is_alive()
    assert acked == list(range(total))
    # The consumer kept up: every record, in order, exactly as produced.
    assert [o for o, _ in received] == list(range(total))
    assert all(v == value(o, size) for o, v in received)
    # Retention ran meanwhile and bounded the log.
    time.sleep(0.5)  # retention checks after the last append
    wait_until(lambda: no_deleted_files(pdir), timeout=10, message=".deleted files removed")
    earliest, latest = offsets(server.bootstrap, topic)
    assert latest == total
    assert earliest > 0
    assert earliest == live_bases(pdir)[0]
    # At least retention.bytes is kept, and less than one segment more.
    assert retention_bytes <= live_log_bytes(pdir) < retention_bytes + segment_bytes
    # ~1.1 MB were written; checks every 200 ms kept the log near retention.bytes throughout.
    assert retention_bytes <= max_log_bytes < 2 * retention_bytes
    got = consume(server.bootstrap, topic, total)
    assert [m.offset for m in got] == list(range(earliest, total))
