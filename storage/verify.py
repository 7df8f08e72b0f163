"""Verify segments on disk: what ``kafka-dump-log.sh --verify-index-only`` checks, and more.

For every segment of a partition directory (or a whole data dir):

- ``.log``: whole RecordBatch v2 batches from position 0 to the end of the file,
  offsets increasing from the segment's base offset, each CRC-32C correct
  (``check_crc``), and no offset at or past the next segment's base offset;
- ``.index``: whole 8-byte entries, offsets and positions increasing, every
  entry pointing at the start of a batch whose last offset it names;
- ``.timeindex``: whole 12-byte entries, timestamps increasing, every entry
  naming a batch's last offset and that batch's max timestamp, which is the
  largest timestamp up to it;
- ``.txnindex`` (only if present): whole 34-byte AbortedTxn entries (version 0),
  first offset <= last offset, last offsets increasing, each naming a control
  batch (the ABORT marker) of the segment.

Like Kafka's tool, zero entries after the last real one (an index preallocated
for the active segment, or left untrimmed by a crash) are padding, not errors;
``strict`` (for a log dir after a clean shutdown) requires trimmed indexes and
a last time index entry holding the segment's largest timestamp.

    python -m kafka_sidecar.storage.verify [--strict] [--no-crc] PATH...

PATH is a data dir, a partition dir or a ``.log`` file; exit status 1 when a
problem was found. Synchronous and read-only: safe on a live server's files
(a segment changing underneath may be reported; check again). Files are read with
``formats.py``'s read-only readers and layouts.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kafka_sidecar.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    compute_crc,
    read_header,
)

from .formats import (
    ABORTED_TXN_ENTRY,
    ABORTED_TXN_VERSION,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    read_file,
    split_padding,
    unpack_entries,
)


@dataclass
class SegmentReport:
    log_path: Path
    base_offset: int
    batches: int = 0
    next_offset: int = 0  # offset after the last batch (the base offset when empty)
    index_entries: int = 0
    time_index_entries: int = 0
    index_padding: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class _Batch:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    is_control: bool = False


def _read_batches(data: bytes, base_offset: int, check_crc: bool, report: SegmentReport) -> list[_Batch]:
    batches: list[_Batch] = []
    pos = 0
    prev_last = base_offset - 1
    name = report.log_path.name
    while pos < len(data):
        if len(data) - pos < BATCH_HEADER_SIZE:
            report.problems.append(f"{name}: {len(data) - pos} stray bytes at position {pos} (a torn batch)")
            break
        h = read_header(data, pos)
        if h.magic != 2:
            report.problems.append(f"{name}: position {pos}: magic {h.magic}, not a v2 batch")
            break
        if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + h.size > len(data):
            report.problems.append(f"{name}: position {pos}: batch length {h.batch_length} runs past the end of the file")
            break
        if check_crc and compute_crc(data, pos, h.size) != h.crc:
            report.problems.append(f"{name}: position {pos}: batch {h.base_offset} fails its CRC-32C check")
        if h.base_offset <= prev_last or h.last_offset_delta < 0:
            report.problems.append(f"{name}: position {pos}: batch offsets {h.base_offset}..{h.last_offset} do not follow {prev_last}")
        prev_last = max(prev_last, h.last_offset)
        batches.append(_Batch(pos, h.base_offset, h.last_offset, h.max_timestamp, h.size, h.is_control))
        pos += h.size
    return batches


def _entries(raw: bytes, entry: struct.Struct, name: str, report: SegmentReport) -> list[tuple[int, int]]:
    """The entries of an index file up to the zero padding; a problem if anything but zeros follows."""
    if len(raw) % entry.size:
        report.problems.append(f"{name}: size {len(raw)} is not a multiple of {entry.size} (a torn entry)")
    out, padding = split_padding(unpack_entries(raw, entry))
    if padding:
        if any(any(e) for e in padding):
            report.problems.append(f"{name}: non-zero data after the zero entry at byte {len(out) * entry.size}")
        report.index_padding = True
    return out  # type: ignore[return-value]


def verify_segment(log_path: Path, *, next_base: int | None = None, check_crc: bool = True, strict: bool = False) -> SegmentReport:
    """Check one segment (``<base>.log`` with its ``.index`` and ``.timeindex``)."""
    log_path = Path(log_path)
    base = int(log_path.name.split(".")[0])
    report = SegmentReport(log_path, base, next_offset=base)
    data = read_file(log_path)
    batches = _read_batches(data, base, check_crc, report)
    report.batches = len(batches)
    if batches:
        report.next_offset = batches[-1].last_offset + 1
        if next_base is not None and batches[-1].last_offset >= next_base:
            report.problems.append(f"{log_path.name}: last offset {batches[-1].last_offset} reaches the next segment's base {next_base}")
    by_position = {b.position: b for b in batches}
    by_last = {b.last_offset: b for b in batches}

    index_path = log_path.with_suffix(".index")
    if index_path.exists():
        raw = read_file(index_path)
        entries = _entries(raw, OFFSET_INDEX_ENTRY, index_path.name, report)
        if strict and report.index_padding:
            report.problems.append(f"{index_path.name}: not trimmed ({len(raw)} bytes for {len(entries)} entries)")
        report.index_entries = len(entries)
        prev_rel, prev_pos = 0, 0
        for rel, pos in entries:
            if rel <= prev_rel or pos <= prev_pos:
                report.problems.append(f"{index_path.name}: entry (offset {base + rel}, position {pos}) is out of order")
            prev_rel, prev_pos = rel, pos
            b = by_position.get(pos)
            if b is None:
                report.problems.append(f"{index_path.name}: entry (offset {base + rel}, position {pos}) does not point at a batch")
            elif b.last_offset != base + rel:
                report.problems.append(
                    f"{index_path.name}: index offset {base + rel}, log offset {b.last_offset} at position {pos}: mismatch"
                )
    else:
        report.problems.append(f"{index_path.name}: missing")

    time_path = log_path.with_suffix(".timeindex")
    if time_path.exists():
        raw = read_file(time_path)
        padding_before = report.index_padding
        report.index_padding = False
        entries = _entries(raw, TIME_INDEX_ENTRY, time_path.name, report)
        if strict and report.index_padding:
            report.problems.append(f"{time_path.name}: not trimmed ({len(raw)} bytes for {len(entries)} entries)")
        report.index_padding = report.index_padding or padding_before
        report.time_index_entries = len(entries)
        running_max: dict[int, int] = {}
        top = -1
        for b in batches:
            top = max(top, b.max_timestamp)
            running_max[b.last_offset] = top
        prev_ts, prev_off = -1, base
        for ts, rel in entries:
            off = base + rel
            if ts <= prev_ts or off < prev_off:
                report.problems.append(f"{time_path.name}: entry (timestamp {ts}, offset {off}) is out of order")
            prev_ts, prev_off = ts, off
            b = by_last.get(off)
            if b is None:
                report.problems.append(f"{time_path.name}: entry (timestamp {ts}, offset {off}) names no batch's last offset")
            elif b.max_timestamp != ts:
                report.problems.append(
                    f"{time_path.name}: timestamp {ts} at offset {off}, but that batch's max timestamp is {b.max_timestamp}: mismatch"
                )
            elif running_max[off] != ts:
                report.problems.append(f"{time_path.name}: timestamp {ts} at offset {off} is not the largest so far ({running_max[off]})")
        if strict and top >= 0:
            if not entries or entries[-1][0] != top:
                report.problems.append(f"{time_path.name}: last entry {entries[-1] if entries else None} is not the segment's largest timestamp {top}")
    else:
        report.problems.append(f"{time_path.name}: missing")
    _verify_txn_index(log_path.with_suffix(".txnindex"), batches, report)
    return report


def _verify_txn_index(path: Path, batches: list[_Batch], report: SegmentReport) -> None:
    """Kafka's TransactionIndex.sanityCheck, and that each entry names an ABORT marker here."""
    if not path.exists():
        return  # created only when the segment has an aborted transaction
    raw = read_file(path)
    if len(raw) % ABORTED_TXN_ENTRY.size:
        report.problems.append(f"{path.name}: size {len(raw)} is not a multiple of {ABORTED_TXN_ENTRY.size} (a torn entry)")
    markers = {b.base_offset for b in batches if b.is_control}
    prev = -1
    for version, pid, first, last, _lso in unpack_entries(raw, ABORTED_TXN_ENTRY):
        if version != ABORTED_TXN_VERSION or first > last or last <= prev:
            report.problems.append(f"{path.name}: bad entry (version {version}, producer {pid}, offsets {first}..{last})")
        elif last not in markers:
            report.problems.append(f"{path.name}: entry of producer {pid} ends at {last}, which is not a control batch of the segment")
        prev = last


def segment_files(partition_dir: Path) -> list[Path]:
    """The live segments' ``.log`` files, by base offset."""
    logs = [p for p in Path(partition_dir).iterdir() if p.name.endswith(".log") and p.name[:-4].isdigit()]
    return sorted(logs, key=lambda p: int(p.name[:-4]))


def verify_partition(partition_dir: Path, *, check_crc: bool = True, strict: bool = False) -> list[SegmentReport]:
    """Check every segment of a partition directory and that their offset ranges follow each other."""
    files = segment_files(partition_dir)
    reports = []
    for i, f in enumerate(files):
        nxt = int(files[i + 1].name[:-4]) if i + 1 < len(files) else None
        reports.append(verify_segment(f, next_base=nxt, check_crc=check_crc, strict=strict))
    return reports


def verify_data_dir(data_dir: Path, *, check_crc: bool = True, strict: bool = False) -> dict[str, list[SegmentReport]]:
    """Check every partition directory of a data dir (``<topic>-<partition>``)."""
    out: dict[str, list[SegmentReport]] = {}
    for entry in sorted(os.listdir(data_dir)):
        path = Path(data_dir) / entry
        topic, sep, part = entry.rpartition("-")
        if path.is_dir() and sep and topic and part.isdigit():
            out[entry] = verify_partition(path, check_crc=check_crc, strict=strict)
    return out


def problems(reports: dict[str, list[SegmentReport]] | list[SegmentReport]) -> list[str]:
    """Every problem found, each naming its partition directory and file."""
    groups = reports.items() if isinstance(reports, dict) else [("", reports)]
    return [f"{name}/{p}" if name else p for name, rs in groups for r in rs for p in r.problems]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_sidecar.storage.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="data dir, partition dir or .log file")
    parser.add_argument("--strict", action="store_true", help="also require trimmed indexes (a log dir after a clean shutdown)")
    parser.add_argument("--no-crc", action="store_true", help="skip the CRC-32C check of each batch")
    args = parser.parse_args(argv)
    found = 0
    segments = 0
    for path in args.paths:
        # A path that holds nothing to check is a problem, not "0 problems": a typo in a
        # partition name must not pass a check (kafka-dump-log.sh fails on a missing file too).
        if not path.exists():
            print(f"{path}: no such file or directory")
            found += 1
            continue
        if path.is_file():
            if not (path.name.endswith(".log") and path.name[:-4].isdigit()):
                print(f"{path}: not a segment file (<base offset>.log)")
                found += 1
                continue
            reports = {path.parent.name: [verify_segment(path, check_crc=not args.no_crc, strict=args.strict)]}
        elif any(p.name.endswith(".log") for p in path.iterdir()):
            reports = {path.name: verify_partition(path, check_crc=not args.no_crc, strict=args.strict)}
        else:
            reports = verify_data_dir(path, check_crc=not args.no_crc, strict=args.strict)
        for line in problems(reports):
            print(line)
            found += 1
        checked = sum(len(rs) for rs in reports.values())
        if not checked and not (path / "meta.properties").is_file():  # a data dir may have no topics yet
            print(f"{path}: no segments (<base offset>.log) or partition directories")
            found += 1
        segments += checked
    print(f"verified {segments} segments: {found} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
