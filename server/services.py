"""BrokerServices: what the API handlers (server/apis/) may use of the broker, built once by
Broker.start (Kafka's KafkaApis takes its collaborators the same way: the replica manager, the
coordinators, the authorizer, the quota managers, the metadata cache, the configs).

A handler gets this object and a RequestContext (server/request_context.py), never the Broker
or the Connection: what is not listed here is not a handler's business.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_sidecar.storage.dynamic_broker_config import DynamicBrokerConfig
    from kafka_sidecar.storage.log_manager import LogManager
    from kafka_sidecar.storage.producer_id_manager import ProducerIdManager
    from kafka_sidecar.storage.topic_registry import TopicRegistry

    from .cluster.node import ClusterNode
    from .config import BrokerConfig
    from .coordinator.runtime import CoordinatorRuntime
    from .features import FeatureControl
    from .fetch_session import FetchManager
    from .group_configs import GroupConfigManager
    from .groups.coordinator import GroupCoordinator
    from .listeners import Endpoint
    from .metrics import Metrics
    from .quotas import ClientQuotas
    from .replica_manager import ReplicaManager
    from .security.authorizer import NoAuthorizer
    from .security.credentials import ScramCredentialStore
    from .share.coordinator import ShareCoordinator
    from .telemetry.manager import ClientMetricsManager
    from .telemetry.subscriptions import ClientMetricsSubscriptions
    from .transactions.coordinator import TransactionCoordinator


@dataclass(eq=False)
class BrokerServices:
    # Who this broker is and where clients reach it.
    node_id: int
    cluster_id: str
    data_dir: Path
    config: BrokerConfig
    listeners: list[Endpoint]
    endpoint_for: Callable[[str | None], tuple[str, int]]  # a listener's advertised (host, port)
    listeners_value: Callable[[], str]  # ``listeners`` with the ports bound
    # The storage thread: blocking work (fsync, files) awaited, or fired and forgotten.
    run_blocking: Callable[..., Awaitable[Any]]
    schedule_blocking: Callable[..., None]
    # The coordinators' writes and their durability (a coordinator API's answer waits for it).
    coordinator_runtime: CoordinatorRuntime
    # Partitions and topics.
    metadata: TopicRegistry
    log_manager: LogManager
    replica_manager: ReplicaManager
    fetch_manager: FetchManager
    producer_ids: ProducerIdManager
    dynamic_config: DynamicBrokerConfig
    # Coordinators.
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    share_coordinator: ShareCoordinator
    # Security, quotas, metrics.
    authorizer: NoAuthorizer
    scram_store: ScramCredentialStore
    client_quotas: ClientQuotas
    metrics: Metrics
    # Feature levels, group configs, client telemetry (KIP-714).
    features: FeatureControl
    group_configs: GroupConfigManager
    client_metrics: ClientMetricsManager
    client_metrics_subscriptions: ClientMetricsSubscriptions
    # A node of `serve --processes N` (server/cluster/node.py); None: a one-node cluster.
    cluster: ClusterNode | None = None
