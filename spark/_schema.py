"""Spark's Kafka source schema, as a Spark StructType and as the Arrow schema rows travel in."""

from __future__ import annotations

from functools import cache

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ._records import Columns

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
_ARROW_HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def kafka_schema(include_headers: bool) -> StructType:
    """key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int (+ headers array<struct<key string, value binary>>): all nullable."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


@cache
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for ``kafka_schema`` (what ``to_arrow_schema`` gives)."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        try:
            return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
        except TypeError:  # older signatures
            return to_arrow_schema(kafka_schema(include_headers))
    except ImportError:
        pass
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _ARROW_HEADERS))
    return pa.schema(fields)


def check_schema(schema: StructType, include_headers: bool, source: str) -> None:
    """Spark's Kafka source has a fixed schema; a user-specified one is an error."""
    expected = kafka_schema(include_headers)
    if schema is not None and schema.simpleString() != expected.simpleString():
        raise ValueError(
            f"{source} source has a fixed schema and cannot be set with a custom one "
            f"(expected {expected.simpleString()}, got {schema.simpleString()})"
        )


def to_arrow(cols: Columns, topic: str, partition: int) -> pa.RecordBatch:
    """One Arrow record batch of decoded records."""
    n = len(cols)
    include_headers = cols.headers is not None
    arrays = [
        pa.array(cols.keys, pa.binary()),
        pa.array(cols.values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(cols.offsets, pa.int64()),
        pa.array([t * 1000 for t in cols.timestamps], pa.timestamp("us", tz="UTC")),
        pa.array(cols.timestamp_types, pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array(cols.headers, _ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))
