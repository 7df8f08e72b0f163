"""RecordBatch v2 with records: spec, round trips, errors, Kafka 4.0.0 golden logs."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

import crc32c
import pytest
from kafka_sidecar.protocol.compression import CODEC_NAMES, GZIP, LZ4, NONE, SNAPPY, ZSTD
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
    RecordSpec,
    decode_batches,
    encode_batch,
)

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden"
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
