"""Crash safety: kill -9 mid-produce loses no acknowledged record; a damaged tail is repaired.

Acknowledged means the broker answered the Produce (acks=all); after a SIGKILL the
data is still in the page cache, so every acknowledged record must be there after
restart, exactly once, at its acknowledged offset. Recovery (no clean-shutdown
marker) must rebuild indexes and cut a torn or corrupt tail batch, never serve it.
"""

from __future__ import annotations

import random
import re
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka_sidecar.protocol.record_batch import BATCH_HEADER_SIZE, read_header
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch

from tests.integration.test_bad_input import (
    NONE,
    RawClient,
    create_topic,
    fetch_all,
    fetch_once,
    list_offset,
    partition_results,
    produce_request,
)
from tests.support import RECENT_TS, SidecarProcess

PARTITIONS = 2
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
_VALUE = re.compile(rb"^it(\d+)-(\d{7})-")


# ------------------------------------------------------------------ on-disk helpers


def segment_bases(partition_dir: Path) -> list[int]:
    return sorted(int(p.stem) for p in partition_dir.glob("*.log") if p.stem.isdigit())


def batches_in(log_file: Path) -> list[tuple[int, object]]:
    """(position, header) of every complete batch in a segment file."""
    data = log_file.read_bytes()
    out = []
    pos = 0
    while len(data) - pos >= BATCH_HEADER_SIZE:
        h = read_header(data, pos)
        if pos + h.size > len(data):
            break
        out.append((pos, h))
        pos += h.size
    return out


def check_indexes_on_disk(partition_dir: Path) -> None:
    """After a clean stop: every .index entry points at a batch start and names that batch's
    last offset; every .timeindex entry names a batch's last offset and its max timestamp."""
    for base in segment_bases(partition_dir):
        prefix = partition_dir / f"{base:020d}"
        batches = batches_in(prefix.with_suffix(".log"))
        by_pos = {pos: h for pos, h in batches}
        by_last = {h.last_offset: h for _, h in batches}
        index = prefix.with_suffix(".index").read_bytes()
        assert len(index) % 8 == 0, f"{prefix}.index has {len(index)} bytes"
        prev = (-1, -1)
        for rel, pos in struct.iter_unpack(">ii", index):
            assert (rel, pos) > prev and rel > prev[0] and pos > prev[1], f"{prefix}.index not increasing at {(rel, pos)}"
            prev = (rel, pos)
            assert pos in by_pos, f"{prefix}.index entry {(rel, pos)} does not point at a batch start"
            assert by_pos[pos].last_offset == base + rel, f"{prefix}.index entry {(rel, pos)} is not its batch's last offset"
        timeindex = prefix.with_suffix(".timeindex").read_bytes()
        assert len(timeindex) % 12 == 0, f"{prefix}.timeindex has {len(timeindex)} bytes"
        prev_ts = -1
        for ts, rel in struct.iter_unpack(">qi", timeindex):
            assert ts > prev_ts, f"{prefix}.timeindex timestamps not increasing at {ts}"
            prev_ts = ts
            h = by_last.get(base + rel)
            assert h is not None, f"{prefix}.timeindex entry {(ts, rel)} names no batch's last offset"
            assert h.max_timestamp == ts, f"{prefix}.timeindex entry {(ts, rel)}: batch max timestamp is {h.max_timestamp}"


# --------------------------------------------------------------------- kill -9 loop


def produce_until_killed(server: SidecarProcess, topic: str, iteration: int, kill_after: int, acked: dict[int, dict[int, bytes]]) -> int:
    """Produce (acks=all, no retries) until ``kill_after`` acks arrived, then SIGKILL the server
    while requests are still in flight. Records the acknowledged (offset, value) per partition."""
    new_acks = 0

    def on_delivery(err, msg) -> None:
        nonlocal new_acks
        if err is None:
            assert msg.offset() not in acked[msg.partition()], f"offset {msg.offset()} acknowledged twice"
            acked[msg.partition()][msg.offset()] = msg.value()
            new_acks += 1

    producer = Producer({
        "bootstrap.servers": server.bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "retries": 0,  # a value is sent at most once, so it can be in the log at most once
        "linger.ms": 1,
        "batch.num.messages": 100,
        "message.timeout.ms": 10000,
        "reconnect.backoff.ms": 50,
        "log_level": 2,
    })
    pad = b"." * random.Random(iteration).randint(20, 200)
    deadline = time.monotonic() + 15
    sent = 0
    while new_acks < kill_after:
        assert time.monotonic() < deadline, f"only {new_acks} of {kill_after} records acknowledged in time"
        value = b"it%d-%07d-" % (iteration, sent) + pad
        try:
            producer.produce(topic, value=value, partition=sent % PARTITIONS, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
    server.kill()
    # Nothing may reach the restarted server from this producer: drop what is queued or in flight.
    producer.purge(in_queue=True, in_flight=True)
    assert producer.flush(10) == 0
    return sent


def check_log_after_restart(server: SidecarProcess, topic: str, acked: dict[int, dict[int, bytes]], rng: random.Random) -> None:
    client = RawClient(server.port, client_id="crash-check")
    try:
        for partition in range(PARTITIONS):
            stored = fetch_all(client, topic, partition)
            offsets = [r.offset for r in stored]
            assert offsets == list(range(len(offsets))), f"partition {partition}: gaps or disorder in offsets"
            end = list_offset(client, topic, partition, -1)
            assert end == len(stored)
            assert list_offset(client, topic, partition, -2) == 0
            mine = acked[partition]
            if mine:
                assert end >= max(mine) + 1, f"partition {partition}: log end {end} below last acknowledged {max(mine)}"
            for offset, value in mine.items():
                assert stored[offset].value == value, f"partition {partition}: offset {offset} holds {stored[offset].value[:20]!r}, acknowledged {value[:20]!r}"
            # Every value was sent once: it is in the log at most once, and in send order.
            values = [r.value for r in stored]
            assert len(set(values)) == len(values), f"partition {partition}: duplicated records"
            seqs = []
            for v in values:
                m = _VALUE.match(v)
                assert m, f"partition {partition}: unexpected value {v[:40]!r}"
                seqs.append((int(m.group(1)), int(m.group(2))))
            assert seqs == sorted(seqs), f"partition {partition}: records out of send order"
            # The offset index after recovery: a fetch at any offset starts at the batch holding it.
            for offset in rng.sample(range(len(stored)), min(25, len(stored))):
                p, raw = fetch_once(client, topic, partition, offset, max_bytes=1)
                assert p.error_code == NONE
                first = decode_batches(raw)[0]
                assert first.base_offset <= offset <= first.last_offset, f"fetch at {offset} returned batch {first.base_offset}..{first.last_offset}"
                assert {r.offset: r.value for r in first.records}[offset] == stored[offset].value
    finally:
        client.close()


def test_kill_9_mid_produce_keeps_every_acknowledged_record(sidecar_factory, topic_name):
    server = sidecar_factory({
        "log.segment.bytes": "65536",  # many segments: recovery crosses segment boundaries
        "log.index.interval.bytes": "1024",  # many index entries to get wrong
        "log.flush.interval.ms": "200",  # the recovery point moves during the run...
        "log.flush.offset.checkpoint.interval.ms": "300",  # ...and is checkpointed
    })
    create_topic(server.port, topic_name, partitions=PARTITIONS)
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    rng = random.Random(4242)
    for iteration in range(3):
        produce_until_killed(server, topic_name, iteration, rng.randint(3000, 10000), acked)
        assert not (server.data_dir / CLEAN_SHUTDOWN).exists()
        server.start()
        check_log_after_restart(server, topic_name, acked, rng)
    assert sum(len(a) for a in acked.values()) >= 9000
    assert server.stop() == 0
    for partition in range(PARTITIONS):
        check_indexes_on_disk(server.data_dir / f"{topic_name}-{partition}")


# --------------------------------------------------------------- damaged tail batch


def _batch(index: int) -> bytes:
    """Batch ``index`` of the damage test: 5 records, values naming batch and record."""
    return encode_batch(
        [Record(j, RECENT_TS + index * 5 + j, b"key-%d" % j, b"batch-%02d-record-%d" % (index, j)) for j in range(5)]
    )


def _damage(log_file: Path, pos: int, size: int, how: str) -> None:
    data = bytearray(log_file.read_bytes())
    assert pos + size == len(data), "the damaged batch must be the last one in the segment"
    if how == "truncate-in-header":
        del data[pos + 30 :]
    elif how == "truncate-in-records":
        del data[pos + size - 7 :]
    elif how == "flip-record-byte":
        data[pos + size - 3] ^= 0x01
    elif how == "flip-crc":
        data[pos + 17] ^= 0x80
    elif how == "length-past-end":
        struct.pack_into(">i", data, pos + 8, size + 100)
    else:
        raise AssertionError(how)
    log_file.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncate-in-header", "truncate-in-records", "flip-record-byte", "flip-crc", "length-past-end"])
def test_damaged_last_batch_is_cut_at_recovery(sidecar_factory, topic_name, how):
    server = sidecar_factory({"log.segment.bytes": "1500"})  # ~5 batches per segment
    create_topic(server.port, topic_name)
    client = RawClient(server.port, client_id="damage")
    batches = 20
    for i in range(batches):
        result = partition_results(client.request(produce_request(topic_name, {0: _batch(i)})))[0]
        assert (result.error_code, result.base_offset) == (NONE, i * 5)
    client.close()
    assert server.stop() == 0
    data_dir = server.data_dir
    (data_dir / CLEAN_SHUTDOWN).unlink()  # force recovery, as after a crash
    partition_dir = data_dir / f"{topic_name}-0"
    bases = segment_bases(partition_dir)
    assert len(bases) >= 3
    last_log = partition_dir / f"{bases[-1]:020d}.log"
    in_last = batches_in(last_log)
    assert len(in_last) >= 2, "the last segment should hold complete batches before the damaged one"
    pos, header = in_last[-1]
    assert header.base_offset == (batches - 1) * 5
    _damage(last_log, pos, header.size, how)
    log_before = len(server.log_text())

    server.start()
    repair = [
        line for line in server.log_text()[log_before:].splitlines()
        if re.search(rf"{re.escape(topic_name)}-0(?!\d)", line) and re.search(r"truncat|corrupt|invalid", line, re.I)
    ]
    assert repair, f"no log line about repairing {topic_name}-0:\n{server.log_text()[log_before:]}"
    assert last_log.stat().st_size == pos, "the damaged tail was not cut off the segment"

    good_end = (batches - 1) * 5
    client = RawClient(server.port, client_id="damage-check")
    try:
        assert list_offset(client, topic_name, 0, -1) == good_end
        stored = fetch_all(client, topic_name, 0)
        assert [r.offset for r in stored] == list(range(good_end))
        assert [r.value for r in stored] == [b"batch-%02d-record-%d" % (i, j) for i in range(batches - 1) for j in range(5)]
        p, raw = fetch_once(client, topic_name, 0, good_end)
        assert (p.error_code, p.high_watermark, raw) == (NONE, good_end, b"")
        # The next produce takes the damaged batch's offsets; the damaged data never comes back.
        result = partition_results(client.request(produce_request(topic_name, {0: encode_batch([Record(0, RECENT_TS + 1000, b"k", b"after-repair")])})))[0]
        assert (result.error_code, result.base_offset) == (NONE, good_end)
        stored = fetch_all(client, topic_name, 0)
        assert [r.offset for r in stored] == list(range(good_end + 1))
        assert stored[-1].value == b"after-repair"
        assert not any(r.value.startswith(b"batch-%02d-" % (batches - 1)) for r in stored)
    finally:
        client.close()
    assert server.stop() == 0
    check_indexes_on_disk(partition_dir)
