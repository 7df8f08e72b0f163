"""Configuring a streams topology against the topics that exist: Kafka's InternalTopicManager
(with RepartitionTopics and ChangelogTopics).

Each subtopology has as many tasks as its largest source topic (repartition sources included).
A repartition topic without a fixed partition count gets the task count of the subtopologies
writing to it; a changelog topic gets its subtopology's task count. Missing source topics, or
internal topics that are missing or partitioned differently, make the topology not ready: the
heartbeat answers the status (MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS,
INCORRECTLY_PARTITIONED_TOPICS) and the broker creates the missing internal topics, as Kafka's
KafkaApis does with the coordinator's list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .streams_group import StreamsTopology, TopicInfo

# StreamsGroupHeartbeatResponse.Status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

# topic name -> partition count, or None when the topic does not exist
PartitionCount = Callable[[str], "int | None"]


@dataclass(frozen=True)
class InternalTopic:
    """A topic to create: name, partitions, replication factor (-1: the broker's default), configs."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class ConfiguredTopology:
    """Kafka's ConfiguredTopology: per subtopology its task count, or why the topology is not ready."""

    epoch: int
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology id -> number of tasks
    source_topics: dict[str, tuple[str, ...]] = field(default_factory=dict)  # subtopology -> input topics
    status: tuple[int, str] | None = None
    to_create: list[InternalTopic] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.status is None


class TopicConfigurationError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def configure_topology(topology: StreamsTopology, partitions_of: PartitionCount) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics."""
    configured = ConfiguredTopology(topology.epoch)
    try:
        repartition = _repartition_partitions(topology, partitions_of)
        counts = dict(repartition)
        for sub in topology.subtopologies:
            n = 0
            for t in sub.source_topics:
                n = max(n, partitions_of(t) or 0)
            for info in sub.repartition_source_topics:
                n = max(n, counts.get(info.name, 0))
            if n <= 0:
                raise TopicConfigurationError(MISSING_SOURCE_TOPICS, "Subtopology does not contain any source topics")
            configured.tasks[sub.subtopology_id] = n
            configured.source_topics[sub.subtopology_id] = tuple(sub.source_topics) + tuple(i.name for i in sub.repartition_source_topics)
        internal: dict[str, tuple[int, TopicInfo, bool]] = {}
        for sub in topology.subtopologies:
            for info in sub.repartition_source_topics:
                internal[info.name] = (repartition[info.name], info, False)
            for info in sub.state_changelog_topics:
                internal[info.name] = (configured.tasks[sub.subtopology_id], info, True)
        missing: list[InternalTopic] = []
        for name in sorted(internal):
            want, info, changelog = internal[name]
            have = partitions_of(name)
            if have is None:
                configs = dict(info.configs)
                missing.append(InternalTopic(name, want, info.replication_factor or -1, configs))
            elif have != want:
                raise TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {name} has different number of partitions: expected {want}, found {have}.")
        if missing:
            configured.to_create = missing
            configured.status = (MISSING_INTERNAL_TOPICS, "Internal topics are missing: [" + ", ".join(t.name for t in missing) + "]")
    except TopicConfigurationError as e:
        configured.tasks = {}
        configured.status = (e.status, str(e))
    return configured


def _repartition_partitions(topology: StreamsTopology, partitions_of: PartitionCount) -> dict[str, int]:
    """Kafka's RepartitionTopics.setup: every repartition topic's partition count."""
    missing = sorted({t for sub in topology.subtopologies for t in sub.source_topics if partitions_of(t) is None})
    if missing:
        raise TopicConfigurationError(MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing.")
    counts: dict[str, int] = {}
    for sub in topology.subtopologies:
        for info in sub.repartition_source_topics:
            if info.partitions > 0:
                counts[info.name] = info.partitions
    writers: dict[str, list[str]] = {}
    by_id = {sub.subtopology_id: sub for sub in topology.subtopologies}
    for sub in topology.subtopologies:
        for t in sub.repartition_sink_topics:
            writers.setdefault(t, []).append(sub.subtopology_id)
    pending = [info.name for sub in topology.subtopologies for info in sub.repartition_source_topics if info.name not in counts]
    for _ in range(len(pending) + 1):
        progressed = False
        for name in pending:
            if name in counts:
                continue
            if name not in writers:
                raise TopicConfigurationError(
                    MISSING_SOURCE_TOPICS, "Failed to compute number of partitions for all repartition topics, because "
                    "a repartition source topic is never used as a sink topic.")
            n, known = 0, True
            for wid in writers[name]:
                w = by_id[wid]
                for t in w.source_topics:
                    n = max(n, partitions_of(t) or 0)
                for info in w.repartition_source_topics:
                    if info.name in counts:
                        n = max(n, counts[info.name])
                    else:
                        known = False
            if known and n > 0:
                counts[name] = n
                progressed = True
        if not progressed:
            break
    if any(name not in counts for name in pending):
        raise TopicConfigurationError(
            MISSING_SOURCE_TOPICS, "Failed to compute number of partitions for all repartition topics. There may be "
            "loops in the topology that cannot be resolved.")
    return counts
