"""Throughput of the log cleaner and of the record codec it uses (no server, no client).

    python -m bench.cleaner                      # 64 MB per codec (none, lz4, zstd), one pass each
    python -m bench.cleaner --mb 16 --codecs none
    python -m bench.cleaner --codec-only         # only the decode/encode figures of a typical batch
    python -m bench.cleaner --profile            # also a cProfile of the cleaning pass (top 25)

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
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cleaner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=64, help="log size per codec (MB, 10^6 bytes)")
    parser.add_argument("--codecs", default="none,lz4,zstd", help="comma-separated: none,gzip,snappy,lz4,zstd")
    parser.add_argument("--repeat", type=int, default=3, help="codec loops per figure (median)")
    parser.add_argument("--codec-only", action="store_true", help="skip the cleaner pass")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each cleaning pass")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    for c in codecs:
        if c not in CODECS_BY_NAME:
            parser.error(f"unknown codec {c!r}")

    results: dict = {"cpus": os.cpu_count(), "loadavg": os.getloadavg()[0], "python": sys.version.split()[0]}
    print(f"load average (1 min) {results['loadavg']:.1f}, {results['cpus']} cpus, Python {results['python']}")
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
