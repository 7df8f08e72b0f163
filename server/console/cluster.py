"""What the console knows of topics and partitions, asked as Kafka's tools ask it.

Topics and leaders come from Metadata (only the topics the principal may DESCRIBE, as for any
client), offsets from ListOffsets (earliest and latest: what ``kafka-get-offsets.sh`` prints),
sizes from DescribeLogDirs (``kafka-log-dirs.sh``), configs from DescribeConfigs
(``kafka-configs.sh --describe``). Only the segment count has no API: it is read from the
partition's Log through the ReplicaManager, for topics the principal may describe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .api import ConsoleSession, call

if TYPE_CHECKING:
    from ..broker import Broker

METADATA, LIST_OFFSETS, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS = 3, 2, 32, 35
EARLIEST, LATEST = -2, -1
TOPIC_RESOURCE = 2
# Kafka's DescribeConfigsResponse.ConfigSource names (as kafka-configs.sh prints them).
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                  4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG",
                  8: "GROUP_CONFIG"}


@dataclass
class PartitionInfo:
    index: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0
    start_offset: int = -1
    end_offset: int = -1
    size: int = -1
    segments: int = -1

    @property
    def records(self) -> int:
        """end - start: the records a consumer from the beginning would count (gaps included)."""
        return self.end_offset - self.start_offset if self.start_offset >= 0 and self.end_offset >= 0 else -1


@dataclass
class TopicInfo:
    name: str
    topic_id: Any
    internal: bool
    partitions: list[PartitionInfo] = field(default_factory=list)
    cleanup_policy: str = ""

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partitions if p.size >= 0)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions if p.records >= 0)


async def topics(broker: Broker, session: ConsoleSession, names: list[str] | None = None) -> tuple[list[TopicInfo], list[tuple[str, int]]]:
    """The topics the principal may describe (all, or ``names``) with their partitions' leaders;
    and the (name, error code) of each named topic Metadata refused or does not know."""
    answer = await call(broker, session, METADATA, 12, {
        "topics": None if names is None else [{"topic_id": None, "name": n} for n in names],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    found: list[TopicInfo] = []
    failed: list[tuple[str, int]] = []
    for t in answer["topics"]:
        if t["error_code"]:
            failed.append((t["name"], t["error_code"]))
            continue
        parts = [PartitionInfo(p["partition_index"], p["leader_id"], p["leader_epoch"], list(p["replica_nodes"]), list(p["isr_nodes"]),
                               p["error_code"]) for p in t["partitions"]]
        found.append(TopicInfo(t["name"], t["topic_id"], bool(t["is_internal"]), sorted(parts, key=lambda p: p.index)))
    found.sort(key=lambda t: (t.internal, t.name))
    return found, failed


async def list_offsets(broker: Broker, session: ConsoleSession, wanted: dict[str, list[int]], timestamp: int) -> dict[tuple[str, int], tuple[int, int, int]]:
    """ListOffsets (read_uncommitted, as the tools ask): (topic, partition) -> (error, offset, timestamp)."""
    if not wanted:
        return {}
    answer = await call(broker, session, LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp} for p in parts]}
        for name, parts in wanted.items()]})
    return {(t["name"], p["partition_index"]): (p["error_code"], p["offset"], p["timestamp"])
            for t in answer["topics"] for p in t["partitions"]}


async def log_dirs(broker: Broker, session: ConsoleSession) -> dict[str, Any] | None:
    """DescribeLogDirs of every topic: the data dir, its total and usable bytes and each
    partition's size. None when the principal may not DESCRIBE the cluster."""
    answer = await call(broker, session, DESCRIBE_LOG_DIRS, 4, {"topics": None})
    if answer["error_code"] or not answer["results"]:
        return None
    return answer["results"][0]


async def fill_offsets_and_sizes(broker: Broker, session: ConsoleSession, topic_list: list[TopicInfo],
                                 dirs: dict[str, Any] | None) -> None:
    """Start and end offsets, sizes and segment counts of every partition of ``topic_list``."""
    wanted = {t.name: [p.index for p in t.partitions] for t in topic_list}
    earliest = await list_offsets(broker, session, wanted, EARLIEST)
    latest = await list_offsets(broker, session, wanted, LATEST)
    sizes: dict[tuple[str, int], int] = {}
    if dirs is not None:
        sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in dirs["topics"] for p in t["partitions"]}
    for t in topic_list:
        for p in t.partitions:
            e, l_ = earliest.get((t.name, p.index)), latest.get((t.name, p.index))
            p.start_offset = e[1] if e and not e[0] else -1
            p.end_offset = l_[1] if l_ and not l_[0] else -1
            p.size = sizes.get((t.name, p.index), -1)
            lg = broker.replica_manager.get_log(t.name, p.index)
            if lg is not None:
                p.segments = len(lg.segments)
                if dirs is None:  # DescribeLogDirs not asked (or no cluster DESCRIBE): its partition_size, from the log
                    p.size = lg.size_in_bytes


async def describe_configs(broker: Broker, session: ConsoleSession, names: list[str], keys: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """DescribeConfigs of topics: name -> {"error_code", "error_message", "configs": [...]}."""
    if not names:
        return {}
    answer = await call(broker, session, DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": keys} for n in names],
        "include_synonyms": False, "include_documentation": False})
    return {r["resource_name"]: r for r in answer["results"]}
