"""Records/s read by Spark from kafka-sidecar: over the wire and from the segment files.

    python -m bench.spark                     # 1,000,000 records of 100 bytes in 4 partitions
    python -m bench.spark --records 1000000 --value-size 1000 --partitions 8 --master 'local[4]'

Starts a kafka-sidecar on a free loopback port with a fresh data dir, fills a topic with
the Spark sink's producer (batches of up to 512 KiB, acks=all), then times, median of
``--repeat`` runs after one untimed warm-up, a full scan that Spark must materialise
(``count(*)``, ``sum(length(value))``), and the same query on one record per partition
(the fixed cost of a query: planning in Python workers, ListOffsets, two stages), so that
"net" = records / (full scan - fixed cost):

- wire:  ``spark.read.format("kafka-sidecar")`` (Fetch from the broker, one task per partition)
- disk:  ``spark.read.format("kafka-sidecar-log")`` on the server's data dir (one task per segment)

and, without Spark, what one Python process decodes (the executors' per-task ceiling):
``read_range`` over the wire and ``read_segment`` from disk for partition 0. Needs
``pip install -e '.[spark]'`` and Java 17. Results go to stdout and ``--json`` if given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start_server(data_dir: Path) -> tuple[subprocess.Popen, str]:
    exe = Path(sys.executable).parent / "kafka-sidecar"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kafka_sidecar.server"]
    proc = subprocess.Popen([*cmd, "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        m = re.search(r"listening on [\w.:\[\]-]+:(\d+)", line or "")
        if m:
            return proc, f"127.0.0.1:{m.group(1)}"
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("kafka-sidecar did not start")


def fill(bootstrap: str, topic: str, records: int, value_size: int, partitions: int) -> float:
    from kafka_sidecar.spark._options import parse_sink_options
    from kafka_sidecar.spark._producer import BatchingProducer
    from kafka_sidecar.spark._wire import Broker

    with Broker(bootstrap) as b:
        b.client.bootstrap.request(19, {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": [{"name": "retention.ms", "value": "-1"}]}],
            "timeout": 10000, "validate_only": False,
        }, max_version=5)
    producer = BatchingProducer(parse_sink_options({"kafka.bootstrap.servers": bootstrap}))
    value = os.urandom(value_size)
    t0 = time.perf_counter()
    try:
        for i in range(records):
            producer.send(topic, i % partitions, b"key-%d" % i, value)
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - t0


def timed(fn, repeat: int) -> tuple[float, list[float]]:
    fn()  # warm-up: Python workers started, JIT warm
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kafka_sidecar.spark import register
    from kafka_sidecar.spark._consumer import read_range
    from kafka_sidecar.spark._logdir import discover, read_segment, segments
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    data_dir = work / "data"
    proc, bootstrap = start_server(data_dir)
    topic = "bench-spark"
    results: dict = {"records": args.records, "value_size": args.value_size, "partitions": args.partitions,
                     "master": args.master, "cpus": os.cpu_count()}
    try:
        fill_s = fill(bootstrap, topic, args.records, args.value_size, args.partitions)
        results["fill_rec_s"] = args.records / fill_s
        spark = (SparkSession.builder.master(args.master).appName("kafka-sidecar bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)

        def scan(reader) -> None:
            total = reader.load().selectExpr("count(*) as n", "sum(length(value)) as b").collect()[0]
            assert total["n"] == args.records, total

        def wire() -> None:
            scan(spark.read.format("kafka-sidecar").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic))

        def disk() -> None:
            total = (spark.read.format("kafka-sidecar-log").option("subscribe", topic).load(str(data_dir))
                     .selectExpr("count(*) as n").collect()[0])
            assert total["n"] == args.records, total

        def tiny() -> None:
            ends = json.dumps({topic: {str(p): 1 for p in range(args.partitions)}})
            (spark.read.format("kafka-sidecar").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("endingOffsets", ends).load()
             .selectExpr("count(*) as n", "sum(length(value)) as b").collect())

        fixed, _ = timed(tiny, args.repeat)
        results["spark_query_fixed_s"] = fixed
        for name, fn in (("spark_wire", wire), ("spark_disk", disk)):
            median, samples = timed(fn, args.repeat)
            results[f"{name}_rec_s"] = args.records / median
            results[f"{name}_net_rec_s"] = args.records / max(median - fixed, 1e-3)
            results[f"{name}_samples_s"] = samples
        spark.stop()

        per_partition = args.records // args.partitions
        t0 = time.perf_counter()
        n = sum(len(c) for c in read_range(bootstrap, topic, 0, 0, per_partition))
        results["python_wire_rec_s"] = n / (time.perf_counter() - t0)
        (pd,) = [p for p in discover(data_dir) if p.topic == topic and p.partition == 0]
        t0 = time.perf_counter()
        n = sum(len(c) for s in segments(pd) for c in read_segment(s))
        results["python_disk_rec_s"] = n / (time.perf_counter() - t0)
    finally:
        proc.terminate()
        proc.wait(30)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    rows = [
        ("fill (Spark sink's producer, 1 process)", "fill_rec_s"),
        ("Spark over the wire (kafka-sidecar)", "spark_wire_rec_s"),
        ("  net of the fixed query cost", "spark_wire_net_rec_s"),
        ("Spark from disk (kafka-sidecar-log)", "spark_disk_rec_s"),
        ("  net of the fixed query cost", "spark_disk_net_rec_s"),
        ("1 Python process, wire (read_range)", "python_wire_rec_s"),
        ("1 Python process, disk (read_segment)", "python_disk_rec_s"),
    ]
    print(f"{args.records:,} records x {args.value_size} B, {args.partitions} partitions, "
          f"Spark {args.master}, {os.cpu_count()} CPUs")
    for label, key in rows:
        print(f"  {label:<42} {results[key]:>12,.0f} rec/s")
    print(f"  {'fixed cost of a Spark query':<42} {results['spark_query_fixed_s']:>12.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
