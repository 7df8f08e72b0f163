"""The message browser: records of one partition, newest first by default, read through the
ReplicaManager as a read_uncommitted consumer sees them (up to the high watermark).

The principal needs READ on the topic, as for Fetch. Pages are windows of offsets:
``newest`` (the last ``limit`` offsets before the high watermark, or before ``before``),
``offset`` (from an offset, oldest first) and ``timestamp`` (the first offset at or after a
time, found with ListOffsets, then oldest first). The file bytes are read and decoded off the
event loop; a page reads at most ``MAX_READ_BYTES`` however large the records are. Control
records (transaction markers) are left out, as consumers never see them.

Keys, values and header values are shown as UTF-8 text, as indented JSON when the text parses
as a JSON object or array, and as hex otherwise (bytes that are not UTF-8, or text with control
characters); each is cut at ``SHOW_LIMIT`` bytes with its full size said.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_sidecar.protocol.records import Record, decode_batches
from kafka_sidecar.storage.log import OffsetOutOfRangeError

from ..security.acls import AclOperation, ResourceType
from .api import ConsoleSession, fetch_header
from .cluster import list_offsets

if TYPE_CHECKING:
    from ..broker import Broker

DEFAULT_LIMIT = 20
MAX_LIMIT = 500
READ_CHUNK = 1 << 20
MAX_READ_BYTES = 16 << 20
SHOW_LIMIT = 8192
_CONTROL = frozenset(range(0, 32)) - {9, 10, 13}


class BrowseError(Exception):
    """Bad input or a refused read: the message is shown on the page."""


@dataclass
class Shown:
    kind: str  # "null", "text", "json", "hex"
    text: str
    size: int
    truncated: bool = False


def show_bytes(data: bytes | None, limit: int = SHOW_LIMIT) -> Shown:
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    head = data[:limit]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if size > limit and e.start >= limit - 3:  # a character cut at the limit: still text
            text = head[:e.start].decode("utf-8")
        else:
            return _hex(data, limit)
    if any(ord(c) in _CONTROL for c in text):
        return _hex(data, limit)
    if size <= limit and text[:1] in ("{", "["):
        try:
            return Shown("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False), size)
        except ValueError:
            pass
    return Shown("text", text, size, size > limit)


def _hex(data: bytes, limit: int) -> Shown:
    cut = data[: limit // 2]
    return Shown("hex", cut.hex(" "), len(data), len(data) > len(cut))


@dataclass
class BrowsePage:
    partition: int
    mode: str
    log_start: int
    high_watermark: int
    records: list[Record] = field(default_factory=list)
    first: int = -1  # the window of offsets read: [first, last]
    last: int = -1
    note: str = ""

    @property
    def older(self) -> int | None:
        """``before`` of the page of older records (None: none)."""
        return self.first if self.first > self.log_start else None

    @property
    def newer(self) -> int | None:
        """``offset`` of the page of newer records (None: none)."""
        return self.last + 1 if 0 <= self.last < self.high_watermark - 1 else None


def parse_int(value: str | None, what: str, *, low: int | None = None, high: int | None = None) -> int | None:
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if not text.lstrip("-").isdigit() or len(text) > 20:
        raise BrowseError(f"{what} must be a whole number, got {text[:40]!r}")
    n = int(text)
    if (low is not None and n < low) or (high is not None and n > high):
        raise BrowseError(f"{what} {n} is out of range ({low}..{high})")
    return n


def _decode(data) -> list:
    """pread and decode one slice (off the loop)."""
    return decode_batches(data.read())


async def _read_window(rm, lg, start: int, end: int, limit: int, newest: bool) -> tuple[list[Record], bool]:
    """Records with start <= offset < end (the last ``limit`` of them when ``newest``, else the
    first). Each chunk is located on the loop (ReplicaManager.read, as Fetch does), then read and decoded
    off it. Returns (records, whether the byte cap stopped the read)."""
    loop = asyncio.get_running_loop()
    kept: deque[Record] = deque(maxlen=limit if newest else None)
    position, total = start, 0
    while position < end and total < MAX_READ_BYTES:
        data = rm.read(lg, position, READ_CHUNK, True)
        if data is None or data.size == 0:
            break
        total += data.size
        progressed = False
        for batch in await loop.run_in_executor(None, _decode, data):
            if batch.next_offset > position:
                position, progressed = batch.next_offset, True
            if batch.is_control:
                continue
            for r in batch.records:
                if start <= r.offset < end:
                    kept.append(r)
                    if not newest and len(kept) >= limit:
                        return list(kept), False
        if not progressed:
            break
    return list(kept), position < end and total >= MAX_READ_BYTES


async def browse(broker: Broker, session: ConsoleSession, topic: str, partition: int, *, mode: str = "newest",
                 offset: int | None = None, before: int | None = None, timestamp: int | None = None,
                 limit: int = DEFAULT_LIMIT) -> BrowsePage:
    az = broker.authorizer
    if az.enabled and not az.authorize(session, fetch_header(), AclOperation.READ, ResourceType.TOPIC, topic):
        raise BrowseError(f"{session.principal} may not READ topic {topic} (a Fetch would answer TOPIC_AUTHORIZATION_FAILED)")
    lg = broker.replica_manager.get_log(topic, partition)
    if lg is None:
        raise BrowseError(f"topic {topic} has no partition {partition}")
    limit = max(1, min(limit, MAX_LIMIT))
    start, hw = lg.log_start_offset, lg.high_watermark
    page = BrowsePage(partition, mode, start, hw)
    if mode == "timestamp":
        if timestamp is None:
            raise BrowseError("give a timestamp (milliseconds since the epoch, or a date and time)")
        found = (await list_offsets(broker, session, {topic: [partition]}, timestamp)).get((topic, partition))
        if found is None or found[0] or found[1] < 0:
            page.note = f"no record at or after timestamp {timestamp} (ListOffsets found none)"
            return page
        offset, mode = found[1], "offset"
    if mode == "offset":
        if offset is None:
            raise BrowseError("give an offset")
        if offset < start or offset > hw:
            raise BrowseError(f"offset {offset} is out of range: partition {partition} has offsets {start} to {hw} "
                              f"(log start {start}, high watermark {hw})")
        first, last_excl, newest = offset, hw, False
    else:
        end = hw if before is None else before
        if end < start or end > hw:
            raise BrowseError(f"offset {end} is out of range: partition {partition} has offsets {start} to {hw}")
        first, last_excl, newest = max(start, end - limit), end, True
    if first >= last_excl:
        page.first, page.last = first, first - 1
        return page
    try:
        records, capped = await _read_window(broker.replica_manager, lg, first, last_excl, limit, newest)
    except OffsetOutOfRangeError as e:  # the log start moved meanwhile (retention, DeleteRecords)
        raise BrowseError(f"the records moved while reading: {e}") from None
    if newest:
        records.reverse()
        page.first = records[-1].offset if records and len(records) >= limit else first
        page.last = last_excl - 1
    else:
        page.first = first
        page.last = records[-1].offset if records and len(records) >= limit else last_excl - 1
    if capped:
        page.note = f"stopped after reading {MAX_READ_BYTES >> 20} MiB: the records here are large"
        if records:
            page.last = records[0].offset if newest else records[-1].offset
    page.records = records
    return page
