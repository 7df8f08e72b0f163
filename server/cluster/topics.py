"""ClusterTopics: a node's LogManager kept in step with the cluster's topic log.

It is the LogManager's TopicJournal (``storage/topic_registry.py``): every topic change this node
makes is recorded in ``cluster-metadata.log`` in its turn (``metadata_log.py``), and the changes
other nodes recorded are applied here, when this node takes its turn, before it answers a request
(``server/dispatch.py``: when the file grew), every ``POLL_INTERVAL_S``, and at start, where the
log is the truth: a local topic the log no longer has (deleted while this node was down) is
deleted, and the log's topics are held with their ids, partition counts and configs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_sidecar.storage.metadata_files import kafka_uuid_str, parse_kafka_uuid
from kafka_sidecar.storage.topic_registry import TopicInfo

from .metadata_log import MetadataLog, Record

if TYPE_CHECKING:
    from kafka_sidecar.storage.log_manager import LogManager

    from ..services import BrokerServices

log = logging.getLogger(__name__)

TOPIC_OPS = frozenset({"topic", "delete"})


class ClusterTopics:
    def __init__(self, cluster_dir: Path, log_manager: LogManager) -> None:
        self.log = MetadataLog(cluster_dir)
        self.log_manager = log_manager
        # Deletions applied on the storage thread whose follow-up (fetch waits woken, groups'
        # offsets dropped, dirs removed later) runs on the event loop: (name, partitions, dirs).
        self.deleted: list[tuple[str, int, list[Path]]] = []
        # The other records read (ACLs, quotas, SCRAM, features, broker configs: admin.py), in the
        # log's order, waiting to be applied on the event loop.
        self.others: list[Record] = []

    # ---- TopicJournal --------------------------------------------------------------------

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        with self.log.turn(self._apply):
            yield

    def record_topic(self, info: TopicInfo) -> None:
        self.log.append({"op": "topic", "name": info.name, "topic_id": kafka_uuid_str(info.topic_id),
                         "partitions": info.partitions, "configs": dict(info.configs)})

    def record_deletion(self, info: TopicInfo) -> None:
        self.log.append({"op": "delete", "name": info.name, "topic_id": kafka_uuid_str(info.topic_id)})

    # ---- following the others ---------------------------------------------------------------

    def _apply(self, records: list[Record]) -> None:
        lm = self.log_manager
        for r in records:
            if r["op"] not in TOPIC_OPS:
                self.others.append(r)
                continue
            name = r["name"]
            local = lm.metadata.topics.get(name)
            topic_id = parse_kafka_uuid(r["topic_id"])
            if r["op"] == "topic":
                if local is not None and local.topic_id != topic_id:  # deleted and made again meanwhile
                    self._delete_local(name)
                lm.adopt_topic(name, topic_id, int(r["partitions"]), dict(r["configs"]))
            elif r["op"] == "delete" and local is not None and local.topic_id == topic_id:
                self._delete_local(name)

    def _delete_local(self, name: str) -> None:
        partitions = self.log_manager.metadata.topics[name].partitions
        renamed = self.log_manager.delete_topic(name, journaled=False)
        self.deleted.append((name, partitions, renamed))
        log.info("topic %s deleted by another node", name)

    def load(self) -> None:
        """At start, after the logs loaded (blocking): hold exactly the topics the log has."""
        lm = self.log_manager
        with self.log.turn(lambda records: self.others.extend(r for r in records if r["op"] not in TOPIC_OPS)):
            want = {name: parse_kafka_uuid(r["topic_id"]) for name, r in self.log.topics.items()}
            for name, info in list(lm.metadata.topics.items()):
                if want.get(name) != info.topic_id:
                    self._delete_local(name)
            for name, r in self.log.topics.items():
                lm.adopt_topic(name, want[name], int(r["partitions"]), dict(r["configs"]))

    def _catch_up_blocking(self) -> None:
        self.log.caught_up(self._apply)

    async def catch_up(self, services: BrokerServices) -> None:
        """Apply what the other nodes recorded since this node last looked."""
        await services.run_blocking(self._catch_up_blocking)
        self.finish_deletions(services)
        if self.others and services.cluster is not None:
            services.cluster.admin.apply_others(services)

    def names_unknown(self, api_key: int, version: int, request: Any) -> bool:
        """Whether a Produce (0) or Fetch (1) names a topic or partition this node does not hold:
        then it catches up before answering (a topic just made through another node is there, as
        the CreateTopics answer promised), while the usual request costs no ``fstat``."""
        lm = self.log_manager
        if version >= 13:
            by_id = lm.metadata.topics_by_id
            for t in request.topic_data if api_key == 0 else request.topics:
                info = by_id.get(t.topic_id)
                if info is None or not _all_below(t, api_key, info.partitions):
                    return True
            return False
        topics = lm.metadata.topics
        for t in request.topic_data if api_key == 0 else request.topics:
            info = topics.get(t.name if api_key == 0 else t.topic)
            if info is None or not _all_below(t, api_key, info.partitions):
                return True
        return False

    async def poll(self, services: BrokerServices) -> None:
        """The periodic look (a deletion made elsewhere reaches Produce and Fetch here)."""
        if self.log.has_news() or self.others:
            await self.catch_up(services)
        elif self.deleted:
            self.finish_deletions(services)

    def finish_deletions(self, services: BrokerServices) -> None:
        """On the loop: what DeleteTopics does after the logs are gone, for deletions applied here."""
        from ..apis.topics import _remove_later as remove_later

        while self.deleted:
            name, partitions, renamed = self.deleted.pop(0)
            for p in range(partitions):
                services.replica_manager.purgatory.try_complete(name, p)
            services.group_coordinator.on_topic_deleted(name)
            remove_later(services, renamed)

    def close(self) -> None:
        self.log.close()


def _all_below(t: Any, api_key: int, count: int) -> bool:
    if api_key == 0:
        return all(p.index < count for p in t.partition_data)
    return all(p.partition < count for p in t.partitions)
