"""Broker: the running server: listeners, log manager, replica manager, coordinators, background tasks.

Everything runs on one asyncio loop; storage calls that can block for long
(start-up recovery, fsync, checkpoint writes, directory removal) go to a thread.
Appends and reads are page-cache writes/reads and run on the loop, all through the
ReplicaManager (server/replica_manager.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_sidecar.storage.dynamic_broker_config import DynamicBrokerConfig
from kafka_sidecar.storage.log_manager import CleanerConfig, DataDirError, LogManager
from kafka_sidecar.storage.log_segment import follow_open_file_limit
from kafka_sidecar.storage.producer_id_manager import ProducerIdManager

from .config import BrokerConfig
from .connection import Connection, admit
from .coordinator.clock import SYSTEM_CLOCK, Clock
from .coordinator.runtime import CoordinatorRuntime
from .features import feature_control
from .fetch_session import FetchManager, FetchSessionCache
from .group_configs import group_config_manager
from .groups.coordinator import GroupCoordinator
from .listeners import Endpoint, ListenerError, advertised_host_for, start_listener
from .logging_setup import Progress
from .metrics import Metrics
from .quotas import ClientQuotas, ClientQuotaStore, load_client_quotas
from .quotas.connections import ConnectionQuotas
from .replica_manager import ReplicaManager
from .security.authorizer import create_authorizer
from .security.credentials import ScramCredentialStore
from .security.listener import ListenerSecurity, build_listener_security
from .services import BrokerServices
from .share.coordinator import ShareCoordinator
from .telemetry.manager import manager_of, subscriptions_of
from .transactions.coordinator import TransactionCoordinator

if TYPE_CHECKING:
    from .cluster.node import ClusterNode

log = logging.getLogger(__name__)

T = TypeVar("T")
NODE_ID = 1
# Start-up progress: reported once loading takes longer than this, then every interval.
PROGRESS_DELAY_S = 1.0
# Descriptors besides one per partition: listeners, connections, checkpoints, snapshots.
FD_HEADROOM = 256
PROGRESS_INTERVAL_S = 5.0


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path, host: str = "127.0.0.1", port: int = 9092, *,
                 listeners: list[Endpoint] | None = None, advertised: dict[str, Endpoint] | None = None,
                 cluster: ClusterNode | None = None) -> None:
        self.config = config
        # A node of `serve --processes N` (server/cluster/node.py); None: a one-node cluster.
        self.cluster = cluster
        self.data_dir = Path(data_dir)
        # Kafka listeners (server/listeners.py); ``host``/``port`` alone make one PLAINTEXT listener.
        self.listeners: list[Endpoint] = list(listeners or [Endpoint("PLAINTEXT", host, port)])
        self.advertised_listeners: dict[str, Endpoint] = dict(advertised or {})
        # TLS contexts and SASL settings per listener (server/security): a bad setting is a
        # ConfigError here, before anything starts. SCRAM credentials live in the data dir.
        self.listener_security: dict[str, ListenerSecurity] = build_listener_security(config, self.listeners)
        self.scram_store = ScramCredentialStore.empty(self.data_dir)
        for sec in self.listener_security.values():
            if sec.sasl is not None:
                sec.sasl.scram_lookup = self._scram_credential
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
        self.bound_ports: dict[str, int] = {}
        self.metrics = Metrics()
        self.ready = False  # /readyz: logs loaded and listeners accepting
        self.state = "starting"
        self.started_at: float | None = None  # time.time() when ready (the console's uptime)
        self.node_id = cluster.node_id if cluster is not None else NODE_ID
        self.log_manager = LogManager(self.data_dir, config.log_defaults(), CleanerConfig(
            enabled=config.get("log.cleaner.enable"),
            threads=config.get("log.cleaner.threads"),
            backoff_ms=config.get("log.cleaner.backoff.ms"),
            dedupe_buffer_size=config.get("log.cleaner.dedupe.buffer.size"),
            io_buffer_load_factor=config.get("log.cleaner.io.buffer.load.factor"),
            io_buffer_size=config.get("log.cleaner.io.buffer.size"),
            max_io_bytes_per_second=config.get("log.cleaner.io.max.bytes.per.second"),
        ), recovery_threads=config.get("num.recovery.threads.per.data.dir"))
        if cluster is not None:  # logs of the partitions it leads; topics agreed through the cluster's log
            cluster.attach(self.log_manager)
        # The topics (Kafka's metadata image): names, ids, partition counts, config overrides.
        self.metadata = self.log_manager.metadata
        # Dynamic broker configs (AlterConfigs on BROKER resources); they reconfigure the logs' defaults.
        self.dynamic_config = DynamicBrokerConfig(self.data_dir, config.log_defaults(), self.log_manager.reconfigure_default_log_config)
        # Producer ids (InitProducerId, the transaction coordinator), never reused across restarts.
        self.producer_ids = ProducerIdManager(self.data_dir, self.log_manager.highest_producer_id)
        if cluster is not None:  # ids unique across the nodes
            self.producer_ids.stride, self.producer_ids.offset = cluster.layout.processes, cluster.node_id - 1
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="storage")
        self._server: asyncio.base_events.Server | None = None
        self._listener_servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.connections: set[Connection] = set()
        self.max_request_size: int = config.get("socket.request.max.bytes")
        # Every append, flush and read of a partition on behalf of the server (server/replica_manager.py).
        self.replica_manager = ReplicaManager(self.log_manager, self.metrics, self.executor)
        # Incremental fetch sessions (KIP-227, server/fetch_session.py), in memory as in Kafka.
        self.fetch_manager = FetchManager(FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots")))
        # The time the coordinators read and their timers run on (a ManualClock in tests).
        self.clock: Clock = SYSTEM_CLOCK
        # The coordinators' writes, replays, durability and timers (server/coordinator/runtime.py).
        self.coordinator_runtime = CoordinatorRuntime(self.replica_manager, self.clock)
        # Consumer groups and committed offsets (server/groups), stored in __consumer_offsets.
        self.group_coordinator = GroupCoordinator(self)
        # Transactions (server/transactions), stored in __transaction_state.
        self.transaction_coordinator = TransactionCoordinator(self)
        # Share groups (server/share, KIP-932): membership, share sessions and share-partitions, in memory.
        self.share_coordinator = ShareCoordinator(self)
        if cluster is not None:  # share-partition state kept by other nodes (server/cluster/share_state.py)
            from .cluster.share_state import RemoteShareState

            self.share_coordinator.persister.remote = RemoteShareState(cluster, self.share_coordinator.persister)
        # ACL authorizer (server/security/authorizer.py): authorizer.class.name, ACLs in sidecar-acls.json.
        self.authorizer = create_authorizer(config, self.data_dir)
        # Client quotas (server/quotas): stored in sidecar-client-quotas.json, loaded at start.
        self.client_quotas = ClientQuotas(ClientQuotaStore.empty(self.data_dir), config.get("quota.window.num"), config.get("quota.window.size.seconds"))
        # Per-IP connection limits and connection creation rates, checked at accept.
        self.connection_quotas = ConnectionQuotas(self.connection_setting, lambda: self.client_quotas.store.quotas)
        self._throttled_sockets: set[asyncio.BaseTransport] = set()  # closed after their throttle time

    def _load_data_dir(self) -> None:
        """Lock the data dir, read the dynamic broker configs (the logs' defaults), load the logs."""
        self.log_manager.lock_data_dir()
        self.log_manager.broker_log_defaults = self.dynamic_config.load()
        self.log_manager.startup()

    @property
    def cluster_id(self) -> str:
        return self.log_manager.cluster_id

    def endpoint_for(self, listener: str | None) -> tuple[str, int]:
        """(host, port) to advertise to a client connected through ``listener`` (Kafka answers
        with that listener's advertised endpoint; by default its own host and bound port)."""
        ep = next((e for e in self.listeners if e.name == listener), self.listeners[0])
        adv = self.advertised_listeners.get(ep.name)
        bound = self.bound_ports.get(ep.name, ep.port)
        if adv is not None:
            return advertised_host_for(adv.host), adv.port or bound
        return advertised_host_for(ep.host), bound

    def listeners_value(self) -> str:
        """The ``listeners`` in effect, with the ports actually bound."""
        return ",".join(Endpoint(e.name, e.host, self.bound_ports.get(e.name, e.port)).uri() for e in self.listeners)

    def schedule_blocking(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` in the storage thread without waiting for it."""
        self.executor.submit(fn, *args)

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # ---- lifecycle ------------------------------------------------------------------

    def _scram_credential(self, user: str, mechanism: str):
        return self.scram_store.get(user, mechanism)

    async def start(self) -> None:
        try:
            self.scram_store = await self.run_blocking(ScramCredentialStore.load, self.data_dir)
        except OSError as e:
            raise DataDirError(str(e)) from None
        await self.run_blocking(self.authorizer.load)  # the ACLs (a damaged ACL file stops the start)
        try:
            self.client_quotas = await self.run_blocking(load_client_quotas, self.data_dir, self.config.get("quota.window.num"),
                                                         self.config.get("quota.window.size.seconds"))
            # Group configs and client metrics subscriptions: read now, so a damaged file stops the
            # start naming it rather than failing the first request that needs it.
            await self.run_blocking(group_config_manager, self)
            await self.run_blocking(subscriptions_of, self)
        except OSError as e:
            raise DataDirError(str(e)) from None
        partitions = await self.run_blocking(_count_partition_dirs, self.data_dir)
        raise_open_file_limit(partitions, self.data_dir)
        self.state = "loading logs"
        watcher = asyncio.create_task(self._watch_loading(partitions))
        try:
            await self.run_blocking(self._load_data_dir)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        if self.cluster is not None:  # the topics as the cluster's log has them (made, deleted while down)
            await self.run_blocking(self.cluster.topics.load)
        self.state = "replaying consumer groups"
        await self.group_coordinator.start()  # replays __consumer_offsets; member session timers run on the loop
        self.state = "replaying transactions"
        await self.transaction_coordinator.start()  # replays __transaction_state, completes Prepare* transactions
        await self.share_coordinator.start()  # replays __share_group_state (share-partition state)
        self.services = self._services()
        self.state = "binding listeners"
        for ep in self.listeners:
            try:
                inherited = self.cluster.sockets_for(ep.name) if self.cluster is not None else None
                servers, port = await start_listener(ep, functools.partial(self._on_connection, ep.name), socks=inherited)
            except OSError as e:
                raise ListenerError(f"cannot listen on {ep.uri()}: {e.strerror or e}") from e
            self._listener_servers += servers
            self.bound_ports[ep.name] = port
        self._server = self._listener_servers[0]
        self.port = self.bound_ports[self.listeners[0].name]
        cfg = self.config
        self._tasks.append(asyncio.create_task(self._periodic(cfg.get("log.flush.offset.checkpoint.interval.ms"), self._checkpoint_recovery_points)))
        self._tasks.append(asyncio.create_task(self._periodic(cfg.get("log.flush.start.offset.checkpoint.interval.ms"), self._checkpoint_log_start_offsets)))
        self._tasks.append(asyncio.create_task(self._periodic(cfg.get("replica.high.watermark.checkpoint.interval.ms"), self._checkpoint_high_watermarks)))
        # Kafka's kafka-log-flusher runs every log.flush.scheduler.interval.ms; the same tick
        # flushes rolled segments and removes .deleted files, so it runs at least every second.
        self._tasks.append(asyncio.create_task(self._periodic(min(1000, cfg.get("log.flush.scheduler.interval.ms")), self._flush_dirty)))
        self._tasks.append(asyncio.create_task(self._periodic(
            self.config.get("log.retention.check.interval.ms"), self._retention,
            initial_delay_ms=self.config.get("log.initial.task.delay.ms"),
        )))
        self._tasks.append(asyncio.create_task(self._periodic(
            self.config.get("producer.id.expiration.check.interval.ms"), self._expire_producers,
        )))
        self._tasks.append(asyncio.create_task(self._periodic(
            self.config.get("offsets.retention.check.interval.ms"), self.group_coordinator.periodic_cleanup,
        )))
        self._tasks.append(asyncio.create_task(self._periodic(
            self.config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"), self.transaction_coordinator.periodic,
        )))
        self._tasks.append(asyncio.create_task(self._periodic(
            self.config.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
            self.transaction_coordinator.periodic_expiration,
        )))
        if self.cluster is not None:
            from .cluster.metadata_log import POLL_INTERVAL_S

            self._tasks.append(asyncio.create_task(self._periodic(int(POLL_INTERVAL_S * 1000), functools.partial(self.cluster.topics.poll, self.services))))
        self.state = "ready"
        self.started_at = time.time()
        self.ready = True

    def _services(self) -> BrokerServices:
        """What the API handlers may use (server/services.py), once everything in it is loaded."""
        return BrokerServices(
            node_id=self.node_id, cluster_id=self.cluster_id, data_dir=self.data_dir, config=self.config,
            listeners=self.listeners, endpoint_for=self.endpoint_for, listeners_value=self.listeners_value,
            run_blocking=self.run_blocking, schedule_blocking=self.schedule_blocking,
            coordinator_runtime=self.coordinator_runtime, metadata=self.metadata, log_manager=self.log_manager, replica_manager=self.replica_manager,
            fetch_manager=self.fetch_manager, producer_ids=self.producer_ids, dynamic_config=self.dynamic_config,
            group_coordinator=self.group_coordinator, transaction_coordinator=self.transaction_coordinator,
            share_coordinator=self.share_coordinator, authorizer=self.authorizer, scram_store=self.scram_store,
            client_quotas=self.client_quotas, metrics=self.metrics, features=feature_control(self),
            group_configs=group_config_manager(self), client_metrics=manager_of(self),
            client_metrics_subscriptions=subscriptions_of(self), cluster=self.cluster)

    async def stop(self) -> None:
        self.ready = False
        self.state = "shutting down"
        for srv in self._listener_servers:
            srv.close()
        for transport in list(self._throttled_sockets):
            transport.abort()
        for conn in list(self.connections):
            conn.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        if self.cluster is not None:  # markers still being sent are written again at the next start (Prepare*)
            await self.cluster.close()
        await self.coordinator_runtime.shutdown()  # flushes of writes timers made
        await self.replica_manager.shutdown()
        self.group_coordinator.shutdown()
        self.transaction_coordinator.shutdown()
        await self.run_blocking(self.log_manager.shutdown)
        self.executor.shutdown(wait=True)

    def connection_setting(self, name: str) -> Any:
        """A connection limit in force: this broker's dynamic config, the cluster-wide dynamic
        default, else the static one (Kafka's DynamicConnectionQuota reconfigures them live)."""
        dynamic = self.dynamic_config.configs
        for scope in (str(self.node_id), ""):
            value = dynamic.get(scope, {}).get(name)
            if value is not None:
                return value
        return self.config.get(name)

    async def _on_connection(self, listener: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not admit(self, writer):  # max.connections
            return
        peer = writer.get_extra_info("peername")
        peer_ip = peer[0] if peer else ""
        admission = self.connection_quotas.accept(peer_ip, int(time.time() * 1000))
        if admission.close:  # over its IP's limits: not served, closed (after its throttle time)
            self._close_later(writer.transport, admission.delay_ms)
            return
        try:
            if admission.delay_ms:  # over the broker's connection creation rate: held unread
                await asyncio.sleep(admission.delay_ms / 1000)
            await self._serve_connection(listener, reader, writer)
        finally:
            self.connection_quotas.release(peer_ip)

    def _close_later(self, transport: asyncio.BaseTransport, delay_ms: int) -> None:
        """Kafka's delayed close of a throttled connection (it was never served)."""
        if delay_ms <= 0:
            transport.abort()
            return
        self._throttled_sockets.add(transport)

        def close() -> None:
            self._throttled_sockets.discard(transport)
            transport.abort()

        asyncio.get_running_loop().call_later(delay_ms / 1000, close)

    async def _serve_connection(self, listener: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The listener: whose advertised endpoint Metadata answers with, and the ACLs' listener.
        conn = Connection(self, reader, writer, self.listener_security.get(listener), listener)
        self.metrics.connections_opened[listener] += 1
        self.connections.add(conn)
        try:
            await conn.serve()
        except asyncio.CancelledError:
            # Shutdown cancels connection tasks; ending normally keeps asyncio's
            # stream callback from logging the cancellation as an error.
            pass
        finally:
            self.connections.discard(conn)
            self.metrics.connections_closed[listener] += 1

    async def _periodic(self, interval_ms: int, fn: Callable[[], Any], initial_delay_ms: int | None = None) -> None:
        interval = max(interval_ms, 10) / 1000
        await asyncio.sleep(interval if initial_delay_ms is None else initial_delay_ms / 1000)
        while True:
            try:
                await fn()
            except Exception:
                log.exception("background task %s failed", getattr(fn, "__name__", fn))
            await asyncio.sleep(interval)

    async def _checkpoint_recovery_points(self) -> None:
        await self.run_blocking(self.log_manager.checkpoint_recovery_points)

    async def _checkpoint_log_start_offsets(self) -> None:
        await self.run_blocking(self.log_manager.checkpoint_log_start_offsets)

    async def _checkpoint_high_watermarks(self) -> None:
        await self.run_blocking(self.replica_manager.checkpoint_high_watermarks)

    async def _flush_dirty(self) -> None:
        now = int(time.time() * 1000)
        await self.run_blocking(self.log_manager.flush_dirty_logs, now)
        await self.run_blocking(self.log_manager.delete_due_segments, now)

    async def _expire_producers(self) -> None:
        await self.run_blocking(
            self.log_manager.remove_expired_producers, int(time.time() * 1000), self.config.get("producer.id.expiration.ms"),
        )

    async def _retention(self) -> None:
        """Kafka's kafka-log-retention task: off the loop, appends and fetches go on."""
        started = time.monotonic()
        deleted = await self.run_blocking(self.log_manager.cleanup_logs)
        self.metrics.record_retention(int(deleted or 0), time.monotonic() - started)

    async def _watch_loading(self, total: int) -> None:
        """Start-up progress while the logs load (reported only if it takes over a second)."""
        progress = Progress("loading logs", total, delay=PROGRESS_DELAY_S, interval=PROGRESS_INTERVAL_S)
        try:
            while True:
                done = self.log_manager.loaded_partitions
                self.state = f"loading logs: {done}/{total} partitions"
                progress.update(done)
                await asyncio.sleep(0.2)
        finally:
            progress.update(self.log_manager.loaded_partitions)  # the last figure, if progress was shown at all
            progress.finish()


def raise_open_file_limit(partitions: int, data_dir: Path) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as Kafka's start scripts expect of the
    system) and refuse to start when it is still too low for the partitions on disk (an idle
    partition keeps one descriptor open): a clear error now, not ``Too many open files`` later.
    Returns the soft limit in effect."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.debug("open file limit raised from %d to %d", soft, target)
            soft = target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open file limit from %d to %d: %s", soft, target, e)
    # The pools of open files were sized at import, from the limit before the raise.
    follow_open_file_limit()
    needed = partitions + FD_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise DataDirError(
            f"the open file limit (RLIMIT_NOFILE: soft {soft}, hard {'unlimited' if hard == resource.RLIM_INFINITY else hard}) "
            f"is too low for the {partitions} partitions in {data_dir}: at least {needed} are needed; "
            f"raise it (ulimit -n {needed}, docker run --ulimit nofile={needed}, systemd LimitNOFILE={needed})"
        )
    return soft


def _count_partition_dirs(data_dir: Path) -> int:
    """Partition directories in ``data_dir`` (what start-up will load), for progress reports."""
    try:
        with os.scandir(data_dir) as entries:  # the entry types come with the listing: no stat each
            return sum(1 for e in entries if not e.name.endswith("-delete") and e.name != "__cluster_metadata-0"
                       and e.name.rpartition("-")[2].isdigit() and e.is_dir())
    except OSError:
        return 0
