"""Unit tests of the Spark data sources' pure-Python parts (no Spark, no JVM, no broker):
the Spark layer over ``protocol.records`` (columns, offset and timestamp filters, Kafka's
rules for malformed records, the sink's batches), Kafka's partitioner, option parsing,
offset-range planning, and the log directory reader on Kafka 4.0.0's golden files."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import struct

import crc32c
import pytest
from kafka_sidecar.protocol import compression
from kafka_sidecar.protocol.records import LOG_APPEND_TIME, Record, decode_batches, encode_batch
from kafka_sidecar.spark import _logdir
from kafka_sidecar.spark._options import (
    OffsetRange,
    OptionError,
    parse_sink_options,
    parse_source_options,
    rate_limit,
    split_ranges,
)
from kafka_sidecar.spark._records import (
    build_batch,
    decode_into,
    iter_batches,
    murmur2,
    new_columns,
    partition_for_key,
)

from tests.support import GOLDEN

LOGDIR = GOLDEN / "kafka-4.0.0-logdir"


def _records(n: int, seed: int = 1) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 5 == 1 else rng.randbytes(rng.randrange(0, 40))
        value = None if i % 7 == 2 else rng.randbytes(rng.choice([0, 3, 200, 5000]))
        headers = [(f"h{j}-é", None if j == 1 else rng.randbytes(j * 3)) for j in range(i % 4)]
        out.append(Record(offset=100 + i * (2 if i % 3 else 1), timestamp=1_700_000_000_000 + rng.randrange(-5000, 5000),
                          key=key, value=value, headers=headers))
    # offsets must increase strictly
    for i in range(1, len(out)):
        if out[i].offset <= out[i - 1].offset:
            out[i].offset = out[i - 1].offset + 1
    return out


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
@pytest.mark.parametrize("timestamp_type", [0, LOG_APPEND_TIME])
def test_columns_match_decode_batches(codec, timestamp_type):
    recs = _records(60, seed=codec)
    raw = encode_batch(recs, base_offset=100, compression=codec, timestamp_type=timestamp_type,
                       max_timestamp=1_800_000_000_000 if timestamp_type else None)
    raw += encode_batch(recs[:3], base_offset=100, compression=codec)  # a second batch
    (b1, b2) = decode_batches(raw)
    batches = list(iter_batches(raw))
    assert [h.base_offset for _, h in batches] == [100, 100]
    cols = new_columns(include_headers=True)
    for pos, h in batches:
        decode_into(cols, raw, pos, h)
    want = b1.records + b2.records
    assert cols.offsets == [r.offset for r in want]
    assert cols.timestamps == [r.timestamp for r in want]
    assert cols.keys == [r.key for r in want]
    assert cols.values == [r.value for r in want]
    assert cols.headers == [r.headers or None for r in want]
    assert cols.timestamp_types == [timestamp_type] * 60 + [0] * 3


def test_decode_filters_offsets_and_timestamps():
    recs = _records(40)
    raw = encode_batch(recs, base_offset=100)
    (pos, h), = iter_batches(raw)
    lo, hi = recs[10].offset, recs[30].offset
    cols = new_columns(False)
    assert decode_into(cols, raw, pos, h, lo, hi) == 20
    assert cols.offsets == [r.offset for r in recs[10:30]] and cols.headers is None
    ts_lo, ts_hi = 1_700_000_000_000 - 1000, 1_700_000_000_000 + 1000
    cols = new_columns(False)
    decode_into(cols, raw, pos, h, ts_lo=ts_lo, ts_hi=ts_hi)
    assert cols.offsets == [r.offset for r in recs if ts_lo <= r.timestamp <= ts_hi]


def _zz(n: int) -> bytes:
    v = (n << 1) if n >= 0 else ((-n) << 1) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _raw_record(body: bytes) -> bytes:
    return _zz(len(body)) + body


def _batch_around(section: bytes, count: int, base_offset: int) -> bytes:
    """An uncompressed batch with this records section and record count, CRC fixed."""
    raw = bytearray(encode_batch([], base_offset=base_offset) + section)
    struct.pack_into(">i", raw, 8, 49 + len(section))
    struct.pack_into(">i", raw, 57, count)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


_K = b"\x02k"  # key length 1, "k"
_GOOD = b"\x00\x00\x00" + _K + b"\x02v\x00"  # attributes, timestampDelta, offsetDelta 0, key, value "v", 0 headers


# Spark decodes with protocol.records, so it refuses what Kafka's DefaultRecord.readFrom /
# DefaultRecordBatch refuse. The reader it had before was lenient and returned a record
# (or skipped it silently when outside the offset range, or its headers when not asked for)
# in every case below; a consumer of Kafka fails on them with InvalidRecordException /
# CorruptRecordException, so returning something was wrong.
_MALFORMED = [
    (_raw_record(b"\x00\x00\x80\x80\x80\x80\x80\x00" + _K + b"\x01\x00"), 1, "varint longer than 5 bytes"),
    (_raw_record(b"\x00" + b"\x80" * 10 + b"\x00\x00" + _K + b"\x01\x00"), 1, "varlong longer than 10 bytes"),
    (_raw_record(_GOOD + b"\x00"), 1, "its fields take 8 of its 9 bytes"),  # Invalid record size
    (_raw_record(b"\x00\x00\x00" + _K + b"\x01\x01"), 1, "invalid header count -1"),
    (_raw_record(_GOOD), 2, "records end early"),  # fewer records than recordCount
    (_raw_record(_GOOD) + b"\x00", 1, "1 bytes after the last record"),
    # Kafka reads any negative length as null; protocol.records (and so Spark) deliberately
    # refuses lengths below -1, which no Kafka client writes (see protocol/records.py).
    (_raw_record(b"\x00\x00\x00\x03\x01\x00"), 1, "invalid key length -2"),
    (_raw_record(b"\x00\x00\x00" + _K + b"\x09\x00"), 1, "invalid value length -5"),
    (_raw_record(b"\x00\x00\x00" + _K + b"\x01\x02\x02h\x03"), 1, "invalid header value length -2"),
]


@pytest.mark.parametrize("section, count, why", _MALFORMED, ids=[m[2] for m in _MALFORMED])
@pytest.mark.parametrize("include_headers", [False, True], ids=["no-headers", "headers"])
@pytest.mark.parametrize("lo", [0, 2], ids=["in-range", "filtered-out"])
def test_decode_refuses_malformed_records_like_kafka(section, count, why, include_headers, lo):
    raw = encode_batch([Record(0, 5, b"a", b"b")]) + _batch_around(section, count, base_offset=1)
    (pos0, h0), (pos1, h1) = iter_batches(raw)
    cols = new_columns(include_headers)
    assert decode_into(cols, raw, pos0, h0) == 1
    with pytest.raises(ValueError, match=f"batch at byte {pos1}: .*{why}"):
        decode_into(cols, raw, pos1, h1, lo)
    # nothing of the bad batch was added
    assert (cols.offsets, cols.keys, cols.values, cols.timestamp_types) == ([0], [b"a"], [b"b"], [0])
    assert cols.headers == ([None] if include_headers else None)


def test_negative_record_count_refused():
    raw = bytearray(encode_batch([Record(0, 5, b"a", b"b")]))
    struct.pack_into(">i", raw, 57, -1)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(ValueError, match="record count -1"):  # Kafka: "Found invalid record count"
        list(iter_batches(bytes(raw)))


def test_truncated_and_corrupt_batches():
    raw = encode_batch(_records(5), base_offset=0)
    assert list(iter_batches(raw[:-1])) == []  # a torn tail is not a batch yet
    bad = bytearray(raw)
    bad[-1] ^= 0xFF
    with pytest.raises(ValueError, match="CRC-32C"):
        list(iter_batches(bytes(bad)))
    assert len(list(iter_batches(bytes(bad), verify_crc=False))) == 1


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
def test_build_batch_round_trips_and_matches_encode_batch(codec):
    recs = _records(30)
    rows = [(r.key, r.value, r.headers, r.timestamp) for r in recs]
    raw = build_batch(rows, compression=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    (batch,) = decode_batches(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.record_count) == (7, 2, 40, 30)
    assert batch.max_timestamp == max(r.timestamp for r in recs)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in batch.records] == [
        (i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(recs)
    ]
    if codec == compression.NONE:
        consecutive = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)]
        assert raw == encode_batch(consecutive, producer_id=7, producer_epoch=2, base_sequence=40)


def test_murmur2_is_kafkas():
    # Kafka's UtilsTest.testMurmur2 vectors, and kafka-python's implementation.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    from kafka.partitioner.default import murmur2 as kp_murmur2

    rng = random.Random(3)
    for _ in range(300):
        key = rng.randbytes(rng.randrange(0, 30))
        assert murmur2(key) & 0xFFFFFFFF == kp_murmur2(key) & 0xFFFFFFFF
        assert partition_for_key(key, 7) == (kp_murmur2(key) & 0x7FFFFFFF) % 7


def test_source_options_like_spark():
    base = {"kafka.bootstrap.servers": "h:1"}
    opts = parse_source_options({**base, "subscribe": "a, b"}, streaming=False)
    assert opts.strategy.topics == ("a", "b") and opts.starting.kind == "earliest" and opts.ending.kind == "latest"
    assert not opts.include_headers and opts.fail_on_data_loss
    stream = parse_source_options({**base, "subscribePattern": "a.*", "FAILONDATALOSS": "false",
                                   "maxOffsetsPerTrigger": "5"}, streaming=True)
    assert stream.starting.kind == "latest" and not stream.fail_on_data_loss and stream.max_offsets_per_trigger == 5
    ts = parse_source_options({**base, "assign": '{"a":[0,1]}', "startingOffsets": "earliest",
                               "startingTimestamp": "1000"}, streaming=False)
    assert ts.starting.kind == "timestamp" and ts.starting.timestamp == 1000  # startingTimestamp wins
    assert ts.strategy.assignment == (("a", 0), ("a", 1))
    js = parse_source_options({**base, "subscribe": "a", "startingOffsets": '{"a":{"0":5,"1":-2}}'}, streaming=False)
    assert js.starting.as_dict() == {("a", 0): 5, ("a", 1): -2}
    for bad, message in [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({**base}, "One of the following options must be specified"),
        ({**base, "subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options"),
        ({**base, "subscribe": " , "}, "No topics to subscribe to"),
        ({**base, "subscribe": "a", "startingOffsets": "latest"}, "can't be latest for batch queries"),
        ({**base, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest"),
        ({**base, "subscribe": "a", "endingOffsets": "earliest"}, "can't be earliest for batch queries"),
        ({**base, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "auto.offset.reset' is not supported"),
        ({**base, "subscribe": "a", "failOnDataLoss": "maybe"}, "must be true or false"),
    ]:
        with pytest.raises(OptionError, match=message):
            parse_source_options(bad, streaming=False)
    with pytest.raises(OptionError, match="ending offset not valid in streaming queries"):
        parse_source_options({**base, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)


def test_sink_options():
    opts = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.compression.type": "lz4"})
    assert (opts.topic, opts.acks, opts.compression, opts.idempotent) == ("t", -1, compression.LZ4, True)
    assert not parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1"}).idempotent
    with pytest.raises(OptionError, match="Must set acks to all"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1", "kafka.enable.idempotence": "true"})
    with pytest.raises(OptionError, match="value.serializer"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})


def test_split_ranges_like_sparks_range_calculator():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 50), OffsetRange("t", 2, 10, 20)]
    assert split_ranges(ranges, None, None) == [ranges[0], ranges[2]]  # empty ranges dropped
    by_max = split_ranges(ranges, None, 30)
    assert [(r.partition, r.start, r.end) for r in by_max] == [(0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (2, 10, 20)]
    by_min = split_ranges(ranges, 4, None)
    assert sum(r.size for r in by_min) == 110 and len(by_min) >= 4
    assert [r for r in by_min if r.partition == 2] == [ranges[2]]  # small ranges stay whole


def test_rate_limit_like_spark():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 10}
    until = {("t", 0): 90, ("t", 1): 10, ("t", 2): 10}
    assert rate_limit(20, start, until) == {("t", 0): 18, ("t", 1): 2, ("t", 2): 10}
    assert rate_limit(1000, start, until) == until
    # A partition with a tiny backlog still moves (ceil below 1).
    assert rate_limit(3, {("a", 0): 0, ("a", 1): 0}, {("a", 0): 1000, ("a", 1): 1}) == {("a", 0): 2, ("a", 1): 1}


# --------------------------------------------------------------------------- log dirs


def _b64(v):
    if v is None:
        return None
    if len(v) > 64:
        return {"len": len(v), "sha256": hashlib.sha256(v).hexdigest()}
    return base64.b64encode(v).decode()


def _golden_partition(topic: str) -> _logdir.PartitionDir:
    (pd,) = [p for p in _logdir.discover(LOGDIR) if p.topic == topic]
    return pd


def test_logdir_discovery_and_checkpoint():
    found = {(p.topic, p.partition): p.log_start_offset for p in _logdir.discover(LOGDIR)}
    assert ("__cluster_metadata", 0) not in found
    assert found[("golden-del", 0)] == 200 and found[("golden", 0)] == 0
    assert ("meta-existing", 1) in found
    single = _logdir.discover(LOGDIR / "golden-del-0")
    assert [(p.topic, p.partition, p.log_start_offset) for p in single] == [("golden-del", 0, 200)]
    assert [s.base_offset for s in _logdir.segments(_golden_partition("golden"))] == [0, 158, 267]


def test_logdir_reads_golden_records():
    expected = [json.loads(line) for line in (GOLDEN / "produce-fetch" / "records.jsonl").read_text().splitlines()]
    got = []
    for seg in _logdir.segments(_golden_partition("golden")):
        for cols in _logdir.read_segment(seg, include_headers=True, chunk_records=50):
            got += [
                {"offset": o, "timestamp": t, "key": _b64(k), "value": _b64(v), "headers": [[hk, _b64(hv)] for hk, hv in h or []]}
                for o, t, k, v, h in zip(cols.offsets, cols.timestamps, cols.keys, cols.values, cols.headers, strict=True)
            ]
    assert got == [{k: e[k] for k in ("offset", "timestamp", "key", "value", "headers")} for e in expected]
    assert sum(len(c) for s in _logdir.segments(_golden_partition("golden-del")) for c in _logdir.read_segment(s)) == 0


def test_index_seeks_never_skip_a_matching_record():
    """Start positions from the offset and time indexes, against a full scan, on every
    offset and on timestamps around every record's."""
    segs = _logdir.segments(_golden_partition("golden"))
    everything = [(o, t) for s in segs for c in _logdir.read_segment(s) for o, t in zip(c.offsets, c.timestamps, strict=True)]
    stamps = sorted({t for _, t in everything})
    probes = [t + d for t in stamps[::7] for d in (-1, 0, 1)] + [stamps[-1] + 1, 0]
    for seg in segs:
        assert _logdir.segment_max_timestamp(seg) in (None, max(t for o, t in everything if seg.base_offset <= o < (seg.next_base_offset or 1 << 62)))
        hi = seg.next_base_offset if seg.next_base_offset is not None else 1 << 62
        for lo in range(seg.base_offset, min(hi, seg.base_offset + 120), 3):
            got = [o for c in _logdir.read_segment(seg, min_offset=lo) for o in c.offsets]
            assert got == [o for o, _ in everything if lo <= o < hi]
        for ts in probes:
            got = [o for c in _logdir.read_segment(seg, min_timestamp=ts) for o in c.offsets]
            assert got == [o for o, t in everything if seg.base_offset <= o < hi and t >= ts]
