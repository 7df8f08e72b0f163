"""TopicRegistry: the topics this node serves (names, ids, partition counts, config overrides).

Kafka keeps these in its KRaft metadata log and serves them from the metadata image (TopicsImage,
ConfigurationsImage); a sidecar keeps them in ``sidecar-topics.json`` (+ ``.bak``) in the data dir
(``storage/metadata_files.py``). LogManager holds the logs and consults this registry for a
topic's id and configs; the server reads topics here (``Broker.metadata``).
"""

from __future__ import annotations

import os
import threading
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .log import parse_partition_dir
from .metadata_files import (
    kafka_uuid_str,
    new_kafka_uuid,
    parse_kafka_uuid,
    read_partition_metadata,
    read_topics_file,
    write_topics_file,
)


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, Any] = field(default_factory=dict)


class TopicJournal(Protocol):
    """Where the nodes of a ``--processes N`` cluster agree on topics (server/cluster/topics.py):
    the LogManager makes every topic change in the journal's turn (exclusive across the nodes,
    the others' changes applied first) and records it there before its own logs change."""

    def turn(self) -> AbstractContextManager[None]: ...

    def record_topic(self, info: TopicInfo) -> None: ...

    def record_deletion(self, info: TopicInfo) -> None: ...


class TopicRegistry:
    """Topics by name and by id, kept in the topics file; every change is written before it
    returns. Mutations run under ``lock`` (the LogManager shares it: a topic and its logs change
    together)."""

    def __init__(self, data_dir: Path, lock: threading.RLock | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.lock = lock if lock is not None else threading.RLock()
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self._deleting: set[str] = set()  # topics detached whose dirs are not renamed yet
        self._stored: dict[str, dict[str, Any]] = {}  # the topics file as read at start

    # ---- start-up ------------------------------------------------------------------------

    def load(self) -> None:
        """Read the topics file (the topics register as their partition dirs are found)."""
        self._stored = read_topics_file(self.data_dir)

    def found_partition(self, topic: str, partition: int) -> TopicInfo:
        """A partition dir found at start: its topic, registered at its first dir (the id from the
        topics file, else the first readable partition.metadata, else new)."""
        info = self.topics.get(topic)
        if info is None:
            saved = self._stored.get(topic, {})
            info = TopicInfo(topic, self._resolve_topic_id(topic, saved.get("topic_id")), 0, dict(saved.get("configs", {})))
            self._register(info)
        info.partitions = max(info.partitions, partition + 1)
        return info

    def missing_partitions(self) -> list[tuple[TopicInfo, int]]:
        """Partitions the topics file declares whose dir vanished (their logs are created empty);
        the topics' counts are raised to what the file says."""
        out = []
        for name, saved in self._stored.items():
            info = self.topics.get(name)
            if info is not None:
                declared = int(saved.get("partitions", 0))
                out += [(info, p) for p in range(info.partitions, declared)]
                info.partitions = max(info.partitions, declared)
        return out

    def _resolve_topic_id(self, topic: str, saved_id: str | None) -> uuid.UUID:
        if saved_id:
            try:
                return parse_kafka_uuid(saved_id)
            except ValueError:
                pass
        for entry in sorted(os.listdir(self.data_dir)):
            tp = parse_partition_dir(entry)
            if tp is not None and tp[0] == topic:
                found = read_partition_metadata(self.data_dir / entry)
                if found is not None:
                    return found
        return new_kafka_uuid()

    # ---- changes ---------------------------------------------------------------------------

    def save(self) -> None:
        """Write the topics file (under ``lock``)."""
        write_topics_file(self.data_dir, {
            t.name: {"topic_id": kafka_uuid_str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
            for t in self.topics.values()
        })

    def new_topic(self, name: str, partitions: int, configs: dict[str, Any] | None = None) -> TopicInfo:
        """A TopicInfo with a new id for a topic not yet registered (FileExistsError if the name
        is taken or still being deleted)."""
        if name in self.topics or name in self._deleting:
            raise FileExistsError(name)
        return TopicInfo(name, new_kafka_uuid(), partitions, dict(configs or {}))

    def add(self, info: TopicInfo) -> None:
        """Register ``info`` (its logs exist) and write the topics file."""
        self._register(info)
        self.save()

    def _register(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.topics_by_id[info.topic_id] = info

    def detach(self, name: str) -> TopicInfo:
        """Take a topic out of the maps; its name stays reserved until ``deletion_done``."""
        info = self.topics.pop(name)
        self.topics_by_id.pop(info.topic_id, None)
        self._deleting.add(name)
        return info

    def is_being_deleted(self, name: str) -> bool:
        return name in self._deleting

    def deletion_done(self, name: str) -> None:
        self._deleting.discard(name)
