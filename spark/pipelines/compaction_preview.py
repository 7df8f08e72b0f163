"""Compaction preview: what the log cleaner would keep and drop in a compacted topic.

Kafka's cleaner keeps, per partition, the record with the highest offset for
each key and drops the rest; a kept record with a null value is a tombstone,
which stays for ``delete.retention.ms`` after its delete horizon and is then
removed too; keyless records are dropped. ``preview`` marks every record with
``action`` (keep / drop) and ``reason`` (latest / tombstone / superseded /
keyless) as a DataFrame; ``summarize`` totals it. This is a full clean: the
real cleaner leaves the active segment and records newer than
``min.compaction.lag.ms`` alone until later passes.

    python -m kafka_sidecar.spark.pipelines.compaction_preview --bootstrap-server 127.0.0.1:9092 --topic users
    python -m kafka_sidecar.spark.pipelines.compaction_preview --log-dir ./data --topic users
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kafka_sidecar.spark.pipelines._common import common_args, spark_session
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F


def load(spark: SparkSession, topic: str, *, bootstrap: str | None = None, log_dir: str | None = None) -> DataFrame:
    """A topic's records over the wire (batch read, earliest to latest) or from a log dir."""
    if (bootstrap is None) == (log_dir is None):
        raise ValueError("give exactly one of bootstrap (read over the wire) or log_dir (read the files)")
    if bootstrap is not None:
        reader = (spark.read.format("kafka-sidecar").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("failOnDataLoss", "false"))
        return reader.load()
    return spark.read.format("kafka-sidecar-log").option("subscribe", topic).load(log_dir)


def preview(records: DataFrame) -> DataFrame:
    """``records`` (Kafka source schema) with ``action`` and ``reason`` columns."""
    by_key = Window.partitionBy("topic", "partition", "key").orderBy(F.col("offset").desc())
    rank = F.row_number().over(by_key)
    keyless = F.col("key").isNull()
    reason = (
        F.when(keyless, F.lit("keyless"))
        .when(rank > 1, F.lit("superseded"))
        .when(F.col("value").isNull(), F.lit("tombstone"))
        .otherwise(F.lit("latest"))
    )
    return (records.withColumn("reason", reason)
            .withColumn("action", F.when(F.col("reason").isin("latest", "tombstone"), "keep").otherwise("drop")))


def summarize(marked: DataFrame) -> dict[str, Any]:
    """Totals: records, distinct keys, kept/dropped/tombstones/keyless, and key+value bytes
    before and after."""
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    row = marked.agg(
        F.count(F.lit(1)).alias("records"),
        F.countDistinct("topic", "partition", "key").alias("keys"),
        F.sum(F.when(F.col("action") == "keep", 1).otherwise(0)).alias("kept"),
        F.sum(F.when(F.col("action") == "drop", 1).otherwise(0)).alias("dropped"),
        F.sum(F.when(F.col("reason") == "tombstone", 1).otherwise(0)).alias("tombstones"),
        F.sum(F.when(F.col("reason") == "keyless", 1).otherwise(0)).alias("keyless"),
        F.sum(size).alias("bytes_before"),
        F.sum(F.when(F.col("action") == "keep", size).otherwise(0)).alias("bytes_after"),
    ).collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_sidecar.spark.pipelines.compaction_preview",
        description="What Kafka's log cleaner would keep and drop in a compacted topic.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bootstrap-server", help="read the topic from a broker")
    source.add_argument("--log-dir", help="read the topic's segment files from a log directory")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", help="also write the marked records as Parquet here")
    parser.add_argument("--show", type=int, default=20, help="print this many marked records (0: none)")
    common_args(parser)
    args = parser.parse_args(argv)
    spark = spark_session("kafka-sidecar compaction-preview", args.master)
    marked = preview(load(spark, args.topic, bootstrap=args.bootstrap_server, log_dir=args.log_dir))
    if args.show:
        (marked.select("partition", "offset", F.col("key").cast("string").alias("key"),
                       F.col("value").cast("string").alias("value"), "action", "reason")
         .orderBy("partition", "offset").show(args.show, truncate=40))
    if args.output:
        marked.write.mode("overwrite").parquet(args.output)
    print(json.dumps(summarize(marked), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
