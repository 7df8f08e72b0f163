"""Archive-then-trim: tiered storage for a Kafka topic, on any Spark cluster.

Reads a topic's records up to an offset (per partition: the high watermark,
given offsets, or the first record at/after a timestamp), writes them as
Parquet partitioned by ``topic``/``partition``/``date`` (UTC day of the record
timestamp) and, only once that write has committed, calls DeleteRecords up to
the archived offset. State lives next to the output, in
``<output>/_kafka_sidecar_archive/`` (hidden from Parquet readers):

- ``state/state-<n>.json``: per partition the offset archived up to (exclusive)
  and the offset trimmed to, the run in progress, and past runs;
- ``staging/<run>/``: where a run's Spark job writes before its files are moved
  into the output.

A run first records what it is about to archive, writes it to staging, records
"written", moves the files into place, then records the new archived offsets
(the commit). A rerun after a crash finishes a written run or discards an
unfinished one, so records are archived exactly once; DeleteRecords never goes
past the committed archived offset, so nothing unarchived is deleted.

    python -m kafka_sidecar.spark.pipelines.archive_then_trim \\
        --bootstrap-server 127.0.0.1:9092 --topic events --output /data/archive [--until latest]
    spark-submit --py-files kafka_sidecar.zip archive_then_trim.py ...  (see spark/README.md)
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import uuid
from typing import Any

from kafka_sidecar.spark._options import DataLossError, offsets_to_json, parse_partition_json
from kafka_sidecar.spark._wire import Broker, TopicPartition, error_name
from kafka_sidecar.spark.pipelines._common import HadoopFS, StateLog, common_args, spark_session
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

STATE_DIR = "_kafka_sidecar_archive"
DAY_MS = 86_400_000


class SimulatedCrash(RuntimeError):
    """Raised by the ``_crash`` test hook."""


def _key(tp: TopicPartition) -> str:
    return f"{tp[0]}:{tp[1]}"


def _tp(key: str) -> TopicPartition:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def resolve_until(broker: Broker, tps: list[TopicPartition], until: str, before_timestamp: int | None,
                  latest: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offset to archive up to (exclusive) for each partition, capped at the high watermark."""
    if before_timestamp is not None:
        found = broker.list_offsets(dict.fromkeys(tps, before_timestamp))
        return {tp: latest[tp] if found[tp][0] < 0 else min(found[tp][0], latest[tp]) for tp in tps}
    u = until.strip()
    if u == "latest":
        return dict(latest)
    if u.lstrip("-").isdigit():
        return {tp: min(int(u), latest[tp]) for tp in tps}
    given = parse_partition_json(u, "--until")
    return {tp: min(latest[tp], latest[tp] if given.get(tp, 0) == -1 else given.get(tp, 0)) for tp in tps}


def read_ranges(spark: SparkSession, bootstrap: str, ranges: dict[TopicPartition, tuple[int, int]]) -> DataFrame:
    """The records of ``ranges`` (start inclusive, end exclusive) with a UTC ``date`` column."""
    assign: dict[str, list[int]] = {}
    for t, p in sorted(ranges):
        assign.setdefault(t, []).append(p)
    df = (
        spark.read.format("kafka-sidecar")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(offsets_to_json({tp: r[0] for tp, r in ranges.items()})))
        .option("endingOffsets", json.dumps(offsets_to_json({tp: r[1] for tp, r in ranges.items()})))
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .load()
    )
    day = F.floor(F.unix_millis(F.col("timestamp")) / F.lit(DAY_MS)).cast("int")
    return df.withColumn("date", F.date_from_unix_date(day))


class Archiver:
    def __init__(self, spark: SparkSession, bootstrap: str, output: str) -> None:
        self.spark = spark
        self.bootstrap = bootstrap
        self.fs = HadoopFS(spark, output)
        self.log = StateLog(self.fs, self.fs.path(STATE_DIR, "state"))
        self.state = self.log.load({"version": 1, "partitions": {}, "pending": None, "runs": [], "gaps": []})

    def staging(self, run_id: str) -> Any:
        return self.fs.path(STATE_DIR, "staging", run_id)

    def save(self) -> None:
        self.log.save(self.state)

    # ---- one run -------------------------------------------------------------------

    def recover(self) -> str | None:
        """Finish or discard the run a crash interrupted."""
        pending = self.state["pending"]
        if not pending:
            return None
        staging = self.staging(pending["run_id"])
        if pending["state"] == "writing":
            if not self.fs.exists(self.fs._Path(staging, "_SUCCESS")):
                self.fs.delete(staging)
                self.state["pending"] = None
                self.save()
                return f"discarded unfinished run {pending['run_id']}"
            pending["records"] = self._count(staging)
            pending["state"] = "written"
            self.save()
        self._commit()
        return f"completed run {pending['run_id']}"

    def _count(self, staging: Any) -> int:
        if not any(True for f in self.fs.files(staging) if f.getName().endswith(".parquet")):
            return 0
        return self.spark.read.parquet(str(staging)).count()

    def archive(self, ranges: dict[TopicPartition, tuple[int, int]], crash: str | None = None) -> dict[str, Any]:
        run_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        self.state["pending"] = {
            "run_id": run_id, "state": "writing", "started": _now(),
            "ranges": {_key(tp): list(r) for tp, r in sorted(ranges.items())},
        }
        self.save()
        staging = self.staging(run_id)
        observed = Observation(f"archive-{run_id}")
        out = read_ranges(self.spark, self.bootstrap, ranges).observe(observed, F.count(F.lit(1)).alias("records"))
        out.write.partitionBy("topic", "partition", "date").mode("errorifexists").parquet(str(staging))
        if crash == "after-write":
            raise SimulatedCrash("crash after the Spark write, before it was recorded")
        self.state["pending"]["records"] = int(observed.get["records"])
        self.state["pending"]["state"] = "written"
        self.save()
        if crash == "after-written":
            raise SimulatedCrash("crash after recording the write, before the commit")
        return self._commit()

    def _commit(self) -> dict[str, Any]:
        """Move the staged files into the output, then record the new archived offsets."""
        pending = self.state["pending"]
        staging = self.staging(pending["run_id"])
        for f in self.fs.files(staging):
            name = f.getName()
            if name.startswith(("_", ".")):
                continue  # _SUCCESS, checksum files
            rel = self.fs.relative(f, staging)
            if not self.fs.rename(f, self.fs.path(*rel.split("/"))):
                raise OSError(f"could not move {f} into the archive")
        self.fs.delete(staging)
        parts = self.state["partitions"]
        for key, (_start, end) in pending["ranges"].items():
            rec = parts.setdefault(key, {"archived": 0, "trimmed": 0})
            rec["archived"] = max(rec["archived"], end)
        run = {k: pending[k] for k in ("run_id", "started", "ranges", "records")}
        run["committed"] = _now()
        self.state["runs"].append(run)
        self.state["pending"] = None
        self.save()  # the commit point
        return run

    def trim(self) -> tuple[dict[str, int], dict[str, str]]:
        """DeleteRecords up to the archived offset where the log still starts before it."""
        parts = self.state["partitions"]
        todo = {_tp(k): rec["archived"] for k, rec in parts.items() if rec["archived"] > rec.get("trimmed", 0)}
        if not todo:
            return {}, {}
        done: dict[str, int] = {}
        errors: dict[str, str] = {}
        with Broker(self.bootstrap) as broker:
            broker.metadata(sorted({t for t, _ in todo}))
            results = broker.delete_records(todo)
        for tp, (code, low) in results.items():
            key = _key(tp)
            if code == 0:
                parts[key]["trimmed"] = max(parts[key].get("trimmed", 0), min(low, parts[key]["archived"]))
                done[key] = low
            else:
                errors[key] = error_name(code)
        self.save()
        return done, errors


def run(
    spark: SparkSession,
    *,
    bootstrap: str,
    topics: list[str],
    output: str,
    until: str = "latest",
    before_timestamp: int | None = None,
    trim: bool = True,
    fail_on_data_loss: bool = True,
    _crash: str | None = None,
) -> dict[str, Any]:
    """One archive-then-trim pass; returns a summary (also what the CLI prints)."""
    arch = Archiver(spark, bootstrap, output)
    summary: dict[str, Any] = {"recovered": arch.recover(), "run": None, "archived": {}, "records": 0,
                               "trimmed": {}, "trim_errors": {}, "gaps": {}}
    with Broker(bootstrap) as broker:
        metas = broker.metadata(topics)
        missing = [t for t in topics if t not in metas or metas[t].error != 0]
        if missing:
            raise ValueError(f"topic(s) not found: {', '.join(missing)}")
        tps = sorted((t, p) for t in topics for p in metas[t].leaders)
        earliest = broker.earliest(tps)
        latest = broker.latest(tps)
        targets = resolve_until(broker, tps, until, before_timestamp, latest)
    ranges: dict[TopicPartition, tuple[int, int]] = {}
    for tp in tps:
        rec = arch.state["partitions"].get(_key(tp))
        start = rec["archived"] if rec else earliest[tp]
        if earliest[tp] > start:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{tp[0]}-{tp[1]}: records [{start}, {earliest[tp]}) were deleted (retention or "
                    "DeleteRecords) before they were archived. Run with --no-fail-on-data-loss to record "
                    "the gap and continue from the log start."
                )
            arch.state["gaps"].append({"partition": _key(tp), "from": start, "to": earliest[tp], "seen": _now()})
            summary["gaps"][_key(tp)] = [start, earliest[tp]]
            start = earliest[tp]
        end = targets[tp]
        if end > start:
            ranges[tp] = (start, end)
    if ranges:
        committed = arch.archive(ranges, crash=_crash)
        summary["run"] = committed["run_id"]
        summary["records"] = committed["records"]
        summary["archived"] = committed["ranges"]
    elif summary["gaps"]:
        arch.save()
    if trim:
        summary["trimmed"], summary["trim_errors"] = arch.trim()
    summary["state"] = {k: dict(v) for k, v in sorted(arch.state["partitions"].items())}
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_sidecar.spark.pipelines.archive_then_trim",
        description="Archive a topic's records to Parquet (topic/partition/date), then DeleteRecords up to what was archived.",
    )
    parser.add_argument("--bootstrap-server", required=True, help="host:port of kafka-sidecar (or any Kafka)")
    parser.add_argument("--topic", action="append", required=True, help="topic to archive (repeatable)")
    parser.add_argument("--output", required=True, help="archive root (any path Spark writes: local, hdfs://, s3a://)")
    parser.add_argument("--until", default="latest",
                        help='archive up to: "latest" (the high watermark), an offset for every partition, '
                             'or JSON {"topic":{"0":123}} (exclusive ends; -1 = latest)')
    parser.add_argument("--before-timestamp", type=int, help="archive the records before the first one with a "
                        "timestamp >= this (ms since the epoch), per partition")
    parser.add_argument("--no-trim", action="store_true", help="archive only; do not call DeleteRecords")
    parser.add_argument("--no-fail-on-data-loss", action="store_true",
                        help="when records were deleted before being archived, record the gap and go on")
    common_args(parser)
    args = parser.parse_args(argv)
    spark = spark_session("kafka-sidecar archive-then-trim", args.master)
    summary = run(
        spark, bootstrap=args.bootstrap_server, topics=args.topic, output=args.output, until=args.until,
        before_timestamp=args.before_timestamp, trim=not args.no_trim,
        fail_on_data_loss=not args.no_fail_on_data_loss,
    )
    print(json.dumps(summary, indent=1, sort_keys=True))
    return 1 if summary["trim_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
