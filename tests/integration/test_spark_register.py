"""The ``kafka-sidecar-log`` source registered the standard way (``spark.dataSource.register``),
with Spark's default ``spark.sql.python.filterPushdown.enabled=false``, reads what
``register(spark)`` (pushdown on) reads: the golden Kafka 4.0.0 log dir, with and without filters."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.support import GOLDEN

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

LOGDIR = str(GOLDEN / "kafka-4.0.0-logdir")


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master("local[2]").appName("kafka-sidecar-register")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()


def rows(spark: SparkSession, where: str | None = None, **options: str) -> list[tuple]:
    df = spark.read.format("kafka-sidecar-log").options(**options).load(LOGDIR)
    if where:
        df = df.filter(where)
    return sorted((r.topic, r.partition, r.offset, r.key, r.value) for r in df.collect())


def test_standard_registration_reads_like_register(spark: SparkSession) -> None:
    from kafka_sidecar.spark import KafkaSidecarLogDataSource, register

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")  # Spark's default
    spark.dataSource.register(KafkaSidecarLogDataSource)
    plain_all = rows(spark)
    plain_filtered = rows(spark, "topic = 'golden' AND offset >= 100 AND offset < 200")
    assert len(plain_all) > 400 and len(plain_filtered) == 100

    register(spark)  # pushdown on, the filters reach the reader
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
    assert rows(spark) == plain_all
    assert rows(spark, "topic = 'golden' AND offset >= 100 AND offset < 200") == plain_filtered
    # And the plain class asked for pushdown explicitly, now that the setting is on.
    spark.dataSource.register(KafkaSidecarLogDataSource)
    assert rows(spark, "topic = 'golden' AND offset >= 100 AND offset < 200", pushdown="true") == plain_filtered
