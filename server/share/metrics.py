"""Share-group metrics on /metrics, after Kafka's JMX names (KIP-932):

- ``kafka.server:type=group-coordinator-metrics,name=group-count,protocol=share``
  -> ``kafka_server_group_coordinator_metrics_group_count{protocol="share"}``
- ``...,name=share-group-count,state=<state>`` -> ``kafka_server_group_coordinator_metrics_share_group_count{state}``
- ``kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount|InFlightBatchCount,group,topic,partition``
  -> ``kafka_server_sharepartitionmetrics_inflightmessagecount`` / ``..._inflightbatchcount``
- ``kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgement,ackType=<type>`` (a rate in Kafka)
  -> ``kafka_server_sharegroupmetrics_recordacknowledgement{ack_type}`` (a counter)
- ``kafka.server:type=ShareGroupMetrics,name=RecordAcquisitionLockTimeout`` (a rate in Kafka)
  -> ``kafka_server_sharegroupmetrics_recordacquisitionlocktimeout`` (a counter)

Registered by server/metrics.py's make_registry.
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any

from .group import EMPTY, STABLE
from .partition import AcknowledgeType

if TYPE_CHECKING:
    from ..broker import Broker

# Kafka's ShareGroup.ShareGroupState names as its share-group-count metric labels them.
_STATES = {EMPTY: "empty", STABLE: "stable"}


class ShareGroupStats:
    """Counters the share coordinator moves (acknowledgements by type, expired acquisition locks)."""

    def __init__(self) -> None:
        self.acknowledgements: Counter[str] = Counter()
        self.lock_timeouts = 0

    def acknowledged(self, ack_types: list[int], first: int, last: int) -> None:
        names = {t.value: t.name.capitalize() for t in AcknowledgeType}
        if len(ack_types) == 1:
            self.acknowledgements[names.get(ack_types[0], "Unknown")] += last - first + 1
        else:
            for t, n in Counter(ack_types).items():
                self.acknowledgements[names.get(t, "Unknown")] += n


class ShareGroupCollector:
    def __init__(self, broker: Broker) -> None:
        self._broker = weakref.ref(broker)

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        broker = self._broker()
        coordinator = getattr(broker, "share_coordinator", None)
        groups = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                                   "The number of groups, per protocol", labels=["protocol"])
        states = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                                   "The number of share groups, per state", labels=["state"])
        messages = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightmessagecount",
                                     "Records acquired and not yet acknowledged or released, per share-partition",
                                     labels=["group", "topic", "partition"])
        batches = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightbatchcount",
                                    "Contiguous runs of acquired records, per share-partition", labels=["group", "topic", "partition"])
        acks = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgement",
                                   "Records acknowledged, per acknowledgement type", labels=["ack_type"])
        timeouts = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacquisitionlocktimeout",
                                       "Acquisition locks that expired")
        if coordinator is not None:
            by_state = Counter(_STATES.get(g.state, g.state.lower()) for g in list(coordinator.groups.values()))
            groups.add_metric(["share"], sum(by_state.values()))
            for state in ("empty", "stable"):
                states.add_metric([state], by_state.get(state, 0))
            by_id = broker.metadata.topics_by_id
            for (group_id, topic_id, partition), sp in sorted(coordinator.share_partitions.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
                info = by_id.get(topic_id)
                acquired, runs = sp.acquired_count()
                labels = [group_id, info.name if info is not None else str(topic_id), str(partition)]
                messages.add_metric(labels, acquired)
                batches.add_metric(labels, runs)
            for name in sorted(coordinator.stats.acknowledgements):
                acks.add_metric([name], coordinator.stats.acknowledgements[name])
            timeouts.add_metric([], coordinator.stats.lock_timeouts)
        yield from (groups, states, messages, batches, acks, timeouts)
