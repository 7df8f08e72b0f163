"""Reading Kafka log directories directly, read-only (ours and Apache Kafka's; no pyspark).

A log dir holds ``<topic>-<partition>/`` directories of segments named by
base offset (``00000000000000000000.log`` + ``.index`` + ``.timeindex``) and
``log-start-offset-checkpoint`` (records below a partition's log start offset
were deleted by DeleteRecords or retention and must not be returned, even
while their segment files are still on disk). Files are only ever opened for
reading: a running broker's directory can be read, and indexes are not
trusted beyond their valid entries (a preallocated active index ends in zeros).
The layouts and read-only readers are the broker's own (``kafka_sidecar.storage.formats``);
no broker is needed.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka_sidecar.protocol.record_batch import CONTROL_MASK, BatchHeader
from kafka_sidecar.storage.formats import (
    READ_CHUNK,
    iter_log_batches,
    read_offset_index,
    read_time_index,
    split_padding,
)

from ._records import Columns, decode_into, new_columns

_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")
_SEGMENT = re.compile(r"^(\d{20})\.log$")
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
# KRaft's metadata log is not a topic consumers can read.
NOT_TOPICS = {"__cluster_metadata"}


@dataclass(frozen=True)
class PartitionDir:
    topic: str
    partition: int
    path: str
    log_start_offset: int  # from the checkpoint, else 0


@dataclass(frozen=True)
class Segment:
    topic: str
    partition: int
    path: str  # the .log file
    base_offset: int
    next_base_offset: int | None  # None for the last (active) segment
    log_start_offset: int
    size: int


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint (``0``, count, ``topic partition offset`` lines); {} if absent or malformed."""
    try:
        lines = path.read_text().split("\n")
        if lines[0].strip() != "0":
            return {}
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            out[(topic, int(partition))] = int(offset)
        return out
    except (OSError, ValueError, IndexError):
        return {}


def discover(path: str | os.PathLike) -> list[PartitionDir]:
    """Partition directories under a log dir, or ``path`` itself when it is one."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"log directory {root} does not exist")
    single = _PARTITION_DIR.match(root.name)
    if single and any(_SEGMENT.match(f) for f in os.listdir(root)):
        starts = read_checkpoint(root.parent / LOG_START_CHECKPOINT)
        key = (single["topic"], int(single["partition"]))
        return [PartitionDir(key[0], key[1], str(root), starts.get(key, 0))]
    starts = read_checkpoint(root / LOG_START_CHECKPOINT)
    found = []
    for name in sorted(os.listdir(root)):
        m = _PARTITION_DIR.match(name)
        if not m or m["topic"] in NOT_TOPICS or not (root / name).is_dir():
            continue
        key = (m["topic"], int(m["partition"]))
        found.append(PartitionDir(key[0], key[1], str(root / name), starts.get(key, 0)))
    return found


def segments(pd: PartitionDir) -> list[Segment]:
    """The partition's segments in offset order (``.deleted``/``.cleaned``/``.swap`` files ignored)."""
    bases = []
    for name in os.listdir(pd.path):
        m = _SEGMENT.match(name)
        if m:
            bases.append(int(m.group(1)))
    bases.sort()
    out = []
    for i, base in enumerate(bases):
        path = os.path.join(pd.path, f"{base:020d}.log")
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:  # removed by retention meanwhile
            continue
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        out.append(Segment(pd.topic, pd.partition, path, base, nxt, pd.log_start_offset, size))
    return out


def _read_entries(path: str, reader: Callable[[str], list[tuple[int, int]]]) -> list[tuple[int, int]]:
    """Whole entries before the zero padding; none when the index is missing."""
    try:
        entries = reader(path)
    except FileNotFoundError:
        return []
    return split_padding(entries)[0]  # type: ignore[return-value]


def offset_index(seg: Segment) -> tuple[list[int], list[int]]:
    """(absolute offsets, positions) of the valid ``.index`` entries."""
    offsets: list[int] = []
    positions: list[int] = []
    for rel, pos in _read_entries(seg.path[:-4] + ".index", read_offset_index):
        if offsets and (rel + seg.base_offset <= offsets[-1] or pos <= positions[-1]):
            break  # garbage after the valid entries (the zero padding is already cut)
        offsets.append(rel + seg.base_offset)
        positions.append(pos)
    return offsets, positions


def time_index(seg: Segment) -> tuple[list[int], list[int]]:
    """(timestamps, absolute offsets) of the valid ``.timeindex`` entries."""
    stamps: list[int] = []
    offsets: list[int] = []
    for ts, rel in _read_entries(seg.path[:-4] + ".timeindex", read_time_index):
        if stamps and ts <= stamps[-1]:
            break
        stamps.append(ts)
        offsets.append(rel + seg.base_offset)
    return stamps, offsets


def segment_max_timestamp(seg: Segment) -> int | None:
    """Largest record timestamp of an inactive segment (its last time index entry, which
    Kafka writes when the segment is rolled), or None when unknown."""
    if seg.next_base_offset is None:
        return None
    stamps, _ = time_index(seg)
    return stamps[-1] if stamps else None


def start_position(seg: Segment, min_offset: int, min_timestamp: int | None) -> int:
    """A file position at or before the first batch that can hold a record with
    offset >= ``min_offset`` and timestamp >= ``min_timestamp`` (Kafka's index lookups)."""
    position = 0
    if min_offset > seg.base_offset:
        offsets, positions = offset_index(seg)
        i = bisect.bisect_right(offsets, min_offset) - 1
        # An entry is (last offset of an append, where that append starts): with the
        # largest entry <= the target, the batch holding the target starts at or after it.
        if i >= 0:
            position = positions[i]
    if min_timestamp is not None:
        stamps, ts_offsets = time_index(seg)
        i = bisect.bisect_right(stamps, min_timestamp) - 1
        if i >= 0:
            # Every batch before the one holding ts_offsets[i] has max timestamp < stamps[i] <= target.
            offsets, positions = offset_index(seg)
            j = bisect.bisect_right(offsets, ts_offsets[i]) - 1
            if j >= 0:
                position = max(position, positions[j])
    return position


def iter_segment_batches(seg: Segment, position: int = 0, *, verify_crc: bool = True) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in buffer, header) of each complete batch from file ``position``.
    A torn or still-being-written tail batch ends the iteration."""
    return iter_log_batches(seg.path, position, verify_crc=verify_crc, chunk_size=READ_CHUNK)


def read_segment(
    seg: Segment,
    *,
    include_headers: bool = False,
    min_offset: int = 0,
    max_offset: int | None = None,
    min_timestamp: int | None = None,
    max_timestamp: int | None = None,
    verify_crc: bool = True,
    chunk_records: int = 8192,
) -> Iterator[Columns]:
    """The segment's records with ``max(min_offset, log start) <= offset < max_offset`` (and,
    when given, ``min_timestamp <= timestamp <= max_timestamp``), in chunks of about
    ``chunk_records``. Control batches (transaction markers) are skipped."""
    lo = max(min_offset, seg.log_start_offset, seg.base_offset)
    hi = seg.next_base_offset if seg.next_base_offset is not None else 1 << 63
    if max_offset is not None:
        hi = min(hi, max_offset)
    if lo >= hi:
        return
    cols = new_columns(include_headers)
    for buf, pos, h in iter_segment_batches(seg, start_position(seg, lo, min_timestamp), verify_crc=verify_crc):
        if h.base_offset >= hi:
            break
        if h.base_offset + h.last_offset_delta < lo or h.attributes & CONTROL_MASK:
            continue
        if min_timestamp is not None and h.max_timestamp < min_timestamp:
            continue
        decode_into(cols, buf, pos, h, lo, hi, min_timestamp, max_timestamp)
        if len(cols) >= chunk_records:
            yield cols
            cols = new_columns(include_headers)
    if len(cols):
        yield cols
