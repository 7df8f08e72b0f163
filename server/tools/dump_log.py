"""``kafka-sidecar dump-log``: kafka-dump-log.sh, offline, on our files or Apache Kafka's.

Decodes ``.log`` segments (and KRaft ``.checkpoint`` snapshots), ``.index``, ``.timeindex``,
``.txnindex`` and producer ``.snapshot`` files with Kafka's output format (DumpLogSegments)::

    kafka-sidecar dump-log --files 00000000000000000000.log [--deep-iteration] [--print-data-log]
    kafka-sidecar dump-log --files 00000000000000000000.index,00000000000000000000.timeindex [--verify-index-only]
    kafka-sidecar dump-log --files data/events-0 --verify

Options shared with Kafka's tool: ``--files`` (comma-separated; a directory stands for its
segment, index and snapshot files), ``--print-data-log``, ``--deep-iteration``,
``--verify-index-only``, ``--index-sanity-check``, ``--max-message-size``, ``--max-bytes``,
``--skip-record-metadata``. Index mismatches, time index problems and non-consecutive offsets go
to stderr at the end, as Kafka prints them.

``--verify`` (ours) checks everything instead of printing it: every batch's CRC-32C and
structure (records decompressed and counted), offsets increasing across batches, every
offset/time index entry against the log (Kafka's rules), snapshot versions and CRCs, stray bytes
at the end of a segment. One line per file (``OK`` or the problems), a summary, exit status 1 if
anything is wrong. A long run shows progress on a terminal.
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import crc32c
from kafka_sidecar.protocol.compression import CODEC_NAMES
from kafka_sidecar.protocol.control_records import (
    ABORT,
    COMMIT,
    CONTROL_TYPE_NAMES,
    END_TXN_MARKER_VALUE,
    LEADER_CHANGE,
    UNKNOWN,
    control_type,
    marker_coordinator_epoch,
)
from kafka_sidecar.protocol.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_POS,
    TRANSACTIONAL_MASK,
    BatchHeader,
    increment_sequence,
    read_header,
)
from kafka_sidecar.protocol.records import CorruptRecordError, decode_batches
from kafka_sidecar.protocol.varint import read_uvarint
from kafka_sidecar.storage import formats
from kafka_sidecar.storage.formats import (
    ABORTED_TXN_ENTRY,
    LOG_ENTRY_HEADER,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    ProducerSnapshotError,
    read_producer_snapshot,
)

from ..logging_setup import Progress

INT_MAX = 2**31 - 1
HEADER_SIZE_UP_TO_MAGIC = MAGIC_POS + 1
SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".checkpoint")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--files", required=True, help="comma-separated files (or partition directories) to dump")
    p.add_argument("--print-data-log", action="store_true", help="print record keys and values (implies --deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batch headers")
    p.add_argument("--verify-index-only", action="store_true", help="check index entries against the log, print only problems")
    p.add_argument("--index-sanity-check", action="store_true", help="the start-up sanity check of indexes only")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024)
    p.add_argument("--max-bytes", type=int, default=INT_MAX, help="read at most this many bytes of each .log")
    p.add_argument("--skip-record-metadata", action="store_true")
    p.add_argument("--verify", action="store_true", help="verify CRCs, index consistency and snapshots instead of printing (exit 1 on problems)")


def _java_bool(b: bool) -> str:
    return "true" if b else "false"


def _optional_long(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


def _decrement_sequence(seq: int, delta: int) -> int:
    if seq < delta:
        return INT_MAX - (delta - seq) + 1
    return seq - delta


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _timestamp_type(h: BatchHeader) -> str:
    return "LogAppendTime" if h.is_log_append_time else "CreateTime"


def _delete_horizon(h: BatchHeader) -> int | None:
    return h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None


class SegmentFile:
    """A log file read through mmap (the whole file, or its first ``max_bytes``)."""

    def __init__(self, path: Path, max_bytes: int = INT_MAX) -> None:
        self.path = path
        self._f = open(path, "rb")
        size = os.fstat(self._f.fileno()).st_size
        self.size = min(size, max_bytes)
        self.data: bytes | mmap.mmap = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        self._f.close()

    def __enter__(self) -> SegmentFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Kafka's FileLogInputStream: (position, header) of the complete batches from ``start``
        (a batch of magic 0/1 with only its offset, length and magic); stops at a torn tail.
        Raises CorruptRecordError for a batch whose size cannot be right."""
        end = self.size if end is None else min(end, self.size)
        pos = start
        data = self.data
        while pos + HEADER_SIZE_UP_TO_MAGIC < end:
            base_offset, length = LOG_ENTRY_HEADER.unpack_from(data, pos)
            if length < 14:
                raise CorruptRecordError(f"Found record size {length} smaller than minimum record overhead (14) in file {self.path}.")
            if pos + LOG_OVERHEAD + length > end:
                return
            magic = data[pos + MAGIC_POS]
            if magic < 2:
                yield pos, BatchHeader(base_offset, length, -1, magic, 0, 0, 0, -1, -1, -1, -1, -1, -1)
            elif pos + BATCH_HEADER_SIZE > end:
                return
            else:
                yield pos, read_header(data, pos)
            pos += LOG_OVERHEAD + length

    def batch_bytes(self, at: int, b: BatchHeader) -> bytes:
        return bytes(self.data[at:at + b.size])

    def crc_ok(self, at: int, b: BatchHeader) -> bool:
        return crc32c.crc32c(self.data[at + ATTRIBUTES_POS:at + b.size]) == b.crc


@dataclass
class Report:
    """What Kafka prints to stderr after all files, plus our --verify problems."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def print(self, err: TextIO) -> None:
        for name, items in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            for a, b in items:
                err.write(f"  Index offset: {a}, log offset: {b}\n")
        for name, items in self.time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            for a, b in items:
                err.write(f"  Index timestamp: {a}, log timestamp: {b}\n")
        for name, items in self.time_out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            for a, b in items:
                err.write(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n")
        for items in self.time_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            for a, b in items:
                err.write(f"Indexed offset: {a}, found log offset: {b}\n")
        for name, items in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            for a, b in items:
                err.write(f"  {a} is followed by {b}\n")


def _stem(path: Path) -> str:
    return path.name.split(".")[0]


def _base_offset(path: Path) -> int:
    try:
        return int(_stem(path))
    except ValueError:
        return 0


# ---- .log / .checkpoint --------------------------------------------------------------------


def _batch_line(at: int, b: BatchHeader, valid: bool) -> str:
    if b.magic < 2:
        return f"offset: {b.base_offset} position: {at} NoTimestampType: -1 size: {b.size} magic: {b.magic} compresscodec: none crc: 0 isvalid: {_java_bool(valid)} (message format v{b.magic} is not decoded)"
    codec = CODEC_NAMES.get(b.attributes & COMPRESSION_MASK, f"unknown({b.attributes & COMPRESSION_MASK})")
    return (
        f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count} baseSequence: {b.base_sequence} "
        f"lastSequence: {b.last_sequence} producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
        f"partitionLeaderEpoch: {b.partition_leader_epoch} isTransactional: {_java_bool(bool(b.attributes & TRANSACTIONAL_MASK))} "
        f"isControl: {_java_bool(b.is_control)} deleteHorizonMs: {_optional_long(_delete_horizon(b))} "
        f"position: {at} {_timestamp_type(b)}: {b.max_timestamp} size: {b.size} magic: {b.magic} "
        f"compresscodec: {codec} crc: {b.crc} isvalid: {_java_bool(valid)}"
    )


def _control_text(key: bytes | None, value: bytes | None) -> str:
    type_id = control_type(key)
    if type_id == UNKNOWN:
        return " controlType: UNKNOWN(-1)"
    name = CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
    if type_id in (ABORT, COMMIT) and value and len(value) >= END_TXN_MARKER_VALUE.size:
        return f" endTxnMarker: {name} coordinatorEpoch: {marker_coordinator_epoch(value)}"
    if type_id == LEADER_CHANGE and value:
        try:
            return f" LeaderChange: {_leader_change_json(value)}"
        except (IndexError, ValueError, struct.error):
            pass
    return f" controlType: {name}({type_id})"


def _leader_change_json(value: bytes) -> str:
    """KRaft's LeaderChangeMessage (flexible v0) as Kafka's JSON converter writes it."""
    version, leader = struct.unpack_from(">hi", value, 0)
    pos = 6
    lists = []
    for _ in range(2):
        n, pos = read_uvarint(value, pos)
        voters = []
        for _ in range(max(0, n - 1)):
            (vid,) = struct.unpack_from(">i", value, pos)
            pos += 4
            tags, pos = read_uvarint(value, pos)
            if tags:
                raise IndexError("tagged fields")
            voters.append(f'{{"voterId":{vid}}}')
        lists.append("[" + ",".join(voters) + "]")
    return f'{{"version":{version},"leaderId":{leader},"voters":{lists[0]},"grantingVoters":{lists[1]}}}'


def dump_log(path: Path, shown: str, args: argparse.Namespace, out: TextIO, report: Report) -> None:
    print_data = args.print_data_log
    deep = args.deep_iteration or print_data
    if path.name.endswith(".log"):
        out.write(f"Log starting offset: {_base_offset(path)}\n")
    elif path.name.endswith(".checkpoint"):
        if path.name == "bootstrap.checkpoint":
            out.write("KRaft bootstrap snapshot\n")
        else:
            offset, _, epoch = _stem(path).partition("-")
            out.write(f"Snapshot end offset: {int(offset)}, epoch: {int(epoch or 0)}\n")
    with SegmentFile(path, args.max_bytes) as f:
        valid_bytes = 0
        last_offset = -1
        pairs: list[tuple[int, int]] = []
        for at, b in f.batches():
            valid = f.crc_ok(at, b) if b.magic >= 2 else False
            out.write(_batch_line(at, b, valid) + "\n")
            if deep and b.magic >= 2:
                for rec in decode_batches(f.batch_bytes(at, b), verify_crc=False)[0].records:
                    if last_offset != -1 and rec.offset != last_offset + 1:
                        pairs.append((last_offset, rec.offset))
                    last_offset = rec.offset
                    line = "| "
                    prefix = "| "
                    if not args.skip_record_metadata:
                        seq = -1 if b.base_sequence == -1 else increment_sequence(b.base_sequence, rec.offset - b.base_offset)
                        line = (f"| offset: {rec.offset} {_timestamp_type(b)}: {rec.timestamp} "
                                f"keySize: {-1 if rec.key is None else len(rec.key)} valueSize: {-1 if rec.value is None else len(rec.value)}"
                                f" sequence: {seq} headerKeys: [{','.join(k for k, _ in rec.headers)}]")
                        prefix = " "
                        if b.is_control:
                            line += _control_text(rec.key, rec.value)
                    else:
                        line = ""
                    if print_data and not b.is_control:
                        if rec.key is not None:
                            line += f"{prefix}key: {_text(rec.key)}"
                            prefix = " "
                        if rec.value is not None:
                            line += f" payload: {_text(rec.value)}"
                    out.write(line + "\n")
            valid_bytes += b.size
        if pairs:
            report.non_consecutive.setdefault(str(path.resolve()), []).extend(reversed(pairs))
        trailing = f.size - valid_bytes
        if trailing > 0 and args.max_bytes == INT_MAX:
            out.write(f"Found {trailing} invalid bytes at the end of {path.name}\n")


# ---- indexes --------------------------------------------------------------------------------


def read_offset_index(path: Path) -> list[tuple[int, int]]:
    """(absolute offset, position) entries up to the first zero (sparse) entry, as Kafka reads."""
    base = _base_offset(path)
    out = []
    for i, (rel, pos) in enumerate(formats.read_offset_index(path)):
        if rel == 0 and i > 0:
            break
        out.append((base + rel, pos))
    return out


def read_time_index(path: Path) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries up to the first zero-offset entry after the first."""
    base = _base_offset(path)
    out = []
    for i, (ts, rel) in enumerate(formats.read_time_index(path)):
        if rel == 0 and i > 0:
            break
        out.append((ts, base + rel))
    return out


def _lookup(entries: list[tuple[int, int]], offset: int) -> int:
    """OffsetIndex.lookup: position of the largest entry <= offset (0 if none)."""
    pos = 0
    for off, p in entries:
        if off > offset:
            break
        pos = p
    return pos


def _log_for(path: Path) -> Path:
    return path.with_name(_stem(path) + ".log")


def dump_index(path: Path, shown: str, args: argparse.Namespace, out: TextIO, report: Report) -> None:
    entries = read_offset_index(path)
    if not entries or (path.stat().st_size // OFFSET_INDEX_ENTRY.size) == 0:
        out.write(f"{shown} is empty.\n")
        return
    if args.index_sanity_check:
        _sanity_check_offset_index(path, entries)
        out.write(f"{shown} passed sanity check.\n")
        return
    with SegmentFile(_log_for(path)) as f:
        for off, pos in entries:
            last = None
            for _at, b in f.batches(pos, pos + args.max_message_size):
                last = b.last_offset
                break
            if last is None:
                last = -1
            if last != off:
                report.index_mismatches.setdefault(str(path.resolve()), []).insert(0, (off, last))
            if not args.verify_index_only:
                out.write(f"offset: {off} position: {pos}\n")


def _sanity_check_offset_index(path: Path, entries: list[tuple[int, int]]) -> None:
    size = path.stat().st_size
    if size % OFFSET_INDEX_ENTRY.size:
        raise CorruptRecordError(
            f"Index file {path.name} is corrupt, found {size} bytes which is neither positive nor a multiple of {OFFSET_INDEX_ENTRY.size}."
        )
    base = _base_offset(path)
    if entries and len(entries) > 1 and entries[-1][0] < base:
        raise CorruptRecordError(f"Corrupt index found, index file ({path}) has non-zero size but the last offset is {entries[-1][0]} which is less than the base offset {base}.")


def dump_time_index(path: Path, shown: str, args: argparse.Namespace, out: TextIO, report: Report) -> None:
    entries = read_time_index(path)
    if args.index_sanity_check:
        out.write(f"{shown} passed sanity check.\n")
        return
    offsets = read_offset_index(path.with_name(_stem(path) + ".index")) if path.with_name(_stem(path) + ".index").exists() else []
    key = str(path.resolve())
    with SegmentFile(_log_for(path)) as f:
        prev_ts = -1
        for ts, off in entries:
            pos = _lookup(offsets, off)
            found, found_at = None, 0
            for at, b in f.batches(pos):
                if b.last_offset >= off:
                    found, found_at = b, at
                    break
            if found is None:
                report.time_not_found.setdefault(key, []).append((off, -1))
            elif found.last_offset != off:
                report.time_not_found.setdefault(key, []).append((off, found.last_offset))
            else:
                max_ts = -1
                try:
                    for rec in decode_batches(f.batch_bytes(found_at, found), verify_crc=False)[0].records:
                        max_ts = max(max_ts, rec.timestamp)
                except CorruptRecordError:
                    max_ts = found.max_timestamp
                if max_ts != ts:
                    report.time_mismatches.setdefault(key, []).append((ts, max_ts))
                if prev_ts >= ts:
                    report.time_out_of_order.setdefault(key, []).append((ts, prev_ts))
            if not args.verify_index_only:
                out.write(f"timestamp: {ts} offset: {off}\n")
            prev_ts = ts


# ---- snapshots and transaction indexes --------------------------------------------------------


def dump_snapshot(path: Path, shown: str, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    try:
        entries = read_producer_snapshot(path)
    except ProducerSnapshotError as e:
        err.write(f"{e}\n")
        return
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in entries:
        line = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
                f"currentTxnFirstOffset: {_optional_long(None if txn_first < 0 else txn_first)} lastTimestamp: {ts} ")
        if last_offset >= 0:
            first_seq = last_seq if last_seq < 0 else _decrement_sequence(last_seq, delta)
            line += (f"firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_offset} "
                     f"offsetDelta: {delta} timestamp: {ts}")
        out.write(line + "\n")


def dump_txn_index(path: Path, out: TextIO) -> None:
    for version, pid, first, last, lso in formats.read_txn_index(path):
        out.write(f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} lastStableOffset: {lso}\n")


# ---- verify ---------------------------------------------------------------------------------


def verify_log(path: Path) -> list[str]:
    problems: list[str] = []
    prev_last = None
    with SegmentFile(path) as f:
        valid = 0
        try:
            for at, b in f.batches():
                valid += b.size
                where = f"batch at position {at} (offset {b.base_offset})"
                if b.magic != 2:
                    problems.append(f"{where}: message format v{b.magic} (only v2 is verified)")
                    continue
                if not f.crc_ok(at, b):
                    problems.append(f"{where}: CRC-32C mismatch (stored {b.crc}, computed {crc32c.crc32c(f.data[at + ATTRIBUTES_POS:at + b.size])})")
                    continue
                if prev_last is not None and b.base_offset <= prev_last:
                    problems.append(f"{where}: offsets go backwards (previous batch ended at {prev_last})")
                prev_last = b.last_offset
                if b.base_offset < _base_offset(path) and path.suffix == ".log":
                    problems.append(f"{where}: below the segment's base offset {_base_offset(path)}")
                try:
                    (decoded,) = decode_batches(f.batch_bytes(at, b), verify_crc=False)
                except (CorruptRecordError, ValueError) as e:
                    problems.append(f"{where}: records cannot be decoded: {e}")
                    continue
                if len(decoded.records) != b.record_count:
                    problems.append(f"{where}: {len(decoded.records)} records, header says {b.record_count}")
                if decoded.records and decoded.records[-1].offset > b.last_offset:
                    problems.append(f"{where}: record offset {decoded.records[-1].offset} beyond the batch's last offset {b.last_offset}")
        except CorruptRecordError as e:
            problems.append(str(e))
            return problems
        if f.size > valid:
            problems.append(f"{f.size - valid} invalid bytes at the end (after position {valid})")
    return problems


def verify_index(path: Path, max_message_size: int) -> list[str]:
    problems: list[str] = []
    size = path.stat().st_size
    if size % OFFSET_INDEX_ENTRY.size:
        problems.append(f"size {size} is not a multiple of {OFFSET_INDEX_ENTRY.size}")
    entries = read_offset_index(path)
    if entries and entries[0] == (_base_offset(path), 0):  # the entry on disk is (0, 0)
        entries = []  # an all-zero (preallocated, unused) index: padding, not an entry
    if not _log_for(path).exists():
        return problems + ([f"no {_log_for(path).name} beside it"] if entries else [])
    prev = None
    with SegmentFile(_log_for(path)) as f:
        for off, pos in entries:
            if prev is not None and (off <= prev[0] or pos <= prev[1]):
                problems.append(f"entry offset {off} position {pos} does not follow offset {prev[0]} position {prev[1]}")
            prev = (off, pos)
            if pos > f.size:
                problems.append(f"entry offset {off} points at position {pos}, beyond the log's {f.size} bytes")
                continue
            first = next(iter(f.batches(pos, pos + max_message_size)), None)
            last = first[1].last_offset if first is not None else -1
            if last != off:
                problems.append(f"entry offset {off} position {pos}: the batch there ends at offset {last}")
    return problems


def verify_time_index(path: Path) -> list[str]:
    size = path.stat().st_size
    problems = [f"size {size} is not a multiple of {TIME_INDEX_ENTRY.size}"] if size % TIME_INDEX_ENTRY.size else []
    if not _log_for(path).exists():
        return problems
    with open(path, "rb") as f:
        if f.read(TIME_INDEX_ENTRY.size) in (b"", bytes(TIME_INDEX_ENTRY.size)):
            return problems  # empty, or preallocated and unused: nothing indexed yet
    report = Report()
    ns = argparse.Namespace(index_sanity_check=False, verify_index_only=True)
    dump_time_index(path, str(path), ns, _NullOut(), report)
    problems += [f"index timestamp {a}, but the batch's largest timestamp is {b}" for v in report.time_mismatches.values() for a, b in v]
    problems += [f"timestamp {a} is not above the previous entry's {b}" for v in report.time_out_of_order.values() for a, b in v]
    problems += [f"indexed offset {a} is not the last offset of a batch (found {b})" for v in report.time_not_found.values() for a, b in v]
    return problems


def verify_snapshot(path: Path) -> list[str]:
    try:
        read_producer_snapshot(path)
    except ProducerSnapshotError as e:
        return [str(e)]
    return []


class _NothingIn(Exception):
    """A directory (or --files list) with no .log, index or snapshot file in it."""

    def __str__(self) -> str:
        return f"no log, index or snapshot files in {self.args[0]}"


class _NullOut:
    def write(self, s: str) -> int:
        return len(s)


def verify_file(path: Path, args: argparse.Namespace) -> list[str] | None:
    name = path.name
    if name.endswith(".log") or name.endswith(".checkpoint"):
        return verify_log(path)
    if name.endswith(".index"):
        return verify_index(path, args.max_message_size)
    if name.endswith(".timeindex"):
        return verify_time_index(path)
    if name.endswith(".snapshot"):
        return verify_snapshot(path)
    if name.endswith(".txnindex"):
        size = path.stat().st_size
        return [f"size {size} is not a multiple of {ABORTED_TXN_ENTRY.size}"] if size % ABORTED_TXN_ENTRY.size else []
    return None


# ---- main -----------------------------------------------------------------------------------


def expand(files: str) -> list[tuple[Path, str]]:
    """(path, name as given) for each file; a directory stands for its known files, sorted.

    A directory with none of them stays in the list as itself, so that the caller reports it:
    naming a place that holds nothing to dump or verify is a mistake (a typo, the wrong disk)."""
    out: list[tuple[Path, str]] = []
    for item in files.split(","):
        item = item.strip()
        if not item:
            continue
        p = Path(item)
        if p.is_dir():
            kids = sorted(c for c in p.iterdir() if c.is_file() and c.name.endswith(SUFFIXES))
            order = {s: i for i, s in enumerate((".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint"))}
            kids.sort(key=lambda c: (_stem(c), order.get(c.suffix, 9)))
            out += [(c, str(c)) for c in kids] if kids else [(p, item)]
        else:
            out.append((p, item))
    return out


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    files = expand(args.files)
    if not files:
        err.write(f"kafka-sidecar: error: no files in --files {args.files!r}\n")
        return 1
    if args.verify:
        return _verify(files, args, out, err)
    report = Report()
    status = 0
    for path, shown in files:
        out.write(f"Dumping {shown}\n")
        try:
            if path.is_dir():
                raise _NothingIn(shown)
            if not path.is_file():
                raise FileNotFoundError(2, "No such file", str(path))
            name = path.name
            if name.endswith(".log") or name.endswith(".checkpoint"):
                dump_log(path, shown, args, out, report)
            elif name.endswith(".index"):
                dump_index(path, shown, args, out, report)
            elif name.endswith(".timeindex"):
                dump_time_index(path, shown, args, out, report)
            elif name.endswith(".snapshot"):
                dump_snapshot(path, shown, args, out, err)
            elif name.endswith(".txnindex"):
                dump_txn_index(path, out)
            else:
                err.write(f"Ignoring unknown file {shown}\n")
        except FileNotFoundError as e:
            out.flush()
            err.write(f"kafka-sidecar: error: {e.filename}: no such file\n")
            status = 1
        except _NothingIn as e:
            out.flush()
            err.write(f"kafka-sidecar: error: {e}\n")
            status = 1
        except (CorruptRecordError, OSError, ValueError) as e:
            out.flush()
            err.write(f"kafka-sidecar: error: {shown}: {e}\n")
            status = 1
    out.flush()
    report.print(err)
    return status


def _verify(files: list[tuple[Path, str]], args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    progress = Progress("verifying", len(files), "files", stream=err)
    bad = 0
    checked = 0
    for i, (path, shown) in enumerate(files):
        try:
            if not path.exists():  # a missing file or directory is a problem, not "nothing to check"
                raise FileNotFoundError(2, "No such file or directory", str(path))
            # expand() leaves a directory in the list only when it holds none of our files
            problems = ["no log, index or snapshot files in this directory"] if path.is_dir() else verify_file(path, args)
        except OSError as e:
            problems = [f"cannot read: {e.strerror or e}"]
        progress.update(i + 1)
        if problems is None:
            continue
        checked += 1
        if problems:
            bad += 1
            out.write(f"FAILED {shown}\n")
            for p in problems:
                out.write(f"  {p}\n")
        else:
            out.write(f"OK {shown}\n")
    progress.finish()
    if not checked:  # only files of other kinds (partition.metadata, ...): nothing was verified
        err.write(f"kafka-sidecar: error: {_NothingIn(args.files)}\n")
        return 1
    out.write(f"verified {checked} files: {'all OK' if not bad else f'{bad} with problems'}\n")
    return 1 if bad else 0
