"""Idempotent-producer state of one partition (storage/producer_state.py, storage/log.py).

What Kafka 4 does, checked through ``Log.append_as_leader`` (the produce path) and the
ProducerStateManager directly:
- a retried batch matching one of the producer's last 5 batches is answered with its
  original offsets and not written again; an older one is out of order (45);
- a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45) with Kafka's message, a smaller
  epoch is INVALID_PRODUCER_EPOCH (47), a new epoch must start at sequence 0;
- sequences wrap at Integer.MAX_VALUE; a producer the partition knows nothing of is
  accepted at any sequence (Kafka 4, before transactions v2);
- ``<offset>.snapshot`` files: replaying Apache Kafka 4.0.0's golden-0 log gives
  Kafka's own snapshot files byte for byte, and loading Kafka's files gives the same
  state; a corrupt snapshot is ignored and the state rebuilt from the log; snapshots go
  with their segments (retention) and above the log end (truncation);
- Kafka's ``kafka-dump-log.sh`` decodes a snapshot we wrote.

Expected answers were checked against Apache Kafka 4.1.0 where
they are visible on the wire.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import crc32c
import pytest
from kafka_sidecar.protocol.record_batch import BatchHeader, iter_headers, validate_batches
from kafka_sidecar.protocol.records import Record, decode_batches, encode_batch
from kafka_sidecar.storage.log import AppendInfo, Log
from kafka_sidecar.storage.log_config import LogConfig
from kafka_sidecar.storage.producer_state import (
    ProducerStateError,
    ProducerStateManager,
    list_snapshots,
)

from tests.support import GOLDEN, kafka_bin

GOLDEN_0 = GOLDEN / "kafka-4.0.0-logdir" / "golden-0"
DUMP_LOG_DIR = GOLDEN / "dump-log"
DUMP_LOG = kafka_bin("kafka-dump-log.sh")

GOLDEN_CONFIG = {"segment.bytes": 1048576, "message.timestamp.type": "CreateTime", "retention.ms": -1}
GOLDEN_SEGMENTS = (0, 158, 267)
GOLDEN_SNAPSHOTS = (158, 267, 322)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INT_MAX = 2**31 - 1
TS0 = 1_700_000_000_000
# Lifecycle tests use recent timestamps: Kafka drops producers idle for longer than
# producer.id.expiration.ms (1 day) when it loads a snapshot.
RECENT = int(time.time() * 1000) - 3_600_000
TP = "t-0"

needs_golden = pytest.mark.skipif(not GOLDEN_0.is_dir(), reason=f"golden data not present at {GOLDEN_0}")


# --------------------------------------------------------------------------- helpers


def idem_batch(pid: int, epoch: int, seq: int, n: int = 2, ts: int = TS0, tag: bytes = b"v") -> bytes:
    """One client batch of an idempotent producer: ``n`` records from sequence ``seq``."""
    return encode_batch(
        [Record(i, ts + i, b"k%d" % i, b"%s-%d-%d" % (tag, seq, i)) for i in range(n)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


def append(lg: Log, batch: bytes) -> AppendInfo:
    """One produce of ``batch`` (a fresh copy: the log patches offsets in place)."""
    buf = bytearray(batch)
    return lg.append_as_leader(buf, validate_batches(buf))


def new_log(d: Path, **overrides) -> Log:
    return Log(d, "t", 0, LogConfig(None, {k.replace("_", "."): v for k, v in overrides.items()}))


def read_values(lg: Log) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record from the log start to the log end, through Log.read."""
    out: list[tuple[int, bytes | None]] = []
    offset = lg.log_start_offset
    for _ in range(10_000):
        if offset >= lg.log_end_offset:
            return out
        sl = lg.read(offset, 1 << 20, True)
        assert sl is not None
        batches = decode_batches(sl.read())
        assert batches
        for b in batches:
            out += [(r.offset, r.value) for r in b.records if r.offset >= offset]
        offset = batches[-1].next_offset
    raise AssertionError("read did not reach the log end")


def state(lg_or_psm: Log | ProducerStateManager) -> dict[int, tuple]:
    """What a snapshot holds per producer: epoch, coordinator epoch, last timestamp and
    the last batch (first/last sequence, last offset, offset delta, timestamp)."""
    psm = lg_or_psm.producer_state if isinstance(lg_or_psm, Log) else lg_or_psm
    out = {}
    for pid, e in psm.producers.items():
        b = e.batches[-1] if e.batches else None
        last = None if b is None else (b.first_seq, b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
        out[pid] = (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, last)
    return out


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}.snapshot"


def snapshots_in(d: Path) -> list[int]:
    return list_snapshots(d)


def is_valid_snapshot(path: Path) -> bool:
    """Version 1, CRC-32C right, whole entries: what Kafka's readSnapshot accepts."""
    data = path.read_bytes()
    if len(data) < 10:
        return False
    version, crc, count = struct.unpack_from(">hIi", data)
    return version == 1 and crc == crc32c.crc32c(data[6:]) and len(data) == 10 + 46 * count


def assert_no_corrupt_snapshot(d: Path) -> None:
    bad = [o for o in snapshots_in(d) if not is_valid_snapshot(d / snapshot_name(o))]
    assert not bad, f"corrupt snapshots left on disk: {bad}"


@contextmanager
def expect_error(code: int, match: str | None = None) -> Iterator[pytest.ExceptionInfo[ProducerStateError]]:
    """A ProducerStateError with ``code`` (and, if given, a message matching ``match`` whole)."""
    with pytest.raises(ProducerStateError) as info:
        yield info
    assert info.value.error_code == code, (info.value.error_code, str(info.value))
    if match is not None:
        assert re.fullmatch(match, str(info.value)), str(info.value)


def copy_golden(dst: Path, segments=GOLDEN_SEGMENTS, snapshots=GOLDEN_SNAPSHOTS) -> Path:
    """A writable copy of golden-0 with only the given segments and snapshot files."""
    dst.mkdir(parents=True)
    for base in segments:
        for suffix in (".log", ".index", ".timeindex"):
            shutil.copyfile(GOLDEN_0 / f"{base:020d}{suffix}", dst / f"{base:020d}{suffix}")
    for off in snapshots:
        shutil.copyfile(GOLDEN_0 / snapshot_name(off), dst / snapshot_name(off))
    for p in dst.iterdir():
        p.chmod(p.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR)
    return dst


def golden_client_batches() -> list[tuple[BatchHeader, bytes]]:
    """golden-0's batches in order: (header as stored, bytes as the producer sent them)."""
    out = []
    for base in GOLDEN_SEGMENTS:
        data = (GOLDEN_0 / f"{base:020d}.log").read_bytes()
        for pos, h in iter_headers(data):
            b = bytearray(data[pos : pos + h.size])
            struct.pack_into(">q", b, 0, 0)  # baseOffset
            struct.pack_into(">i", b, 12, -1)  # partitionLeaderEpoch
            out.append((h, bytes(b)))
    return out


_DUMP_LINE = re.compile(
    r"producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) currentTxnFirstOffset: OptionalLong.empty "
    r"lastTimestamp: (-?\d+) firstSequence: (-?\d+) lastSequence: (-?\d+) lastOffset: (-?\d+) offsetDelta: (-?\d+) timestamp: (-?\d+)"
)


def dump_log_state(text: str) -> dict[int, tuple]:
    """kafka-dump-log's lines for one snapshot, in the shape of ``state``."""
    out = {}
    for line in text.splitlines():
        m = _DUMP_LINE.fullmatch(line)
        if m is None:
            assert line.startswith("Dumping "), line
            continue
        pid, epoch, coord, last_ts, first_seq, last_seq, last_off, delta, ts = map(int, m.groups())
        out[pid] = (epoch, coord, last_ts, (first_seq, last_seq, last_off, delta, ts))
    return out


def golden_dump(offset: int) -> str:
    return (DUMP_LOG_DIR / f"golden-0_{snapshot_name(offset)}.txt").read_text()


# =========================================================================== sequence rules


def test_duplicate_of_each_of_the_last_five_batches_gets_its_original_offsets(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        batches = [idem_batch(7, 0, 2 * i, 2) for i in range(6)]
        infos = [append(lg, b) for b in batches]
        assert [(i.first_offset, i.last_offset) for i in infos] == [(2 * i, 2 * i + 1) for i in range(6)]
        size = lg.active_segment.size
        # Retries of any of the last 5 batches: the original offsets, nothing written.
        for i in range(1, 6):
            dup = append(lg, batches[i])
            assert (dup.first_offset, dup.last_offset) == (2 * i, 2 * i + 1), i
            assert dup.log_start_offset == lg.log_start_offset
            assert (lg.log_end_offset, lg.active_segment.size) == (12, size)
        # The 6th-oldest is no longer remembered: out of order, as in Kafka.
        with expect_error(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            r"Out of order sequence number for producer 7 at offset 12 in partition t-0: 0 \(incoming seq\. number\), "
            r"11 \(current end sequence number\)",
        ):
            append(lg, batches[0])
        # Same base sequence as a retained batch but another last sequence: not a duplicate.
        with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
            append(lg, idem_batch(7, 0, 10, 1))
        assert (lg.log_end_offset, lg.active_segment.size) == (12, size)
        assert read_values(lg) == [(2 * i + j, b"v-%d-%d" % (2 * i, j)) for i in range(6) for j in range(2)]
    finally:
        lg.close()


def test_duplicate_window_slides_with_every_append(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        batches = [idem_batch(3, 0, i, 1) for i in range(20)]
        for i, b in enumerate(batches):
            assert append(lg, b).first_offset == i
            for j in range(max(0, i - 4), i + 1):
                assert append(lg, batches[j]).first_offset == j, (i, j)
            if i >= 5:
                with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
                    append(lg, batches[i - 5])
        assert lg.log_end_offset == 20
    finally:
        lg.close()


def test_sequence_gap_is_out_of_order_with_kafkas_message(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        assert append(lg, idem_batch(7, 0, 0, 3)).first_offset == 0
        with expect_error(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            r"Out of order sequence number for producer 7 at offset 3 in partition t-0: 4 \(incoming seq\. number\), "
            r"2 \(current end sequence number\)",
        ):
            append(lg, idem_batch(7, 0, 4, 1))
        # Overlapping the last batch without matching it is out of order too.
        with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
            append(lg, idem_batch(7, 0, 2, 2))
        assert lg.log_end_offset == 3
        assert append(lg, idem_batch(7, 0, 3, 1)).first_offset == 3
        # Another producer is not affected by producer 7's sequences.
        assert append(lg, idem_batch(8, 0, 0, 1)).first_offset == 4
    finally:
        lg.close()


def test_gap_message_names_the_offset_the_batch_would_get(tmp_path):
    psm = ProducerStateManager(tmp_path, "orders-3")
    h = validate_batches(idem_batch(42, 2, 0, 5))[0]
    assert psm.check(h, 1000) is None
    psm.update(h, 1004, h.max_timestamp)
    gap = validate_batches(idem_batch(42, 2, 9, 1))[0]
    with expect_error(
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        r"Out of order sequence number for producer 42 at offset 1005 in partition orders-3: 9 \(incoming seq\. number\), "
        r"4 \(current end sequence number\)",
    ):
        psm.check(gap, 1005)


def test_stale_epoch_is_invalid_producer_epoch(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        old = idem_batch(7, 2, 0, 2)
        assert append(lg, old).first_offset == 0
        assert append(lg, idem_batch(7, 3, 0, 2)).first_offset == 2
        with expect_error(
            INVALID_PRODUCER_EPOCH,
            r"Epoch of producer 7 at offset 4 in t-0 is 2, which is smaller than the last seen epoch 3",
        ):
            append(lg, idem_batch(7, 2, 2, 1))
        # A retry of a batch of the old epoch is fenced too, not answered as a duplicate.
        with expect_error(INVALID_PRODUCER_EPOCH):
            append(lg, old)
        assert lg.log_end_offset == 4
    finally:
        lg.close()


def test_new_epoch_must_start_at_sequence_zero(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        for i in range(3):
            append(lg, idem_batch(7, 0, 2 * i, 2))
        # Kafka's text: "Invalid sequence number for new epoch of producer 7at offset 6 in partition
        # t-0: 1 (request epoch), 6 (seq. number), 0 (current producer epoch)" (Kafka 4's Java lacks
        # the space before "at"; the broker never sends this text to clients).
        with expect_error(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            r"Invalid sequence number for new epoch of producer 7 ?at offset 6 in partition t-0: 1 \(request epoch\), "
            r"6 \(seq\. number\), 0 \(current producer epoch\)",
        ):
            append(lg, idem_batch(7, 1, 6, 1))
        assert lg.log_end_offset == 6
        first = idem_batch(7, 1, 0, 2)
        assert append(lg, first).first_offset == 6
        assert append(lg, idem_batch(7, 1, 2, 1)).first_offset == 8
        assert append(lg, first).first_offset == 6  # duplicate within the new epoch
        with expect_error(INVALID_PRODUCER_EPOCH):
            append(lg, idem_batch(7, 0, 4, 2))  # a retry from the old epoch
        # Epochs may jump by more than one; still from sequence 0.
        with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
            append(lg, idem_batch(7, 5, 3, 1))
        assert append(lg, idem_batch(7, 5, 0, 1)).first_offset == 9
        assert lg.log_end_offset == 10
    finally:
        lg.close()


def test_sequence_wraps_at_int_max(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        assert append(lg, idem_batch(9, 0, INT_MAX - 3, 2)).first_offset == 0  # sequences MAX-3, MAX-2
        wrapping = idem_batch(9, 0, INT_MAX - 1, 3)  # MAX-1, MAX, 0
        assert (append(lg, wrapping).first_offset, lg.log_end_offset) == (2, 5)
        entry = lg.producer_state.producers[9]
        assert (entry.batches[-1].first_seq, entry.batches[-1].last_seq) == (INT_MAX - 1, 0)
        info = append(lg, wrapping)
        assert (info.first_offset, info.last_offset, lg.log_end_offset) == (2, 4, 5)
        with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
            append(lg, idem_batch(9, 0, 0, 1))  # 0 was the wrapping batch's last sequence
        assert append(lg, idem_batch(9, 0, 1, 2)).first_offset == 5

        # A batch ending exactly at Integer.MAX_VALUE is followed by sequence 0.
        assert append(lg, idem_batch(10, 0, INT_MAX - 1, 2)).first_offset == 7
        with expect_error(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            rf"Out of order sequence number for producer 10 at offset 9 in partition t-0: 1 \(incoming seq\. number\), "
            rf"{INT_MAX} \(current end sequence number\)",
        ):
            append(lg, idem_batch(10, 0, 1, 1))
        assert append(lg, idem_batch(10, 0, 0, 1)).first_offset == 9
        assert lg.log_end_offset == 10
    finally:
        lg.close()


def test_unknown_producer_accepts_any_sequence(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        # Kafka 4 (before transactions v2): no state for the producer (new to this
        # partition, or expired/deleted) -> any sequence and any epoch are accepted.
        assert append(lg, idem_batch(11, 4, 1234, 3)).first_offset == 0
        assert append(lg, idem_batch(12, 0, INT_MAX, 1)).first_offset == 3
        assert append(lg, idem_batch(11, 4, 1237, 1)).first_offset == 4
        assert append(lg, idem_batch(12, 0, 0, 1)).first_offset == 5
        with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
            append(lg, idem_batch(11, 4, 1240, 1))
        # Once known, retries are recognised.
        assert append(lg, idem_batch(11, 4, 1234, 3)).first_offset == 0
    finally:
        lg.close()


def test_non_idempotent_batches_are_not_deduplicated(tmp_path):
    lg = new_log(tmp_path / "t-0")
    try:
        plain = encode_batch([Record(0, TS0, b"k", b"v")])
        assert [append(lg, plain).first_offset for _ in range(3)] == [0, 1, 2]
        assert lg.producer_state.producers == {}
    finally:
        lg.close()


def test_multi_producer_interleaving_and_log_append_time(tmp_path):
    lg = new_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime")
    try:
        seqs = {1: 0, 2: 0, 3: 0}
        sent = []
        for i in range(30):
            pid = 1 + i % 3
            b = idem_batch(pid, 0, seqs[pid], 1 + i % 4)
            info = append(lg, b)
            sent.append((b, info.first_offset, info.last_offset))
            seqs[pid] += 1 + i % 4
        end = lg.log_end_offset
        for b, first, last in sent[-15:]:  # the last 5 of each producer
            info = append(lg, b)
            assert (info.first_offset, info.last_offset) == (first, last)
        assert lg.log_end_offset == end
    finally:
        lg.close()


# =========================================================================== snapshots: golden


@needs_golden
def test_replaying_golden_0_writes_kafkas_snapshot_files(tmp_path):
    """golden-0 produced again through our Log: the snapshots of the two rolls and of the
    clean close are Kafka 4.0.0's files, byte for byte."""
    d = tmp_path / "golden-0"
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG))
    try:
        batches = golden_client_batches()
        assert len(batches) == 37
        for _, b in batches:
            append(lg, b)
        assert lg.log_end_offset == 322
        assert snapshots_in(d) == [158, 267]
    finally:
        lg.close()
    assert snapshots_in(d) == list(GOLDEN_SNAPSHOTS)
    for off in GOLDEN_SNAPSHOTS:
        assert (d / snapshot_name(off)).read_bytes() == (GOLDEN_0 / snapshot_name(off)).read_bytes(), off


@needs_golden
@pytest.mark.parametrize(("end", "segments"), [(158, (0,)), (267, (0, 158)), (322, (0, 158, 267))])
def test_golden_0_loaded_without_snapshots_rebuilds_kafkas_state(tmp_path, end, segments):
    """Kafka's segments without its .snapshot files, loaded after an unclean stop: the state
    replayed from the batch headers encodes to Kafka's snapshot at that log end."""
    d = copy_golden(tmp_path / "golden-0", segments=segments, snapshots=())
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG), recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == end
        kafka = (GOLDEN_0 / snapshot_name(end)).read_bytes()
        assert lg.producer_state.encode_snapshot() == kafka
        lg.producer_state.take_snapshot(end)
        assert (d / snapshot_name(end)).read_bytes() == kafka
        assert state(lg) == dump_log_state(golden_dump(end))
    finally:
        lg.close(trim=False)


@needs_golden
@pytest.mark.parametrize("offset", GOLDEN_SNAPSHOTS)
def test_loading_kafkas_snapshot_files_gives_the_same_state(tmp_path, offset):
    d = copy_golden(tmp_path / "golden-0", segments=(), snapshots=(offset,))
    psm = ProducerStateManager(d, "golden-0")
    assert psm.load_snapshot(offset)
    assert psm.last_snapshot_offset == offset
    # What kafka-dump-log decodes from Kafka's file...
    assert state(psm) == dump_log_state(golden_dump(offset))
    # ...is what replaying the log up to there gives...
    segments = tuple(b for b in GOLDEN_SEGMENTS if b < offset)
    replay_dir = copy_golden(tmp_path / "replay" / "golden-0", segments=segments, snapshots=())
    lg = Log(replay_dir, "golden", 0, LogConfig(None, GOLDEN_CONFIG), recovery_point=0, clean_shutdown=False)
    try:
        assert state(psm) == state(lg)
    finally:
        lg.close(trim=False)
    # ...and it encodes back to the same bytes.
    assert psm.encode_snapshot() == (GOLDEN_0 / snapshot_name(offset)).read_bytes()


@needs_golden
def test_log_with_kafkas_snapshots_uses_them_for_dedup(tmp_path):
    """A clean start on Kafka's own log dir: the snapshot at the log end is the state.

    As in Kafka, a snapshot keeps each producer's last batch only, so that batch is a
    duplicate and an earlier one of the same producer is out of order. (Producer expiry is
    the broker's periodic task, not the Log's: golden's 2023 timestamps would make a
    broker with the default producer.id.expiration.ms forget these producers.)
    """
    d = copy_golden(tmp_path / "golden-0")
    batches = golden_client_batches()
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG), recovery_point=322)
    try:
        assert lg.log_end_offset == 322
        assert state(lg) == dump_log_state(golden_dump(322))
        by_pid: dict[int, list[tuple[BatchHeader, bytes]]] = {}
        for h, b in batches:
            by_pid.setdefault(h.producer_id, []).append((h, b))
        # Every producer's last batch is answered with Kafka's offsets, nothing is written.
        for hb in by_pid.values():
            h, b = hb[-1]
            info = append(lg, b)
            assert (info.first_offset, info.last_offset) == (h.base_offset, h.last_offset), h.producer_id
        assert lg.log_end_offset == 322
        assert (d / "00000000000000000267.log").stat().st_size == (GOLDEN_0 / "00000000000000000267.log").stat().st_size
        # A producer with several batches: the one before its last is out of order after a
        # restart from the snapshot (Kafka 4.1 answers the same).
        multi = [hb for hb in by_pid.values() if len(hb) >= 2]
        assert multi, "golden-0 has producers with several batches"
        for hb in multi:
            h, b = hb[-2]
            with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
                append(lg, b)
        # The next sequence of producer 21 (last batch 0-4 at 317-321) goes on at the log end.
        assert append(lg, idem_batch(21, 0, 5, 2, ts=1_700_000_003_300)).first_offset == 322
        with expect_error(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            r"Out of order sequence number for producer 2 at offset 324 in partition golden-0: 11 \(incoming seq\. number\), "
            r"9 \(current end sequence number\)",
        ):
            append(lg, idem_batch(2, 0, 11, 1))
    finally:
        lg.close(trim=False)


@needs_golden
@pytest.mark.parametrize("damage", ["bad-crc", "truncated", "bad-version", "empty", "extra-byte"])
def test_corrupt_snapshot_is_ignored_and_state_rebuilt_from_the_log(tmp_path, damage):
    d = copy_golden(tmp_path / "golden-0")
    path = d / snapshot_name(322)
    data = bytearray(path.read_bytes())
    if damage == "bad-crc":
        data[-3] ^= 0x01  # inside the last entry: the CRC-32C no longer matches
    elif damage == "truncated":
        data = data[:-10]
    elif damage == "bad-version":
        struct.pack_into(">h", data, 0, 2)
    elif damage == "empty":
        data = bytearray()
    else:
        data += b"\0"
    path.write_bytes(bytes(data))
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG), recovery_point=322)
    try:
        # Deleted (Kafka may write a fresh one at the log end after rebuilding).
        assert_no_corrupt_snapshot(d)
        assert [o for o in snapshots_in(d) if o < 322] == [158, 267]
        # The same state as Kafka's intact snapshot, rebuilt from the log.
        assert lg.producer_state.encode_snapshot() == (GOLDEN_0 / snapshot_name(322)).read_bytes()
        h, b = golden_client_batches()[-1]
        info = append(lg, b)
        assert (info.first_offset, info.last_offset, lg.log_end_offset) == (h.base_offset, h.last_offset, 322)
    finally:
        lg.close(trim=False)


@needs_golden
def test_every_corrupt_snapshot_is_deleted_and_state_rebuilt_from_the_log(tmp_path):
    """Kafka tries the snapshots newest first, deleting each corrupt one, and replays the
    log from its start when none is left."""
    d = copy_golden(tmp_path / "golden-0")
    for off in GOLDEN_SNAPSHOTS:
        p = d / snapshot_name(off)
        raw = bytearray(p.read_bytes())
        raw[2] ^= 0xFF  # the stored CRC
        p.write_bytes(bytes(raw))
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG), recovery_point=322)
    try:
        assert lg.producer_state.encode_snapshot() == (GOLDEN_0 / snapshot_name(322)).read_bytes()
        assert_no_corrupt_snapshot(d)
    finally:
        lg.close()
    # The clean close writes Kafka's file again.
    assert (d / snapshot_name(322)).read_bytes() == (GOLDEN_0 / snapshot_name(322)).read_bytes()


def test_corrupt_newest_snapshot_falls_back_to_the_next_older_one(tmp_path):
    """Kafka's ProducerStateManager.loadFromSnapshot: a corrupt snapshot is deleted and the
    next newest one is loaded, then the log replayed from there. That older snapshot may hold
    producers whose batches retention has already deleted; their retries stay duplicates."""
    d = tmp_path / "t-0"
    lg = new_log(d, segment_bytes=1500)
    early = [idem_batch(500, 0, 3 * i, 3, ts=RECENT, tag=b"early" * 12) for i in range(2)]
    early_offsets = [(i.first_offset, i.last_offset) for i in (append(lg, b) for b in early)]
    _fill(lg)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) >= 4 and early_offsets[-1][1] < bases[1], "producer 500 only in the first segment"
    assert lg.maybe_increment_log_start_offset(bases[1])
    assert [s.base_offset for s in lg.delete_old_segments(RECENT + 1000)] == [0]
    end = lg.log_end_offset
    lg.close()
    assert snapshots_in(d) == [*bases[1:], end]
    newest = d / snapshot_name(end)
    raw = bytearray(newest.read_bytes())
    raw[-1] ^= 0x01
    newest.write_bytes(bytes(raw))
    lg = Log(d, "t", 0, lg.config, recovery_point=end, log_start_offset=bases[1])
    try:
        assert_no_corrupt_snapshot(d)
        # The snapshot at the last roll knows producer 500: its retry is answered, not written.
        info = append(lg, early[-1])
        assert (info.first_offset, info.last_offset) == early_offsets[-1]
        assert lg.log_end_offset == end
    finally:
        lg.close()


def test_snapshot_format_and_crc(tmp_path):
    """Version 1, CRC-32C over everything after it, one 46-byte entry per producer."""
    psm = ProducerStateManager(tmp_path, TP)
    for pid, epoch, seq, n, off in [(5, 1, 10, 3, 100), (2**40 + 3, 32767, INT_MAX - 1, 2, 7)]:
        h = validate_batches(idem_batch(pid, epoch, seq, n, ts=TS0 + pid % 1000))[0]
        psm.update(h, off + n - 1, h.max_timestamp)
    data = psm.encode_snapshot()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 2, 10 + 2 * 46)
    assert crc == crc32c.crc32c(data[6:])
    entries = list(struct.iter_unpack(">qhiqiqiq", data[10:]))
    assert entries == [
        (5, 1, 12, 102, 2, TS0 + 5 + 2, -1, -1),
        (2**40 + 3, 32767, INT_MAX, 8, 1, TS0 + (2**40 + 3) % 1000 + 1, -1, -1),
    ]
    psm.take_snapshot(109)
    other = ProducerStateManager(tmp_path, TP)
    assert other.load_snapshot(109)
    assert state(other) == state(psm)
    assert other.producers[2**40 + 3].batches[-1].first_seq == INT_MAX - 1


# =========================================================================== snapshots: lifecycle


def _fill(lg: Log, producers: int = 3, rounds: int = 12, n: int = 3) -> dict[int, list[tuple[bytes, int, int]]]:
    """Interleaved idempotent batches; per producer, (batch, first offset, last offset)."""
    sent: dict[int, list[tuple[bytes, int, int]]] = {p: [] for p in range(100, 100 + producers)}
    for r in range(rounds):
        for p in sent:
            b = idem_batch(p, 0, r * n, n, ts=RECENT + 10 * r, tag=b"x" * 60)
            info = append(lg, b)
            sent[p].append((b, info.first_offset, info.last_offset))
    return sent


def test_snapshots_are_taken_on_roll_and_clean_close(tmp_path):
    d = tmp_path / "t-0"
    lg = new_log(d, segment_bytes=1500)
    sent = _fill(lg)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) >= 4
    assert snapshots_in(d) == bases[1:]
    end = lg.log_end_offset
    lg.close()
    assert snapshots_in(d) == [*bases[1:], end]
    # A clean restart loads the snapshot at the log end: each producer's last batch is a
    # duplicate, the one before is out of order (the snapshot keeps only the last batch, as
    # in Kafka), the next sequence goes on.
    lg = Log(d, "t", 0, lg.config, recovery_point=end)
    try:
        for p, batches in sent.items():
            b, first, last = batches[-1]
            info = append(lg, b)
            assert (info.first_offset, info.last_offset) == (first, last), p
            with expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER):
                append(lg, batches[-2][0])
        assert lg.log_end_offset == end
        assert append(lg, idem_batch(100, 0, 36, 1)).first_offset == end
    finally:
        lg.close()


def test_unclean_restart_replays_from_the_newest_snapshot(tmp_path):
    """After a crash (no snapshot at the log end) the state is the newest snapshot plus the
    batches after it: every producer's last batch is a duplicate, and no retried batch is
    ever written twice. (Kafka 4.1 remembers only the last batch after a kill -9 -- its
    recovery snapshots the recovered segment -- and answers 45 for the ones before; a
    broker that replays them from the log may answer them as duplicates instead.)"""
    d = tmp_path / "t-0"
    lg = new_log(d, segment_bytes=1500)
    sent = _fill(lg)
    last_snapshot = snapshots_in(d)[-1]
    for p in sent:  # a few more batches after the last roll
        for _ in range(2):
            b = idem_batch(p, 0, sent_next_seq(sent[p]), 1, ts=RECENT + 5000)
            info = append(lg, b)
            sent[p].append((b, info.first_offset, info.last_offset))
    assert snapshots_in(d)[-1] == last_snapshot, "no roll after the extra batches"
    end = lg.log_end_offset
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(d, crashed)  # the files as a kill -9 leaves them
    lg.close()
    lg = Log(crashed, "t", 0, lg.config, recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == end
        assert snapshots_in(crashed)[-1] == last_snapshot
        for p, batches in sent.items():
            b, first, last = batches[-1]
            info = append(lg, b)
            assert (info.first_offset, info.last_offset) == (first, last), p
            for b, first, last in reversed(batches[-6:-1]):
                try:
                    info = append(lg, b)
                except ProducerStateError as e:
                    assert e.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, str(e)
                else:
                    assert (info.first_offset, info.last_offset) == (first, last), p
        assert lg.log_end_offset == end
        # The next sequences go on where the log ends.
        for p, batches in sent.items():
            assert append(lg, idem_batch(p, 0, sent_next_seq(batches), 1, ts=RECENT + 6000)).first_offset == lg.log_end_offset - 1
    finally:
        lg.close()


def sent_next_seq(batches: list[tuple[bytes, int, int]]) -> int:
    h = validate_batches(batches[-1][0])[0]
    return h.base_sequence + h.last_offset_delta + 1


def test_snapshots_are_deleted_with_their_segments(tmp_path):
    d = tmp_path / "t-0"
    lg = new_log(d, segment_bytes=1500)
    try:
        sent = _fill(lg)
        bases = [s.base_offset for s in lg.segments]
        assert snapshots_in(d) == bases[1:]
        assert lg.maybe_increment_log_start_offset(bases[3])
        removed = lg.delete_old_segments(RECENT + 1000)
        assert [s.base_offset for s in removed] == bases[:3]
        assert [s.base_offset for s in lg.segments] == bases[3:]
        # Kafka removes the snapshot of each deleted segment (at its base offset); the one
        # at the new first segment's base and later ones stay.
        assert snapshots_in(d) == bases[3:]
        # Producer state is not lost with the segments: retries are still recognised.
        for batches in sent.values():
            b, first, last = batches[-1]
            info = append(lg, b)
            assert (info.first_offset, info.last_offset) == (first, last)
            assert info.log_start_offset == bases[3]
    finally:
        lg.close()
    lg = Log(d, "t", 0, lg.config, recovery_point=lg.log_end_offset, log_start_offset=bases[3])
    try:
        assert all(o >= bases[3] for o in snapshots_in(d))
        b, first, last = sent[101][-1]
        info = append(lg, b)
        assert (info.first_offset, info.last_offset) == (first, last)
    finally:
        lg.close()


def test_snapshots_above_the_log_end_are_removed_after_truncation(tmp_path):
    d = tmp_path / "t-0"
    lg = new_log(d, segment_bytes=1500)
    sent = _fill(lg)
    end = lg.log_end_offset
    lg.close()
    assert snapshots_in(d)[-1] == end
    # The last batch torn in half: an unclean start truncates it away.
    last_b, last_first, last_last = max((x for v in sent.values() for x in v), key=lambda x: x[1])
    assert last_last == end - 1
    active = lg.segments[-1].base_offset
    log_file = d / f"{active:020d}.log"
    os.truncate(log_file, log_file.stat().st_size - len(last_b) // 2)
    lg = Log(d, "t", 0, lg.config, recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == last_first
        assert end not in snapshots_in(d), "a snapshot above the log end is removed"
        assert all(o <= lg.log_end_offset for o in snapshots_in(d))
        # The torn batch is not remembered: its retry is written (again) at the log end...
        info = append(lg, last_b)
        assert (info.first_offset, info.last_offset) == (last_first, last_last)
        assert lg.log_end_offset == end
        # ...and the producer's previous batch is still a duplicate.
        pid = validate_batches(last_b)[0].producer_id
        b, first, last = sent[pid][-2]
        assert (append(lg, b).first_offset, lg.log_end_offset) == (first, end)
    finally:
        lg.close()


@needs_golden
def test_golden_snapshot_above_a_shorter_log_is_removed(tmp_path):
    """Kafka's dir without its last segment (log end 267): the 322 snapshot goes, the 267
    one gives the state."""
    d = copy_golden(tmp_path / "golden-0", segments=(0, 158))
    lg = Log(d, "golden", 0, LogConfig(None, GOLDEN_CONFIG), recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == 267
        assert snapshots_in(d) == [158, 267]
        assert lg.producer_state.encode_snapshot() == (GOLDEN_0 / snapshot_name(267)).read_bytes()
    finally:
        lg.close(trim=False)


# =========================================================================== kafka-dump-log


@pytest.mark.skipif(
    shutil.which("java") is None or not DUMP_LOG.exists(),
    reason=f"needs java on PATH and Kafka's kafka-dump-log.sh at {DUMP_LOG}",
)
def test_kafka_dump_log_decodes_our_snapshot(tmp_path):
    d = tmp_path / "t-0"
    lg = new_log(d)
    append(lg, idem_batch(0, 0, 0, 5, ts=TS0))
    append(lg, idem_batch(123_456_789_012, 7, 100, 3, ts=TS0 + 50))
    append(lg, idem_batch(0, 0, 5, 2, ts=TS0 + 60))
    append(lg, idem_batch(99, 0, INT_MAX - 1, 4, ts=TS0 + 70))  # MAX-1, MAX, 0, 1
    end = lg.log_end_offset
    lg.close()
    name = snapshot_name(end)
    proc = subprocess.run([str(DUMP_LOG), "--files", name], cwd=d, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    expected = [f"Dumping {name}"] + [
        f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {ts} firstSequence: {first} lastSequence: {last} lastOffset: {off} offsetDelta: {delta} timestamp: {ts}"
        for pid, epoch, ts, first, last, off, delta in [
            (0, 0, TS0 + 61, 5, 6, 9, 1),
            (99, 0, TS0 + 73, INT_MAX - 1, 1, 13, 3),
            (123_456_789_012, 7, TS0 + 52, 100, 102, 7, 2),
        ]
    ]
    assert proc.stdout.splitlines() == expected, proc.stdout + proc.stderr
