"""Streaming example: topic -> transform -> topic, with a checkpoint.

Reads ``--source`` with ``readStream.format("kafka-sidecar")``, upper-cases each
value, adds a ``source`` header naming where the record came from
(``<topic>-<partition>@<offset>``), and writes to ``--sink`` with
``writeStream.format("kafka-sidecar")``. The checkpoint holds the source
offsets of every committed micro-batch (Spark's Kafka JSON), so a stopped or
restarted query continues where it stopped: each source record is written
once as long as the query is stopped between micro-batches (a crash inside a
micro-batch replays that batch, which Spark's Kafka sink also does; the
``source`` header lets a consumer drop such duplicates).

    python -m kafka_sidecar.spark.pipelines.stream_transform --bootstrap-server 127.0.0.1:9092 \\
        --source events --sink events-upper --checkpoint /tmp/ckpt [--available-now]
"""

from __future__ import annotations

import argparse
import sys

from kafka_sidecar.spark._schema import HEADERS_TYPE
from kafka_sidecar.spark.pipelines._common import common_args, spark_session
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery


def transform(records: DataFrame) -> DataFrame:
    """Kafka source rows -> Kafka sink rows (key, value, headers)."""
    provenance = F.struct(
        F.lit("source").alias("key"),
        F.concat(F.col("topic"), F.lit("-"), F.col("partition").cast("string"), F.lit("@"),
                 F.col("offset").cast("string")).cast("binary").alias("value"),
    )
    headers = F.coalesce(F.col("headers"), F.array().cast(HEADERS_TYPE))
    return records.select(
        F.col("key"),
        F.upper(F.col("value").cast("string")).alias("value"),
        F.concat(headers, F.array(provenance)).alias("headers"),
    )


def start(
    spark: SparkSession,
    *,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    available_now: bool = False,
    trigger_interval: str | None = None,
    fail_on_data_loss: bool = True,
) -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka-sidecar")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", starting_offsets)
        .option("includeHeaders", "true")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    writer = (
        transform(reader.load()).writeStream.format("kafka-sidecar")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .queryName(f"{source}-to-{sink}")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_interval:
        writer = writer.trigger(processingTime=trigger_interval)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_sidecar.spark.pipelines.stream_transform",
        description="Stream one topic into another through a transformation, with a checkpoint.",
    )
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--source", required=True, help="topic to read")
    parser.add_argument("--sink", required=True, help="topic to write")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it to resume)")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest or Spark's JSON (first start only)")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--trigger-interval", help='micro-batch interval, e.g. "5 seconds"')
    common_args(parser)
    args = parser.parse_args(argv)
    spark = spark_session("kafka-sidecar stream-transform", args.master)
    query = start(
        spark, bootstrap=args.bootstrap_server, source=args.source, sink=args.sink, checkpoint=args.checkpoint,
        starting_offsets=args.starting_offsets, max_offsets_per_trigger=args.max_offsets_per_trigger,
        available_now=args.available_now, trigger_interval=args.trigger_interval,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
