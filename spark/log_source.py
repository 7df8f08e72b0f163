"""``format("kafka-sidecar-log")``: read a Kafka log directory's segment files, no broker.

``spark.read.format("kafka-sidecar-log").load("/path/to/data")`` returns the
records of every partition directory (or of the one partition directory
given) with the schema of Spark's Kafka source. One input partition per
segment. Filters on ``topic``, ``partition`` and ``offset`` are pushed down
and applied exactly (whole directories and segments skipped, the offset index
used to seek); filters on ``timestamp`` prune segments and seek with the time
index, and Spark still applies them. Records below a partition's log start
offset (``log-start-offset-checkpoint``) are never returned.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

try:  # pyspark >= 4.1: filter pushdown for Python data sources
    from pyspark.sql.datasource import (
        EqualTo,
        Filter,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )
except ImportError:  # pragma: no cover - pyspark 4.0 never calls pushFilters

    class Filter:  # type: ignore[no-redef]
        pass

    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = Filter  # type: ignore[misc]

from ._logdir import Segment, discover, read_segment, segment_max_timestamp, segments
from ._options import OptionError, _bool, _get
from ._schema import check_schema, kafka_schema, to_arrow

NAME = "kafka-sidecar-log"
_NO_MAX = 1 << 63


class SegmentInputPartition(InputPartition):
    """One segment file, with the offset/timestamp bounds pushed down."""

    def __init__(self, segment: Segment, min_offset: int, max_offset: int | None,
                 min_timestamp: int | None, max_timestamp: int | None) -> None:
        self.segment = segment
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.min_timestamp = min_timestamp
        self.max_timestamp = max_timestamp


class KafkaSidecarLogDataSource(DataSource):
    """Registered as ``register(spark)`` does or the standard way
    (``spark.dataSource.register(KafkaSidecarLogDataSource)``), with or without
    ``spark.sql.python.filterPushdown.enabled``: see ``reader``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return kafka_schema(_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        include_headers = _bool(self.options, "includeHeaders", False)
        check_schema(schema, include_headers, "kafka-sidecar-log")
        path = _get(self.options, "path")
        if not path:
            raise OptionError(f"{NAME} needs the log directory: .load(\"/path/to/log-dir\")")
        # Spark refuses a reader that has pushFilters while spark.sql.python.filterPushdown.enabled
        # is false (DATA_SOURCE_PUSHDOWN_DISABLED), and reader() cannot read that setting. But
        # Spark only calls pushFilters from its filter-pushdown planning step, which exists only
        # when the setting is on: so by default the reader has pushFilters exactly when that step
        # is the one asking (_planning_pushdown). pushdown=true asks for it anyway (Spark's error
        # if the setting is off); pushdown=false never, which also avoids pyspark 4.1-4.3 reusing
        # the read planned for a filtered query in the next unfiltered query on the same
        # DataFrame (see spark/README.md).
        pushdown = _get(self.options, "pushdown")
        wanted = _planning_pushdown() if pushdown is None else _bool(self.options, "pushdown", True)
        cls = PushdownLogReader if wanted else LogReader
        return cls(
            path=path,
            include_headers=include_headers,
            subscribe=_get(self.options, "subscribe"),
            pattern=_get(self.options, "subscribePattern"),
            include_internal=_bool(self.options, "includeInternal", False),
            verify_crc=_bool(self.options, "verifyCrc", True),
        )


# pyspark's planning step that pushes filters (pyspark/sql/worker/data_source_pushdown_filters.py):
# it creates the reader and then calls pushFilters; Spark runs it only with filter pushdown on.
_PUSHDOWN_PLANNER = "data_source_pushdown_filters.py"


def _planning_pushdown(depth: int = 8) -> bool:
    """Whether reader() was called by pyspark's filter-pushdown planning step (a few frames up,
    allowing for subclasses that call ``super().reader``). If a later pyspark renames or merges
    that step, this is False and the read goes without pushdown: the same rows, never an error."""
    frame = sys._getframe(1)
    for _ in range(depth):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return False
        if os.path.basename(frame.f_code.co_filename) == _PUSHDOWN_PLANNER:
            return True
    return False


def _ms_floor(v: object) -> int | None:
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.UTC)
        delta = v - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        return (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) // 1000
    return None


def _ms_ceil(v: object) -> int | None:
    floor = _ms_floor(v)
    if floor is None:
        return None
    assert isinstance(v, datetime.datetime)
    return floor + (1 if v.microsecond % 1000 else 0)


class LogReader(DataSourceReader):
    def __init__(self, *, path: str, include_headers: bool, subscribe: str | None, pattern: str | None,
                 include_internal: bool, verify_crc: bool) -> None:
        self.path = path
        self.include_headers = include_headers
        self.topics = {t.strip() for t in subscribe.split(",") if t.strip()} if subscribe else None
        self.pattern = pattern
        self.include_internal = include_internal
        self.verify_crc = verify_crc
        # pushed down
        self.partition_set: set[int] | None = None
        self.partition_lo, self.partition_hi = 0, _NO_MAX  # [lo, hi)
        self.offset_lo, self.offset_hi = 0, _NO_MAX  # [lo, hi)
        self.ts_lo: int | None = None  # inclusive, milliseconds
        self.ts_hi: int | None = None
        self.pushed: list[str] = []

    # ---- filter pushdown (pyspark >= 4.1, PushdownLogReader) ----------------------------

    def _push(self, f: Filter) -> bool:
        """Record what ``f`` allows; True when it is applied exactly (Spark may drop it)."""
        attribute = getattr(f, "attribute", ())
        if len(attribute) != 1:
            return False
        col = attribute[0]
        value = getattr(f, "value", None)
        if col == "topic":
            if isinstance(f, EqualTo) and isinstance(value, str):
                names = {value}
            elif isinstance(f, In) and all(isinstance(v, str) for v in value):
                names = set(value)
            else:
                return False
            self.topics = names if self.topics is None else self.topics & names
            self.pushed.append(repr(f))
            return True
        if col in ("partition", "offset"):
            values = value if isinstance(f, In) else [value]
            if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                return False
            if col == "partition" and isinstance(f, In | EqualTo):
                s = set(values)
                self.partition_set = s if self.partition_set is None else self.partition_set & s
                self.pushed.append(repr(f))
                return True
            lo, hi = _bounds(f, values)
            if lo is None and hi is None:
                return False
            if col == "partition":
                self.partition_lo = max(self.partition_lo, lo or 0)
                self.partition_hi = min(self.partition_hi, hi if hi is not None else _NO_MAX)
            else:
                self.offset_lo = max(self.offset_lo, lo or 0)
                self.offset_hi = min(self.offset_hi, hi if hi is not None else _NO_MAX)
            self.pushed.append(repr(f))
            return not isinstance(f, In)  # an IN list only narrows the range: Spark keeps it
        if col == "timestamp":
            if isinstance(f, GreaterThan | GreaterThanOrEqual | EqualTo):
                lo = _ms_floor(value)
                if lo is not None:
                    self.ts_lo = lo if self.ts_lo is None else max(self.ts_lo, lo)
            if isinstance(f, LessThan | LessThanOrEqual | EqualTo):
                hi = _ms_ceil(value)
                if hi is not None:
                    self.ts_hi = hi if self.ts_hi is None else min(self.ts_hi, hi)
            return False  # conservative (millisecond) bounds: Spark still applies the exact filter
        return False

    # ---- planning ---------------------------------------------------------------------

    def _wanted(self, topic: str, partition: int) -> bool:
        if self.topics is not None:
            if topic not in self.topics:
                return False
        elif self.pattern is not None:
            if not re.fullmatch(self.pattern, topic):
                return False
        elif topic.startswith("__") and not self.include_internal:
            return False
        if self.partition_set is not None and partition not in self.partition_set:
            return False
        return self.partition_lo <= partition < self.partition_hi

    def partitions(self) -> list[InputPartition]:
        out: list[InputPartition] = []
        if self.offset_lo >= self.offset_hi or (self.ts_lo is not None and self.ts_hi is not None and self.ts_lo > self.ts_hi):
            return out
        for pd in discover(self.path):
            if not self._wanted(pd.topic, pd.partition):
                continue
            for seg in segments(pd):
                lo = max(seg.base_offset, seg.log_start_offset, self.offset_lo)
                hi = min(seg.next_base_offset if seg.next_base_offset is not None else _NO_MAX, self.offset_hi)
                if lo >= hi or seg.size == 0:
                    continue
                if self.ts_lo is not None:
                    max_ts = segment_max_timestamp(seg)
                    if max_ts is not None and max_ts < self.ts_lo:
                        continue
                out.append(SegmentInputPartition(
                    seg, self.offset_lo, self.offset_hi if self.offset_hi != _NO_MAX else None, self.ts_lo, self.ts_hi,
                ))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentInputPartition):
            return
        seg = partition.segment
        for cols in read_segment(
            seg,
            include_headers=self.include_headers,
            min_offset=partition.min_offset,
            max_offset=partition.max_offset,
            min_timestamp=partition.min_timestamp,
            max_timestamp=partition.max_timestamp,
            verify_crc=self.verify_crc,
        ):
            yield to_arrow(cols, seg.topic, seg.partition)


class PushdownLogReader(LogReader):
    """LogReader with filter pushdown (pyspark >= 4.1 calls ``pushFilters``)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for f in filters:
            if not self._push(f):
                yield f


def _bounds(f: Filter, values: list[int]) -> tuple[int | None, int | None]:
    """[lo, hi) allowed by a comparison (or the span of an IN list)."""
    if isinstance(f, EqualTo):
        return values[0], values[0] + 1
    if isinstance(f, In):
        return min(values), max(values) + 1
    v = values[0]
    if isinstance(f, GreaterThan):
        return v + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return v, None
    if isinstance(f, LessThan):
        return None, v
    if isinstance(f, LessThanOrEqual):
        return None, v + 1
    return None, None


__all__ = ["KafkaSidecarLogDataSource", "NAME"]
