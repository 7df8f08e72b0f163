"""Request dispatch: the table of implemented APIs and versions, and ApiVersions.

``SUPPORTED_APIS`` is the single source for what ApiVersions advertises and for
which requests are accepted: only what is implemented is listed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_sidecar.protocol import errors
from kafka_sidecar.protocol.framing import (
    API_VERSIONS_KEY,
    FrameError,
    ProtocolViolation,
    frame,
    framed_response,
    parse_request_header,
    peek_api,
    response_header,
)
from kafka_sidecar.protocol.messages import decode_request_body, encode_body, is_flexible_request

from .apis import (
    acls,
    admin,
    cluster,
    configs,
    consumer_groups,
    delegation_tokens,
    delete_records,
    features,
    fetch,
    groups,
    leader_epoch,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producer_id,
    producers,
    quotas,
    sasl,
    scram,
    share,
    share_state,
    streams_groups,
    telemetry,
    topics,
    transactions,
    txn_markers,
)
from .error_response import error_response
from .quotas.manager import SELF_RECORDED_APIS
from .request_context import ClientInfo, RequestContext, Throttled

if TYPE_CHECKING:
    from .services import BrokerServices

log = logging.getLogger(__name__)

# A handler answers a request with a response dict, pre-encoded parts (Fetch), None (no answer:
# acks=0), or one of these inside Throttled (KIP-219: the connection then mutes itself).
Handler = Callable[["BrokerServices", RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    # Answered only once the coordinator writes it made are durable (server/replica_manager.py).
    coordinator_write: bool = False


async def _api_versions(services: BrokerServices, context: RequestContext, request: Any) -> dict[str, Any]:
    """Features (v3+) are server/features.py's: Kafka 4.3.1's, at the levels we have. Below v4 a
    supported feature whose range starts at 0 is left out, as Kafka does (older clients reject a
    minimum of 0, KAFKA-17011). Disabled features hide no API: Kafka 4.3 keeps the share APIs
    listed at share.version 0 and answers them UNSUPPORTED_VERSION."""
    telemetry.record_client_software(context, request)  # KIP-714's client_software_* selectors
    control = services.features
    supported = control.supported_features()
    if context.header.api_version < 4:
        supported = [f for f in supported if f["min_version"] > 0]
    return {
        "error_code": errors.NONE,
        "api_keys": [
            {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
            for s in sorted(SUPPORTED_APIS.values(), key=lambda s: s.key)
        ],
        "throttle_time": 0,
        "supported_features": supported,
        "finalized_features_epoch": control.epoch,
        "finalized_features": control.finalized_features(),
    }


SUPPORTED_APIS: dict[int, ApiSpec] = {
    s.key: s
    for s in [
        ApiSpec(0, "Produce", 3, 13, produce.handle_produce),
        ApiSpec(1, "Fetch", 4, 18, fetch.handle_fetch),
        ApiSpec(2, "ListOffsets", 1, 11, list_offsets.handle_list_offsets),
        ApiSpec(3, "Metadata", 0, 13, metadata.handle_metadata),
        ApiSpec(18, "ApiVersions", 0, 4, _api_versions),
        ApiSpec(19, "CreateTopics", 2, 7, topics.handle_create_topics),
        ApiSpec(20, "DeleteTopics", 1, 6, topics.handle_delete_topics),
        ApiSpec(21, "DeleteRecords", 0, 2, delete_records.handle_delete_records),
        ApiSpec(22, "InitProducerId", 0, 5, producer_id.handle_init_producer_id, coordinator_write=True),
        ApiSpec(61, "DescribeProducers", 0, 0, producers.handle_describe_producers),
        # Transactions (server/apis/transactions.py, server/transactions): Kafka 4.3's version ranges.
        ApiSpec(24, "AddPartitionsToTxn", 0, 5, transactions.handle_add_partitions_to_txn, coordinator_write=True),
        ApiSpec(25, "AddOffsetsToTxn", 0, 4, transactions.handle_add_offsets_to_txn, coordinator_write=True),
        ApiSpec(26, "EndTxn", 0, 5, transactions.handle_end_txn, coordinator_write=True),
        ApiSpec(27, "WriteTxnMarkers", 1, 2, txn_markers.handle_write_txn_markers, coordinator_write=True),
        ApiSpec(28, "TxnOffsetCommit", 0, 5, transactions.handle_txn_offset_commit, coordinator_write=True),
        ApiSpec(65, "DescribeTransactions", 0, 0, transactions.handle_describe_transactions),
        # v2: the transactional id pattern (KIP-1152), matched over the whole id as Kafka's RE2J matches().
        ApiSpec(66, "ListTransactions", 0, 2, transactions.handle_list_transactions),
        # Kafka 4.3 serves v2-4 (v0-1 went with KIP-896).
        ApiSpec(23, "OffsetForLeaderEpoch", 2, 4, leader_epoch.handle_offset_for_leader_epoch),
        # Topic and broker configs (server/apis/configs.py): Kafka 4.3's version ranges.
        ApiSpec(32, "DescribeConfigs", 1, 4, configs.handle_describe_configs),
        ApiSpec(33, "AlterConfigs", 0, 2, configs.handle_alter_configs),
        ApiSpec(44, "IncrementalAlterConfigs", 0, 1, configs.handle_incremental_alter_configs),
        # Consumer groups, classic protocol (server/apis/groups.py): Kafka 4.3's version ranges
        # (OffsetCommit/OffsetFetch v10 name topics by id).
        ApiSpec(8, "OffsetCommit", 2, 10, groups.handle_offset_commit, coordinator_write=True),
        ApiSpec(9, "OffsetFetch", 1, 10, groups.handle_offset_fetch),
        ApiSpec(10, "FindCoordinator", 0, 6, groups.handle_find_coordinator),
        ApiSpec(11, "JoinGroup", 0, 9, groups.handle_join_group, coordinator_write=True),
        ApiSpec(12, "Heartbeat", 0, 4, groups.handle_heartbeat),
        ApiSpec(13, "LeaveGroup", 0, 5, groups.handle_leave_group, coordinator_write=True),
        ApiSpec(14, "SyncGroup", 0, 5, groups.handle_sync_group, coordinator_write=True),
        ApiSpec(15, "DescribeGroups", 0, 6, groups.handle_describe_groups),
        ApiSpec(16, "ListGroups", 0, 5, groups.handle_list_groups),
        ApiSpec(42, "DeleteGroups", 0, 2, groups.handle_delete_groups, coordinator_write=True),
        ApiSpec(47, "OffsetDelete", 0, 0, groups.handle_offset_delete, coordinator_write=True),
        # Consumer groups, KIP-848 protocol (server/apis/consumer_groups.py): Kafka 4.3's version ranges.
        ApiSpec(68, "ConsumerGroupHeartbeat", 0, 1, consumer_groups.handle_consumer_group_heartbeat, coordinator_write=True),
        ApiSpec(69, "ConsumerGroupDescribe", 0, 1, consumer_groups.handle_consumer_group_describe),
        # Streams groups, KIP-1071 (server/apis/streams_groups.py): Kafka 4.3's version ranges.
        ApiSpec(88, "StreamsGroupHeartbeat", 0, 0, streams_groups.handle_streams_group_heartbeat, coordinator_write=True),
        ApiSpec(89, "StreamsGroupDescribe", 0, 0, streams_groups.handle_streams_group_describe),
        # Kafka's tools (issue 11): Kafka 4.3's version ranges.
        ApiSpec(35, "DescribeLogDirs", 1, 5, log_dirs.handle_describe_log_dirs),
        ApiSpec(37, "CreatePartitions", 0, 3, topics.handle_create_partitions),
        ApiSpec(60, "DescribeCluster", 0, 2, cluster.handle_describe_cluster),
        ApiSpec(75, "DescribeTopicPartitions", 0, 0, cluster.handle_describe_topic_partitions),
        # Feature flags (server/features.py, server/apis/features.py): Kafka 4.3's version range.
        ApiSpec(57, "UpdateFeatures", 0, 2, features.handle_update_features),
        # Delegation tokens, never enabled here (server/apis/delegation_tokens.py): Kafka 4.3's ranges.
        ApiSpec(38, "CreateDelegationToken", 1, 3, delegation_tokens.handle_create_delegation_token),
        ApiSpec(39, "RenewDelegationToken", 1, 2, delegation_tokens.handle_renew_delegation_token),
        ApiSpec(40, "ExpireDelegationToken", 1, 2, delegation_tokens.handle_expire_delegation_token),
        ApiSpec(41, "DescribeDelegationToken", 1, 3, delegation_tokens.handle_describe_delegation_token),
        # The single-node admin APIs (server/apis/admin.py): Kafka 4.3's version ranges.
        ApiSpec(43, "ElectLeaders", 0, 2, admin.handle_elect_leaders),
        ApiSpec(45, "AlterPartitionReassignments", 0, 1, admin.handle_alter_partition_reassignments),
        ApiSpec(46, "ListPartitionReassignments", 0, 0, admin.handle_list_partition_reassignments),
        ApiSpec(55, "DescribeQuorum", 0, 2, admin.handle_describe_quorum),
        ApiSpec(74, "ListConfigResources", 0, 1, admin.handle_list_config_resources),
        # KIP-714 client telemetry (server/apis/telemetry.py, server/telemetry/): Kafka 4.3's versions.
        ApiSpec(71, "GetTelemetrySubscriptions", 0, 0, telemetry.handle_get_telemetry_subscriptions),
        ApiSpec(72, "PushTelemetry", 0, 0, telemetry.handle_push_telemetry),
        # Authentication (server/apis/sasl.py, scram.py, quotas.py): Kafka 4.3's version ranges.
        ApiSpec(17, "SaslHandshake", 0, 1, sasl.handle_sasl_handshake),
        ApiSpec(36, "SaslAuthenticate", 0, 2, sasl.handle_sasl_authenticate),
        ApiSpec(48, "DescribeClientQuotas", 0, 1, quotas.handle_describe_client_quotas),
        ApiSpec(49, "AlterClientQuotas", 0, 1, quotas.handle_alter_client_quotas),
        ApiSpec(50, "DescribeUserScramCredentials", 0, 0, scram.handle_describe_user_scram_credentials),
        ApiSpec(51, "AlterUserScramCredentials", 0, 0, scram.handle_alter_user_scram_credentials),
        # ACLs (server/apis/acls.py): Kafka 4.3's version ranges.
        ApiSpec(29, "DescribeAcls", 1, 3, acls.handle_describe_acls),
        ApiSpec(30, "CreateAcls", 1, 3, acls.handle_create_acls),
        ApiSpec(31, "DeleteAcls", 1, 3, acls.handle_delete_acls),
        # Share groups, KIP-932 (server/apis/share.py, server/share): Kafka 4.3's version ranges.
        ApiSpec(76, "ShareGroupHeartbeat", 1, 1, share.handle_share_group_heartbeat, coordinator_write=True),
        ApiSpec(77, "ShareGroupDescribe", 1, 1, share.handle_share_group_describe),
        ApiSpec(78, "ShareFetch", 1, 2, share.handle_share_fetch, coordinator_write=True),
        ApiSpec(79, "ShareAcknowledge", 1, 2, share.handle_share_acknowledge, coordinator_write=True),
        ApiSpec(90, "DescribeShareGroupOffsets", 0, 1, share.handle_describe_share_group_offsets),
        ApiSpec(91, "AlterShareGroupOffsets", 0, 0, share.handle_alter_share_group_offsets, coordinator_write=True),
        ApiSpec(92, "DeleteShareGroupOffsets", 0, 0, share.handle_delete_share_group_offsets, coordinator_write=True),
        # The share coordinator's inter-broker APIs (server/apis/share_state.py): what the nodes of
        # `serve --processes N` send each other for share-partition state kept on another node.
        ApiSpec(83, "InitializeShareGroupState", 0, 0, share_state.handle_initialize_share_group_state, coordinator_write=True),
        ApiSpec(84, "ReadShareGroupState", 0, 0, share_state.handle_read_share_group_state),
        ApiSpec(85, "WriteShareGroupState", 0, 1, share_state.handle_write_share_group_state, coordinator_write=True),
        ApiSpec(86, "DeleteShareGroupState", 0, 0, share_state.handle_delete_share_group_state, coordinator_write=True),
        ApiSpec(87, "ReadShareGroupStateSummary", 0, 1, share_state.handle_read_share_group_state_summary),
    ]
}


def _unsupported_api_versions(correlation_id: int) -> list[bytes]:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body, error 35,
    listing only ApiVersions' own range, so the client can retry with one it supports."""
    spec = SUPPORTED_APIS[API_VERSIONS_KEY]
    body = encode_body(API_VERSIONS_KEY, 0, {
        "error_code": errors.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}],
    })
    return [frame([response_header(correlation_id, False), body])]


# Whether each (API, version) is flexible (request header v2, response header v1): a dict read
# per request instead of two cached schema look-ups.
_FLEXIBLE: dict[tuple[int, int], bool] = {}


async def handle_request(services: BrokerServices, client: ClientInfo, data: bytes) -> tuple[list[Any] | None, int]:
    """Decode, run and encode one request: (the framed response parts or None, the throttle in ms
    after which the connection reads its next request: KIP-219, 0 for none)."""
    started = time.perf_counter()
    api_key, version, correlation_id = peek_api(data)
    spec = SUPPORTED_APIS.get(api_key)
    if spec is None:
        services.metrics.protocol_errors += 1
        raise ProtocolViolation(f"unknown or unsupported API key {api_key} (version {version})")
    if not spec.min_version <= version <= spec.max_version:
        if api_key == API_VERSIONS_KEY:
            log.info("ApiVersions v%d from %s is not supported: answered with our range (v%d-%d)", version, client.peer, spec.min_version, spec.max_version)
            return _unsupported_api_versions(correlation_id), 0
        services.metrics.protocol_errors += 1
        raise ProtocolViolation(
            f"unsupported version {version} of {spec.name} (supported {spec.min_version}-{spec.max_version})"
        )
    flexible = _FLEXIBLE.get((api_key, version))
    if flexible is None:
        flexible = _FLEXIBLE[api_key, version] = is_flexible_request(api_key, version)
    header = parse_request_header(data, flexible)
    try:
        request = decode_request_body(api_key, version, data, header.body_offset)
    except Exception as e:
        services.metrics.protocol_errors += 1
        raise ProtocolViolation(f"cannot decode {spec.name} v{version} request: {e}") from None
    cluster = services.cluster
    if cluster is not None and (api_key > 1 or cluster.topics.names_unknown(api_key, version, request)) \
            and (cluster.topics.log.has_news() or cluster.topics.others):
        # A cluster node answers from the topics every node agreed on (server/cluster/topics.py).
        await cluster.topics.catch_up(services)
    # A coordinator request is answered once the coordinator partitions it wrote to (or read) are
    # as durable as the flush policy asks (server/coordinator/runtime.py): a scope collects them.
    write_scope = None
    try:
        if spec.coordinator_write:
            with services.coordinator_runtime.scope() as write_scope:
                result = await spec.handler(services, RequestContext(header, client, len(data)), request)
        else:  # no context manager at all: nullcontext() was ~1% of a small Produce
            result = await spec.handler(services, RequestContext(header, client, len(data)), request)
    except (FrameError, ProtocolViolation):
        raise
    except Exception:  # Kafka's requestHelper.handleError: the request's error response, never a close
        log.exception("%s v%d from %s failed: answered UNKNOWN_SERVER_ERROR", spec.name, version, client.peer)
        result = error_response(api_key, version, request, errors.UNKNOWN_SERVER_ERROR)
    throttle_ms = 0
    if result.__class__ is Throttled:
        result, throttle_ms = result
    # request_percentage for every API (server/quotas): one attribute test while none is set.
    quotas = services.client_quotas
    if quotas.request.enabled and api_key not in SELF_RECORDED_APIS:
        throttle_ms = max(throttle_ms, quotas.throttle_request(client.principal, header.client_id, result, time.perf_counter() - started))
    if write_scope is not None:
        await services.coordinator_runtime.await_durable(write_scope)
    # Metrics (server/metrics.py): a histogram bucket, a sum, and the response's error codes.
    services.metrics.observe_request(spec.name, time.perf_counter() - started, result)
    if result is None:
        return None, throttle_ms
    # ApiVersions responses always use header v0 so clients can parse them before negotiating.
    if isinstance(result, dict):
        try:
            body = encode_body(api_key, version, result)
        except Exception:  # an answer the schema cannot carry: as a handler's failure
            log.exception("%s v%d from %s: the answer does not encode: answered UNKNOWN_SERVER_ERROR", spec.name, version, client.peer)
            body = encode_body(api_key, version, error_response(api_key, version, request, errors.UNKNOWN_SERVER_ERROR))
        return [framed_response(correlation_id, flexible and api_key != API_VERSIONS_KEY, body)], throttle_ms
    head = response_header(correlation_id, flexible and api_key != API_VERSIONS_KEY)
    # Pre-encoded parts (Fetch): bytes and file slices, framed around their total size.
    sizes = sum(len(p) if isinstance(p, bytes) else p.size for p in result)
    return [frame([head], sizes), *result], throttle_ms
