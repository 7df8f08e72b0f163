"""``format("kafka-sidecar")``: Spark's Kafka source and sink as a Python data source.

Batch (``spark.read``) and streaming (``spark.readStream``) reads take the
options of Spark's built-in ``kafka`` connector and produce its schema; writes
(``df.write`` / ``writeStream``) take its columns. See ``spark/README.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from ._consumer import read_range
from ._options import (
    OffsetRange,
    OptionError,
    SinkOptions,
    SourceOptions,
    data_loss,
    offsets_from_json,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
    rate_limit,
    resolve_offsets,
    split_ranges,
)
from ._producer import BatchingProducer
from ._schema import check_schema, kafka_schema, to_arrow
from ._wire import Broker, TopicPartition

try:  # Spark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    _STREAM_BASES: tuple[type, ...] = (DataSourceStreamReader, SupportsTriggerAvailableNow)
except ImportError:  # pragma: no cover - older pyspark
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    _STREAM_BASES = (DataSourceStreamReader,)

try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    _STREAM_WRITER_BASE: type = DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - older pyspark
    _STREAM_WRITER_BASE = DataSourceStreamWriter

NAME = "kafka-sidecar"


class KafkaInputPartition(InputPartition):
    """One offset range ``[start, end)`` of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def _read_partition(opts: SourceOptions, part: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(part, KafkaInputPartition):
        return  # the single empty partition Spark plans when there is nothing to read
    for cols in read_range(
        opts.bootstrap, part.topic, part.partition, part.start, part.end,
        fail_on_data_loss=opts.fail_on_data_loss, include_headers=opts.include_headers,
        fetch_bytes=opts.fetch_bytes, isolation_level=opts.isolation_level, timeout_s=opts.timeout_s,
    ):
        yield to_arrow(cols, part.topic, part.partition)


def _input_partitions(opts: SourceOptions, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
    split = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    return [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in split]


class KafkaSidecarDataSource(DataSource):
    """Spark's ``kafka`` source/sink options and schema, over the Kafka protocol."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _include_headers(self) -> bool:
        return str(self.options.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_source_options(self.options, streaming=False)
        check_schema(schema, opts.include_headers, "Kafka")
        return KafkaBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_source_options(self.options, streaming=True)
        check_schema(schema, opts.include_headers, "Kafka")
        return KafkaStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise OptionError(
                "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
                "ErrorIfExists (default); Python data sources need .mode(\"append\")."
            )
        opts = parse_sink_options(self.options)
        return KafkaBatchWriter(opts, sink_columns(schema, opts.topic))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # ``overwrite`` is the complete output mode: every row is written again, as Spark's sink does.
        opts = parse_sink_options(self.options)
        return KafkaStreamWriter(opts, sink_columns(schema, opts.topic))


# --------------------------------------------------------------------------- batch read


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        with Broker(opts.bootstrap, timeout=opts.timeout_s) as broker:
            tps = opts.strategy.partitions(broker)
            start = resolve_offsets(broker, tps, opts.starting, is_start=True,
                                    no_match_latest=opts.no_match_latest, isolation_level=opts.isolation_level)
            end = resolve_offsets(broker, tps, opts.ending, is_start=False, isolation_level=opts.isolation_level)
        ranges = []
        for tp in tps:
            if start[tp] > end[tp]:
                raise OptionError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for topic {tp[0]} "
                    f"partition {tp[1]}. You either provided an invalid fromOffset, or the Kafka topic "
                    "has been damaged"
                )
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        return _input_partitions(opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.opts, partition)


# --------------------------------------------------------------------------- streaming read


class KafkaStreamReader(*_STREAM_BASES):  # type: ignore[misc]
    """Offsets are Spark's Kafka source JSON: {"topic": {"partition": offset}}."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self._latest: dict[TopicPartition, int] | None = None
        self._planned: dict[TopicPartition, int] | None = None  # start hint for pyspark < 4.2

    def _broker(self) -> Broker:
        return Broker(self.opts.bootstrap, timeout=self.opts.timeout_s)

    def initialOffset(self) -> dict:
        opts = self.opts
        with self._broker() as broker:
            tps = opts.strategy.partitions(broker)
            start = resolve_offsets(broker, tps, opts.starting, is_start=True,
                                    no_match_latest=opts.no_match_latest, isolation_level=opts.isolation_level)
        self._planned = start
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None and self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        with self._broker() as broker:
            tps = self.opts.strategy.partitions(broker)
            self._target = broker.latest(tps, self.opts.isolation_level)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        opts = self.opts
        if start is not None:
            start_map = offsets_from_json(start)
            max_rows = getattr(limit, "max_rows", None)
        else:  # pyspark < 4.2: no start, no limit; rate-limit from the last planned offsets
            start_map = self._planned
            max_rows = opts.max_offsets_per_trigger if start_map is not None else None
            start_map = start_map or {}
        with self._broker() as broker:
            tps = opts.strategy.partitions(broker)
            current = broker.latest(tps, opts.isolation_level)
            self._latest = dict(current)
            gone = sorted(set(start_map) - set(current))
            if gone and opts.fail_on_data_loss:
                raise data_loss("PARTITIONS_DELETED", f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone. "
                                "Some data may have been missed.")
            end: dict[TopicPartition, int] = {}
            for tp, offset in current.items():
                if self._target is not None:  # Trigger.AvailableNow: nothing past the target
                    if tp in self._target:
                        offset = min(offset, self._target[tp])
                    elif tp in start_map:
                        offset = start_map[tp]
                    else:
                        continue
                end[tp] = offset
            if max_rows:
                new = [tp for tp in end if tp not in start_map]
                begin = dict(start_map)
                if new:
                    begin.update(broker.earliest(new, opts.isolation_level))
                end = rate_limit(max_rows, begin, end)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        opts = self.opts
        start_map = offsets_from_json(start)
        end_map = offsets_from_json(end)
        self._planned = end_map
        new = [tp for tp in end_map if tp not in start_map]
        if new:
            with self._broker() as broker:
                earliest = broker.earliest(new, opts.isolation_level)
            for tp in new:
                if earliest[tp] != 0 and opts.fail_on_data_loss:
                    raise data_loss(
                        "ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
                        f"Added partition {tp[0]}-{tp[1]} starts from {earliest[tp]} instead of 0. "
                        "Some data may have been missed.",
                    )
                start_map[tp] = earliest[tp]
        ranges = []
        for tp, until in sorted(end_map.items()):
            begin = start_map[tp]
            if until < begin:
                if opts.fail_on_data_loss:
                    raise data_loss(
                        "PARTITION_OFFSET_CHANGED",
                        f"Partition {tp[0]}-{tp[1]}'s offset was changed from {begin} to {until}, "
                        "some data may have been missed.",
                    )
                continue
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
        return _input_partitions(opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass  # like Spark's Kafka source: offsets live in the checkpoint, nothing is committed to Kafka

    def stop(self) -> None:
        pass


# --------------------------------------------------------------------------- write


_HEADERS_SIMPLE = "array<struct<key:string,value:binary>>"


def sink_columns(schema: StructType, topic_option: str | None) -> dict[str, str]:
    """Spark's KafkaWriter.validateQuery: the columns used and their kind (string/binary/...)."""
    fields = {f.name.lower(): f for f in schema.fields}
    cols: dict[str, str] = {}

    def kind(name: str, allowed: tuple[type, ...], message: str) -> None:
        f = fields.get(name)
        if f is None:
            return
        if not isinstance(f.dataType, allowed):
            raise OptionError(message)
        cols[name] = f.name

    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    kind("value", (StringType, BinaryType), "value attribute type must be a string or binary")
    kind("key", (StringType, BinaryType), "key attribute type must be a string or binary")
    if topic_option is None:
        if "topic" not in fields:
            raise OptionError(
                "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
            )
        kind("topic", (StringType,), "Topic type must be a string")
    kind("partition", (IntegerType,), "partition attribute type must be an int")
    h = fields.get("headers")
    if h is not None:
        if not isinstance(h.dataType, ArrayType) or h.dataType.elementType.simpleString() != "struct<key:string,value:binary>":
            raise OptionError(f"headers attribute type must be {_HEADERS_SIMPLE}")
        cols["headers"] = h.name
    return cols


def _to_bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _headers(v: Any) -> list[tuple[str, bytes | None]] | None:
    if not v:
        return None
    out = []
    for h in v:
        key, value = (h["key"], h["value"]) if isinstance(h, dict) else (h[0], h[1])
        if key is None:
            raise ValueError("header keys cannot be null")
        out.append((key, _to_bytes(value)))
    return out


class _SinkCommit(WriterCommitMessage):
    def __init__(self, records: int) -> None:
        self.records = records


def _write_rows(opts: SinkOptions, cols: dict[str, str], rows: Iterator[tuple]) -> _SinkCommit:
    producer = BatchingProducer(opts)
    try:
        for topic, partition, key, value, headers in rows:
            producer.send(opts.topic if opts.topic is not None else topic, partition,
                          _to_bytes(key), _to_bytes(value), _headers(headers))
        producer.flush()
        return _SinkCommit(producer.sent_records)
    finally:
        producer.close()


def _arrow_rows(cols: dict[str, str], batches: Iterator[pa.RecordBatch]) -> Iterator[tuple]:
    names = ("topic", "partition", "key", "value", "headers")
    for batch in batches:
        columns = [
            batch.column(cols[c]).to_pylist() if c in cols else [None] * batch.num_rows for c in names
        ]
        yield from zip(*columns, strict=True)


def _spark_rows(cols: dict[str, str], rows: Iterator[Any]) -> Iterator[tuple]:
    names = [cols.get(c) for c in ("topic", "partition", "key", "value", "headers")]
    for row in rows:
        yield tuple(row[n] if n is not None else None for n in names)


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, cols: dict[str, str]) -> None:
        self.opts = opts
        self.cols = cols

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write_rows(self.opts, self.cols, _arrow_rows(self.cols, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged stay in Kafka: the sink is at-least-once, like Spark's.
        pass


class KafkaStreamWriter(_STREAM_WRITER_BASE):  # type: ignore[misc,valid-type]
    def __init__(self, opts: SinkOptions, cols: dict[str, str]) -> None:
        self.opts = opts
        self.cols = cols

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if _STREAM_WRITER_BASE is DataSourceStreamWriter:
            rows = _spark_rows(self.cols, iterator)
        else:
            rows = _arrow_rows(self.cols, iterator)
        return _write_rows(self.opts, self.cols, rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        print(f"kafka-sidecar: streaming write of batch {batchId} aborted; records already "
              "acknowledged stay in the topic (at-least-once)", file=sys.stderr)
