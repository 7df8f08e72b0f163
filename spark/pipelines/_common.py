"""What the pipelines share: a SparkSession with our formats, and file access through
Hadoop's FileSystem (so state files live next to the output on any filesystem Spark
writes to: local, HDFS, S3A, ...)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from kafka_sidecar.spark import register
from pyspark.sql import SparkSession


def spark_session(app_name: str, master: str | None = None) -> SparkSession:
    """The active session (spark-submit's) or a new one; our data sources registered.

    Python workers run this interpreter unless PYSPARK_PYTHON says otherwise, so a
    ``python -m`` run in a virtualenv finds kafka_sidecar in its executors too.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", help="Spark master when not run by spark-submit (default: local[*])")


class HadoopFS:
    """A few Hadoop FileSystem calls through the JVM (classic Spark sessions)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm = spark._jvm  # type: ignore[attr-defined]
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self.root = self._Path(root)
        self.fs = self.root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
        self.root = self.fs.makeQualified(self.root)

    def path(self, *parts: str) -> Any:
        p = self.root
        for part in parts:
            p = self._Path(p, part)
        return p

    def exists(self, p: Any) -> bool:
        return bool(self.fs.exists(p))

    def mkdirs(self, p: Any) -> None:
        self.fs.mkdirs(p)

    def read_text(self, p: Any) -> str:
        stream = self.fs.open(p)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_new(self, p: Any, text: str) -> None:
        """Create ``p`` (failing if it exists) with ``text``."""
        stream = self.fs.create(p, False)
        try:
            stream.write(bytearray(text.encode("utf-8")))
            stream.hflush()
        finally:
            stream.close()

    def list(self, p: Any) -> list[tuple[Any, bool]]:
        """(path, is_dir) of the entries of directory ``p`` ([] if it does not exist)."""
        if not self.exists(p):
            return []
        return [(s.getPath(), bool(s.isDirectory())) for s in self.fs.listStatus(p)]

    def files(self, p: Any) -> list[Any]:
        """Every file under ``p``, recursively."""
        out = []
        for child, is_dir in self.list(p):
            if is_dir:
                out += self.files(child)
            else:
                out.append(child)
        return out

    def rename(self, src: Any, dst: Any) -> bool:
        self.fs.mkdirs(dst.getParent())
        return bool(self.fs.rename(src, dst))

    def delete(self, p: Any, recursive: bool = True) -> None:
        self.fs.delete(p, recursive)

    def relative(self, p: Any, base: Any) -> str:
        return str(base.toUri().relativize(p.toUri()).getPath())


class StateLog:
    """A small versioned JSON state: ``<dir>/state-<n>.json``, a new file per save.

    Creating a new file is atomic on every Hadoop filesystem (a rename over an
    existing file is not), so a crash leaves either the old or the new state.
    """

    KEEP = 20

    def __init__(self, fs: HadoopFS, directory: Any) -> None:
        self.fs = fs
        self.dir = directory
        self.version = -1

    def _versions(self) -> list[tuple[int, Any]]:
        out = []
        for p, is_dir in self.fs.list(self.dir):
            name = p.getName()
            if not is_dir and name.startswith("state-") and name.endswith(".json"):
                try:
                    out.append((int(name[6:-5]), p))
                except ValueError:
                    pass
        return sorted(out, key=lambda x: x[0])

    def load(self, default: dict[str, Any]) -> dict[str, Any]:
        for version, p in reversed(self._versions()):
            try:
                state = json.loads(self.fs.read_text(p))
            except ValueError:
                continue  # a torn write (cannot happen with create-new, but be safe)
            self.version = version
            return state
        self.version = -1
        return default

    def save(self, state: dict[str, Any]) -> None:
        self.fs.mkdirs(self.dir)
        self.version += 1
        self.fs.write_new(self.fs._Path(self.dir, f"state-{self.version:010d}.json"), json.dumps(state, indent=1, sort_keys=True))
        for version, p in self._versions()[: -self.KEEP]:
            if version < self.version:
                self.fs.delete(p, False)
