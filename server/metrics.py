"""Prometheus metrics, health and readiness: ``--metrics-port`` (HTTP on ``--metrics-host``).

Kafka's familiar figures, named the way the JMX exporter names Kafka's MBeans:

- ``kafka_server_brokertopicmetrics_{bytesin,messagesin,bytesout,messagesout}_total{topic}``
- ``kafka_network_requestmetrics_requests_total{request}``, ``..._errors_total{request,error}``,
  ``kafka_network_requestmetrics_request_duration_seconds{request}`` (histogram, request read
  to response ready; a Fetch long-poll counts its wait, as Kafka's TotalTimeMs does)
- ``kafka_log_log_{size_bytes,segments,start_offset,end_offset}{topic,partition}``
- ``kafka_cluster_partition_underminisr{topic,partition}`` and
  ``kafka_server_replicamanager_{underminisrpartitioncount,underreplicatedpartitions}``: always 0
  (one broker, every replica in sync)
- ``kafka_log_logcleaner_*`` and ``kafka_log_logmanager_retention_*``: cleaner and retention rounds
- ``kafka_server_socketserver_{connections,connections_opened_total,connections_closed_total}{listener}``
- ``kafka_server_socketserver_{failed,successful}_authentication_total{listener}``
- ``kafka_client_telemetry{client_instance_id,client_id,metric,attributes}``: the latest value of
  each metric clients pushed (KIP-714, server/telemetry/), and
  ``kafka_server_client_metrics_instance_count``
- ``kafka_server_{produce,fetch}_byte_rate``, ``kafka_server_request_request_time`` and
  ``kafka_server_{produce,fetch,request}_throttle_time{user,client_id}``: client quotas
  (server/quotas/metrics.py)
- ``kafka_sidecar_ready``, ``kafka_sidecar_info`` and the ``process_*`` figures.

The hot paths only bump plain integers in dicts (per request, per partition, never per record);
everything is turned into Prometheus families when scraped, on the event loop, so nothing here
needs a lock. ``/healthz`` answers 200 while the process serves HTTP; ``/readyz`` answers 200
once the logs are loaded and the Kafka listeners accept connections (503 before, and while
shutting down).
"""

from __future__ import annotations

import bisect
import logging
import weakref
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors as error_codes
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from .http import HttpRequest, HttpResponse, HttpServer
from .quotas.metrics import ClientQuotaCollector
from .share.metrics import ShareGroupCollector
from .telemetry.manager import ClientTelemetryCollector

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

VERSION = "0.1.0"
# Request latency buckets, seconds (Kafka's request times span ~0.1 ms to a long-poll's max wait).
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_ERROR_NAMES = {v: k for k, v in vars(error_codes).items() if k.isupper() and isinstance(v, int)}


def error_name(code: int) -> str:
    return _ERROR_NAMES.get(code, f"ERROR_{code}")


class _ApiStats:
    __slots__ = ("buckets", "sum", "errors")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.errors: dict[int, int] = defaultdict(int)


def _count_errors(obj: Any, out: dict[int, int], depth: int = 0) -> None:
    """Non-zero ``error_code`` fields of a response dict (top level and nested lists of dicts)."""
    code = obj.get("error_code")
    if code:
        out[code] += 1
    if depth >= 4:
        return
    for v in obj.values():
        if v.__class__ is list and v:  # an empty list (a Produce answer's record_errors) has nothing
            for item in v:
                if item.__class__ is dict:
                    _count_errors(item, out, depth + 1)


_PRODUCE_ANSWER_KEYS = frozenset(("responses", "throttle_time"))


def _count_produce_errors(response: dict[str, Any], out: dict[int, int]) -> None:
    """``_count_errors`` for the Produce handler's answer, without walking every field (it was
    1.3 us of each request): Kafka's ProduceResponse has an error code on partitions only (its
    record_errors, current_leader and node_endpoints have none), so those are all it counts."""
    topics = response["responses"]
    if topics.__class__ is not list:
        return
    for t in topics:
        if t.__class__ is not dict:
            continue
        code = t.get("error_code")  # none in Kafka's schema: counted if ever there, as _count_errors would
        if code:
            out[code] += 1
        partitions = t.get("partition_responses")
        if partitions.__class__ is not list:
            continue
        for p in partitions:
            if p.__class__ is dict:
                code = p.get("error_code")
                if code:
                    out[code] += 1


class Metrics:
    """Counters the broker bumps; read by :class:`SidecarCollector` at scrape time."""

    def __init__(self) -> None:
        self.apis: dict[str, _ApiStats] = {}
        self.protocol_errors = 0
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_out: dict[str, int] = defaultdict(int)
        self.connections_opened: dict[str, int] = defaultdict(int)
        self.connections_closed: dict[str, int] = defaultdict(int)
        # Authentications (TLS client certificate or SASL) per listener, as Kafka's socket-server
        # metrics count them (failed-authentication-total, successful-authentication-total).
        self.authentications_failed: dict[str, int] = defaultdict(int)
        self.authentications_succeeded: dict[str, int] = defaultdict(int)
        self.retention_rounds = 0
        self.retention_segments_deleted = 0
        self.retention_last_seconds = 0.0
        # Per connection: the fetch position of each partition it last asked for (messages out).
        self._positions: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], int]] = weakref.WeakKeyDictionary()

    # ---- hot path -------------------------------------------------------------------------

    def observe_request(self, api: str, seconds: float, response: Any) -> None:
        st = self.apis.get(api)
        if st is None:
            st = self.apis[api] = _ApiStats()
        st.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        st.sum += seconds
        if response.__class__ is dict:
            if api == "Produce" and response.keys() == _PRODUCE_ANSWER_KEYS:
                _count_produce_errors(response, st.errors)
            else:
                _count_errors(response, st.errors)

    def record_produce(self, topic: str, nbytes: int, records: int) -> None:
        self.bytes_in[topic] += nbytes
        self.messages_in[topic] += records

    def record_fetch(self, conn: Any, topics: Any, requested: Any) -> None:
        """After a Fetch: bytes sent per topic (``topics``: the answer's), and records consumed per
        topic: how far the fetch position of each partition the request named (``requested``:
        objects with topic, partition, fetch_offset) moved since this connection's previous fetch
        of it. An incremental fetch names only the partitions whose position changed."""
        try:
            positions = self._positions.get(conn)
            if positions is None:
                positions = self._positions[conn] = {}
        except TypeError:  # not weak-referenceable (a test double): skip messages out
            positions = {}
        stats = self.apis.get("Fetch")
        if stats is None:
            stats = self.apis["Fetch"] = _ApiStats()
        bytes_out = self.bytes_out
        for ft in topics:
            name = ft.name
            if not name:
                continue
            for fp in ft.partitions:
                if fp.error_code:
                    stats.errors[fp.error_code] += 1
                    continue
                records = fp.records
                if records is not None:
                    size = len(records) if records.__class__ in (bytes, bytearray) else records.size
                    if size:
                        bytes_out[name] += size
        for rp in requested:
            name = rp.topic
            if not name:
                continue
            key = (name, rp.partition)
            offset = rp.fetch_offset
            prev = positions.get(key)
            if prev is not None and offset > prev:
                self.messages_out[name] += offset - prev
            positions[key] = offset

    # ---- background rounds ------------------------------------------------------------------

    def record_retention(self, deleted: int, seconds: float) -> None:
        self.retention_rounds += 1
        self.retention_segments_deleted += deleted
        self.retention_last_seconds = seconds


class SidecarCollector:
    """Turns the broker's state and counters into Prometheus metric families."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self):  # noqa: C901 - one flat list of families
        b = self.broker
        m: Metrics = b.metrics

        info = GaugeMetricFamily("kafka_sidecar_info", "kafka-sidecar build and cluster", labels=["version", "cluster_id", "node_id"])
        info.add_metric([VERSION, b.cluster_id or "", str(b.node_id)], 1)
        yield info
        ready = GaugeMetricFamily("kafka_sidecar_ready", "1 once the logs are loaded and the listeners accept connections")
        ready.add_metric([], 1 if b.ready else 0)
        yield ready

        # -- topics
        for attr, name, doc in (
            ("bytes_in", "bytesin", "Bytes of record batches appended (Produce), per topic"),
            ("messages_in", "messagesin", "Records appended (Produce), per topic"),
            ("bytes_out", "bytesout", "Bytes of records sent to consumers (Fetch), per topic"),
            ("messages_out", "messagesout", "Records consumed (Fetch), per topic: how far each connection's fetch position advanced"),
        ):
            fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            for topic, v in list(getattr(m, attr).items()):
                fam.add_metric([topic], v)
            yield fam

        # -- requests
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered, per API", labels=["request"])
        errs = CounterMetricFamily("kafka_network_requestmetrics_errors", "Error codes in responses (top level, topics, partitions), per API", labels=["request", "error"])
        hist = HistogramMetricFamily("kafka_network_requestmetrics_request_duration_seconds", "Time from request read to response ready, per API", labels=["request"])
        for api, st in sorted(m.apis.items()):
            total = 0
            buckets = []
            for bound, count in zip((*BUCKETS, float("inf")), st.buckets, strict=True):
                total += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
            requests.add_metric([api], total)
            hist.add_metric([api], buckets, st.sum)
            for code, count in sorted(st.errors.items()):
                errs.add_metric([api, error_name(code)], count)
        yield requests
        yield errs
        yield hist
        pv = CounterMetricFamily("kafka_network_requestmetrics_protocol_violations", "Requests that closed their connection (malformed, unknown API or version)")
        pv.add_metric([], m.protocol_errors)
        yield pv

        # -- logs
        size = GaugeMetricFamily("kafka_log_log_size_bytes", "Bytes in the partition's segments", labels=["topic", "partition"])
        segs = GaugeMetricFamily("kafka_log_log_segments", "Segments of the partition", labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_start_offset", "Log start offset", labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_end_offset", "Log end offset", labels=["topic", "partition"])
        under = GaugeMetricFamily("kafka_cluster_partition_underminisr", "1 if the partition has fewer in-sync replicas than min.insync.replicas (never: one broker)", labels=["topic", "partition"])
        lm = b.log_manager
        count = 0
        for lg in lm.all_logs():
            labels = [lg.topic, str(lg.partition)]
            try:
                segments = lg.segments
                size.add_metric(labels, sum(s.size for s in segments))
                segs.add_metric(labels, len(segments))
                start.add_metric(labels, lg.log_start_offset)
                end.add_metric(labels, lg.log_end_offset)
            except Exception:  # a log being closed or deleted right now
                continue
            under.add_metric(labels, 0)
            count += 1
        yield from (size, segs, start, end, under)
        for name, doc in (
            ("kafka_server_replicamanager_underminisrpartitioncount", "Partitions under min.insync.replicas (always 0)"),
            ("kafka_server_replicamanager_underreplicatedpartitions", "Under-replicated partitions (always 0)"),
            ("kafka_server_replicamanager_offlinereplicacount", "Offline replicas (always 0)"),
        ):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], 0)
            yield g
        pc = GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions on this broker")
        pc.add_metric([], count)
        yield pc

        # -- incremental fetch sessions (Kafka's kafka.server:type=FetchSessionCache)
        fetch_manager = getattr(b, "fetch_manager", None)
        if fetch_manager is not None:
            cache = fetch_manager.cache
            for name, doc, value in (
                ("kafka_server_fetchsessioncache_numincrementalfetchsessions", "Incremental fetch sessions in the cache", len(cache)),
                ("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", "Partitions of the cached fetch sessions",
                 cache.total_partitions),
            ):
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], value)
                yield g
            ev = CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                     "Fetch sessions evicted to make room for new ones")
            ev.add_metric([], cache.evictions)
            yield ev

        # -- cleaner and retention
        cleaner = getattr(lm, "cleaner", None)
        rounds = CounterMetricFamily("kafka_log_logcleaner_cleanings", "Logs cleaned (compaction rounds that cleaned a log)")
        rounds.add_metric([], getattr(cleaner, "rounds", 0) if cleaner else 0)
        yield rounds
        stats = getattr(cleaner, "last_stats", None) if cleaner else None
        for name, doc, value in (
            ("kafka_log_logcleaner_last_bytes_read", "Bytes read by the last cleaning", stats.bytes_read if stats else 0),
            ("kafka_log_logcleaner_last_bytes_written", "Bytes written by the last cleaning", stats.bytes_written if stats else 0),
            ("kafka_log_logcleaner_last_records_removed", "Records removed by the last cleaning", stats.records_removed if stats else 0),
            ("kafka_log_logcleaner_last_duration_seconds", "Duration of the last cleaning", (stats.duration_ms / 1000) if stats else 0),
            ("kafka_log_logcleaner_last_end_timestamp_seconds", "When the last cleaning ended (Unix time)", (stats.end_ms / 1000) if stats else 0),
            # Kafka's LogCleaner and LogCleanerManager gauges.
            *((f"kafka_log_logcleaner_{attr}", f"Kafka's {attr.replace('_', '-')}", getattr(cleaner, attr, 0) if cleaner else 0) for attr in (
                "max_buffer_utilization_percent", "cleaner_recopy_percent", "max_clean_time_secs", "dead_thread_count")),
            *((f"kafka_log_logcleanermanager_{attr}", f"Kafka's {attr.replace('_', '-')}", getattr(cleaner, attr, 0) if cleaner else 0) for attr in (
                "uncleanable_partitions_count", "uncleanable_bytes", "max_dirty_percent", "time_since_last_run_ms")),
        ):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], value)
            yield g
        r = CounterMetricFamily("kafka_log_logmanager_retention_rounds", "Retention checks run (log.retention.check.interval.ms)")
        r.add_metric([], m.retention_rounds)
        yield r
        r = CounterMetricFamily("kafka_log_logmanager_retention_segments_deleted", "Segments scheduled for deletion by retention")
        r.add_metric([], m.retention_segments_deleted)
        yield r
        g = GaugeMetricFamily("kafka_log_logmanager_retention_last_duration_seconds", "Duration of the last retention check")
        g.add_metric([], m.retention_last_seconds)
        yield g

        # -- connections
        current: dict[str, int] = defaultdict(int)
        for conn in list(b.connections):
            current[getattr(conn, "listener", "PLAINTEXT")] += 1
        names = sorted({e.name for e in b.listeners} | set(current) | set(m.connections_opened))
        conns = GaugeMetricFamily("kafka_server_socketserver_connections", "Open client connections, per listener", labels=["listener"])
        opened = CounterMetricFamily("kafka_server_socketserver_connections_opened", "Client connections accepted, per listener", labels=["listener"])
        closed = CounterMetricFamily("kafka_server_socketserver_connections_closed", "Client connections closed, per listener", labels=["listener"])
        failed = CounterMetricFamily("kafka_server_socketserver_failed_authentication",
                                     "Failed TLS handshakes and SASL authentications, per listener", labels=["listener"])
        succeeded = CounterMetricFamily("kafka_server_socketserver_successful_authentication",
                                        "Successful TLS client authentications and SASL authentications, per listener", labels=["listener"])
        for n in names:
            conns.add_metric([n], current.get(n, 0))
            opened.add_metric([n], m.connections_opened.get(n, 0))
            closed.add_metric([n], m.connections_closed.get(n, 0))
            failed.add_metric([n], m.authentications_failed.get(n, 0))
            succeeded.add_metric([n], m.authentications_succeeded.get(n, 0))
        yield from (conns, opened, closed, failed, succeeded)


def make_registry(broker: Broker) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SidecarCollector(broker))
    registry.register(ClientTelemetryCollector(broker))
    registry.register(ShareGroupCollector(broker))  # server/share/metrics.py
    registry.register(ClientQuotaCollector(broker))  # server/quotas/metrics.py
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


class MetricsServer:
    """/metrics, /healthz, /readyz over the shared small HTTP server (server/http.py)."""

    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.registry = make_registry(broker)
        self._http = HttpServer(self._serve, host, port, name="metrics")

    @property
    def host(self) -> str:
        return self._http.host

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    async def start(self) -> None:
        await self._http.start()

    async def stop(self) -> None:
        await self._http.stop()

    async def _serve(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse(*self._answer(request.path))

    def _answer(self, path: str) -> tuple[int, str, bytes]:
        b = self.broker
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path in ("/healthz", "/health", "/livez"):
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path in ("/readyz", "/ready"):
            if b.ready:
                return 200, "text/plain; charset=utf-8", b"ready\n"
            return 503, "text/plain; charset=utf-8", f"not ready: {b.state}\n".encode()
        if path == "/":
            return 200, "text/plain; charset=utf-8", b"kafka-sidecar: /metrics /healthz /readyz\n"
        return 404, "text/plain; charset=utf-8", b"not found\n"
