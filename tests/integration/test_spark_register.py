"""The ``kafka-sidecar-log`` source registered the standard way (``spark.dataSource.register``)
works with Spark's default ``spark.sql.python.filterPushdown.enabled=false`` (Spark refuses a
reader with ``pushFilters`` then), pushes filters down once the setting is on, and reads what
``register(spark)`` reads: the golden Kafka 4.0.0 log dir, with and without filters, row for row.

The session is test_spark.py's (imported), which calls ``register(spark)``; each test sets the
registration and the setting it is about.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support import GOLDEN

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
from tests.integration.test_spark import PUSHDOWN, spark  # noqa: E402,F401  (the module's SparkSession)

LOGDIR = str(GOLDEN / "kafka-4.0.0-logdir")
CONF = "spark.sql.python.filterPushdown.enabled"
# (filter, input partitions with pushdown, rows): segments of golden-0 are 0, 158 and 267; the
# whole dir has 7 non-empty segments above the log starts.
QUERIES = [
    (None, 7, 524),
    ("topic = 'golden'", 3, 322),
    ("topic = 'golden' AND offset >= 100 AND offset < 200", 2, 100),
    ("topic = 'golden' AND offset >= 300", 1, 22),
    ("topic IN ('golden', 'golden-compact') AND partition = 0 AND offset BETWEEN 150 AND 160", 3, 11 + 0),
]


def read(spark, where: str | None, **options: str):  # noqa: F811
    """A new DataFrame per query (pyspark 4.1-4.3 reuse a filtered query's read in the next one
    on the same DataFrame: spark/README.md)."""
    df = spark.read.format("kafka-sidecar-log").options(**options).load(LOGDIR)
    return df.filter(where) if where else df


def rows(df) -> list[tuple]:
    return sorted((r.topic, r.partition, r.offset, r.timestamp, r.key, r.value) for r in df.collect())


def everything(spark, **options: str) -> list[tuple[list[tuple], int]]:  # noqa: F811
    """(rows, input partitions) of every query."""
    out = []
    for where, _, _ in QUERIES:
        df = read(spark, where, **options)
        out.append((rows(df), df.rdd.getNumPartitions()))
    return out


@pytest.fixture
def standard(spark) -> Callable[[bool], None]:  # noqa: F811
    """Register the source the standard way, with filter pushdown on or off; register(spark)'s
    state back afterwards (the module's other tests expect it)."""
    from kafka_sidecar.spark import KafkaSidecarLogDataSource, register

    def setup(pushdown: bool) -> None:
        spark.conf.set(CONF, "true" if pushdown else "false")
        spark.dataSource.register(KafkaSidecarLogDataSource)

    yield setup
    register(spark)


def test_standard_registration_reads_like_register(spark, standard) -> None:  # noqa: F811
    from kafka_sidecar.spark import register

    register(spark)
    assert spark.conf.get(CONF) == "true"
    helper = everything(spark)
    assert [len(r) for r, _ in helper] == [n for _, _, n in QUERIES]
    if PUSHDOWN:
        assert [p for _, p in helper] == [p for _, p, _ in QUERIES]  # segments skipped

    standard(pushdown=False)  # Spark's default: no pushFilters, every segment read, Spark filters
    plain = everything(spark)
    assert [r for r, _ in plain] == [r for r, _ in helper]
    assert {p for _, p in plain} == {7}

    standard(pushdown=True)  # the setting on: the same class now gets the filters
    pushed = everything(spark)
    assert pushed == helper


def test_pushdown_option(spark, standard) -> None:  # noqa: F811
    """pushdown=false reads every segment even with the setting on; pushdown=true with the
    setting off is Spark's own refusal (a reader with pushFilters), named."""
    where = "topic = 'golden' AND offset >= 300"
    standard(pushdown=True)
    off = read(spark, where, pushdown="false")
    assert off.rdd.getNumPartitions() == 7 and len(rows(off)) == 22
    if not PUSHDOWN:
        return
    standard(pushdown=False)
    with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
        read(spark, where, pushdown="true").collect()
