"""PySpark data sources for kafka-sidecar (``pip install kafka-sidecar[spark]``).

``register(spark)`` makes two formats available in a SparkSession:

- ``kafka-sidecar``: Spark's ``kafka`` connector (batch and streaming reads, batch
  and streaming writes) over the Kafka protocol, same options and schema;
- ``kafka-sidecar-log``: a Kafka log directory read straight from its segment files.

See ``spark/README.md`` in the repository for usage.
"""

from __future__ import annotations

from typing import Any

FORMATS = ("kafka-sidecar", "kafka-sidecar-log")
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the kafka-sidecar data sources with ``spark`` (a SparkSession).

    Also turns on ``spark.sql.python.filterPushdown.enabled`` (Spark >= 4.1), which
    the log reader's filter pushdown needs; it only lets Python sources that
    implement ``pushFilters`` receive filters.
    """
    from .kafka_source import KafkaSidecarDataSource
    from .log_source import KafkaSidecarLogDataSource

    # Registering by hand (spark.dataSource.register) works too, with pushdown on or off: the
    # log reader pushes filters wherever Spark lets it (log_source.KafkaSidecarLogDataSource.reader).
    spark.dataSource.register(KafkaSidecarDataSource)
    spark.dataSource.register(KafkaSidecarLogDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true")


def __getattr__(name: str) -> Any:
    if name == "KafkaSidecarDataSource":
        from .kafka_source import KafkaSidecarDataSource

        return KafkaSidecarDataSource
    if name == "KafkaSidecarLogDataSource":
        from .log_source import KafkaSidecarLogDataSource

        return KafkaSidecarLogDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMATS", "register", "KafkaSidecarDataSource", "KafkaSidecarLogDataSource"]
