"""RecordBatch v2 with records: spec, round trips, errors, Kafka 4.0.0 golden logs."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

import crc32c
import pytest
from construct import ConstructError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kafka_sidecar.protocol.compression import (
    CODEC_NAMES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
)
from kafka_sidecar.protocol.record_batch import (
    ATTRIBUTES_POS,
    CRC_POS,
    CorruptRecordError,
    read_header,
    validate_batches,
)
from kafka_sidecar.protocol.records import (
    LOG_APPEND_TIME,
    Record,
    RecordBatch,
    decode_batches,
    decode_records,
    encode_batch,
    encode_columns,
    iter_batches,
)

from tests.record_spec import BatchBodySpec, RecordBatchSpec, RecordSpec, RecordsSpec
from tests.support import GOLDEN

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

LOGDIR = GOLDEN / "kafka-4.0.0-logdir"


def _sample_records(base: int = 0, ts: int = 1_700_000_000_000) -> list[Record]:
    return [
        Record(base + 0, ts, b"key-0", b"value-0"),
        Record(base + 1, ts + 10, None, b"null key"),
        Record(base + 2, ts + 20, b"null value", None),
        Record(base + 3, ts + 30, None, None),
        Record(base + 4, ts + 40, b"", b""),
        Record(base + 5, ts - 5_000, b"k", b"v", [("h1", b"hv1"), ("h2", b""), ("h3", None)]),
        Record(base + 6, ts + 60, b"k", b"v", [("dup", b"a"), ("dup", b"b"), ("dup", None)]),
        Record(base + 7, ts + 70, b"\x00\xff" * 10, b"\x00" * 70_000, [("ünïcödé-ключ", b"\xff")]),
        Record(base + 8, ts + 80, b"k8", b"x" * 200, [("", b"empty header key")]),
    ]


# ------------------------------------------------------------------ the spec


def test_record_wire_layout():
    # length 7, attributes 0, timestampDelta 0, offsetDelta 1, key "k", value null, 0 headers
    assert RecordSpec.build(
        {
            "attributes": 0,
            "timestamp_delta": 0,
            "offset_delta": 1,
            "key": b"k",
            "value": None,
            "headers": [],
        }
    ) == bytes.fromhex("0e 00 00 02 02 6b 01 00")
    # zigzag varlong: -1 -> 01, 64 -> 80 01; header with null value
    built = RecordSpec.build(
        {
            "attributes": 0,
            "timestamp_delta": -1,
            "offset_delta": 64,
            "key": None,
            "value": b"",
            "headers": [{"key": "h", "value": None}],
        }
    )
    assert built == bytes.fromhex("14 00 01 80 01 01 00 02 02 68 01")
    parsed = RecordSpec.parse(built)
    assert (parsed.timestamp_delta, parsed.offset_delta, parsed.key, parsed.value) == (
        -1,
        64,
        None,
        b"",
    )
    assert [(h.key, h.value) for h in parsed.headers] == [("h", None)]


def test_batch_header_layout_matches_record_batch_module():
    records = _sample_records(base=100)
    raw = encode_batch(
        records,
        base_offset=100,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        partition_leader_epoch=5,
        compression=ZSTD,
    )
    h = read_header(raw)
    assert h.base_offset == 100
    assert h.size == len(raw)
    assert h.partition_leader_epoch == 5
    assert h.magic == 2
    assert h.crc == crc32c.crc32c(raw[ATTRIBUTES_POS:])
    assert h.attributes == ZSTD
    assert h.last_offset_delta == 8
    assert h.base_timestamp == records[0].timestamp
    assert h.max_timestamp == max(r.timestamp for r in records)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (42, 3, 7, 9)
    [batch] = decode_batches(raw)
    assert batch.crc == h.crc
    assert (batch.base_offset, batch.batch_length, batch.partition_leader_epoch) == (
        100,
        h.batch_length,
        5,
    )
    assert batch.last_sequence == 15
    assert batch.last_offset == 108 and batch.next_offset == 109
    assert batch.size == len(raw)


# -------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: CODEC_NAMES[c])
def test_round_trip_every_codec(codec):
    records = _sample_records()
    raw = encode_batch(records, compression=codec)
    [h] = validate_batches(raw)
    assert h.compression == codec
    [batch] = decode_batches(raw)
    assert batch.compression == codec
    assert batch.records == records
    assert batch.record_count == len(records)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1
    assert not (batch.is_transactional or batch.is_control or batch.has_delete_horizon)
    assert batch.timestamp_type == 0
    assert batch.delete_horizon_ms is None


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: CODEC_NAMES[c])
def test_many_batches_and_truncated_tail(codec):
    batches = [
        encode_batch(_sample_records(base=b * 9), base_offset=b * 9, compression=codec)
        for b in range(4)
    ]
    log = b"".join(batches)
    assert len(validate_batches(log)) == 4
    decoded = decode_batches(log)
    assert [b.base_offset for b in decoded] == [0, 9, 18, 27]
    assert [r.offset for b in decoded for r in b.records] == list(range(36))
    # any cut inside the last batch drops just that batch
    start_of_last = len(log) - len(batches[-1])
    for cut in (
        start_of_last + 1,
        start_of_last + 11,
        start_of_last + 12,
        start_of_last + 61,
        len(log) - 1,
    ):
        assert [b.base_offset for b in decode_batches(log[:cut])] == [0, 9, 18]
    assert decode_batches(b"") == []
    assert decode_batches(memoryview(log)) == decoded
    assert decode_batches(bytearray(log)) == decoded


def test_single_record_and_empty_headers():
    rec = Record(0, 0, None, None, [])
    [batch] = decode_batches(encode_batch([rec]))
    assert batch.records == [rec]
    assert batch.last_offset_delta == 0
    assert (batch.base_timestamp, batch.max_timestamp) == (0, 0)


def test_default_headers_is_empty_list():
    assert Record(0, 1, b"k", b"v").headers == []


def test_offset_gaps_and_base_offset():
    # as left by compaction: gaps inside a batch; deltas relative to base_offset
    records = [
        Record(1000, 5, b"a", b"1"),
        Record(1003, 6, b"b", b"2"),
        Record(1009, 7, b"c", None),
    ]
    raw = encode_batch(records, base_offset=1000)
    [batch] = decode_batches(raw)
    assert batch.last_offset_delta == 9
    assert batch.record_count == 3
    assert batch.records == records
    # base offset below the first record's offset
    [batch] = decode_batches(encode_batch(records, base_offset=990))
    assert batch.base_offset == 990 and batch.last_offset == 1009
    assert batch.records == records


def test_timestamps_explicit_and_negative_deltas():
    records = [
        Record(0, 2_000_000_000_000, b"a", b"1"),
        Record(1, 1, b"b", b"2"),
        Record(2, 5, b"c", b"3"),
    ]
    [batch] = decode_batches(encode_batch(records))
    assert batch.base_timestamp == 2_000_000_000_000
    assert batch.max_timestamp == 2_000_000_000_000
    assert batch.records == records
    [batch] = decode_batches(encode_batch(records, base_timestamp=0, max_timestamp=123))
    assert (batch.base_timestamp, batch.max_timestamp) == (0, 123)
    assert batch.records == records


def test_producer_fields_and_flags():
    records = _sample_records(base=50)
    raw = encode_batch(
        records,
        base_offset=50,
        producer_id=1234567890123,
        producer_epoch=32767,
        base_sequence=2147483640,
        partition_leader_epoch=9,
        is_transactional=True,
        compression=LZ4,
    )
    [h] = validate_batches(raw)
    [batch] = decode_batches(raw)
    assert batch.is_transactional and not batch.is_control
    assert batch.attributes == 0x10 | LZ4
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        1234567890123,
        32767,
        2147483640,
    )
    assert batch.last_sequence == (2147483640 + 8) % (1 << 31)
    assert batch.partition_leader_epoch == 9
    assert [r.offset for r in batch.records] == list(range(50, 59))


def test_control_batch():
    # a COMMIT marker: key = version 0 + type 1, value = version 0 + coordinator epoch
    marker = Record(0, 1_700_000_000_000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")
    raw = encode_batch(
        [marker], producer_id=7, producer_epoch=1, is_transactional=True, is_control=True
    )
    validate_batches(raw)
    [batch] = decode_batches(raw)
    assert batch.is_control and batch.is_transactional
    assert batch.attributes == 0x30
    assert batch.records == [marker]


def test_log_append_time():
    records = _sample_records()
    raw = encode_batch(records, timestamp_type=LOG_APPEND_TIME, max_timestamp=1_800_000_000_000)
    validate_batches(raw)
    [batch] = decode_batches(raw)
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert batch.attributes & 0x08
    assert batch.max_timestamp == 1_800_000_000_000
    # Kafka reports the batch's maxTimestamp as every record's timestamp
    assert {r.timestamp for r in batch.records} == {1_800_000_000_000}
    assert [(r.key, r.value, r.headers) for r in batch.records] == [
        (r.key, r.value, r.headers) for r in records
    ]


def test_delete_horizon():
    records = [Record(10, 1_700_000_000_010, b"a", None), Record(12, 1_700_000_000_012, b"b", b"x")]
    horizon = 1_795_385_201_254
    raw = encode_batch(records, base_offset=10, delete_horizon_ms=horizon)
    validate_batches(raw)
    [batch] = decode_batches(raw)
    assert batch.has_delete_horizon and batch.attributes & 0x40
    assert batch.base_timestamp == horizon == batch.delete_horizon_ms
    assert batch.max_timestamp == 1_700_000_000_012
    assert batch.records == records  # negative deltas from the horizon give the CreateTimes back
    with pytest.raises(ValueError):
        encode_batch(records, base_offset=10, delete_horizon_ms=horizon, base_timestamp=5)


def test_empty_batch_keeps_last_offset_delta():
    # what the cleaner leaves to preserve producer state when all records are removed
    raw = encode_batch(
        [], base_offset=300, last_offset_delta=4, producer_id=8, producer_epoch=0, base_sequence=0
    )
    [h] = validate_batches(raw)
    assert (h.record_count, h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (
        0,
        4,
        -1,
        -1,
    )
    [batch] = decode_batches(raw)
    assert batch.records == [] and batch.last_offset == 304
    assert len(raw) == 61


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: CODEC_NAMES[c])
def test_empty_batch_every_codec(codec):
    raw = encode_batch([], compression=codec)
    validate_batches(raw)
    [batch] = decode_batches(raw)
    assert batch.records == [] and batch.compression == codec


def test_large_batch():
    records = [
        Record(i, 1_700_000_000_000 + i, f"key-{i % 50}".encode(), b"v" * (i % 300))
        for i in range(5000)
    ]
    for codec in (NONE, ZSTD):
        [batch] = decode_batches(encode_batch(records, compression=codec))
        assert batch.records == records
        assert batch.last_offset_delta == 4999


# ------------------------------------------------------------------- errors


def test_encode_rejects_bad_offsets_and_options():
    with pytest.raises(ValueError, match="strictly increasing"):
        encode_batch([Record(1, 0, None, None), Record(1, 0, None, None)])
    with pytest.raises(ValueError, match="strictly increasing"):
        encode_batch([Record(2, 0, None, None), Record(1, 0, None, None)])
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, None)], base_offset=6)
    with pytest.raises(ValueError, match="unknown compression codec"):
        encode_batch([Record(0, 0, None, None)], compression=5)
    with pytest.raises(ValueError, match="timestamp_type"):
        encode_batch([Record(0, 0, None, None)], timestamp_type=2)
    with pytest.raises(ValueError, match="last_offset_delta"):
        encode_batch([Record(0, 0, None, None), Record(3, 0, None, None)], last_offset_delta=2)


def _recrc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, CRC_POS, crc32c.crc32c(bytes(raw[ATTRIBUTES_POS:])))
    return bytes(raw)


def test_crc_mismatch():
    raw = bytearray(encode_batch(_sample_records()))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batches(bytes(raw))
    with pytest.raises(CorruptRecordError):
        validate_batches(bytes(raw))


def test_verify_crc_off():
    records = _sample_records()
    raw = bytearray(encode_batch(records))
    struct.pack_into(">I", raw, CRC_POS, 12345)
    [batch] = decode_batches(bytes(raw), verify_crc=False)
    assert batch.records == records and batch.crc == 12345


def test_bad_magic():
    raw = bytearray(encode_batch(_sample_records()))
    raw[16] = 1
    with pytest.raises(CorruptRecordError):
        decode_batches(bytes(raw))


def test_bad_batch_length():
    raw = bytearray(encode_batch(_sample_records()))
    struct.pack_into(">i", raw, 8, 10)
    with pytest.raises(CorruptRecordError, match="length"):
        decode_batches(bytes(raw))


@pytest.mark.parametrize("count", [0, 8, 10, -1])
def test_record_count_mismatch(count):
    raw = bytearray(encode_batch(_sample_records()))  # 9 records
    struct.pack_into(">i", raw, 57, count)
    with pytest.raises(CorruptRecordError):
        decode_batches(_recrc(raw))


def test_bad_compressed_payload():
    raw = bytearray(encode_batch(_sample_records(), compression=GZIP))
    raw[70:80] = b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="gzip"):
        decode_batches(_recrc(raw))


def test_wrong_codec_bit():
    raw = bytearray(encode_batch(_sample_records(), compression=NONE))
    struct.pack_into(">h", raw, ATTRIBUTES_POS, ZSTD)
    with pytest.raises(CorruptRecordError):
        decode_batches(_recrc(raw))


# ------------------------------------------------- cross-check: kafka-python


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python imports
def test_kafka_python_reads_our_batches():
    from kafka.record.default_records import DefaultRecordBatch

    records = _sample_records(base=0)
    for codec in (NONE, GZIP):  # the codecs kafka-python can use without extra packages
        raw = encode_batch(
            records, compression=codec, producer_id=3, producer_epoch=0, base_sequence=0
        )
        kb = DefaultRecordBatch(raw)
        assert kb.validate_crc()
        got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in kb]
        want = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
        assert got == want


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python imports
def test_we_read_kafka_python_batches():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    records = _sample_records(base=0)
    for codec in (NONE, GZIP):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=False,
            producer_id=11, producer_epoch=2, base_sequence=5, batch_size=1 << 20,
        )  # fmt: skip
        for r in records:
            builder.append(
                r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers
            )
        raw = bytes(builder.build())
        validate_batches(raw)
        [batch] = decode_batches(raw)
        assert batch.records == records
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (11, 2, 5)
        if codec == NONE:
            again = encode_batch(
                batch.records,
                producer_id=11,
                producer_epoch=2,
                base_sequence=5,
                partition_leader_epoch=batch.partition_leader_epoch,
            )
            assert again == raw


# ------------------------------------------------- golden: Apache Kafka 4.0.0


def _needs(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"golden data not found at {path}")
    return path


def _read_log(partition_dir: Path) -> list[tuple[bytes, RecordBatch]]:
    """(Kafka's exact bytes, decoded batch) for every batch of every segment."""
    out = []
    for seg in sorted(_needs(partition_dir).glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        for batch in decode_batches(data):
            out.append((data[pos : pos + batch.size], batch))
            pos += batch.size
        assert pos == len(data), f"{seg.name}: trailing bytes"
    return out


def _reencode(batch: RecordBatch) -> bytes:
    return encode_batch(
        batch.records,
        base_offset=batch.base_offset,
        compression=batch.compression,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        partition_leader_epoch=batch.partition_leader_epoch,
        timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        delete_horizon_ms=batch.delete_horizon_ms,
        max_timestamp=batch.max_timestamp,
    )


def _golden_bytes(field):
    """records.jsonl encoding -> (kind, value) comparable with real bytes."""
    if field is None:
        return None
    if isinstance(field, dict):
        return ("sha256", field["len"], field["sha256"])
    return ("b64", base64.b64decode(field))


def _actual_bytes(data: bytes | None, like):
    if data is None:
        return None
    if like is not None and like[0] == "sha256":
        return ("sha256", len(data), hashlib.sha256(data).hexdigest())
    return ("b64", data)


def test_golden_produce_fetch_log():
    expected = [
        json.loads(line)
        for line in _needs(GOLDEN / "produce-fetch" / "records.jsonl").read_text().splitlines()
        if line.strip()
    ]
    batches = _read_log(LOGDIR / "golden-0")
    assert len(batches) == 37
    assert {b.compression for _, b in batches} == {NONE, GZIP, SNAPPY, LZ4, ZSTD}
    records = [r for _, b in batches for r in b.records]
    assert len(records) == len(expected) == 322
    for rec, exp in zip(records, expected, strict=True):
        assert rec.offset == exp["offset"]
        assert rec.timestamp == exp["timestamp"], rec.offset
        for name in ("key", "value"):
            want = _golden_bytes(exp[name])
            assert _actual_bytes(getattr(rec, name), want) == want, (rec.offset, name)
        want_headers = [(k, _golden_bytes(v)) for k, v in exp["headers"]]
        got_headers = [
            (k, _actual_bytes(v, w))
            for (k, v), (_, w) in zip(rec.headers, want_headers, strict=True)
        ]
        assert got_headers == want_headers, rec.offset
    # records.jsonl's batch index groups records exactly like the log
    by_batch: dict[int, list[int]] = {}
    for exp in expected:
        by_batch.setdefault(exp["batch"], []).append(exp["offset"])
    assert [[r.offset for r in b.records] for _, b in batches] == list(by_batch.values())
    # the stored codec is the producer's, or none where kafka-python found compression did not
    # pay (the incompressible snappy batch 21)
    for (_, b), offsets in zip(batches, by_batch.values(), strict=True):
        produced = expected[offsets[0]]["compression"]
        assert CODEC_NAMES[b.compression] in (produced, "none")
    # header fields as kafka-dump-log.sh reports them
    first = batches[0][1]
    assert (first.base_offset, first.last_offset, first.producer_id, first.producer_epoch) == (
        0,
        9,
        2,
        0,
    )
    assert (first.partition_leader_epoch, first.crc, first.size) == (0, 2219147691, 305)
    outlier = next(b for _, b in batches if b.base_offset <= 315 <= b.last_offset)
    assert outlier.max_timestamp == 1700010000000 and outlier.compression == ZSTD


def test_golden_reencode():
    batches = _read_log(LOGDIR / "golden-0")
    identical = 0
    for kafka_bytes, batch in batches:
        ours = _reencode(batch)
        [h] = validate_batches(ours)
        assert h.base_offset == batch.base_offset
        assert h.last_offset_delta == batch.last_offset_delta
        assert h.record_count == batch.record_count
        assert h.max_timestamp == batch.max_timestamp
        assert h.base_timestamp == batch.base_timestamp
        assert h.attributes == batch.attributes
        [again] = decode_batches(ours)
        assert again.records == batch.records
        if batch.compression == NONE:
            assert ours == kafka_bytes, f"batch at offset {batch.base_offset}"
            identical += 1
        # max timestamp computed from the records matches Kafka's header too
        plain = encode_batch(batch.records, base_offset=batch.base_offset)
        assert read_header(plain).max_timestamp == batch.max_timestamp
    assert identical >= 20


def test_golden_compacted_log_with_delete_horizon():
    expected = [
        json.loads(line)
        for line in _needs(GOLDEN / "compaction" / "after-clean.jsonl").read_text().splitlines()
        if line.strip()
    ]
    batches = _read_log(LOGDIR / "golden-compact-0")
    records = [r for _, b in batches for r in b.records]
    got = [
        (r.offset, r.timestamp, r.key.decode(), None if r.value is None else r.value.decode())
        for r in records
    ]
    want = [(e["offset"], e["timestamp"], e["key"], e["value"]) for e in expected]
    assert got == want
    horizon_batches = [b for _, b in batches if b.has_delete_horizon]
    assert horizon_batches, "the cleaner's delete-horizon batch is gone from the golden log"
    for b in horizon_batches:
        assert b.delete_horizon_ms == b.base_timestamp == 1795385201254
        # record timestamps are still the CreateTimes: baseTimestamp + (negative) delta
        assert all(r.timestamp < b.base_timestamp for r in b.records)
    identical = 0
    for kafka_bytes, batch in batches:
        ours = _reencode(batch)
        validate_batches(ours)
        assert decode_batches(ours)[0].records == batch.records
        if batch.compression == NONE:
            # Kafka's cleaner rewrote these (delete-horizon batch included): same bytes
            assert ours == kafka_bytes, f"batch at offset {batch.base_offset}"
            identical += 1
    assert identical == len(batches)


# ------------------------------------- the hand-written codec against the construct spec
#
# decode_batches / encode_batch do by hand what RecordBatchSpec / RecordsSpec specify. The
# reference functions below are the construct-only implementations (what the module did
# before the fast codec): every batch must give the same bytes and the same objects both
# ways, and every malformed records section must be rejected by both.

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _spec_encode_batch(
    records,
    *,
    base_offset=0,
    compression=0,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    partition_leader_epoch=-1,
    timestamp_type=0,
    is_transactional=False,
    is_control=False,
    base_timestamp=None,
    max_timestamp=None,
    delete_horizon_ms=None,
    last_offset_delta=None,
):
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else -1
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=-1)
    built = b"".join(
        RecordSpec.build(
            {
                "attributes": 0,
                "timestamp_delta": r.timestamp - base_timestamp,
                "offset_delta": r.offset - base_offset,
                "key": r.key,
                "value": r.value,
                "headers": [{"key": k, "value": v} for k, v in r.headers],
            }
        )
        for r in records
    )
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - base_offset if records else 0
    attributes = (
        compression
        | (0x08 if timestamp_type else 0)
        | (0x10 if is_transactional else 0)
        | (0x20 if is_control else 0)
        | (0x40 if delete_horizon_ms is not None else 0)
    )
    section = compress(compression, built)
    batch_length = 9 + 40 + len(section)
    body = BatchBodySpec.build(
        {
            "attributes": attributes,
            "last_offset_delta": last_offset_delta,
            "base_timestamp": base_timestamp,
            "max_timestamp": max_timestamp,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "base_sequence": base_sequence,
            "record_count": len(records),
            "records": section,
        },
        batch_length=batch_length,
    )
    return RecordBatchSpec.build(
        {
            "base_offset": base_offset,
            "batch_length": batch_length,
            "partition_leader_epoch": partition_leader_epoch,
            "crc": crc32c.crc32c(body),
            "body": {"data": body},
        }
    )


def _spec_decode_batches(data: bytes, verify_crc: bool = True) -> list[RecordBatch]:
    """decode_batches with construct only; raises CorruptRecordError like it."""
    batches, pos = [], 0
    while len(data) - pos >= 12:
        batch_length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if batch_length < 49:
            raise CorruptRecordError(f"batch at byte {pos} declares length {batch_length}")
        if pos + batch_length + 12 > len(data):
            break
        raw = data[pos : pos + batch_length + 12]
        try:
            parsed = RecordBatchSpec.parse(raw)
        except ConstructError as e:
            raise CorruptRecordError(f"batch at byte {pos}: {e}") from e
        body = parsed.body.value
        if verify_crc and crc32c.crc32c(parsed.body.data) != parsed.crc:
            raise CorruptRecordError(f"batch at byte {pos}: CRC")
        if body.record_count < 0:
            raise CorruptRecordError(f"batch at byte {pos}: record count")
        try:
            section = decompress(body.attributes & 7, body.records)
            recs = RecordsSpec.parse(section, count=body.record_count).records
        except (ValueError, ConstructError, UnicodeDecodeError) as e:
            raise CorruptRecordError(f"batch at byte {pos}: {e}") from e
        append_time = bool(body.attributes & 0x08)
        fields = dict(body)
        del fields["_io"], fields["records"]
        batch = RecordBatch(
            base_offset=parsed.base_offset,
            batch_length=parsed.batch_length,
            partition_leader_epoch=parsed.partition_leader_epoch,
            magic=parsed.magic,
            crc=parsed.crc,
            **fields,
        )
        batch.records = [
            Record(
                batch.base_offset + r.offset_delta,
                batch.max_timestamp if append_time else batch.base_timestamp + r.timestamp_delta,
                r.key,
                r.value,
                [(h.key, h.value) for h in r.headers],
            )
            for r in recs
        ]
        batches.append(batch)
        pos += batch_length + 12
    return batches


def _outcome(fn, *args):
    """('ok', result) or ('corrupt', None); any other exception propagates."""
    try:
        return "ok", fn(*args)
    except CorruptRecordError:
        return "corrupt", None


def _raw_record(body: bytes) -> bytes:
    """A record: its (canonical) length varint, then ``body`` as given."""
    return _zz(len(body)) + body


def _zz(n: int) -> bytes:
    v = (n << 1) if n >= 0 else ((-n) << 1) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _batch_around(section: bytes, count: int, codec: int = NONE, base_offset: int = 0) -> bytes:
    """A batch with this (uncompressed) records section and record count, CRC fixed."""
    shell = bytearray(encode_batch([], base_offset=base_offset, compression=NONE))
    payload = compress(codec, section)
    struct.pack_into(">i", shell, 8, 49 + len(payload))
    struct.pack_into(">h", shell, ATTRIBUTES_POS, codec)
    struct.pack_into(">i", shell, 57, count)
    return _recrc(bytearray(bytes(shell) + payload))


@st.composite
def _batches(draw):
    """(records, encode_batch options) covering the format's corners."""
    n = draw(st.integers(0, 12))
    base_offset = draw(st.one_of(st.integers(0, 1000), st.integers(0, INT64_MAX - INT32_MAX)))
    deltas, d = [], -1
    for _ in range(n):
        d += draw(st.one_of(st.integers(1, 3), st.integers(1, 70), st.integers(1, 1 << 20)))
        deltas.append(d)
    if deltas and deltas[-1] > INT32_MAX:
        deltas = deltas[: sum(1 for x in deltas if x <= INT32_MAX)]
    if deltas and draw(st.booleans()):
        deltas[-1] = max(deltas[-1], draw(st.integers(deltas[-1], INT32_MAX)))
    base_ts = draw(
        st.one_of(st.just(-1), st.integers(0, 2_000_000_000_000), st.integers(INT64_MIN, INT64_MAX))
    )
    lo, hi = max(INT64_MIN, base_ts + INT64_MIN), min(INT64_MAX, base_ts + INT64_MAX)
    ts_strategy = st.one_of(
        st.integers(max(lo, base_ts - 100), min(hi, base_ts + 100)),
        st.integers(max(lo, base_ts - 10**7), min(hi, base_ts + 10**7)),
        st.integers(lo, hi),
        st.sampled_from([lo, hi]),
    )
    blob = st.one_of(st.none(), st.binary(max_size=70), st.binary(min_size=100, max_size=9000))
    headers = st.lists(
        st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=200))), max_size=4
    )
    records = [
        Record(base_offset + delta, draw(ts_strategy), draw(blob), draw(blob), draw(headers))
        for delta in deltas
    ]
    opts = {
        "base_offset": base_offset,
        "compression": draw(st.sampled_from(ALL_CODECS)),
        "producer_id": draw(st.one_of(st.just(-1), st.integers(0, INT64_MAX))),
        "producer_epoch": draw(st.integers(-1, 32767)),
        "base_sequence": draw(st.one_of(st.just(-1), st.integers(0, INT32_MAX))),
        "partition_leader_epoch": draw(st.integers(-1, INT32_MAX)),
        "timestamp_type": draw(st.sampled_from([0, LOG_APPEND_TIME])),
        "is_transactional": draw(st.booleans()),
        "is_control": draw(st.booleans()),
    }
    if draw(st.booleans()):
        opts["delete_horizon_ms"] = base_ts
    else:
        opts["base_timestamp"] = base_ts
    if draw(st.booleans()):
        opts["max_timestamp"] = draw(st.integers(INT64_MIN, INT64_MAX))
    if draw(st.booleans()):
        last = deltas[-1] if deltas else 0
        opts["last_offset_delta"] = draw(st.integers(last, INT32_MAX))
    return records, opts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches())
def test_fast_codec_matches_construct_spec(batch):
    records, opts = batch
    try:
        spec_raw = _spec_encode_batch(records, **opts)
    except ConstructError:  # e.g. a computed maxTimestamp beyond int64: both refuse
        with pytest.raises(ValueError):
            encode_batch(records, **opts)
        return
    raw = encode_batch(records, **opts)
    assert raw == spec_raw
    assert encode_columns(*_columns(records), **opts) == raw
    fast = decode_batches(raw)
    assert fast == _spec_decode_batches(raw)
    assert _decode_columns(raw) == _columns(r for b in fast for r in b.records)
    [b] = fast
    if opts["timestamp_type"] == LOG_APPEND_TIME:
        assert [r.timestamp for r in b.records] == [b.max_timestamp] * len(records)
        assert [(r.offset, r.key, r.value, r.headers) for r in b.records] == [
            (r.offset, r.key, r.value, r.headers) for r in records
        ]
    else:
        assert b.records == records
    # two batches back to back, the second one cut: the same batches from both
    both = raw + raw
    for cut in (len(both), len(both) - 1, len(raw) + 12):
        assert decode_batches(both[:cut]) == _spec_decode_batches(both[:cut])


_INTERESTING = [0x00, 0x01, 0x02, 0x03, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches(), st.data())
def test_mutated_records_sections_rejected_by_both(batch, data):
    records, opts = batch
    records = records[:6]
    for r in records:  # keep sections small, so that mutations hit the structure
        r.value = r.value[:50] if r.value else r.value
    opts = {**opts, "compression": NONE, "timestamp_type": 0}
    opts.pop("last_offset_delta", None)
    try:
        raw = encode_batch(records, **opts)
    except ValueError:
        return
    section = bytearray(raw[61:])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        kind = data.draw(st.sampled_from(["set", "set", "insert", "delete", "truncate", "extend"]))
        at = data.draw(st.integers(0, len(section)), label="at")
        byte = data.draw(st.one_of(st.sampled_from(_INTERESTING), st.integers(0, 255)))
        if kind == "set" and at < len(section):
            section[at] = byte
        elif kind == "insert":
            section[at:at] = bytes([byte])
        elif kind == "delete":
            del section[at : at + data.draw(st.integers(1, 6))]
        elif kind == "truncate":
            del section[at:]
        elif kind == "extend":
            section += bytes([byte]) * data.draw(st.integers(1, 6))
    count = len(records) + data.draw(st.sampled_from([0, 0, 0, -1, 1]), label="count change")
    codec = data.draw(st.sampled_from(ALL_CODECS), label="codec")
    buf = _batch_around(bytes(section), count, codec, opts["base_offset"])
    fast = _outcome(decode_batches, buf)
    spec = _outcome(_spec_decode_batches, buf)
    assert fast == spec
    columns = _outcome(_decode_columns, buf)
    assert columns[0] == fast[0]
    if fast[0] == "ok":
        assert columns[1] == _columns(r for r in fast[1][0].records)
    event(fast[0])
    if fast[0] == "ok":
        assert fast[1][0].record_count == len(fast[1][0].records)


def test_corrupt_batch_message_names_its_position():
    good = encode_batch(_sample_records())
    bad = _batch_around(b"\x02\x00", 1)  # a record of 1 byte: attributes only
    with pytest.raises(
        CorruptRecordError, match=f"batch at byte {len(good)}: records do not match"
    ):
        decode_batches(good + bad)


# Each malformed record below is refused by both codecs, with Kafka (DefaultRecord.readFrom).
_KEY_K = b"\x02k"  # key length 1, "k"
_NO_HEADERS = b"\x00"


@pytest.mark.parametrize(
    "section, count, why",
    [
        (
            _raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01" + _NO_HEADERS) + b"\x00",
            1,
            "trailing byte",
        ),
        (
            _raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01" + _NO_HEADERS + b"\x00"),
            1,
            "record length slack",
        ),
        (_raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01"), 1, "record ends before its header count"),
        (_zz(-2) + b"\x00" * 6, 1, "negative record length"),
        (_raw_record(b"\x00\x00\x00\x03\x01" + _NO_HEADERS), 1, "key length -2"),
        (_raw_record(b"\x00\x00\x00" + _KEY_K + b"\x03" + _NO_HEADERS), 1, "value length -2"),
        (_raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01\x02\x02h\x03"), 1, "header value length -2"),
        (_raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01\x01"), 1, "header count -1"),
        (
            _raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01\x02\x01\x01"),
            1,
            "header key length -1 (null)",
        ),
        (
            _raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01\x02\x04\xff\xfe\x01"),
            1,
            "header key not UTF-8",
        ),
        (_raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01\x02\x02h"), 1, "header without its value"),
        (
            _raw_record(b"\x00\x00\x80\x80\x80\x80\x80\x00" + _KEY_K + b"\x01" + _NO_HEADERS),
            1,
            "6-byte varint",
        ),
        (
            _raw_record(b"\x00" + b"\x80" * 10 + b"\x00\x00" + _KEY_K + b"\x01" + _NO_HEADERS),
            1,
            "11-byte varlong",
        ),
        (
            _raw_record(b"\x00\x00\x00\x7f" + _KEY_K + b"\x01" + _NO_HEADERS),
            1,
            "key length overruns",
        ),
        (b"", 1, "no record at all"),
        (
            _raw_record(b"\x00\x00\x00" + _KEY_K + b"\x01" + _NO_HEADERS),
            2,
            "fewer records than counted",
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
@pytest.mark.parametrize("codec", [NONE, LZ4], ids=lambda c: CODEC_NAMES[c])
def test_malformed_records_rejected_by_both(section, count, why, codec):
    buf = _batch_around(section, count, codec)
    with pytest.raises(CorruptRecordError, match="batch at byte 0"):
        decode_batches(buf)
    with pytest.raises(CorruptRecordError):
        _spec_decode_batches(buf)


def test_kafka_varint_edge_cases_accepted_by_both():
    # Over-long but terminated encodings are fine (Kafka's readVarint reads them); bits of a
    # 5th varint byte beyond 32 and of a 10th varlong byte beyond 64 are dropped, as Java does.
    cases = [
        # offsetDelta 3 written in 2 bytes (0x86 0x00), timestampDelta -1 as 0x81 0x00
        (b"\x00\x81\x00\x86\x00" + _KEY_K + b"\x01" + _NO_HEADERS, 3, -1),
        # offsetDelta: 5 bytes whose value is 2^32 + 4 -> 4 after dropping bit 32
        (b"\x00\x00\x84\x80\x80\x80\x10" + _KEY_K + b"\x01" + _NO_HEADERS, 2, 0),
        # timestampDelta: 10 bytes, raw 2^64 + 3 -> 3 -> zigzag -2
        (b"\x00\x83" + b"\x80" * 8 + b"\x02" + b"\x00" + _KEY_K + b"\x01" + _NO_HEADERS, 0, -2),
        # int32 extremes as 5-byte varints
        (b"\x00\x00\xfe\xff\xff\xff\x0f" + _KEY_K + b"\x01" + _NO_HEADERS, INT32_MAX, 0),
    ]
    for body, offset_delta, ts_delta in cases:
        buf = _batch_around(_raw_record(body), 1, NONE)
        [fast] = decode_batches(buf)
        assert fast == _spec_decode_batches(buf)[0]
        [r] = fast.records
        assert (r.offset, r.timestamp - fast.base_timestamp, r.key, r.value) == (
            offset_delta,
            ts_delta,
            b"k",
            None,
        )
    # the smallest int32 (zigzag 2^32 - 1) and int64
    body = (
        b"\x00" + b"\xff" * 9 + b"\x01" + b"\xff\xff\xff\xff\x0f" + _KEY_K + b"\x01" + _NO_HEADERS
    )
    [b] = decode_batches(_batch_around(_raw_record(body), 1, NONE))
    assert (b.records[0].offset, b.records[0].timestamp - b.base_timestamp) == (
        INT32_MIN,
        INT64_MIN,
    )


def test_encode_refuses_what_the_format_cannot_hold():
    with pytest.raises(ValueError, match="2\\^31-1"):
        encode_batch([Record(0, 0, None, None), Record(1 << 31, 0, None, None)])
    with pytest.raises(ConstructError):
        _spec_encode_batch([Record(0, 0, None, None), Record(1 << 31, 0, None, None)])
    with pytest.raises(ValueError, match="timestamp"):
        encode_batch([Record(0, INT64_MAX, None, None)], base_timestamp=-1)
    with pytest.raises(ValueError, match="out of range"):
        encode_batch([Record(0, 0, None, None)], producer_epoch=1 << 15)
    # bytes-like keys and values are written as bytes, as the spec's adapter does
    rec = Record(0, 5, bytearray(b"k"), memoryview(b"value"), [("h", bytearray(b"v"))])
    assert encode_batch([rec]) == _spec_encode_batch([rec])


# ------------------------------------------------------------- columns (Spark, groups)


def _columns(records) -> tuple[list, ...]:
    records = list(records)
    return (
        [r.offset for r in records],
        [r.timestamp for r in records],
        [r.key for r in records],
        [r.value for r in records],
        [r.headers for r in records],
    )


def _decode_columns(buf: bytes) -> tuple[list, ...]:
    """Every record of ``buf`` through iter_batches + decode_records (the column readers' path)."""
    cols: tuple[list, ...] = ([], [], [], [], [])
    for pos, h in iter_batches(buf):
        assert decode_records(buf, pos, h, *cols) == h.record_count
    return cols


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: CODEC_NAMES[c])
def test_iter_batches_and_decode_records_match_decode_batches(codec):
    log = b"".join(
        encode_batch(_sample_records(base=b * 9), base_offset=b * 9, compression=codec)
        for b in range(3)
    )
    batches = decode_batches(log)
    found = list(iter_batches(log))
    assert [pos for pos, _ in found] == [0, batches[0].size, batches[0].size + batches[1].size]
    assert [RecordBatch(*h, b.records) for (_, h), b in zip(found, batches, strict=True)] == batches
    want = _columns(r for b in batches for r in b.records)
    assert _decode_columns(log) == want
    # records are appended after what the lists hold; bytearray and memoryview input too
    for buf in (bytearray(log), memoryview(log)):
        cols = ([-1], [-1], [b"x"], [None], [[]])
        for pos, h in iter_batches(buf):
            decode_records(buf, pos, h, *cols)
        firsts = [-1, -1, b"x", None, []]
        assert cols == tuple([first, *col] for first, col in zip(firsts, want, strict=True))
        assert all(type(k) is bytes for k in cols[2][1:] if k is not None)
    # a torn tail ends the iteration; iteration can start at any batch
    assert len(list(iter_batches(log[:-1]))) == 2
    assert [pos for pos, _ in iter_batches(log, found[1][0])] == [found[1][0], found[2][0]]


def test_decode_records_adds_nothing_from_a_malformed_batch():
    good = _sample_records()
    # the 9th record's fields end one byte before its declared length (Kafka: "Invalid record size")
    section = b"".join(
        _raw_record(b"\x00\x00" + _zz(i) + _KEY_K + b"\x01" + _NO_HEADERS) for i in range(8)
    ) + _raw_record(b"\x00\x00" + _zz(8) + _KEY_K + b"\x01" + _NO_HEADERS + b"\x00")
    log = encode_batch(good) + _batch_around(section, 9, base_offset=100)
    cols = ([], [], [], [], [])
    (pos0, h0), (pos1, h1) = iter_batches(log)
    decode_records(log, pos0, h0, *cols)
    with pytest.raises(CorruptRecordError, match=f"batch at byte {pos1}: .*record 8"):
        decode_records(log, pos1, h1, *cols)
    assert cols == _columns(good)  # the 8 good records of the bad batch were taken back


@pytest.mark.parametrize(
    "mutate, error",
    [
        (lambda b: struct.pack_into(">i", b, 8, 48), "declares length 48"),
        (lambda b: struct.pack_into(">b", b, 16, 1), "has magic 1"),
        (lambda b: struct.pack_into(">i", b, 57, -1), "record count -1"),
    ],
)
def test_iter_batches_rejects_what_decode_batches_rejects(mutate, error):
    raw = bytearray(encode_batch(_sample_records()))
    mutate(raw)
    raw = _recrc(raw)
    with pytest.raises(CorruptRecordError, match=error):
        list(iter_batches(raw))
    with pytest.raises(CorruptRecordError, match=error):
        decode_batches(raw)


def test_encode_columns_takes_sequences():
    recs = _sample_records(base=10)
    raw = encode_batch(recs, base_offset=10, compression=LZ4)
    offsets, timestamps, keys, values, headers = _columns(recs)
    assert (
        encode_columns(
            range(10, 10 + len(recs)),
            tuple(timestamps),
            tuple(keys),
            values,
            [h or None for h in headers],
            base_offset=10,
            compression=LZ4,
        )  # fmt: skip
        == raw
    )
    with pytest.raises(ValueError):
        encode_columns(offsets, timestamps[:-1], keys, values, headers)
