"""The data directory's small metadata files: ``meta.properties``, ``sidecar-topics.json``
and each partition's ``partition.metadata``, read and written as Kafka's tools expect them.

Kept apart from the LogManager, which decides when they are read and written; here is only
what they hold and how a damaged one is told from a good one. Topic ids are Kafka's Uuids
(URL-safe base64 of 16 bytes in text).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from . import checkpoint
from .log_config import ConfigError, validate_topic_configs

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
TOPICS_FILE = "sidecar-topics.json"


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_kafka_uuid(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def new_kafka_uuid() -> uuid.UUID:
    """A random Uuid whose string form does not start with '-' (as Kafka requires)."""
    while True:
        u = uuid.uuid4()
        if not kafka_uuid_str(u).startswith("-") and u.int != 0:
            return u


def load_meta_properties(data_dir: Path, node_id: int = 1, cluster_id: str | None = None) -> tuple[str, str]:
    """(cluster id, directory id) from ``meta.properties``, written first with new ids when
    it is missing or unreadable (a new data dir is a new one-node cluster; a node of a
    ``--processes N`` cluster gets its node id and the cluster's id)."""
    path = data_dir / META_PROPERTIES
    props: dict[str, str] = {}
    try:
        text = path.read_text() if path.exists() else ""
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable %s (%s): a new cluster id is written", path, e)
        text = ""
    if text:
        for line in text.splitlines():
            if line.strip() and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
    if "cluster.id" not in props:
        props = {
            "node.id": str(node_id),
            "directory.id": kafka_uuid_str(new_kafka_uuid()),
            "version": "1",
            "cluster.id": cluster_id or kafka_uuid_str(new_kafka_uuid()),
        }
        text = f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\n" + "".join(f"{k}={v}\n" for k, v in props.items())
        checkpoint.atomic_write(path, text.encode())
    return props["cluster.id"], props.get("directory.id", "")


# sidecar-topics.json carries a CRC-32 of its topics (so a flipped bit that still parses is
# caught) and has a copy, sidecar-topics.json.bak, written after it: if one is damaged the
# other is used; if both are, the damaged file is kept aside and configs fall back to defaults.

def parse_topics_file(text: str) -> dict[str, dict[str, Any]]:
    """The topics of a topics file, each checked; ValueError if the file is damaged."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("topics", {}), dict):
        raise ValueError("not a topics file")
    topics = data.get("topics", {})
    if "crc32" in data and data["crc32"] != checkpoint.json_checksum(topics):
        raise ValueError("checksum mismatch")
    out: dict[str, dict[str, Any]] = {}
    for name, saved in topics.items():
        if not isinstance(saved, dict) or not isinstance(saved.get("configs", {}), dict):
            raise ValueError(f"bad entry for topic {name!r}")
        partitions = saved.get("partitions", 0)
        if not isinstance(partitions, int) or partitions < 0:
            raise ValueError(f"bad partition count for topic {name!r}")
        configs: dict[str, Any] = {}
        for key, value in saved.get("configs", {}).items():
            try:
                configs.update(validate_topic_configs({key: str(value).lower() if isinstance(value, bool) else str(value)}))
            except ConfigError as e:
                log.warning("topic %s: dropping stored config %s (%s)", name, key, e)
        topic_id = saved.get("topic_id")
        out[name] = {"topic_id": topic_id if isinstance(topic_id, str) else None, "partitions": partitions, "configs": configs}
    return out


def read_topics_file(data_dir: Path) -> dict[str, dict[str, Any]]:
    path = data_dir / TOPICS_FILE
    topics, problems = checkpoint.read_with_copy(path, parse_topics_file, "topic configs")
    if topics is not None:
        return topics
    if problems:
        kept = path.with_name(path.name + ".damaged")
        try:
            os.replace(path, kept)
        except OSError:
            kept = path
        log.warning("ignoring unreadable topics file (%s); kept as %s: topic configs fall back to defaults", "; ".join(problems), kept.name)
    return {}


def write_topics_file(data_dir: Path, topics: dict[str, dict[str, Any]]) -> None:
    """Write the topics (name -> topic id text, partitions, configs) with their CRC and copy."""
    checkpoint.write_with_copy(data_dir / TOPICS_FILE, {"version": 1, "topics": topics, "crc32": checkpoint.json_checksum(topics)})


def check_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    """Write partition.metadata if it is missing, unreadable or names another topic id."""
    # The usual case, what write_partition_metadata wrote, is one compare of the bytes (one
    # open and read per partition at start, no text decoding nor Path objects).
    if _read_small(f"{path}/{PARTITION_METADATA}") == _partition_metadata_bytes(topic_id):
        return
    found = read_partition_metadata(path)
    if found == topic_id:
        return
    if (path / PARTITION_METADATA).exists():
        log.warning(
            "%s/%s %s: rewritten with topic id %s", path.name, PARTITION_METADATA,
            "is unreadable" if found is None else f"names topic id {kafka_uuid_str(found)}", kafka_uuid_str(topic_id),
        )
    write_partition_metadata(path, topic_id)


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    try:
        lines = (path / PARTITION_METADATA).read_text().splitlines()
        if not lines or lines[0].strip() != "version: 0":
            return None
        for line in lines:
            if line.startswith("topic_id:"):
                text = line.split(":", 1)[1].strip()
                u = parse_kafka_uuid(text)
                # A damaged id may still decode: it must read back exactly.
                return u if kafka_uuid_str(u) == text and u.int != 0 else None
    except (OSError, ValueError):
        return None
    return None


@functools.lru_cache(maxsize=1024)
def _partition_metadata_bytes(topic_id: uuid.UUID) -> bytes:
    return f"version: 0\ntopic_id: {kafka_uuid_str(topic_id)}".encode()


def _read_small(path: str) -> bytes | None:
    """A small file's bytes (up to 4 KiB), or None if it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    checkpoint.atomic_write(path / PARTITION_METADATA, _partition_metadata_bytes(topic_id))
